package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/store/pgtest"
)

// turnsCase is one BenchmarkTurns sub-benchmark: threads concurrent
// connections, one thread each, sharing total measured turns.
type turnsCase struct {
	threads int
	total   int
	// initialize, when set, is the workers' initialize request (see
	// handshakeWith); by default initializeFrame.
	initialize string
	// dynamicTools is how many dynamic tools each thread registers at
	// thread/start (benchDynamicTools); the model calls none of them.
	dynamicTools int
}

var turnsCases = []turnsCase{
	{threads: 1, total: 300},
	{threads: 4, total: 800},
	{threads: 32, total: 2000},
}

const (
	// setupTimeout bounds opening the connections, starting the threads
	// and the warm-up turns.
	setupTimeout = time.Minute
	// turnsTimeout bounds one b.N iteration of the measured phase.
	turnsTimeout = 3 * time.Minute
	// turnTimeout bounds one turn, from turn/start to turn/completed.
	turnTimeout = 30 * time.Second
)

// BenchmarkTurns is a load generator for plain turns: the daemon runs with
// an in-process fake model (script exhausted from the start, so every
// request gets the fixed exhausted text at once, with no delay) and N
// workers, each on its own websocket and thread, run turn/start →
// turn/completed in a loop until the sub-benchmark's fixed number of turns
// is done.
//
// Sub-benchmarks: store=embedded|postgres × threads=1|4|32. Each b.N
// iteration is the whole fixed workload on the same daemon (after one
// warm-up turn per thread, not counted), so -benchtime=1x is a full
// measurement; a time-based -benchtime repeats the workload a few times
// (the threads keep growing). Every phase has a deadline, so a
// sub-benchmark always ends by itself. Reported:
//   - p50-ms, p99-ms: per-turn latency, from writing turn/start to reading
//     that thread's turn/completed (status must be "completed");
//   - turns/s: measured turns over the wall time of the measured phase;
//   - ns/op: that wall time per turn (1e9 / turns/s);
//   - peak-rss-MB: the daemon's VmHWM at the end (whole life: start-up,
//     migrations, warm-up and load);
//   - daemon-cpu-ms/turn: the daemon's user+system CPU time over the
//     measured phase (from /proc/PID/stat), per turn. Unlike the latency
//     figures it hardly moves when other processes compete for the CPU;
//   - tree-cpu-ms/turn: the same for the daemon and every process below
//     it, the commands it ran and their sandboxes (bubblewrap, pooled
//     sandboxes' launchers) included.
//
// The log line adds the p50 of the first and the last tenth of the turns
// (threads grow, and every model request carries the whole history), the
// frames a client reads per turn (thread/status/changed goes to every
// connection) and this process's CPU per turn (the clients and the fake
// model share the machine with the daemon).
//
// Postgres runs use pgtest's throwaway cluster; the benchmark fails unless
// synchronous_commit is on and logs fsync and full_page_writes (pgtest
// turns both off, so commits do not wait for a disk flush; point
// APPSERVER_TEST_DATABASE_URL at a server with fsync on to include it).
func BenchmarkTurns(b *testing.B) {
	raiseNoFileLimit(b, 4096)
	for _, st := range []string{"embedded", "postgres"} {
		for _, tc := range turnsCases {
			b.Run(fmt.Sprintf("store=%s/threads=%d", st, tc.threads), func(b *testing.B) {
				benchTurns(b, st, tc, fakemodel.Script{})
			})
		}
	}
}

// BenchmarkShellTurns is BenchmarkTurns (embedded store) for a turn that
// runs one command: the model calls exec_command `echo hi`, which runs in
// the user's login shell under the default sandbox, then answers. The
// daemon runs with this process's HOME, so that the user's real profile
// is what a login shell (or its snapshot) costs. One thread runs 200
// turns in a row; four threads 25 each at once.
func BenchmarkShellTurns(b *testing.B) {
	raiseNoFileLimit(b, 4096)
	for _, tc := range []turnsCase{{threads: 1, total: 200}, {threads: 4, total: 100}} {
		b.Run(fmt.Sprintf("threads=%d", tc.threads), func(b *testing.B) {
			benchTurns(b, "embedded", tc, shellScript(tc.threads+tc.total*b.N))
		})
	}
}

// shellScript is the fake model's script for that many shell turns: one
// exec_command `echo hi` and one answer per turn. A call id is never
// reused, since it names the turn's item.
func shellScript(turns int) fakemodel.Script {
	var script fakemodel.Script
	for i := range turns {
		id := fmt.Sprintf("call_sh_%d", i)
		script.Steps = append(script.Steps,
			fakemodel.Step{ToolCalls: []fakemodel.ToolCall{{CallID: id, Name: "exec_command", Arguments: json.RawMessage(`{"cmd":"echo hi"}`)}}},
			fakemodel.Step{Match: &fakemodel.Match{CallOutput: id}, Text: "done"})
	}
	return script
}

// BenchmarkDynamicToolTurns is BenchmarkTurns (embedded store, one
// thread, 300 plain turns) for a thread that registered ten dynamic tools
// at thread/start, as an editor or a web frontend does; the model calls
// none of them, so what it adds to a turn is the tools' part of the turn's
// tool set.
func BenchmarkDynamicToolTurns(b *testing.B) {
	raiseNoFileLimit(b, 4096)
	benchTurns(b, "embedded", turnsCase{threads: 1, total: 300, initialize: experimentalInitialize, dynamicTools: 10}, fakemodel.Script{})
}

// experimentalInitialize is initializeFrame with the experimentalApi
// capability, which dynamic tools need.
const experimentalInitialize = `{"id":"initialize","method":"initialize","params":{"clientInfo":{"name":"bench","title":null,"version":"1"},"capabilities":{"experimentalApi":true}}}`

// benchDynamicTools returns n dynamic tool specs for thread/start, each
// with a small object schema (none when n is 0).
func benchDynamicTools(n int) []any {
	var tools []any
	for i := range n {
		tools = append(tools, map[string]any{
			"name":        fmt.Sprintf("edit_%d", i),
			"description": "Does a thing in the editor and answers with what happened.",
			"inputSchema": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"path": map[string]any{"type": "string", "description": "a file"},
					"line": map[string]any{"type": "integer", "minimum": 1},
					"text": map[string]any{"type": "string"},
					"mode": map[string]any{"type": "string", "enum": []string{"a", "b", "c"}},
				},
				"required":             []string{"path"},
				"additionalProperties": false,
			},
		})
	}
	return tools
}

// BenchmarkCrowdTurns is BenchmarkTurns (embedded store) at rising
// concurrency: N connections with one thread each, five turns per thread
// after the warm-up turn. A refused turn/start (-32001) fails the run, so
// a line of results also says that no turn was refused at that
// concurrency. Compare daemon-cpu-ms/turn across N: a cost that grows
// with the number of connections or threads shows there.
func BenchmarkCrowdTurns(b *testing.B) {
	raiseNoFileLimit(b, 8192)
	for _, n := range []int{32, 100, 400} {
		b.Run(fmt.Sprintf("threads=%d", n), func(b *testing.B) {
			benchTurns(b, "embedded", turnsCase{threads: n, total: 5 * n}, fakemodel.Script{})
		})
	}
	for _, n := range []int{32, 400} {
		b.Run(fmt.Sprintf("optout/threads=%d", n), func(b *testing.B) {
			benchTurns(b, "embedded", turnsCase{threads: n, total: 5 * n, initialize: optOutBroadcastsFrame}, fakemodel.Script{})
		})
	}
}

func benchTurns(b *testing.B, storeKind string, tc turnsCase, script fakemodel.Script) {
	fake := startFake(b, script)
	args := fakeModelArgs(fake.URL())
	if storeKind == "postgres" {
		url := pgtest.URL(b)
		checkSynchronousCommit(b, url)
		args = append(args, "--database-url", url, "--migrate")
	}
	var d *daemon
	if referenceBinary() != "" {
		if storeKind != "embedded" {
			b.Skip("the reference keeps its threads in files: only store=embedded compares with it")
		}
		d = startReference(b, fakeModelArgs(fake.URL())...)
	} else {
		d = startDaemon(b, args...)
	}

	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	workers := make([]*turnWorker, tc.threads)
	for i := range workers {
		w, err := newTurnWorkerWith(ctx, d.ws, b.TempDir(), tc.initialize, benchDynamicTools(tc.dynamicTools))
		if err != nil {
			b.Fatalf("worker %d: %v", i, err)
		}
		b.Cleanup(func() { _ = w.ws.CloseNow() })
		workers[i] = w
	}
	// Warm-up: one turn per thread, concurrently, not measured.
	if err := runTurns(ctx, workers, tc.threads, nil); err != nil {
		b.Fatalf("warm-up: %v\ndaemon stderr:\n%s", err, d.stderr)
	}
	for _, w := range workers {
		w.frames = 0
	}

	durs := make([]time.Duration, 0, tc.total*b.N)
	answers := make([]time.Duration, 0, tc.total*b.N)
	var wall time.Duration
	tree0 := procTreeCPUTime(d.pid())
	cpu0, err := procCPUTime(d.pid())
	if err != nil {
		b.Fatal(err)
	}
	self0 := selfCPUTime()
	prof := startProfile(b, d)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		var mu sync.Mutex
		ctx, cancel := context.WithTimeout(context.Background(), turnsTimeout)
		err := runTurns(ctx, workers, tc.total, func(d, answer time.Duration) {
			mu.Lock()
			durs = append(durs, d)
			answers = append(answers, answer)
			mu.Unlock()
		})
		cancel()
		wall += time.Since(start)
		if err != nil {
			b.Fatalf("%v\ndaemon stderr:\n%s", err, d.stderr)
		}
	}
	b.StopTimer()
	prof.stop(b)
	self1 := selfCPUTime()
	tree1 := procTreeCPUTime(d.pid())
	cpu1, err := procCPUTime(d.pid())
	if err != nil {
		b.Fatal(err)
	}

	hwm, err := procStatusBytes(d.pid(), "VmHWM:")
	if err != nil {
		b.Fatal(err)
	}
	rss, _ := procStatusBytes(d.pid(), "VmRSS:")
	// A scripted turn makes one model request per step pair (a tool
	// call, then the answer); a plain turn one.
	requests := 1
	if len(script.Steps) > 0 {
		requests = 2
	}
	if !d.reference {
		checkTurnSeries(b, d, len(durs)+tc.threads, requests)
	}
	for _, w := range workers {
		_ = w.ws.Close(websocket.StatusNormalClosure, "")
	}
	d.stop(b)

	// Threads get longer as the run goes on and every request carries the
	// whole history: compare the first and the last tenth of the turns (in
	// completion order).
	n := len(durs)
	tenth := max(n/10, 1)
	early := slices.Sorted(slices.Values(durs[:tenth]))
	late := slices.Sorted(slices.Values(durs[n-tenth:]))
	frames := 0
	for _, w := range workers {
		frames += w.frames
	}
	slices.Sort(durs)
	p50, p99 := percentile(durs, 0.50), percentile(durs, 0.99)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	// The turn/start answer waits for the turn and its input to be stored.
	slices.Sort(answers)
	b.ReportMetric(ms(percentile(answers, 0.50)), "start-p50-ms")
	b.ReportMetric(float64(n)/wall.Seconds(), "turns/s")
	b.ReportMetric(float64(wall.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(float64(hwm)/(1<<20), "peak-rss-MB")
	b.ReportMetric(ms(cpu1-cpu0)/float64(n), "daemon-cpu-ms/turn")
	b.ReportMetric(ms(tree1-tree0)/float64(n), "tree-cpu-ms/turn")
	b.Logf("%d turns on %d threads in %v: p50 %v p90 %v p99 %v max %v; p50 of the first/last tenth %v/%v; %.1f frames read per turn; CPU per turn: daemon %.2f ms, this process (clients and fake model) %.2f ms; daemon VmHWM %.1f MB, VmRSS at end %.1f MB",
		n, tc.threads, wall.Round(time.Millisecond), p50, percentile(durs, 0.90), p99, durs[n-1],
		percentile(early, 0.5), percentile(late, 0.5), float64(frames)/float64(n),
		ms(cpu1-cpu0)/float64(n), ms(self1-self0)/float64(n),
		float64(hwm)/(1<<20), float64(rss)/(1<<20))
}

// runTurns runs total turns across the workers, each worker taking the next
// one as soon as its previous turn completed, and passes each turn's
// latency to record (if set). The first error stops every worker.
func runTurns(ctx context.Context, workers []*turnWorker, total int, record func(turn, answer time.Duration)) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var left atomic.Int64
	left.Store(int64(total))
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				d, answer, err := w.turn(ctx)
				if err != nil {
					cancel(err)
					return
				}
				if record != nil {
					record(d, answer)
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// turnWorker is one connection with one thread.
type turnWorker struct {
	ws       *websocket.Conn
	threadID string
	nextID   int
	frames   int // frames read by turn
	// lastTurnID and lastCompleted are the id of the last turn run by
	// turn and when its turn/completed was read.
	lastTurnID    string
	lastCompleted time.Time
	// timeout bounds one turn; 0 means turnTimeout.
	timeout time.Duration
	// pump, when set, reads the connection's frames as they come, so
	// that the daemon never finds it slow while the worker waits for its
	// turn; the worker reads them from it.
	pump *framePump
	// watched is the context whose end closes the connection (see watch);
	// reads under it need no deadline of their own.
	watched context.Context
	// rbuf holds the last frame next returned; the next read reuses it.
	rbuf bytes.Buffer
}

// watch makes the end of ctx close the connection until the returned
// stop is called, so that next can read without handing ctx to every
// read: coder/websocket registers and removes a context callback for
// each read given a context that can end, and with io.ReadAll allocates
// each frame anew. At 400 threads every client reads about 1,200 frames
// a turn, and those two costs made up about a quarter of the clients' CPU
// (bench process profile, BenchmarkCrowdTurns/threads=400), which shares
// the two cores with the daemon. Call stop before ctx is cancelled.
func (w *turnWorker) watch(ctx context.Context) (stop func()) {
	if w.pump != nil || ctx.Done() == nil {
		return func() {}
	}
	ws := w.ws
	unwatch := context.AfterFunc(ctx, func() { _ = ws.CloseNow() })
	w.watched = ctx
	return func() {
		unwatch()
		w.watched = nil
	}
}

// next returns the connection's next frame.
func (w *turnWorker) next(ctx context.Context) ([]byte, error) {
	if w.pump != nil {
		return w.pump.next(ctx)
	}
	if w.watched != ctx {
		_, data, err := w.ws.Read(ctx)
		return data, err
	}
	// The frame is only valid until the next call.
	_, r, err := w.ws.Reader(context.Background())
	if err == nil {
		w.rbuf.Reset()
		_, err = w.rbuf.ReadFrom(r)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return w.rbuf.Bytes(), nil
}

// rpcFrame is a decoded response or notification.
type rpcFrame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func newTurnWorker(ctx context.Context, url, cwd string) (*turnWorker, error) {
	return newTurnWorkerWith(ctx, url, cwd, "", nil)
}

// newTurnWorkerWith is newTurnWorker with another initialize request
// (initializeFrame when empty), whose thread registers tools as its
// dynamic tools.
func newTurnWorkerWith(ctx context.Context, url, cwd, initialize string, tools []any) (*turnWorker, error) {
	if initialize == "" {
		initialize = initializeFrame
	}
	ws, err := handshakeWith(ctx, url, initialize, nil)
	if err != nil {
		return nil, err
	}
	return startThreadWith(ctx, &turnWorker{ws: ws}, cwd, tools)
}

// startThread starts the worker's thread on its open connection.
func startThread(ctx context.Context, w *turnWorker, cwd string) (*turnWorker, error) {
	return startThreadWith(ctx, w, cwd, nil)
}

// startThreadWith is startThread for a thread that registers tools as its
// dynamic tools.
func startThreadWith(ctx context.Context, w *turnWorker, cwd string, tools []any) (*turnWorker, error) {
	ws := w.ws
	ws.SetReadLimit(16 << 20)
	params := map[string]any{"cwd": cwd}
	if len(tools) > 0 {
		params["dynamicTools"] = tools
	}
	res, err := w.call(ctx, "thread/start", params)
	if err != nil {
		_ = ws.CloseNow()
		return nil, err
	}
	var ts struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	if err := json.Unmarshal(res, &ts); err != nil || ts.Thread.ID == "" {
		_ = ws.CloseNow()
		return nil, fmt.Errorf("thread/start: unexpected result %s", res)
	}
	w.threadID = ts.Thread.ID
	return w, nil
}

// send writes a request and returns its id.
func (w *turnWorker) send(ctx context.Context, method string, params any) (string, error) {
	w.nextID++
	id := strconv.Itoa(w.nextID)
	msg, err := json.Marshal(map[string]any{"id": w.nextID, "method": method, "params": params})
	if err != nil {
		return "", err
	}
	if err := w.ws.Write(ctx, websocket.MessageText, msg); err != nil {
		return "", fmt.Errorf("%s: write: %w", method, err)
	}
	return id, nil
}

func (w *turnWorker) read(ctx context.Context) (rpcFrame, error) {
	data, err := w.next(ctx)
	if err != nil {
		return rpcFrame{}, err
	}
	var f rpcFrame
	if err := json.Unmarshal(data, &f); err != nil {
		return rpcFrame{}, fmt.Errorf("bad frame %q: %w", data, err)
	}
	return f, nil
}

// call sends a request and waits for its response, skipping notifications.
func (w *turnWorker) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	defer w.watch(ctx)()
	id, err := w.send(ctx, method, params)
	if err != nil {
		return nil, err
	}
	for {
		f, err := w.read(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		if string(f.ID) != id {
			continue
		}
		if len(f.Error) > 0 && string(f.Error) != "null" {
			return nil, fmt.Errorf("%s: error %s", method, f.Error)
		}
		return f.Result, nil
	}
}

var turnCompleted = []byte(`"turn/completed"`)

// frameHead is how far into a frame turnBy looks for its method.
const frameHead = 48

// turn runs one turn and returns the time from writing turn/start to
// reading turn/completed for the worker's thread, and to reading the
// turn/start response.
func (w *turnWorker) turn(ctx context.Context) (elapsed, answer time.Duration, err error) {
	return w.turnBy(ctx, "turn/start", map[string]any{
		"threadId": w.threadID,
		"input":    []any{map[string]any{"type": "text", "text": "hi"}},
	})
}

// turnBy is turn for any request that starts a turn on the worker's
// thread (turn/start, thread/compact/start).
func (w *turnWorker) turnBy(ctx context.Context, method string, params any) (elapsed, answer time.Duration, err error) {
	timeout := turnTimeout
	if w.timeout > 0 {
		timeout = w.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer w.watch(ctx)()
	start := time.Now()
	id, err := w.send(ctx, method, params)
	if err != nil {
		return 0, 0, err
	}
	answered := false
	for {
		data, err := w.next(ctx)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: waiting for turn/completed (answered %v): %w", method, answered, err)
		}
		w.frames++
		// Most frames are notifications this loop does not look at; decode
		// only responses and turn/completed. Both servers write a
		// notification's method first ({"method":"…","params":…}, as the
		// raw captures of the reference in
		// internal/server/testdata/golden/reference show), so only a
		// frame's head is searched: at 400 threads, once reads were cheap,
		// searching whole frames was a sixth of the clients' CPU.
		head := data[:min(len(data), frameHead)]
		if !answered && !bytes.Contains(head, []byte(`"method"`)) {
			var f rpcFrame
			if err := json.Unmarshal(data, &f); err != nil {
				return 0, 0, fmt.Errorf("bad frame %q: %w", data, err)
			}
			if string(f.ID) == id {
				if len(f.Error) > 0 && string(f.Error) != "null" {
					return 0, 0, fmt.Errorf("%s: error %s", method, f.Error)
				}
				answered = true
				answer = time.Since(start)
			}
			continue
		}
		if !bytes.Contains(head, turnCompleted) {
			continue
		}
		elapsed = time.Since(start)
		var f struct {
			Method string `json:"method"`
			Params struct {
				ThreadID string `json:"threadId"`
				Turn     struct {
					ID     string          `json:"id"`
					Status string          `json:"status"`
					Error  json.RawMessage `json:"error"`
				} `json:"turn"`
			} `json:"params"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			return 0, 0, fmt.Errorf("bad frame %q: %w", data, err)
		}
		if f.Method != "turn/completed" || f.Params.ThreadID != w.threadID {
			continue
		}
		if !answered {
			return 0, 0, fmt.Errorf("turn/completed arrived before the %s response", method)
		}
		if f.Params.Turn.Status != "completed" {
			return 0, 0, fmt.Errorf("turn ended with status %q, error %s", f.Params.Turn.Status, f.Params.Turn.Error)
		}
		w.lastTurnID, w.lastCompleted = f.Params.Turn.ID, start.Add(elapsed)
		return elapsed, answer, nil
	}
}

// checkSynchronousCommit fails the benchmark if the database would
// acknowledge commits before their WAL is flushed, and logs the settings
// that decide what a flush costs.
func checkSynchronousCommit(b *testing.B, url string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatalf("connect to %s: %v", url, err)
	}
	defer conn.Close(context.Background())
	show := func(name string) string {
		var v string
		if err := conn.QueryRow(ctx, "SHOW "+name).Scan(&v); err != nil {
			b.Fatalf("SHOW %s: %v", name, err)
		}
		return v
	}
	sc, fsync, fpw := show("synchronous_commit"), show("fsync"), show("full_page_writes")
	b.Logf("postgres: synchronous_commit=%s fsync=%s full_page_writes=%s", sc, fsync, fpw)
	if sc != "on" {
		b.Fatalf("synchronous_commit is %q, want on", sc)
	}
}

// parentPID returns the parent of process pid, from /proc/PID/stat; 0
// when it cannot be read.
func parentPID(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(data, ')')
	if err != nil || i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// procCPUTime returns the user plus system CPU time a process has used,
// from /proc/PID/stat (in clock ticks, assumed to be 100 per second).
func procCPUTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat %q", pid, data)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat %q", pid, data)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// procTreeCPUTime returns the CPU time used by pid and every process below
// it, alive or reaped by a process of the tree: the user and system time
// of each live one and of the children it reaped (/proc/PID/stat fields
// 14 to 17).
func procTreeCPUTime(pid int) time.Duration {
	ents, _ := os.ReadDir("/proc")
	type proc struct {
		ppid int
		cpu  int64
	}
	procs := map[int]proc{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		i := bytes.LastIndexByte(data, ')')
		if err != nil || i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		var cpu int64
		for _, v := range f[11:15] {
			n, _ := strconv.ParseInt(v, 10, 64)
			cpu += n
		}
		procs[p] = proc{ppid: ppid, cpu: cpu}
	}
	var total int64
	for p, pr := range procs {
		for q := p; q > 1; q = procs[q].ppid {
			if q == pid {
				total += pr.cpu
				break
			}
			if _, ok := procs[q]; !ok {
				break
			}
		}
	}
	return time.Duration(total) * 10 * time.Millisecond
}

// selfCPUTime returns the user plus system CPU time this process has used.
func selfCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procStatusBytes reads a "kB" field such as VmHWM from /proc/PID/status.
func procStatusBytes(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("unexpected %s line %q", field, line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("%s not found in /proc/%d/status", field, pid)
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// metricsText returns a daemon's /metrics, every series.
func metricsText(tb testing.TB, d *daemon) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.http+"/metrics", nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return string(raw)
}

// checkTurnSeries scrapes the daemon after the load: every turn run (warm-up
// included) is counted as completed, each with requests model requests,
// and the turn, model, tool and store series are logged.
func checkTurnSeries(b *testing.B, d *daemon, turns, requests int) {
	raw := metricsText(b, d)
	var lines []string
	series := map[string]string{}
	for _, line := range strings.Split(raw, "\n") {
		for _, prefix := range []string{"appserver_turn", "appserver_model_", "appserver_threads_loaded", "appserver_tool_", "appserver_store_operation_duration_seconds_sum{op=\"write\"", "appserver_store_operation_duration_seconds_count{op=\"write\""} {
			if strings.HasPrefix(line, prefix) && !strings.Contains(line, "_bucket{") {
				lines = append(lines, line)
				if i := strings.LastIndexByte(line, ' '); i > 0 {
					series[line[:i]] = line[i+1:]
				}
			}
		}
	}
	for name, want := range map[string]string{
		`appserver_turns_total{status="completed"}`:                                       strconv.Itoa(turns),
		`appserver_model_requests_total{model="fake",outcome="ok",provider="fake"}`:       strconv.Itoa(turns * requests),
		`appserver_model_time_to_first_token_seconds_count{model="fake",provider="fake"}`: strconv.Itoa(turns * requests),
	} {
		if series[name] != want {
			b.Fatalf("%s = %q after %d turns; scrape:\n%s", name, series[name], turns, strings.Join(lines, "\n"))
		}
	}
	b.Logf("series after the load:\n%s", strings.Join(lines, "\n"))
}
