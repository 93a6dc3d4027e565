package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkDynamicToolRoundTrip measures the daemon's own overhead for a
// client-registered (dynamic) tool call on loopback, and checks that
// 100,000 calls leave no goroutines or memory behind.
//
// Setup: the daemon is the real binary (subprocess, embedded store); the
// model is dynFake, an in-process Responses-API server whose every response
// is one lookup_weather function call until the turn has made
// dynCallsPerTurn calls, then a short text; the clients register
// lookup_weather at thread/start and answer every item/tool/call at once.
// Each worker (one websocket) runs threads of dynTurnsPerThread turns and
// archives each thread when done, so finished threads leave memory and the
// history a request carries stays short (at most 20 calls).
//
// Per call, four clocks of this process are combined:
//
//	sent     the fake model wrote the whole response carrying the call
//	         (Content-Length body, written in one go);
//	read     the client's websocket read of the item/tool/call returned;
//	written  the client's write of its answer returned;
//	arrived  the fake model finished reading the body of the next request,
//	         the one carrying the call's function_call_output.
//
//	overhead = (read − sent) + (arrived − written) = inbound + outbound
//
// i.e. (arrived − sent) minus the client's own time. These harness clocks
// also count when this process's goroutines got to run: the client's
// wake-up after the daemon sent item/tool/call, the fake's after the
// daemon sent the request. The headline figures (p50-us, p99-us) are
// therefore taken on the wire, as the issue defines the overhead (from the
// tool call arriving at the daemon to the output leaving it, minus the
// client's time): wireTap stamps the same four events with the kernel's
// receive timestamps of the segments at the daemon's sockets. It needs a
// packet socket (root or CAP_NET_RAW); without one only the harness
// figures (harness-p50-us, harness-p99-us) are reported. Both include all the
// daemon does for the call: reading and parsing the SSE response,
// committing the function call to the turn history, argument validation,
// item/started, the item/tool/call request and both loopback websocket
// hops, reading and resolving the answer, committing the completed
// dynamicToolCall item, item/completed, committing the history and the
// token usage, thread/tokenUsage/updated, and building and sending the
// next model request over loopback HTTP. It excludes the client's decode
// and encode and all of the fake model's work.
//
// Phases of one iteration (fresh daemon; use -benchtime=1x):
//
//  1. latency: one worker, dynLatencyCalls sequential calls (after a
//     warm-up) → p50-us, p99-us on the wire: the figures for the 1 ms
//     target; harness-p50-us, harness-p99-us from the harness clocks; and,
//     from the daemon's /metrics, alloc-B/call (heap allocated per call,
//     all of the daemon's work for the calls' turns and threads included)
//     and gc/1k-calls (collections per 1000 calls), the main cause of the
//     tail;
//  2. soak (store=disk only): dynWorkers workers in parallel, dynSoakCalls
//     calls in all → soak-p50-us, soak-p99-us (the same measure under
//     load), calls/s, daemon-cpu-us/call; the daemon is settled (GC
//     nudged) before and after, and go_goroutines and
//     go_memstats_heap_inuse_bytes from /metrics give goroutines-growth and
//     heap-growth-KB. It fails on goroutine growth that lasts 5 s or on
//     > 4 MiB of heap.
//
// Sub-benchmarks: store=disk (data dir under the test's TempDir, synchronous
// FULL commits, as deployed); store=disk,gc-floor=0, the same with the
// daemon's GC heap floor off (gc_heap_floor_mib=0: the Go runtime's
// defaults), latency phase only; store=tmpfs (data dir under /dev/shm: the
// same commits, but fsync costs nothing); store=ephemeral (ephemeral
// threads, which the daemon keeps in memory only: no store writes at all,
// unsubscribed instead of archived); store=disk,model-pause=20ms, the
// disk case with the fake model pausing 20 ms before each response, as a
// real model takes far longer, so that the daemon is idle when the call
// arrives (dynPauseCalls calls; latency phase only). -short runs 10x fewer
// calls.
func BenchmarkDynamicToolRoundTrip(b *testing.B) {
	for _, c := range []struct {
		name, store string
		extra       []string
		soak        bool
		pause       time.Duration
	}{
		{name: "store=disk", store: "disk", soak: true},
		{name: "store=disk,gc-floor=0", store: "disk", extra: []string{"-c", "gc_heap_floor_mib=0"}},
		{name: "store=tmpfs", store: "tmpfs"},
		{name: "store=ephemeral", store: "ephemeral"},
		{name: "store=disk,model-pause=20ms", store: "disk", pause: dynPause},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				benchDynamic(b, c.store, c.soak, c.pause, c.extra...)
			}
		})
	}
}

const (
	dynCallsPerTurn   = 10
	dynTurnsPerThread = 2
	dynLatencyCalls   = 10_000
	dynSoakCalls      = 100_000
	dynWarmupCalls    = 1_000
	dynWorkers        = 8
	dynPhaseTimeout   = 4 * time.Minute
	// dynPause is the model's pause in the model-pause case, which runs
	// dynPauseCalls calls in its latency phase.
	dynPause      = 20 * time.Millisecond
	dynPauseCalls = 2_000
)

func benchDynamic(b *testing.B, storeKind string, soak bool, pause time.Duration, extra ...string) {
	dataDir := b.TempDir() // disk, ephemeral
	if storeKind == "tmpfs" {
		dir, err := os.MkdirTemp("/dev/shm", "appserver-bench-")
		if err != nil {
			b.Skipf("no /dev/shm: %v", err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
		dataDir = dir
	}
	fake, err := startDynFake()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(fake.close)
	d := startDaemon(b, append([]string{"--data-dir", dataDir,
		"-c", `model="fake"`,
		"-c", `model_provider="fake"`,
		"-c", `model_providers.fake={name="Fake", base_url="` + fake.url() + `", wire_api="responses", request_max_retries=0}`,
	}, extra...)...)
	latencyCalls, soakCalls, warmupCalls := dynLatencyCalls, dynSoakCalls, dynWarmupCalls
	if pause > 0 {
		latencyCalls = dynPauseCalls
	}
	if testing.Short() {
		latencyCalls, soakCalls, warmupCalls = latencyCalls/10, soakCalls/10, warmupCalls/10
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*dynPhaseTimeout)
	defer cancel()

	// Phase 1: one worker, sequential calls, timed on the wire when the
	// tap can open a packet socket (the tap starts before any connection
	// it reads, so it sees every stream from its first byte).
	tap, tapErr := startWireTap(strings.TrimPrefix(d.ws, "ws://"), fake.ln.Addr().String())
	if tapErr == nil {
		defer func() { _ = tap.close() }()
	}
	pool, err := newDynPool(ctx, d.ws, 1, storeKind == "ephemeral")
	if err != nil {
		b.Fatal(err)
	}
	if err := pool.run(ctx, warmupCalls, newDynClientTimes(warmupCalls)); err != nil {
		b.Fatalf("warm-up: %v\ndaemon stderr:\n%s", err, d.stderr)
	}
	fake.reset()
	fake.pause.Store(int64(pause))
	times := newDynClientTimes(latencyCalls)
	m0, err := d.metrics()
	if err != nil {
		b.Fatal(err)
	}
	if err := pool.run(ctx, latencyCalls, times); err != nil {
		b.Fatalf("latency phase: %v\ndaemon stderr:\n%s", err, d.stderr)
	}
	m1, err := d.metrics()
	if err != nil {
		b.Fatal(err)
	}
	pool.close()
	fake.pause.Store(0)
	lat := fake.overheads(b, times)
	n := float64(len(lat.total))
	allocPerCall := (m1["go_memstats_alloc_bytes_total"] - m0["go_memstats_alloc_bytes_total"]) / n
	gcs := m1["go_gc_duration_seconds_count"] - m0["go_gc_duration_seconds_count"]
	if tapErr == nil {
		times.mu.Lock()
		wire, err := tap.overheads(times.m)
		times.mu.Unlock()
		if cerr := tap.close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatalf("wire tap: %v", err)
		}
		b.ReportMetric(dynPct(wire.total, 0.50), "p50-us")
		b.ReportMetric(dynPct(wire.total, 0.99), "p99-us")
		b.Logf("%s latency phase, %d sequential calls, on the wire: %v", b.Name(), len(wire.total), wire)
	} else {
		b.Logf("no wire tap (%v): p50-us and p99-us are not reported, only the harness clocks", tapErr)
	}
	b.ReportMetric(dynPct(lat.total, 0.50), "harness-p50-us")
	b.ReportMetric(dynPct(lat.total, 0.99), "harness-p99-us")
	b.ReportMetric(allocPerCall, "alloc-B/call")
	b.ReportMetric(gcs*1000/n, "gc/1k-calls")
	b.Logf("%s latency phase, %d sequential calls, harness clocks: %v; daemon allocated %.1f KB/call, %.0f collections",
		b.Name(), len(lat.total), lat, allocPerCall/1024, gcs)
	if !soak {
		return
	}

	// Phase 2: the soak. Warm up with the same concurrency, settle, run,
	// settle again; the workers' connections stay open throughout (settle
	// waits for exactly that many).
	pool, err = newDynPool(ctx, d.ws, dynWorkers, false)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.close()
	if err := pool.run(ctx, warmupCalls, newDynClientTimes(warmupCalls)); err != nil {
		b.Fatalf("soak warm-up: %v\ndaemon stderr:\n%s", err, d.stderr)
	}
	before := settle(b, d, dynWorkers)
	fake.reset()
	cpu0, err := dynCPUTime(d.pid())
	if err != nil {
		b.Fatal(err)
	}
	soakTimes := newDynClientTimes(soakCalls)
	start := time.Now()
	if err := pool.run(ctx, soakCalls, soakTimes); err != nil {
		b.Fatalf("soak: %v\ndaemon stderr:\n%s", err, d.stderr)
	}
	wall := time.Since(start)
	cpu1, err := dynCPUTime(d.pid())
	if err != nil {
		b.Fatal(err)
	}
	o := fake.overheads(b, soakTimes)
	calls := len(o.total)
	after := settle(b, d, dynWorkers)
	// A goroutine may be on its way out when the sample is taken (a
	// timer's callback, a connection's reader): only growth that
	// persists for a few seconds counts.
	for deadline := time.Now().Add(5 * time.Second); after.goroutines > before.goroutines && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		m, err := d.metrics()
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("go_goroutines %v after the soak; re-sampling", after.goroutines)
		after.goroutines = m["go_goroutines"]
	}
	m, err := d.metrics()
	if err != nil {
		b.Fatal(err)
	}
	if p := m["appserver_dynamic_tool_calls_pending"]; p != 0 {
		b.Errorf("appserver_dynamic_tool_calls_pending = %v after the soak", p)
	}

	b.ReportMetric(dynPct(o.total, 0.50), "soak-p50-us")
	b.ReportMetric(dynPct(o.total, 0.99), "soak-p99-us")
	b.ReportMetric(float64(calls)/wall.Seconds(), "calls/s")
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(calls), "daemon-cpu-us/call")
	b.ReportMetric(after.goroutines-before.goroutines, "goroutines-growth")
	b.ReportMetric((after.heap-before.heap)/1024, "heap-growth-KB")
	b.Logf("store=%s soak, %d calls on %d workers in %v (%.0f calls/s, daemon CPU %.0f µs/call): %v",
		storeKind, calls, dynWorkers, wall.Round(time.Millisecond), float64(calls)/wall.Seconds(),
		float64((cpu1-cpu0).Microseconds())/float64(calls), o)
	b.Logf("after warm-up → after soak: goroutines %v → %v, heap in use %s → %s, RSS %s → %s",
		before.goroutines, after.goroutines, kib(int64(before.heap)), kib(int64(after.heap)), kib(before.rss), kib(after.rss))
	if after.goroutines > before.goroutines {
		b.Errorf("goroutines grew over %d calls: %v → %v", calls, before.goroutines, after.goroutines)
	}
	if grow := after.heap - before.heap; grow > 4<<20 {
		b.Errorf("heap in use grew by %s over %d calls", kib(int64(grow)), calls)
	}
}

// dynCPUTime is the process's user+system CPU time from /proc/PID/stat.
func dynCPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command (which may contain spaces) start after ")".
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	const ticks = 100 // USER_HZ on linux
	return time.Duration(utime+stime) * time.Second / ticks, nil
}

// dynPct returns the p-quantile of sorted, in µs.
func dynPct(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return float64(sorted[min(max(i, 0), len(sorted)-1)].Nanoseconds()) / 1e3
}

// dynClientTimes collects, per call id, when the client's read of the
// item/tool/call frame returned and when its write of the answer returned.
type dynClientTimes struct {
	mu sync.Mutex
	m  map[string][2]time.Time
}

func newDynClientTimes(n int) *dynClientTimes {
	return &dynClientTimes{m: make(map[string][2]time.Time, n)}
}

func (c *dynClientTimes) add(callID string, read, written time.Time) {
	c.mu.Lock()
	c.m[callID] = [2]time.Time{read, written}
	c.mu.Unlock()
}

// dynPool is a set of workers, one websocket each.
type dynPool struct{ workers []*dynWorker }

func newDynPool(ctx context.Context, url string, n int, ephemeral bool) (*dynPool, error) {
	p := &dynPool{}
	for i := range n {
		ws, err := dynHandshake(ctx, url)
		if err != nil {
			p.close()
			return nil, err
		}
		p.workers = append(p.workers, &dynWorker{id: i, ws: ws, ephemeral: ephemeral})
	}
	return p, nil
}

// dynHandshake dials the daemon and initializes with experimentalApi,
// which dynamicTools requires.
func dynHandshake(ctx context.Context, url string) (*websocket.Conn, error) {
	ws, resp, err := websocket.Dial(ctx, url, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(16 << 20)
	const init = `{"id":"initialize","method":"initialize","params":{"clientInfo":{"name":"bench","title":null,"version":"1"},"capabilities":{"experimentalApi":true}}}`
	if err := ws.Write(ctx, websocket.MessageText, []byte(init)); err != nil {
		_ = ws.CloseNow()
		return nil, err
	}
	typ, data, err := ws.Read(ctx)
	if err == nil {
		err = checkInitialize(typ, data)
	}
	if err != nil {
		_ = ws.CloseNow()
		return nil, err
	}
	return ws, nil
}

func (p *dynPool) close() {
	for _, w := range p.workers {
		_ = w.ws.Close(websocket.StatusNormalClosure, "")
	}
}

// run makes the workers do calls tool calls in all (whole turns, so
// possibly a few more), concurrently.
func (p *dynPool) run(ctx context.Context, calls int, times *dynClientTimes) error {
	per := (calls + len(p.workers) - 1) / len(p.workers)
	errs := make(chan error, len(p.workers))
	for _, w := range p.workers {
		go func() { errs <- w.run(ctx, per, times) }()
	}
	var first error
	for range p.workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// dynWorker is one client connection answering item/tool/call at once.
type dynWorker struct {
	id        int
	ws        *websocket.Conn
	ephemeral bool // start ephemeral threads (unsubscribe rather than archive them)
	nextID    int
	turns     int // turns started, for unique call ids
}

type dynFrame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

var dynWeatherTool = map[string]any{
	"type": "function", "name": "lookup_weather", "description": "Look up the weather",
	"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
}

// run does at least calls tool calls: threads of dynTurnsPerThread turns,
// each archived (ephemeral ones: unsubscribed) at the end.
func (w *dynWorker) run(ctx context.Context, calls int, times *dynClientTimes) error {
	for done := 0; done < calls; {
		res, err := w.call(ctx, "thread/start", map[string]any{"cwd": os.TempDir(), "ephemeral": w.ephemeral, "dynamicTools": []any{dynWeatherTool}}, times)
		if err != nil {
			return err
		}
		var ts struct {
			Thread struct {
				ID string `json:"id"`
			} `json:"thread"`
		}
		if err := json.Unmarshal(res, &ts); err != nil {
			return err
		}
		for range dynTurnsPerThread {
			if done >= calls {
				break
			}
			w.turns++
			tag := fmt.Sprintf("w%dt%d", w.id, w.turns)
			if _, err := w.call(ctx, "turn/start", map[string]any{"threadId": ts.Thread.ID, "input": []any{map[string]any{"type": "text", "text": tag}}}, times); err != nil {
				return err
			}
			n, err := w.untilTurnCompleted(ctx, ts.Thread.ID, times)
			if err != nil {
				return fmt.Errorf("turn %s: %w", tag, err)
			}
			if n != dynCallsPerTurn {
				return fmt.Errorf("turn %s: %d tool calls, want %d", tag, n, dynCallsPerTurn)
			}
			done += n
		}
		end := "thread/archive"
		if w.ephemeral {
			end = "thread/unsubscribe"
		}
		if _, err := w.call(ctx, end, map[string]any{"threadId": ts.Thread.ID}, times); err != nil {
			return err
		}
	}
	return nil
}

// call sends a request and waits for its response, answering tool calls
// meanwhile.
func (w *dynWorker) call(ctx context.Context, method string, params any, times *dynClientTimes) (json.RawMessage, error) {
	w.nextID++
	id := strconv.Itoa(w.nextID)
	b, err := json.Marshal(map[string]any{"id": w.nextID, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	if err := w.ws.Write(ctx, websocket.MessageText, b); err != nil {
		return nil, err
	}
	for {
		f, err := w.next(ctx, times)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		if f.Method == "" && string(f.ID) == id {
			if len(f.Error) > 0 {
				return nil, fmt.Errorf("%s: %s", method, f.Error)
			}
			return f.Result, nil
		}
	}
}

// untilTurnCompleted reads until the thread's turn/completed and returns
// how many tool calls it answered.
func (w *dynWorker) untilTurnCompleted(ctx context.Context, threadID string, times *dynClientTimes) (int, error) {
	n := 0
	for {
		f, err := w.next(ctx, times)
		if err != nil {
			return n, err
		}
		switch f.Method {
		case "item/tool/call":
			n++
		case "turn/completed":
			var p struct {
				ThreadID string `json:"threadId"`
				Turn     struct {
					Status string          `json:"status"`
					Error  json.RawMessage `json:"error"`
				} `json:"turn"`
			}
			if err := json.Unmarshal(f.Params, &p); err != nil {
				return n, err
			}
			if p.ThreadID != threadID {
				continue
			}
			if p.Turn.Status != "completed" {
				return n, fmt.Errorf("turn %s: %s", p.Turn.Status, p.Turn.Error)
			}
			return n, nil
		}
	}
}

// next reads one frame; an item/tool/call is answered before next returns,
// and the time from the read returning to the answer written is recorded
// as the client's own time.
func (w *dynWorker) next(ctx context.Context, times *dynClientTimes) (dynFrame, error) {
	_, data, err := w.ws.Read(ctx)
	if err != nil {
		return dynFrame{}, err
	}
	read := time.Now()
	var f dynFrame
	if err := json.Unmarshal(data, &f); err != nil {
		return f, fmt.Errorf("bad frame %q: %w", data, err)
	}
	if f.Method != "item/tool/call" {
		return f, nil
	}
	var p struct {
		CallID string `json:"callId"`
	}
	if err := json.Unmarshal(f.Params, &p); err != nil {
		return f, err
	}
	answer := make([]byte, 0, 128)
	answer = append(answer, `{"id":`...)
	answer = append(answer, f.ID...)
	answer = append(answer, `,"result":{"contentItems":[{"type":"inputText","text":"Sunny, 21C"}],"success":true}}`...)
	if err := w.ws.Write(ctx, websocket.MessageText, answer); err != nil {
		return f, err
	}
	times.add(p.CallID, read, time.Now())
	return f, nil
}

// dynFake is a minimal Responses-API model: each response is one
// lookup_weather call until the turn made dynCallsPerTurn calls, then a
// text answer. Call ids carry the turn's tag (the user text) and the call's
// index, so the fake needs only the last input item. Bodies are written
// whole with a Content-Length, so "sent" is the moment the response left.
type dynFake struct {
	ln    net.Listener
	srv   *http.Server
	wg    sync.WaitGroup
	pause atomic.Int64 // a time.Duration to wait before each response

	mu      sync.Mutex
	sent    map[string]time.Time // call id → response carrying it written
	arrived map[string]time.Time // call id → request carrying its output read
}

func startDynFake() (*dynFake, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &dynFake{ln: ln}
	f.reset()
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 10 * time.Second}
	f.wg.Go(func() { _ = f.srv.Serve(ln) })
	return f, nil
}

func (f *dynFake) url() string { return "http://" + f.ln.Addr().String() + "/v1" }

func (f *dynFake) close() {
	_ = f.srv.Close()
	f.wg.Wait()
}

// reset forgets the recorded times.
func (f *dynFake) reset() {
	f.mu.Lock()
	f.sent = map[string]time.Time{}
	f.arrived = map[string]time.Time{}
	f.mu.Unlock()
}

// dynOverheads are the daemon's per-call times, each sorted: total =
// inbound + outbound; inbound is from the model's response written to the
// client's read of item/tool/call returning, outbound from the client's
// answer written to the next model request read.
type dynOverheads struct{ total, inbound, outbound []time.Duration }

// overheads pairs the fake's and the client's clocks per call.
func (f *dynFake) overheads(b *testing.B, client *dynClientTimes) dynOverheads {
	f.mu.Lock()
	defer f.mu.Unlock()
	client.mu.Lock()
	defer client.mu.Unlock()
	n := len(client.m)
	o := dynOverheads{make([]time.Duration, 0, n), make([]time.Duration, 0, n), make([]time.Duration, 0, n)}
	for id, c := range client.m {
		s, ok1 := f.sent[id]
		a, ok2 := f.arrived[id]
		if !ok1 || !ok2 {
			b.Fatalf("call %s: the fake model has sent=%v arrived=%v", id, ok1, ok2)
		}
		in, out := c[0].Sub(s), a.Sub(c[1])
		o.inbound = append(o.inbound, in)
		o.outbound = append(o.outbound, out)
		o.total = append(o.total, in+out)
	}
	o.sort()
	return o
}

func (o *dynOverheads) sort() {
	slices.Sort(o.total)
	slices.Sort(o.inbound)
	slices.Sort(o.outbound)
}

func (o dynOverheads) String() string {
	return fmt.Sprintf("overhead p50 %.0f µs, p90 %.0f µs, p99 %.0f µs, p99.9 %.0f µs, max %.0f µs (inbound p50 %.0f / p99 %.0f µs, outbound p50 %.0f / p99 %.0f µs)",
		dynPct(o.total, 0.50), dynPct(o.total, 0.90), dynPct(o.total, 0.99), dynPct(o.total, 0.999), dynPct(o.total, 1),
		dynPct(o.inbound, 0.50), dynPct(o.inbound, 0.99), dynPct(o.outbound, 0.50), dynPct(o.outbound, 0.99))
}

func (f *dynFake) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	arrived := time.Now()
	if err != nil {
		return
	}
	if !strings.HasSuffix(r.URL.Path, "/responses") {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	var req struct {
		Input []json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Input) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	var last struct {
		Type    string `json:"type"`
		CallID  string `json:"call_id"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(req.Input[len(req.Input)-1], &last); err != nil {
		http.Error(w, `{"error":{"message":"bad input"}}`, http.StatusBadRequest)
		return
	}
	var next string // the next call id, "" for the final text
	switch {
	case last.Type == "function_call_output":
		f.mu.Lock()
		f.arrived[last.CallID] = arrived
		f.mu.Unlock()
		tag, n, ok := strings.Cut(last.CallID, "_c")
		k, err := strconv.Atoi(n)
		if !ok || err != nil {
			http.Error(w, `{"error":{"message":"bad call id"}}`, http.StatusBadRequest)
			return
		}
		if k < dynCallsPerTurn {
			next = fmt.Sprintf("%s_c%d", tag, k+1)
		}
	case len(last.Content) > 0:
		next = last.Content[0].Text + "_c1"
	default:
		http.Error(w, `{"error":{"message":"unexpected input"}}`, http.StatusBadRequest)
		return
	}

	var buf bytes.Buffer
	seq := 0
	ev := func(typ string, fields string) {
		fmt.Fprintf(&buf, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq, fields)
		seq++
	}
	resp := func(status, output string) string {
		usage := ""
		if status == "completed" {
			usage = `,"usage":{"input_tokens":120,"input_tokens_details":{"cached_tokens":20},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":150}`
		}
		return `"response":{"id":"resp_1","object":"response","created_at":0,"status":"` + status + `","model":"fake","output":[` + output + `]` + usage + `}`
	}
	ev("response.created", resp("in_progress", ""))
	var item string
	if next != "" {
		const args = `{\"city\":\"Paris\"}`
		added := `{"type":"function_call","id":"fc_` + next + `","call_id":"` + next + `","name":"lookup_weather","arguments":"","status":"in_progress"}`
		item = `{"type":"function_call","id":"fc_` + next + `","call_id":"` + next + `","name":"lookup_weather","arguments":"` + args + `","status":"completed"}`
		ev("response.output_item.added", `"output_index":0,"item":`+added)
		ev("response.function_call_arguments.delta", `"item_id":"fc_`+next+`","output_index":0,"delta":"`+args+`"`)
		ev("response.function_call_arguments.done", `"item_id":"fc_`+next+`","output_index":0,"arguments":"`+args+`"`)
		ev("response.output_item.done", `"output_index":0,"item":`+item)
	} else {
		item = `{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Done.","annotations":[]}]}`
		ev("response.output_item.added", `"output_index":0,"item":{"type":"message","id":"msg_1","status":"in_progress","role":"assistant","content":[]}`)
		ev("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Done."`)
		ev("response.output_item.done", `"output_index":0,"item":`+item)
	}
	ev("response.completed", resp("completed", item))
	// A real model takes its time: the daemon sits idle meanwhile. The
	// pause is not counted: the response's clock starts when it is sent.
	time.Sleep(time.Duration(f.pause.Load()))

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(buf.Bytes()); err != nil {
		return
	}
	_ = http.NewResponseController(w).Flush()
	if next != "" {
		sent := time.Now()
		f.mu.Lock()
		f.sent[next] = sent
		f.mu.Unlock()
	}
}
