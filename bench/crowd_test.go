package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/appserver/appserver/internal/model/fakemodel"
)

// The sizes of BenchmarkCrowd and BenchmarkBusyThread, divided by
// APPSERVER_BENCH_SCALE for a quick check.
const (
	// crowdConns connections are open, crowdRunning of them with a thread
	// running crowdTurnsEach turns, one after the other, all at once.
	crowdConns     = 10000
	crowdRunning   = 1000
	crowdTurnsEach = 1
	// busySubscribers connections resumed the one thread that runs
	// busyTurns turns one after the other.
	busySubscribers = 1000
	busyTurns       = 100
	// crowdTimeout bounds each phase of BenchmarkCrowd (opening the
	// connections, the threads and their warm-up, the load) and each of
	// its turns: with a thousand turns at once on two cores a turn takes
	// minutes.
	crowdTimeout = 20 * time.Minute
)

// BenchmarkCrowd opens crowdConns initialized websocket connections, of
// which crowdRunning start a thread each and then run crowdTurnsEach plain
// turns one after the other, all at once, against the fake model
// answering at once (embedded store). The other connections stay idle:
// they read what the daemon sends every connection (thread/status/changed,
// thread/readState/changed, ...) and send nothing. They connect once the
// threads exist and ran a warm-up turn.
//
// The daemon runs with ws_pong_timeout = "10m" (the clients share the
// machine's cores and answer pings late) and max_running_turns at twice
// the number of threads: a turn counts as running until its end is stored
// and its thread given back, a little after its turn/completed, so a
// client that starts its next turn at once can find its previous turn
// still counted. A refused turn fails the run, and so does a connection
// the daemon closed.
//
// Reported, besides BenchmarkTurns' latency, turns/s and CPU figures:
//   - idle-rss-bytes/conn: the daemon's VmRSS once the idle connections
//     are open and initialized minus before, per connection (read as
//     BenchmarkIdleConnections reads it);
//   - thread-rss-bytes: VmRSS once the threads are started and ran their
//     warm-up turn minus before (with their connections open), per
//     thread;
//   - running-rss-bytes/turn: the highest VmRSS sampled during the load
//     minus before it, per running turn: what the turns in flight, the
//     frames queued for the connections and the garbage the collector
//     has not reclaimed yet cost;
//   - max-running: the highest appserver_turns_running sampled;
//   - idle-frames/turn: the frames an idle connection read per turn.
//
// The optout case runs the same crowd with every client opted out of the
// three broadcasts every connection gets about every thread
// (optOutBroadcastsFrame): bots that each run their own thread, and idle
// connections that hear nothing until they ask.
func BenchmarkCrowd(b *testing.B) {
	conns, running := benchScale(crowdConns), benchScale(crowdRunning)
	b.Run(fmt.Sprintf("conns=%d,running=%d", conns, running), func(b *testing.B) {
		benchCrowd(b, conns, running, running*crowdTurnsEach, initializeFrame)
	})
	b.Run(fmt.Sprintf("optout/conns=%d,running=%d", conns, running), func(b *testing.B) {
		benchCrowd(b, conns, running, running*crowdTurnsEach, optOutBroadcastsFrame)
	})
}

func benchCrowd(b *testing.B, conns, running, total int, initialize string) {
	// This process holds the clients' sockets and the fake model's side
	// of the daemon's model connections (one per running turn).
	need := uint64(conns + running + 1024)
	raiseNoFileLimit(b, need)
	fake := startFake(b, fakemodel.Script{})
	// The clients share the machine's cores with the daemon: under this
	// load a client reads a ping only after the frames queued before it,
	// later than the default 15 s pong timeout.
	args := append(fakeModelArgs(fake.URL()),
		"-c", fmt.Sprintf("max_running_turns=%d", 2*running),
		"-c", `ws_pong_timeout="10m"`)
	d := startDaemon(b, args...)
	for range 20 {
		if err := handshakeAndClose(context.Background(), d.ws); err != nil {
			b.Fatal(err)
		}
	}
	if m, err := d.metrics(); err != nil {
		b.Fatal(err)
	} else if fds := m["process_max_fds"]; fds > 0 && fds < float64(conns+running+256) {
		b.Fatalf("the daemon may open only %v files, too few for %d connections and %d model streams", fds, conns, running)
	}
	s0 := settle(b, d, 0)

	// The workers' connections, their threads and one warm-up turn each,
	// then the idle crowd: opened first, the idle connections would each
	// get every new thread's thread/started (with 10,000 connections, 10
	// million frames of the whole thread), more than the clients, on the
	// same two cores, read before the daemon's 10 s write timeout.
	ctx, cancel := context.WithTimeout(context.Background(), crowdTimeout)
	defer cancel()
	workers := make([]*turnWorker, running)
	dialAll(b, ctx, d, running, func(i int) error {
		ws, err := handshakeWith(ctx, d.ws, initialize, crowdDial)
		if err != nil {
			return err
		}
		b.Cleanup(func() { _ = ws.CloseNow() })
		workers[i] = &turnWorker{ws: ws, pump: startPump(ws), timeout: crowdTimeout}
		return nil
	})
	s1 := settle(b, d, running)
	dialAll(b, ctx, d, running, func(i int) error {
		_, err := startThread(ctx, workers[i], b.TempDir())
		return err
	})
	if err := runTurns(ctx, workers, running, nil); err != nil {
		b.Fatalf("warm-up: %v (%s)\ndaemon stderr:\n%s", err, crowdHealth(d), d.stderr)
	}
	s2 := settle(b, d, running)
	var idleFrames atomic.Int64
	var drains sync.WaitGroup
	b.Cleanup(drains.Wait) // the drains end as the connections close
	dialAll(b, ctx, d, conns-running, func(int) error {
		ws, err := handshakeWith(ctx, d.ws, initialize, crowdDial)
		if err != nil {
			return err
		}
		b.Cleanup(func() { _ = ws.CloseNow() })
		drains.Go(func() { drain(ws, &idleFrames) })
		return nil
	})
	s3 := settle(b, d, conns)
	b.Logf("daemon RSS: %s with no connection, %s with the %d workers' connections, %s once they started a thread and ran a turn, %s with %d idle connections more",
		kib(s0.rss), kib(s1.rss), running, kib(s2.rss), kib(s3.rss), conns-running)
	for _, w := range workers {
		w.frames = 0
	}
	idleFrames.Store(0)

	// The load, with the daemon's RSS and running turns sampled meanwhile.
	sampled := make(chan struct{})
	stopSampling := sync.OnceFunc(func() { close(sampled) })
	b.Cleanup(stopSampling)
	var peakRSS atomic.Int64
	var peakRunning atomic.Int64
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-sampled:
				return
			case <-t.C:
			}
			if rss, err := d.rss(); err == nil && rss > peakRSS.Load() {
				peakRSS.Store(rss)
			}
			if i%4 == 0 {
				if m, err := d.metrics(); err == nil && int64(m["appserver_turns_running"]) > peakRunning.Load() {
					peakRunning.Store(int64(m["appserver_turns_running"]))
				}
			}
		}
	}()
	l := measureTurns(b, d, workers, total, crowdTimeout)
	stopSampling()
	durs, wall := l.durs, l.wall
	hwm, err := procStatusBytes(d.pid(), "VmHWM:")
	if err != nil {
		b.Fatal(err)
	}
	checkTurnSeries(b, d, total+running, 1)
	// An idle connection the daemon closed as a slow consumer (its
	// outbound queue full) no longer counts in the crowd.
	m, err := d.metrics()
	if err != nil {
		b.Fatal(err)
	}
	if open := m["appserver_open_connections"]; int(open) != conns {
		b.Errorf("%v connections open at the end of %d (%s)", open, conns, crowdHealth(d))
	}
	for _, w := range workers {
		_ = w.ws.Close(websocket.StatusNormalClosure, "")
	}
	d.stop(b)

	n := len(durs)
	frames := 0
	for _, w := range workers {
		frames += w.frames
	}
	slices.Sort(durs)
	p50, p99 := percentile(durs, 0.50), percentile(durs, 0.99)
	idle := conns - running
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(float64(n)/wall.Seconds(), "turns/s")
	b.ReportMetric(float64(wall.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(ms(l.cpu)/float64(n), "daemon-cpu-ms/turn")
	b.ReportMetric(float64(hwm)/(1<<20), "peak-rss-MB")
	b.ReportMetric(float64(s3.rss-s2.rss)/float64(max(conns-running, 1)), "idle-rss-bytes/conn")
	b.ReportMetric(float64(s2.rss-s1.rss)/float64(running), "thread-rss-bytes")
	b.ReportMetric(float64(peakRSS.Load()-s3.rss)/float64(running), "running-rss-bytes/turn")
	b.ReportMetric(float64(peakRunning.Load()), "max-running")
	if idle > 0 {
		b.ReportMetric(float64(idleFrames.Load())/float64(idle)/float64(n), "idle-frames/turn")
	}
	b.Logf("%d turns on %d of %d connections in %v: p50 %v p90 %v p99 %v max %v; %.1f frames read per turn by its worker; CPU per turn: daemon %.2f ms, this process %.2f ms; daemon heap+stack: +%s for the idle connections, +%s for the threads; goroutines %.0f → %.0f → %.0f; peak RSS during the load %s, VmHWM %s",
		n, running, conns, wall.Round(time.Millisecond), p50, percentile(durs, 0.90), p99, durs[n-1],
		float64(frames)/float64(n), ms(l.cpu)/float64(n), ms(l.self)/float64(n),
		kib(int64(s3.heap+s3.stack-s2.heap-s2.stack)), kib(int64(s2.heap+s2.stack-s1.heap-s1.stack)),
		s0.goroutines, s2.goroutines, s3.goroutines, kib(peakRSS.Load()), kib(hwm))
}

// busyInitialize is the initialize request of a subscriber of
// BenchmarkBusyThread: with eventSeq, so that each thread notification
// carries its number in the thread's log, which names it across
// connections.
const busyInitialize = `{"id":"initialize","method":"initialize","params":{"clientInfo":{"name":"bench","title":null,"version":"1"},"capabilities":{"experimentalApi":true,"eventSeq":true}}}`

// BenchmarkBusyThread runs busyTurns plain turns, one after the other, on
// one thread that busySubscribers other connections resumed (embedded
// store, the fake model answering at once). One connection, the one that
// started the thread, drives the turns; the subscribers only read.
//
// Reported:
//   - p50-ms, p99-ms, turns/s, daemon-cpu-ms/turn, peak-rss-MB: the
//     driver's turns, as BenchmarkTurns reports them;
//   - fanout-p50-ms, fanout-p99-ms, fanout-max-ms: for each numbered
//     notification of the thread during the load, the time from the first
//     subscriber's receipt to the last one's (the fan-out delay as the
//     clients see it; the daemon's own send time is not on the wire, and
//     emittedAtMs has a millisecond's resolution);
//   - sub-rss-bytes: the daemon's VmRSS once every subscriber resumed,
//     minus before they connected, per subscriber.
func BenchmarkBusyThread(b *testing.B) {
	subs := benchScale(busySubscribers)
	b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) {
		benchBusyThread(b, subs, busyTurns)
	})
}

func benchBusyThread(b *testing.B, subs, turns int) {
	raiseNoFileLimit(b, uint64(subs+1024))
	fake := startFake(b, fakemodel.Script{})
	d := startDaemon(b, fakeModelArgs(fake.URL())...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	driver, err := newTurnWorker(ctx, d.ws, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = driver.ws.CloseNow() })
	if err := runTurns(ctx, []*turnWorker{driver}, 1, nil); err != nil {
		b.Fatalf("warm-up: %v\ndaemon stderr:\n%s", err, d.stderr)
	}
	before := settle(b, d, 1)

	fan := &fanout{want: subs, seen: map[int64]*receipts{}}
	resume := fmt.Sprintf(`{"id":"resume","method":"thread/resume","params":{"threadId":%q,"excludeTurns":true}}`, driver.threadID)
	var readers sync.WaitGroup
	b.Cleanup(readers.Wait) // the readers end as the connections close
	dialAll(b, ctx, d, subs, func(int) error {
		ws, err := handshakeWith(ctx, d.ws, busyInitialize, nil)
		if err != nil {
			return err
		}
		b.Cleanup(func() { _ = ws.CloseNow() })
		if err := ws.Write(ctx, websocket.MessageText, []byte(resume)); err != nil {
			return err
		}
		resumed := make(chan error, 1)
		readers.Go(func() { fan.read(ws, resumed) })
		select {
		case err := <-resumed:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	after := settle(b, d, subs+1)
	first := fan.last() + 1 // numbered after the subscribers joined

	l := measureTurns(b, d, []*turnWorker{driver}, turns, turnsTimeout)
	durs, wall := l.durs, l.wall
	// Every subscriber gets the last turn's notifications too.
	last := fan.waitAll(b, 30*time.Second)
	hwm, err := procStatusBytes(d.pid(), "VmHWM:")
	if err != nil {
		b.Fatal(err)
	}
	delays := fan.delays(b, first, last)
	events := len(delays)
	_ = driver.ws.Close(websocket.StatusNormalClosure, "")
	d.stop(b)

	slices.Sort(durs)
	slices.Sort(delays)
	b.ReportMetric(ms(percentile(durs, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(durs, 0.99)), "p99-ms")
	b.ReportMetric(float64(len(durs))/wall.Seconds(), "turns/s")
	b.ReportMetric(float64(wall.Nanoseconds())/float64(len(durs)), "ns/op")
	b.ReportMetric(ms(l.cpu)/float64(len(durs)), "daemon-cpu-ms/turn")
	b.ReportMetric(float64(hwm)/(1<<20), "peak-rss-MB")
	b.ReportMetric(ms(percentile(delays, 0.50)), "fanout-p50-ms")
	b.ReportMetric(ms(percentile(delays, 0.99)), "fanout-p99-ms")
	b.ReportMetric(ms(delays[len(delays)-1]), "fanout-max-ms")
	b.ReportMetric(float64(after.rss-before.rss)/float64(subs), "sub-rss-bytes")
	b.Logf("%d turns on one thread with %d subscribers in %v; %d numbered notifications (%.1f a turn) reached all of them; CPU per turn: daemon %.2f ms, this process %.2f ms; daemon heap+stack +%s with the subscribers",
		len(durs), subs, wall.Round(time.Millisecond), events, float64(events)/float64(len(durs)),
		ms(l.cpu)/float64(len(durs)), ms(l.self)/float64(len(durs)),
		kib(int64(after.heap+after.stack-before.heap-before.stack)))
}

// fanout records when each subscriber received each numbered
// notification.
type fanout struct {
	want int // subscribers
	mu   sync.Mutex
	seen map[int64]*receipts
	max  int64
}

// receipts are the first and last receipt of one notification and how
// many subscribers received it.
type receipts struct {
	first, last time.Time
	n           int
}

var seqMember = []byte(`,"seq":`)

// read reads a subscriber's frames until its connection closes, recording
// the numbered notifications; resumed gets the outcome of its
// thread/resume.
func (f *fanout) read(ws *websocket.Conn, resumed chan<- error) {
	ws.SetReadLimit(16 << 20)
	ctx := context.Background()
	for {
		_, data, err := ws.Read(ctx)
		now := time.Now()
		if err != nil {
			select {
			case resumed <- err:
			default:
			}
			return
		}
		// The number is the frame's last member.
		if i := bytes.LastIndex(data, seqMember); i > 0 && bytes.HasPrefix(data, []byte(`{"method"`)) {
			seq, err := strconv.ParseInt(string(bytes.TrimSuffix(data[i+len(seqMember):], []byte("}"))), 10, 64)
			if err == nil {
				f.record(seq, now)
			}
			continue
		}
		if bytes.Contains(data, []byte(`"id":"resume"`)) {
			var r struct {
				Error json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(data, &r); err != nil || len(r.Error) > 0 {
				resumed <- fmt.Errorf("thread/resume: %s", data)
				return
			}
			resumed <- nil
		}
	}
}

func (f *fanout) record(seq int64, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.seen[seq]
	if r == nil {
		r = &receipts{first: at}
		f.seen[seq] = r
	}
	r.first, r.last = minTime(r.first, at), maxTime(r.last, at)
	r.n++
	f.max = max(f.max, seq)
}

// last returns the highest number received.
func (f *fanout) last() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.max
}

// waitAll waits until every subscriber received the highest number any
// received, and returns it.
func (f *fanout) waitAll(b *testing.B, timeout time.Duration) int64 {
	deadline := time.Now().Add(timeout)
	for {
		f.mu.Lock()
		last, n := f.max, 0
		if r := f.seen[last]; r != nil {
			n = r.n
		}
		f.mu.Unlock()
		if n >= f.want {
			return last
		}
		if time.Now().After(deadline) {
			b.Fatalf("notification %d reached %d of %d subscribers within %v", last, n, f.want, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// delays returns, for the numbers from first to last, the time from the
// first receipt to the last; it fails on one that did not reach every
// subscriber.
func (f *fanout) delays(b *testing.B, first, last int64) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Duration
	for seq := first; seq <= last; seq++ {
		r := f.seen[seq]
		if r == nil {
			continue // a number the daemon gave no notification sent here
		}
		if r.n != f.want {
			b.Fatalf("notification %d reached %d of %d subscribers", seq, r.n, f.want)
		}
		out = append(out, r.last.Sub(r.first))
	}
	if len(out) == 0 {
		b.Fatal("no numbered notification during the load")
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// dialAll runs open(i) for i in [0, n) on 16 goroutines, failing the
// benchmark on the first error with the daemon's log.
func dialAll(b *testing.B, ctx context.Context, d *daemon, n int, open func(i int) error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := open(i); err != nil {
					cancel(fmt.Errorf("connection %d: %w", i, err))
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		b.Fatalf("%v\ndaemon stderr:\n%s", err, d.stderr)
	}
}

// drain reads an idle connection's frames, counting them, until it
// closes.
func drain(ws *websocket.Conn, frames *atomic.Int64) {
	for {
		_, r, err := ws.Reader(context.Background())
		if err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			return
		}
		frames.Add(1)
	}
}

// framePump reads a connection's frames on a goroutine of its own into a
// queue that grows as needed, until the connection closes.
type framePump struct {
	mu     sync.Mutex
	frames [][]byte
	err    error
	ready  chan struct{} // signalled when a frame or the error arrives
}

func startPump(ws *websocket.Conn) *framePump {
	p := &framePump{ready: make(chan struct{}, 1)}
	ws.SetReadLimit(16 << 20)
	go func() {
		for {
			_, data, err := ws.Read(context.Background())
			p.mu.Lock()
			if err != nil {
				p.err = err
			} else {
				p.frames = append(p.frames, data)
			}
			p.mu.Unlock()
			select {
			case p.ready <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	return p
}

// next returns the oldest frame not taken yet, waiting for one.
func (p *framePump) next(ctx context.Context) ([]byte, error) {
	for {
		p.mu.Lock()
		if len(p.frames) > 0 {
			f := p.frames[0]
			p.frames[0] = nil
			p.frames = p.frames[1:]
			p.mu.Unlock()
			return f, nil
		}
		err := p.err
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-p.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// load is the measured phase of a benchmark: each turn's latency, the
// wall time, and the CPU time of the daemon and of this process.
type load struct {
	durs            []time.Duration
	wall, cpu, self time.Duration
}

// measureTurns runs total turns across the workers as the benchmark's
// timed phase (and the daemon's profile, if asked for) within timeout.
func measureTurns(b *testing.B, d *daemon, workers []*turnWorker, total int, timeout time.Duration) load {
	var mu sync.Mutex
	l := load{durs: make([]time.Duration, 0, total)}
	cpu0, err := procCPUTime(d.pid())
	if err != nil {
		b.Fatal(err)
	}
	self0 := selfCPUTime()
	prof := startProfile(b, d)
	b.ResetTimer()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err = runTurns(ctx, workers, total, func(d, _ time.Duration) {
		mu.Lock()
		l.durs = append(l.durs, d)
		mu.Unlock()
	})
	cancel()
	l.wall = time.Since(start)
	b.StopTimer()
	prof.stop(b)
	if err != nil {
		b.Fatalf("%v (%s)\ndaemon stderr:\n%s", err, crowdHealth(d), d.stderr)
	}
	cpu1, err := procCPUTime(d.pid())
	if err != nil {
		b.Fatal(err)
	}
	l.cpu, l.self = cpu1-cpu0, selfCPUTime()-self0
	return l
}

// crowdHealth says how many connections the daemon has open and why it
// closed some.
func crowdHealth(d *daemon) string {
	m, err := d.metrics()
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%v connections open, %v closed as slow consumers, %v for a late pong",
		m["appserver_open_connections"], m["appserver_slow_consumer_disconnects_total"], m["appserver_ws_ping_timeouts_total"])
}

// crowdDial dials the crowd's connections with a fixed 1 MiB socket
// receive buffer (Linux doubles it). A client of the crowd shares the two
// cores with 10,000 others and the daemon and reads late; with the
// default buffer, which grows only as fast as the client reads, a few
// hundred frames behind are enough to make the daemon's write wait, and a
// write that waits 10 s closes the connection. With 1 MiB a client may
// lag by thousands of frames: the clients, not the daemon, are what is
// slow then.
var crowdDial = &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{
	DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			err = errors.Join(err, tc.SetReadBuffer(1<<20))
		}
		return c, err
	},
}}}
