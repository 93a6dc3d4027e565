package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/store/pgtest"
)

// BenchmarkHTTPTurns is BenchmarkTurns over the HTTP API: the same daemon
// flags, fake model (script exhausted, no delay), stores, thread counts and
// turn totals, but each worker creates its thread with POST /v1/threads and
// runs each turn as one POST /v1/threads/{id}/turns?wait=true, which
// answers once the turn has completed, with its items, final message and
// usage. Workers share one HTTP client with keep-alive connections (one per
// worker). Latency is from sending the POST to reading the whole answer;
// the status must be 200 and the turn "completed". The metrics are those
// of BenchmarkTurns, so the two compare directly:
//
//	go test -run '^$' -bench 'Turns' -benchtime=1x ./bench/
func BenchmarkHTTPTurns(b *testing.B) {
	raiseNoFileLimit(b, 4096)
	for _, st := range []string{"embedded", "postgres"} {
		for _, tc := range turnsCases {
			b.Run(fmt.Sprintf("store=%s/threads=%d", st, tc.threads), func(b *testing.B) {
				benchHTTPTurns(b, st, tc)
			})
		}
	}
}

func benchHTTPTurns(b *testing.B, storeKind string, tc turnsCase) {
	fake := startFake(b, fakemodel.Script{})
	args := fakeModelArgs(fake.URL())
	if storeKind == "postgres" {
		url := pgtest.URL(b)
		checkSynchronousCommit(b, url)
		args = append(args, "--database-url", url, "--migrate")
	}
	d := startDaemon(b, args...)

	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	workers := make([]*httpWorker, tc.threads)
	for i := range workers {
		w, err := newHTTPWorker(ctx, hc, d.http, b.TempDir())
		if err != nil {
			b.Fatalf("worker %d: %v\ndaemon stderr:\n%s", i, err, d.stderr)
		}
		workers[i] = w
	}
	run := func(ctx context.Context, total int, record func(time.Duration)) error {
		return runWorkers(ctx, len(workers), total, func(ctx context.Context, i int) (time.Duration, error) {
			return workers[i].turn(ctx)
		}, record)
	}
	if err := run(ctx, tc.threads, nil); err != nil {
		b.Fatalf("warm-up: %v\ndaemon stderr:\n%s", err, d.stderr)
	}

	durs := make([]time.Duration, 0, tc.total*b.N)
	var wall time.Duration
	cpu0, err := procCPUTime(d.pid())
	if err != nil {
		b.Fatal(err)
	}
	self0 := selfCPUTime()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		var mu sync.Mutex
		ctx, cancel := context.WithTimeout(context.Background(), turnsTimeout)
		err := run(ctx, tc.total, func(d time.Duration) {
			mu.Lock()
			durs = append(durs, d)
			mu.Unlock()
		})
		cancel()
		wall += time.Since(start)
		if err != nil {
			b.Fatalf("%v\ndaemon stderr:\n%s", err, d.stderr)
		}
	}
	b.StopTimer()
	self1 := selfCPUTime()
	cpu1, err := procCPUTime(d.pid())
	if err != nil {
		b.Fatal(err)
	}
	hwm, err := procStatusBytes(d.pid(), "VmHWM:")
	if err != nil {
		b.Fatal(err)
	}
	hc.CloseIdleConnections()
	d.stop(b)

	n := len(durs)
	tenth := max(n/10, 1)
	early := slices.Sorted(slices.Values(durs[:tenth]))
	late := slices.Sorted(slices.Values(durs[n-tenth:]))
	slices.Sort(durs)
	p50, p99 := percentile(durs, 0.50), percentile(durs, 0.99)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(float64(n)/wall.Seconds(), "turns/s")
	b.ReportMetric(float64(wall.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(float64(hwm)/(1<<20), "peak-rss-MB")
	b.ReportMetric(ms(cpu1-cpu0)/float64(n), "daemon-cpu-ms/turn")
	b.Logf("%d HTTP turns on %d threads in %v: p50 %v p90 %v p99 %v max %v; p50 of the first/last tenth %v/%v; CPU per turn: daemon %.2f ms, this process (clients and fake model) %.2f ms; daemon VmHWM %.1f MB",
		n, tc.threads, wall.Round(time.Millisecond), p50, percentile(durs, 0.90), p99, durs[n-1],
		percentile(early, 0.5), percentile(late, 0.5), ms(cpu1-cpu0)/float64(n), ms(self1-self0)/float64(n), float64(hwm)/(1<<20))
}

// runWorkers runs total calls of turn across n workers, each taking the
// next as soon as its previous one returned; the first error stops all.
func runWorkers(ctx context.Context, n, total int, turn func(ctx context.Context, worker int) (time.Duration, error), record func(time.Duration)) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	left := total
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for {
				mu.Lock()
				if left == 0 || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				left--
				mu.Unlock()
				d, err := turn(ctx, i)
				if err != nil {
					cancel(err)
					return
				}
				if record != nil {
					record(d)
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && ctx.Err() != nil && err != context.Canceled {
		return err
	}
	return nil
}

// httpWorker is one thread driven over the HTTP API.
type httpWorker struct {
	hc       *http.Client
	base     string
	threadID string
}

var httpTurnBody = []byte(`{"input":[{"type":"text","text":"hi"}]}`)

func newHTTPWorker(ctx context.Context, hc *http.Client, base, cwd string) (*httpWorker, error) {
	body, _ := json.Marshal(map[string]any{"cwd": cwd})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/threads", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var th struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("POST /v1/threads: %s: %s", resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&th); err != nil || th.Thread.ID == "" {
		return nil, fmt.Errorf("POST /v1/threads: bad answer (%v)", err)
	}
	return &httpWorker{hc: hc, base: base, threadID: th.Thread.ID}, nil
}

// turn runs one turn with wait=true and returns the time from sending the
// POST to reading its whole answer.
func (w *httpWorker) turn(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.base+"/v1/threads/"+w.threadID+"/turns?wait=true", bytes.NewReader(httpTurnBody))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := w.hc.Do(req)
	if err != nil {
		return 0, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	elapsed := time.Since(start)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("POST turns: %s: %s", resp.Status, body)
	}
	var t struct {
		Status string          `json:"status"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &t); err != nil {
		return 0, fmt.Errorf("POST turns: bad answer %q: %w", body, err)
	}
	if t.Status != "completed" {
		return 0, fmt.Errorf("turn ended with status %q, error %s", t.Status, t.Error)
	}
	return elapsed, nil
}
