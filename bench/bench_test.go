package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkHandshake measures one client session from scratch: websocket
// dial (TCP connect + HTTP upgrade), the initialize request and its
// response, and the close handshake. Besides ns/op it reports the p50 and
// p99 of the per-operation latencies. -benchmem figures are the client's
// (this process's) allocations, not the daemon's.
func BenchmarkHandshake(b *testing.B) {
	d := startDaemon(b)
	ctx := context.Background()
	durs := make([]time.Duration, 0, 1<<16)
	for b.Loop() {
		start := time.Now()
		if err := handshakeAndClose(ctx, d.ws); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(start))
	}
	reportPercentiles(b, durs)
}

func handshakeAndClose(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ws, err := handshake(ctx, url)
	if err != nil {
		return err
	}
	if err := ws.Close(websocket.StatusNormalClosure, ""); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

func reportPercentiles(b *testing.B, durs []time.Duration) {
	if len(durs) == 0 {
		return
	}
	slices.Sort(durs)
	pct := func(p float64) float64 {
		i := int(p*float64(len(durs))+0.5) - 1
		return float64(durs[min(max(i, 0), len(durs)-1)].Nanoseconds())
	}
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
}

// idleConns is how many initialized connections BenchmarkIdleConnections
// holds open.
const idleConns = 1000

// BenchmarkIdleConnections measures what an idle, initialized connection
// costs the daemon: it reads the daemon's RSS and Go memory statistics with
// no connection open, opens idleConns connections, waits for memory to
// settle and reads them again. Each iteration is one full measurement on a
// fresh daemon; run it with -benchtime=1x.
//
// Reported per connection:
//   - rss-bytes/conn: VmRSS delta from /proc/PID/status, read once RSS has
//     stopped moving, before any GC nudge: what the OS sees, including
//     garbage the handshakes left that no GC cycle has collected yet;
//   - heap+stack-bytes/conn: go_memstats_heap_inuse_bytes +
//     go_memstats_stack_inuse_bytes delta from /metrics (also split into
//     heap-bytes/conn and stack-bytes/conn). The daemon's GC cannot be forced
//     from outside, so nudgeGC allocates in it (gzip /metrics scrapes) until
//     two GC cycles ran; the figures are then close to the live heap (within
//     about one scrape's garbage, < 1 MB in all) and to the shrunk stacks;
//   - goroutines/conn: go_goroutines delta.
func BenchmarkIdleConnections(b *testing.B) {
	raiseNoFileLimit(b, 4096)
	var sum idleResult
	for range b.N {
		r := measureIdle(b, idleConns)
		sum.rss += r.rss
		sum.heap += r.heap
		sum.stack += r.stack
		sum.goroutines += r.goroutines
	}
	n := float64(b.N)
	b.ReportMetric(sum.rss/n, "rss-bytes/conn")
	b.ReportMetric((sum.heap+sum.stack)/n, "heap+stack-bytes/conn")
	b.ReportMetric(sum.heap/n, "heap-bytes/conn")
	b.ReportMetric(sum.stack/n, "stack-bytes/conn")
	b.ReportMetric(sum.goroutines/n, "goroutines/conn")
}

// idleResult is one measurement, per connection.
type idleResult struct{ rss, heap, stack, goroutines float64 }

// memSample is the daemon's memory in one state.
type memSample struct {
	rss                     int64
	heap, stack, goroutines float64
}

func measureIdle(b *testing.B, n int) idleResult {
	d := startDaemon(b)
	defer d.stop(b)
	ctx := context.Background()

	// Warm up the handshake path (pools, lazily built tables, the HTTP
	// server's goroutines) so the baseline is not a cold process.
	for range 20 {
		if err := handshakeAndClose(ctx, d.ws); err != nil {
			b.Fatal(err)
		}
	}
	before := settle(b, d, 0)
	if m, err := d.metrics(); err == nil && m["process_max_fds"] > 0 && m["process_max_fds"] < float64(n+64) {
		b.Fatalf("the daemon may open only %v files, too few for %d connections", m["process_max_fds"], n)
	}

	conns := openConns(b, d.ws, n)
	after := settle(b, d, n)

	for _, ws := range conns {
		_ = ws.Close(websocket.StatusNormalClosure, "")
	}

	b.Logf("daemon with 0 conns: rss %s heap %s stack %s goroutines %.0f",
		kib(before.rss), kib(int64(before.heap)), kib(int64(before.stack)), before.goroutines)
	b.Logf("daemon with %d conns: rss %s heap %s stack %s goroutines %.0f",
		n, kib(after.rss), kib(int64(after.heap)), kib(int64(after.stack)), after.goroutines)
	per := func(a, b float64) float64 { return (a - b) / float64(n) }
	return idleResult{
		rss:        per(float64(after.rss), float64(before.rss)),
		heap:       per(after.heap, before.heap),
		stack:      per(after.stack, before.stack),
		goroutines: per(after.goroutines, before.goroutines),
	}
}

// openConns opens n initialized connections with a few concurrent dialers.
func openConns(b *testing.B, url string, n int) []*websocket.Conn {
	const workers = 16
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conns := make([]*websocket.Conn, n)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				ws, err := handshake(ctx, url)
				if err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
					cancel()
					return
				}
				conns[i] = ws
			}
		})
	}
	go func() {
		defer close(next)
		for i := range n {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	b.Cleanup(func() {
		for _, ws := range conns {
			if ws != nil {
				_ = ws.CloseNow()
			}
		}
	})
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return conns
}

// settle waits until the daemon reports wantOpen connections and its RSS
// has stopped moving, reads the RSS, then makes the daemon collect garbage
// and reads its Go memory statistics.
func settle(b *testing.B, d *daemon, wantOpen int) memSample {
	waitOpen(b, d, wantOpen)
	rss := waitRSS(b, d)
	nudgeGC(b, d)
	m, err := d.metrics()
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_goroutines"} {
		if _, ok := m[name]; !ok {
			b.Fatalf("/metrics lacks %s", name)
		}
	}
	return memSample{
		rss:        rss,
		heap:       m["go_memstats_heap_inuse_bytes"],
		stack:      m["go_memstats_stack_inuse_bytes"],
		goroutines: m["go_goroutines"],
	}
}

// waitOpen waits up to 10 s for appserver_open_connections to reach want.
func waitOpen(b *testing.B, d *daemon, want int) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := d.metrics()
		if err != nil {
			b.Fatal(err)
		}
		open, ok := m["appserver_open_connections"]
		if !ok {
			b.Fatal("/metrics lacks appserver_open_connections")
		}
		if int(open) == want {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("daemon reports %v open connections, want %d", open, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitRSS polls VmRSS (which does not disturb the daemon) until four samples
// 250 ms apart agree within 128 KiB, or 10 s passed, and returns the last.
func waitRSS(b *testing.B, d *daemon) int64 {
	const (
		interval  = 250 * time.Millisecond
		tolerance = 128 << 10
		stable    = 4
		timeout   = 10 * time.Second
	)
	deadline := time.Now().Add(timeout)
	last, streak := int64(-1), 0
	for {
		rss, err := d.rss()
		if err != nil {
			b.Fatal(err)
		}
		if last >= 0 && abs(rss-last) <= tolerance {
			streak++
		} else {
			streak = 0
		}
		last = rss
		if streak >= stable-1 {
			return rss
		}
		if time.Now().After(deadline) {
			b.Logf("RSS did not settle within %v; sampling anyway", timeout)
			return rss
		}
		time.Sleep(interval)
	}
}

// nudgeGC makes the daemon run garbage collections. Its GC cannot be forced
// from outside, so this allocates in it instead: gzip-compressed /metrics
// scrapes, until go_gc_duration_seconds_count has grown by two (so at least
// one whole cycle started after the connections were in place), or 30 s.
// Heap and stack figures sampled right after are then close to the live
// heap and the shrunk stacks.
func nudgeGC(b *testing.B, d *daemon) {
	const name = "go_gc_duration_seconds_count"
	m, err := d.metrics()
	if err != nil {
		b.Fatal(err)
	}
	start, ok := m[name]
	if !ok {
		b.Fatalf("/metrics lacks %s", name)
	}
	deadline := time.Now().Add(30 * time.Second)
	for scrapes := 1; ; scrapes++ {
		m, err := d.scrape(true)
		if err != nil {
			b.Fatal(err)
		}
		if m[name] >= start+2 {
			b.Logf("daemon ran 2 GC cycles after %d gzip scrapes", scrapes)
			// Spans are freed as they are swept, in the background after
			// the cycle; give the (otherwise idle) sweeper time to finish.
			time.Sleep(500 * time.Millisecond)
			return
		}
		if time.Now().After(deadline) {
			b.Logf("daemon ran %v GC cycles in %d scrapes; heap figures include garbage", m[name]-start, scrapes)
			return
		}
	}
}

// raiseNoFileLimit makes sure this process, and the daemon it starts, may
// open at least want files. It always calls Setrlimit: the Go runtime raises
// its own soft limit at start-up but hands children the original one unless
// the program sets the limit itself.
func raiseNoFileLimit(b *testing.B, want uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatalf("getrlimit: %v", err)
	}
	if lim.Cur < want {
		lim.Cur = min(want, lim.Max)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatalf("setrlimit: %v", err)
	}
	if lim.Cur < want {
		b.Logf("RLIMIT_NOFILE is capped at %d (< %d); connections may fail", lim.Cur, want)
	}
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func kib(n int64) string { return fmt.Sprintf("%.0f KiB", float64(n)/1024) }
