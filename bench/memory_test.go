package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/appserver/appserver/internal/model/fakemodel"
)

// rssSampler records the daemon's highest VmRSS while it runs.
type rssSampler struct {
	peak atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func sampleRSS(d *daemon) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if v, err := d.rss(); err == nil && v > s.peak.Load() {
				s.peak.Store(v)
			}
			select {
			case <-t.C:
			case <-s.stop:
				return
			}
		}
	}()
	return s
}

func (s *rssSampler) end() int64 {
	close(s.stop)
	<-s.done
	return s.peak.Load()
}

// settledRSS waits up to limit for the daemon's RSS to go below floor
// and returns it, read every second.
func settledRSS(b *testing.B, d *daemon, floor int64, limit time.Duration) (int64, time.Duration) {
	start := time.Now()
	for {
		v, err := d.rss()
		if err != nil {
			b.Fatal(err)
		}
		if v < floor || time.Since(start) >= limit {
			return v, time.Since(start)
		}
		time.Sleep(time.Second)
	}
}

// rssCurve returns the daemon's RSS at each of marks after now.
func rssCurve(b *testing.B, d *daemon, marks []time.Duration) []int64 {
	start := time.Now()
	out := make([]int64, 0, len(marks))
	for _, m := range marks {
		time.Sleep(time.Until(start.Add(m)))
		v, err := d.rss()
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func mibs(v []int64) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = x / mib
	}
	return out
}

const mib = 1 << 20

// BenchmarkLargeFrames sends one valid frame of just under 16 MiB (a
// turn/start whose text fills it, for a thread that does not exist) on
// each of 40 connections at once, and reports the daemon's peak RSS
// while they are handled and its RSS over the 3 minutes after.
//
//	go test -run '^$' -bench LargeFrames -benchtime=1x ./bench/
func BenchmarkLargeFrames(b *testing.B) {
	const conns = 40
	d := startDaemon(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	wss := make([]*websocket.Conn, conns)
	for i := range wss {
		ws, err := handshake(ctx, d.ws)
		if err != nil {
			b.Fatal(err)
		}
		wss[i] = ws
		defer func() { _ = ws.CloseNow() }()
	}
	text := strings.Repeat("x", 16*mib-1024)
	frame, err := json.Marshal(map[string]any{"id": 1, "method": "turn/start", "params": map[string]any{
		"threadId": "00000000-0000-0000-0000-000000000000",
		"input":    []map[string]any{{"type": "text", "text": text}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	text = ""
	base, _ := d.rss()
	for range b.N {
		sampler := sampleRSS(d)
		var wg sync.WaitGroup
		var mu sync.Mutex
		codes := map[string]int{}
		for _, ws := range wss {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := ws.Write(ctx, websocket.MessageText, frame); err != nil {
					b.Error(err)
					return
				}
				f, err := readReply(ctx, ws)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					codes["closed"]++
				case f.Error != nil:
					codes[fmt.Sprint(f.Error.Code)]++
				default:
					codes["ok"]++
				}
			}()
		}
		wg.Wait()
		peak := sampler.end()
		curve := rssCurve(b, d, []time.Duration{5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 3 * time.Minute})
		after := curve[len(curve)-1]
		b.ReportMetric(float64(peak)/mib, "peak-rss-MiB")
		b.ReportMetric(float64(curve[1])/mib, "rss-10s-MiB")
		b.ReportMetric(float64(after)/mib, "rss-after-MiB")
		b.Logf("base RSS %.0f MiB, peak %.0f MiB, %.0f MiB 3 min later (RSS at 5 s, 10 s, 30 s, 1, 2, 3 min: %v MiB); replies by code: %v",
			float64(base)/mib, float64(peak)/mib, float64(after)/mib, mibs(curve), codes)
	}
}

type replyFrame struct {
	ID    json.RawMessage `json:"id"`
	Error *struct {
		Code int64 `json:"code"`
	} `json:"error"`
}

// readReply reads frames until one with an id.
func readReply(ctx context.Context, ws *websocket.Conn) (replyFrame, error) {
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return replyFrame{}, err
		}
		var f replyFrame
		if json.Unmarshal(data, &f) == nil && len(f.ID) > 0 {
			return f, nil
		}
	}
}

// BenchmarkSlowReader runs turns whose answers are 1 MiB each on threads a
// second connection is subscribed to, which reads at about 1 MB/s, and
// reports the daemon's peak RSS and whether the slow reader was
// disconnected.
//
//	go test -run '^$' -bench SlowReader -benchtime=1x ./bench/
func BenchmarkSlowReader(b *testing.B) {
	const (
		threads = 150
		answer  = mib
	)
	fake, err := fakemodel.StartConfig(fakemodel.Config{Script: fakemodel.Script{ExhaustedText: strings.Repeat("y", answer)}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(fake.Close)
	d := startDaemon(b,
		"-c", `model="fake"`,
		"-c", `model_provider="fake"`,
		"-c", `model_providers.fake={name="Fake", base_url="`+fake.URL()+`", wire_api="responses", request_max_retries=0}`,
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	base, _ := d.rss()
	for range b.N {
		driver, err := newTurnWorker(ctx, d.ws, b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		slow, err := handshake(ctx, d.ws)
		if err != nil {
			b.Fatal(err)
		}
		slow.SetReadLimit(-1)
		ids := make([]string, threads)
		for i := range ids {
			res, err := driver.call(ctx, "thread/start", map[string]any{"cwd": b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			var ts struct {
				Thread struct {
					ID string `json:"id"`
				} `json:"thread"`
			}
			if err := json.Unmarshal(res, &ts); err != nil {
				b.Fatal(err)
			}
			ids[i] = ts.Thread.ID
			msg, _ := json.Marshal(map[string]any{"id": i + 1, "method": "thread/resume", "params": map[string]any{"threadId": ts.Thread.ID}})
			if err := slow.Write(ctx, websocket.MessageText, msg); err != nil {
				b.Fatal(err)
			}
		}
		// The slow reader drains at about 1 MB/s until it is closed.
		var received atomic.Int64
		slowDone := make(chan error, 1)
		go func() {
			for {
				_, data, err := slow.Read(ctx)
				if err != nil {
					slowDone <- err
					return
				}
				received.Add(int64(len(data)))
				time.Sleep(time.Duration(len(data)) * time.Microsecond)
			}
		}()
		sampler := sampleRSS(d)
		for _, id := range ids {
			driver.threadID = id
			if _, _, err := driver.turn(ctx); err != nil {
				b.Fatal(err)
			}
		}
		peak := sampler.end()
		var closeErr error
		select {
		case closeErr = <-slowDone:
		case <-time.After(time.Second):
			closeErr = fmt.Errorf("still connected")
			_ = slow.CloseNow()
			<-slowDone
		}
		_ = driver.ws.CloseNow()
		after, waited := settledRSS(b, d, base+64*mib, 180*time.Second)
		b.ReportMetric(float64(peak)/mib, "peak-rss-MiB")
		b.ReportMetric(float64(after)/mib, "rss-after-MiB")
		b.Logf("%d turns of %d MiB answers; base RSS %.0f MiB, peak %.0f MiB, %.0f MiB %v later; slow reader got %.0f MiB, then: %v",
			threads, answer/mib, float64(base)/mib, float64(peak)/mib, float64(after)/mib, waited.Round(time.Second),
			float64(received.Load())/mib, closeErr)
	}
}
