package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
)

// testCtx bounds a test so a broken dispatcher fails instead of hanging.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fakeClock is an injectable clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// syncBuffer is a log sink safe to read after the writers are done.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testHandler is a configurable real handler.
type testHandler struct {
	kind     PayloadKind
	accepts  []PayloadKind
	mutating bool
	handle   func(ctx context.Context, inv Invocation) (Output, error)
}

func (h *testHandler) Kind() PayloadKind {
	if h.kind == "" {
		return PayloadFunction
	}
	return h.kind
}

func (h *testHandler) IsMutating(context.Context, Invocation) bool { return h.mutating }

func (h *testHandler) Handle(ctx context.Context, inv Invocation) (Output, error) {
	return h.handle(ctx, inv)
}

// kindWidened also accepts custom payloads, like apply_patch.
type kindWidened struct{ testHandler }

func (h *kindWidened) MatchesKind(p Payload) bool {
	return p.Kind() == PayloadFunction || p.Kind() == PayloadCustom
}

// gated is a handler that reports its start and waits for its release.
type gated struct {
	started  chan struct{}
	release  chan struct{}
	finished chan struct{}
}

func newGated() *gated {
	return &gated{started: make(chan struct{}), release: make(chan struct{}), finished: make(chan struct{})}
}

func (g *gated) handler(active *atomic.Int32, maxActive *atomic.Int32, text string) func(context.Context, Invocation) (Output, error) {
	return func(ctx context.Context, _ Invocation) (Output, error) {
		n := active.Add(1)
		for {
			m := maxActive.Load()
			if n <= m || maxActive.CompareAndSwap(m, n) {
				break
			}
		}
		defer close(g.finished)
		defer active.Add(-1)
		close(g.started)
		select {
		case <-g.release:
			return TextOutput(text, true), nil
		case <-ctx.Done():
			return Output{}, ctx.Err()
		}
	}
}

func wait(t *testing.T, ctx context.Context, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("timed out waiting for %s", what)
	}
}

// waitCtx is wait for handler goroutines, which must not call t.Fatal.
func waitCtx(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func fcall(id, name string) Call {
	return Call{CallID: id, Name: name, Payload: FunctionPayload{Arguments: `{}`}}
}

type dispatchResult struct {
	items []ResponseItem
	err   error
}

// dispatchAsync runs DispatchAll in a goroutine the test waits for.
func dispatchAsync(ctx context.Context, d *Dispatcher, calls ...Call) <-chan dispatchResult {
	ch := make(chan dispatchResult, 1)
	go func() {
		items, err := d.DispatchAll(ctx, calls)
		ch <- dispatchResult{items, err}
	}()
	return ch
}

func itemJSON(t *testing.T, it ResponseItem) string {
	t.Helper()
	b, err := json.Marshal(it)
	require.NoError(t, err)
	return string(b)
}

func TestDispatchSuccessAndInvocation(t *testing.T) {
	ctx := testCtx(t)
	var got Invocation
	b := NewBuilder(Config{})
	require.NoError(t, b.Register(fn("echo"), &testHandler{handle: func(_ context.Context, inv Invocation) (Output, error) {
		got = inv
		return TextOutput("hi", true), nil
	}}, false))
	_, reg := b.Build()
	d := reg.NewDispatcher(DispatcherConfig{Turn: TurnContext{TurnID: "turn-1", Cwd: "/repo"}})

	it, err := d.Dispatch(ctx, Call{CallID: "c1", Name: "echo", Payload: FunctionPayload{Arguments: `{"a":1}`}})
	require.NoError(t, err)
	assert.Equal(t, "c1", got.CallID)
	assert.Equal(t, "echo", got.Name)
	assert.Equal(t, FunctionPayload{Arguments: `{"a":1}`}, got.Payload)
	assert.Equal(t, "turn-1", got.Turn.TurnID)
	assert.Equal(t, "/repo", got.Turn.Cwd)
	assert.True(t, it.Output.Succeeded())
	assert.JSONEq(t, `{"type":"function_call_output","call_id":"c1","output":"hi"}`, itemJSON(t, it))
}

// goroutineID is the running goroutine's id, from its stack header.
func goroutineID(t *testing.T) string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := bytes.Fields(buf)
	require.GreaterOrEqual(t, len(f), 2, "%q", buf)
	return string(f[1])
}

// The last call of a round runs on the dispatching goroutine (which would
// otherwise only wait); the others run on goroutines of their own.
func TestDispatchLastCallRunsOnCaller(t *testing.T) {
	ctx := testCtx(t)
	var mu sync.Mutex
	ran := map[string]string{}
	b := NewBuilder(Config{})
	require.NoError(t, b.Register(fn("where"), &testHandler{handle: func(_ context.Context, inv Invocation) (Output, error) {
		mu.Lock()
		ran[inv.CallID] = goroutineID(t)
		mu.Unlock()
		return TextOutput("ok", true), nil
	}}, true))
	_, reg := b.Build()
	d := reg.NewDispatcher(DispatcherConfig{})
	caller := goroutineID(t)

	_, err := d.DispatchAll(ctx, []Call{fcall("1", "where"), fcall("2", "where")})
	require.NoError(t, err)
	assert.NotEqual(t, caller, ran["1"])
	assert.Equal(t, caller, ran["2"])
	_, err = d.Dispatch(ctx, fcall("3", "where"))
	require.NoError(t, err)
	assert.Equal(t, caller, ran["3"])
}

func TestDispatchUnknownTool(t *testing.T) {
	ctx := testCtx(t)
	logs := &syncBuffer{}
	b := NewBuilder(Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	_, reg := b.Build()
	d := reg.NewDispatcher(DispatcherConfig{})

	items, err := d.DispatchAll(ctx, []Call{
		{CallID: "f", Name: "nope", Payload: FunctionPayload{Arguments: `{}`}},
		{CallID: "c", Name: "nope", Payload: CustomPayload{Input: "x"}},
		{CallID: "n", Namespace: "ns", Name: "nope", Payload: FunctionPayload{}},
		{CallID: "l", Name: "local_shell", Payload: LocalShellPayload{Action: LocalShellAction{Command: []string{"ls"}}}},
	})
	require.NoError(t, err)
	require.Len(t, items, 4)
	assert.JSONEq(t, `{"type":"function_call_output","call_id":"f","output":"unsupported call: nope"}`, itemJSON(t, items[0]))
	assert.JSONEq(t, `{"type":"custom_tool_call_output","call_id":"c","output":"unsupported custom tool call: nope"}`, itemJSON(t, items[1]))
	assert.JSONEq(t, `{"type":"function_call_output","call_id":"n","output":"unsupported call: ns.nope"}`, itemJSON(t, items[2]))
	assert.JSONEq(t, `{"type":"function_call_output","call_id":"l","output":"unsupported call: local_shell"}`, itemJSON(t, items[3]))
	for _, it := range items {
		require.NotNil(t, it.Output.Success)
		assert.False(t, *it.Output.Success)
	}
	assert.Contains(t, logs.String(), "unsupported tool call")
}

func TestDispatchKindMismatchIsFatal(t *testing.T) {
	ctx := testCtx(t)
	var ran atomic.Int32
	h := &testHandler{handle: func(context.Context, Invocation) (Output, error) {
		ran.Add(1)
		return TextOutput("ran", true), nil
	}}
	b := NewBuilder(Config{})
	require.NoError(t, b.Register(fn("read_file"), h, true))
	require.NoError(t, b.Register(fn("mcp_tool"), &testHandler{kind: PayloadMCP, handle: h.handle}, true))
	_, reg := b.Build()
	d := reg.NewDispatcher(DispatcherConfig{})

	cases := []struct {
		call Call
		msg  string
	}{
		{Call{CallID: "2", Name: "read_file", Payload: CustomPayload{Input: "x"}}, "tool read_file invoked with incompatible payload"},
		{Call{CallID: "2", Name: "read_file", Payload: MCPPayload{Server: "s", Tool: "t"}}, "tool read_file invoked with incompatible payload"},
		{Call{CallID: "2", Name: "mcp_tool", Payload: FunctionPayload{}}, "tool mcp_tool invoked with incompatible payload"},
		{Call{CallID: "2", Name: "read_file"}, "tool read_file invoked with incompatible payload"},
	}
	for _, tc := range cases {
		items, err := d.DispatchAll(ctx, []Call{fcall("1", "read_file"), tc.call})
		require.Error(t, err)
		assert.Nil(t, items)
		assert.ErrorIs(t, err, ErrFatal)
		assert.EqualError(t, err, tc.msg)
	}
	assert.Zero(t, ran.Load(), "no call of the batch runs")
}

func TestDispatchKindMatcherWidens(t *testing.T) {
	ctx := testCtx(t)
	h := &kindWidened{testHandler{handle: func(_ context.Context, inv Invocation) (Output, error) {
		if p, ok := inv.Payload.(CustomPayload); ok {
			return TextOutput("patched: "+p.Input, true), nil
		}
		return TextOutput("json", true), nil
	}}}
	b := NewBuilder(Config{})
	require.NoError(t, b.Register(FreeformSpec{Name: "apply_patch"}, h, false))
	_, reg := b.Build()
	d := reg.NewDispatcher(DispatcherConfig{})

	items, err := d.DispatchAll(ctx, []Call{
		{CallID: "a", Name: "apply_patch", Payload: CustomPayload{Input: "*** Begin Patch"}},
		{CallID: "b", Name: "apply_patch", Payload: FunctionPayload{Arguments: `{"input":"x"}`}},
	})
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"custom_tool_call_output","call_id":"a","output":"patched: *** Begin Patch"}`, itemJSON(t, items[0]))
	assert.JSONEq(t, `{"type":"function_call_output","call_id":"b","output":"json"}`, itemJSON(t, items[1]))

	_, err = d.Dispatch(ctx, Call{CallID: "c", Name: "apply_patch", Payload: LocalShellPayload{}})
	assert.ErrorIs(t, err, ErrFatal)
}

func TestDispatchBadArguments(t *testing.T) {
	ctx := testCtx(t)
	type args struct {
		Path string `json:"path"`
	}
	h := &testHandler{handle: func(_ context.Context, inv Invocation) (Output, error) {
		var a args
		if err := DecodeArgumentsStrict(inv.Payload.(FunctionPayload).Arguments, &a); err != nil {
			return Output{}, err
		}
		return TextOutput("read "+a.Path, true), nil
	}}
	b := NewBuilder(Config{})
	require.NoError(t, b.Register(fn("read_file"), h, true))
	_, reg := b.Build()
	d := reg.NewDispatcher(DispatcherConfig{})

	cases := []struct{ args, want string }{
		{`{"path":`, "failed to parse function arguments: unexpected EOF"},
		{``, "failed to parse function arguments: unexpected EOF"},
		{`{"path":"a"} x`, "failed to parse function arguments: trailing characters after the JSON value"},
		{`{"path":1}`, "failed to parse function arguments: json: cannot unmarshal number into Go struct field args.path of type string"},
		{`{"path":"a","mode":"x"}`, `failed to parse function arguments: json: unknown field "mode"`},
	}
	for _, tc := range cases {
		it, err := d.Dispatch(ctx, Call{CallID: "c", Name: "read_file", Payload: FunctionPayload{Arguments: tc.args}})
		require.NoError(t, err, "argument errors are answered to the model")
		assert.Equal(t, tc.want, it.Output.Text, "args %q", tc.args)
		assert.False(t, it.Output.Succeeded())
	}
	it, err := d.Dispatch(ctx, Call{CallID: "c", Name: "read_file", Payload: FunctionPayload{Arguments: `{"path":"a"}`}})
	require.NoError(t, err)
	assert.Equal(t, "read a", it.Output.Text)
}

func TestDispatchHandlerErrors(t *testing.T) {
	ctx := testCtx(t)
	b := NewBuilder(Config{})
	require.NoError(t, b.Register(fn("plain"), &testHandler{handle: func(context.Context, Invocation) (Output, error) {
		return Output{}, errors.New("open /x: permission denied")
	}}, false))
	require.NoError(t, b.Register(fn("domain"), &testHandler{handle: func(context.Context, Invocation) (Output, error) {
		return Output{}, apperr.Wrap(apperr.NotFound, errors.New("secret detail"), "no such file")
	}}, false))
	_, reg := b.Build()
	d := reg.NewDispatcher(DispatcherConfig{})

	items, err := d.DispatchAll(ctx, []Call{fcall("1", "plain"), fcall("2", "domain")})
	require.NoError(t, err)
	assert.Equal(t, "open /x: permission denied", items[0].Output.Text)
	assert.Equal(t, "no such file", items[1].Output.Text, "only the client-safe message reaches the model")
	assert.False(t, items[0].Output.Succeeded())
	assert.False(t, items[1].Output.Succeeded())
}

func TestDispatchFatalHandlerErrorCancelsSiblings(t *testing.T) {
	ctx := testCtx(t)
	sibling := newGated()
	var active, maxActive atomic.Int32
	b := NewBuilder(Config{})
	require.NoError(t, b.Register(fn("slow"), &testHandler{handle: sibling.handler(&active, &maxActive, "slow")}, true))
	require.NoError(t, b.Register(fn("fatal"), &testHandler{handle: func(ctx context.Context, _ Invocation) (Output, error) {
		if err := waitCtx(ctx, sibling.started); err != nil {
			return Output{}, err
		}
		return Output{}, Fatalf("sandbox is gone")
	}}, true))
	_, reg := b.Build()
	d := reg.NewDispatcher(DispatcherConfig{})

	items, err := d.DispatchAll(ctx, []Call{fcall("1", "slow"), fcall("2", "fatal")})
	assert.Nil(t, items)
	assert.ErrorIs(t, err, ErrFatal)
	assert.EqualError(t, err, "sandbox is gone")
	assert.True(t, closed(sibling.finished), "the sibling was cancelled and returned before DispatchAll did")
	assert.False(t, closed(sibling.release))
}

func TestDispatchParallelCallsOverlap(t *testing.T) {
	ctx := testCtx(t)
	aStarted, bStarted := make(chan struct{}), make(chan struct{})
	rendezvous := func(mine, other chan struct{}, text string) func(context.Context, Invocation) (Output, error) {
		return func(ctx context.Context, _ Invocation) (Output, error) {
			close(mine)
			// Finishing requires the other call to be running at the same
			// time; sequential execution would block until the test times out.
			select {
			case <-other:
				return TextOutput(text, true), nil
			case <-ctx.Done():
				return Output{}, ctx.Err()
			}
		}
	}
	b := NewBuilder(Config{})
	require.NoError(t, b.Register(fn("a"), &testHandler{handle: rendezvous(aStarted, bStarted, "A")}, true))
	require.NoError(t, b.Register(fn("b"), &testHandler{handle: rendezvous(bStarted, aStarted, "B")}, true))
	_, reg := b.Build()
	d := reg.NewDispatcher(DispatcherConfig{})

	items, err := d.DispatchAll(ctx, []Call{fcall("1", "a"), fcall("2", "b")})
	require.NoError(t, err)
	require.NoError(t, ctx.Err(), "calls must overlap, not time out")
	assert.Equal(t, "A", items[0].Output.Text)
	assert.Equal(t, "B", items[1].Output.Text)
}

func TestDispatchNonParallelRunsAlone(t *testing.T) {
	ctx := testCtx(t)
	var active, maxActive atomic.Int32
	a, bb, c := newGated(), newGated(), newGated()
	b := NewBuilder(Config{})
	require.NoError(t, b.Register(fn("read_a"), &testHandler{handle: a.handler(&active, &maxActive, "A")}, true))
	require.NoError(t, b.Register(fn("plan"), &testHandler{handle: bb.handler(&active, &maxActive, "B")}, false))
	require.NoError(t, b.Register(fn("read_c"), &testHandler{handle: c.handler(&active, &maxActive, "C")}, true))
	_, reg := b.Build()
	d := reg.NewDispatcher(DispatcherConfig{})

	res := dispatchAsync(ctx, d, fcall("1", "read_a"), fcall("2", "plan"), fcall("3", "read_c"))

	wait(t, ctx, a.started, "A")
	readers, writer, queued := d.lock.state()
	assert.Equal(t, 1, readers, "A holds the shared side")
	assert.False(t, writer)
	assert.Equal(t, 2, queued, "B waits for A; C, though parallel, queues behind B")
	assert.False(t, closed(bb.started))
	assert.False(t, closed(c.started))

	close(a.release)
	wait(t, ctx, bb.started, "B")
	assert.True(t, closed(a.finished), "B started only after A finished")
	readers, writer, queued = d.lock.state()
	assert.Equal(t, 0, readers)
	assert.True(t, writer, "B holds the exclusive side")
	assert.Equal(t, 1, queued, "C waits for B")
	assert.False(t, closed(c.started))

	close(bb.release)
	wait(t, ctx, c.started, "C")
	assert.True(t, closed(bb.finished), "C started only after B finished")
	close(c.release)

	r := <-res
	require.NoError(t, r.err)
	assert.Equal(t, []string{"A", "B", "C"}, []string{r.items[0].Output.Text, r.items[1].Output.Text, r.items[2].Output.Text})
	assert.Equal(t, int32(1), maxActive.Load(), "no two of these calls overlapped")
	readers, writer, queued = d.lock.state()
	assert.Equal(t, 0, readers)
	assert.False(t, writer)
	assert.Zero(t, queued)
}

func TestDispatchMutatingCallRunsAlone(t *testing.T) {
	ctx := testCtx(t)
	var active, maxActive atomic.Int32
	first, second := newGated(), newGated()
	b := NewBuilder(Config{})
	// Both specs are parallel-capable, but the first handler reports its call
	// as mutating, which makes it exclusive.
	require.NoError(t, b.Register(fn("shell"), &testHandler{mutating: true, handle: first.handler(&active, &maxActive, "rm")}, true))
	require.NoError(t, b.Register(fn("read_file"), &testHandler{handle: second.handler(&active, &maxActive, "read")}, true))
	_, reg := b.Build()
	d := reg.NewDispatcher(DispatcherConfig{})

	res := dispatchAsync(ctx, d, fcall("1", "shell"), fcall("2", "read_file"))
	wait(t, ctx, first.started, "mutating call")
	_, writer, queued := d.lock.state()
	assert.True(t, writer)
	assert.Equal(t, 1, queued)
	close(first.release)
	wait(t, ctx, second.started, "read call")
	assert.True(t, closed(first.finished))
	close(second.release)
	r := <-res
	require.NoError(t, r.err)
	assert.Equal(t, int32(1), maxActive.Load())
}

func TestDispatchOutputsKeepCallOrder(t *testing.T) {
	ctx := testCtx(t)
	// Call i finishes only after call i+1, so completion order is reversed.
	done := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
	b := NewBuilder(Config{})
	for i, name := range []string{"t0", "t1", "t2"} {
		require.NoError(t, b.Register(fn(name), &testHandler{handle: func(ctx context.Context, _ Invocation) (Output, error) {
			if i+1 < len(done) {
				if err := waitCtx(ctx, done[i+1]); err != nil {
					return Output{}, err
				}
			}
			close(done[i])
			return TextOutput(name, true), nil
		}}, true))
	}
	_, reg := b.Build()
	d := reg.NewDispatcher(DispatcherConfig{})

	items, err := d.DispatchAll(ctx, []Call{fcall("c0", "t0"), fcall("cx", "unknown"), fcall("c1", "t1"), fcall("c2", "t2")})
	require.NoError(t, err)
	var ids, texts []string
	for _, it := range items {
		ids = append(ids, it.CallID)
		texts = append(texts, it.Output.Text)
	}
	assert.Equal(t, []string{"c0", "cx", "c1", "c2"}, ids)
	assert.Equal(t, []string{"t0", "unsupported call: unknown", "t1", "t2"}, texts)
}

func TestDispatchHandlerPanic(t *testing.T) {
	ctx := testCtx(t)
	logs := &syncBuffer{}
	b := NewBuilder(Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, b.Register(fn("boom"), &testHandler{handle: func(context.Context, Invocation) (Output, error) {
		panic("nil map write")
	}}, true))
	require.NoError(t, b.Register(fn("fine"), okHandler("ok"), true))
	require.NoError(t, b.Register(fn("bad_mutating"), &panicMutating{}, true))
	_, reg := b.Build()
	d := reg.NewDispatcher(DispatcherConfig{})

	items, err := d.DispatchAll(ctx, []Call{fcall("1", "boom"), fcall("2", "fine"), fcall("3", "bad_mutating")})
	require.NoError(t, err)
	assert.Equal(t, "tool boom failed with an internal error", items[0].Output.Text)
	assert.False(t, items[0].Output.Succeeded())
	assert.Equal(t, "ok", items[1].Output.Text)
	assert.Equal(t, "ran", items[2].Output.Text)
	assert.Contains(t, logs.String(), "tool handler panicked")
	assert.Contains(t, logs.String(), "nil map write")
	assert.Contains(t, logs.String(), "tool IsMutating panicked")
}

// panicMutating panics in IsMutating; dispatch must treat it as mutating.
type panicMutating struct{}

func (*panicMutating) Kind() PayloadKind { return PayloadFunction }
func (*panicMutating) IsMutating(context.Context, Invocation) bool {
	panic("cannot decide")
}
func (*panicMutating) Handle(context.Context, Invocation) (Output, error) {
	return TextOutput("ran", true), nil
}

func TestDispatchCancelWhileWaitingOnLock(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	clock := newFakeClock()
	var active, maxActive atomic.Int32
	holder := newGated()
	var waiterRan atomic.Bool
	b := NewBuilder(Config{Now: clock.Now})
	require.NoError(t, b.Register(fn("update_plan"), &testHandler{handle: holder.handler(&active, &maxActive, "held")}, false))
	require.NoError(t, b.Register(fn("shell_command"), &testHandler{handle: func(context.Context, Invocation) (Output, error) {
		waiterRan.Store(true)
		return TextOutput("ran", true), nil
	}}, false))
	require.NoError(t, b.Register(fn("read_file"), &testHandler{handle: func(context.Context, Invocation) (Output, error) {
		waiterRan.Store(true)
		return TextOutput("ran", true), nil
	}}, true))
	_, reg := b.Build()
	d := reg.NewDispatcher(DispatcherConfig{})

	res := dispatchAsync(ctx, d, fcall("1", "update_plan"), fcall("2", "shell_command"), fcall("3", "read_file"))
	wait(t, ctx, holder.started, "holder")
	_, _, queued := d.lock.state()
	require.Equal(t, 2, queued)
	clock.Advance(2500 * time.Millisecond)
	cancel()

	r := <-res
	require.NoError(t, r.err, "an interrupted batch still yields every output")
	require.Len(t, r.items, 3)
	assert.Equal(t, "aborted by user after 2.5s", r.items[0].Output.Text, "the running call is aborted")
	assert.Equal(t, "Wall time: 2.5 seconds\naborted by user", r.items[1].Output.Text)
	assert.Equal(t, "aborted by user after 2.5s", r.items[2].Output.Text)
	for _, it := range r.items {
		assert.False(t, it.Output.Succeeded())
	}
	assert.False(t, waiterRan.Load(), "waiting calls never ran")
	readers, writer, queued := d.lock.state()
	assert.Zero(t, readers)
	assert.False(t, writer)
	assert.Zero(t, queued, "cancelled requests leave the queue")
}

func TestDispatchReadyGate(t *testing.T) {
	ctx := testCtx(t)
	var mutRan atomic.Bool
	clock := newFakeClock()
	b := NewBuilder(Config{Now: clock.Now})
	require.NoError(t, b.Register(fn("apply_patch"), &testHandler{mutating: true, handle: func(context.Context, Invocation) (Output, error) {
		mutRan.Store(true)
		return TextOutput("patched", true), nil
	}}, false))
	require.NoError(t, b.Register(fn("read_file"), okHandler("read"), true))
	_, reg := b.Build()

	t.Run("read-only calls ignore the gate", func(t *testing.T) {
		d := reg.NewDispatcher(DispatcherConfig{Gate: NewReadyGate()})
		it, err := d.Dispatch(ctx, fcall("1", "read_file"))
		require.NoError(t, err)
		assert.Equal(t, "read", it.Output.Text)
	})

	t.Run("mutating calls wait until ready", func(t *testing.T) {
		gate := NewReadyGate()
		d := reg.NewDispatcher(DispatcherConfig{Gate: gate})
		res := dispatchAsync(ctx, d, fcall("1", "apply_patch"))
		// The call is admitted (it holds the lock) and then waits on the gate.
		waitWriter(t, ctx, d)
		select {
		case r := <-res:
			t.Fatalf("returned before the gate opened: %+v", r)
		default:
		}
		assert.False(t, mutRan.Load())
		gate.MarkReady()
		gate.MarkReady()
		r := <-res
		require.NoError(t, r.err)
		assert.Equal(t, "patched", r.items[0].Output.Text)
	})

	t.Run("cancel while waiting on the gate", func(t *testing.T) {
		mutRan.Store(false)
		cctx, cancel := context.WithCancel(ctx)
		d := reg.NewDispatcher(DispatcherConfig{Gate: NewReadyGate()})
		res := dispatchAsync(cctx, d, fcall("1", "apply_patch"))
		waitWriter(t, ctx, d)
		cancel()
		r := <-res
		require.NoError(t, r.err)
		assert.Equal(t, "aborted by user after 0.1s", r.items[0].Output.Text, "elapsed time is at least 0.1s")
		assert.False(t, mutRan.Load())
	})
}

// waitWriter polls until a call holds the exclusive side of d's lock.
func waitWriter(t *testing.T, ctx context.Context, d *Dispatcher) {
	t.Helper()
	for {
		if _, writer, _ := d.lock.state(); writer {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("timed out waiting for the exclusive lock")
		}
		runtime.Gosched()
	}
}

func TestDispatchAlreadyCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	var ran atomic.Bool
	b := NewBuilder(Config{})
	require.NoError(t, b.Register(fn("t"), &testHandler{handle: func(ctx context.Context, _ Invocation) (Output, error) {
		ran.Store(true)
		return Output{}, ctx.Err()
	}}, false))
	_, reg := b.Build()
	d := reg.NewDispatcher(DispatcherConfig{})
	it, err := d.Dispatch(ctx, Call{CallID: "1", Namespace: "ns", Name: "shell_command", Payload: CustomPayload{}})
	require.NoError(t, err)
	assert.Equal(t, "unsupported custom tool call: ns.shell_command", it.Output.Text)
	it, err = d.Dispatch(ctx, fcall("2", "t"))
	require.NoError(t, err)
	assert.Contains(t, it.Output.Text, "aborted by user after")
}

func TestDispatchHooks(t *testing.T) {
	ctx := testCtx(t)
	clock := newFakeClock()
	type seen struct {
		hook string
		ev   AfterToolUseEvent
	}
	var mu sync.Mutex
	var events []seen
	record := func(name string, res func(AfterToolUseEvent) HookResult) AfterToolUseHook {
		return AfterToolUseHook{Name: name, Run: func(ctx context.Context, ev AfterToolUseEvent) HookResult {
			mu.Lock()
			events = append(events, seen{name, ev})
			mu.Unlock()
			if _, ok := ctx.Deadline(); !ok {
				return HookResult{Action: HookAbort, Err: errors.New("hook ran without a deadline")}
			}
			return res(ev)
		}}
	}
	build := func(logs *syncBuffer, hooks ...AfterToolUseHook) *Dispatcher {
		b := NewBuilder(Config{Hooks: hooks, Now: clock.Now, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		require.NoError(t, b.Register(fn("shell"), &testHandler{mutating: true, handle: func(context.Context, Invocation) (Output, error) {
			clock.Advance(1500 * time.Millisecond)
			return TextOutput("exit 0", true), nil
		}}, true))
		require.NoError(t, b.Register(fn("fails"), &testHandler{handle: func(context.Context, Invocation) (Output, error) {
			return Output{}, errors.New("bad input")
		}}, true))
		_, reg := b.Build()
		return reg.NewDispatcher(DispatcherConfig{Turn: TurnContext{TurnID: "t-9"}})
	}

	t.Run("pass", func(t *testing.T) {
		events = nil
		logs := &syncBuffer{}
		d := build(logs, record("audit", func(AfterToolUseEvent) HookResult { return HookResult{} }))
		it, err := d.Dispatch(ctx, Call{CallID: "c1", Name: "shell", Payload: FunctionPayload{Arguments: `{"command":["ls"]}`}})
		require.NoError(t, err)
		assert.Equal(t, "exit 0", it.Output.Text)
		require.Len(t, events, 1)
		ev := events[0].ev
		assert.Equal(t, "t-9", ev.TurnID)
		assert.Equal(t, "c1", ev.CallID)
		assert.Equal(t, "shell", ev.ToolName)
		assert.Equal(t, PayloadFunction, ev.ToolKind)
		assert.Equal(t, FunctionPayload{Arguments: `{"command":["ls"]}`}, ev.ToolInput)
		assert.True(t, ev.Executed)
		assert.True(t, ev.Success)
		assert.True(t, ev.Mutating)
		assert.Equal(t, 1500*time.Millisecond, ev.Duration)
		assert.Equal(t, "exit 0", ev.OutputPreview)
	})

	t.Run("hooks see failed calls too", func(t *testing.T) {
		events = nil
		d := build(&syncBuffer{}, record("audit", func(AfterToolUseEvent) HookResult { return HookResult{} }))
		it, err := d.Dispatch(ctx, fcall("c2", "fails"))
		require.NoError(t, err)
		assert.Equal(t, "bad input", it.Output.Text)
		require.Len(t, events, 1)
		assert.False(t, events[0].ev.Success)
		assert.False(t, events[0].ev.Mutating)
		assert.Equal(t, "bad input", events[0].ev.OutputPreview)
	})

	t.Run("failed hook continues", func(t *testing.T) {
		events = nil
		logs := &syncBuffer{}
		d := build(logs,
			record("flaky", func(AfterToolUseEvent) HookResult { return HookResult{Err: errors.New("exit 1")} }),
			AfterToolUseHook{Name: "panics", Run: func(context.Context, AfterToolUseEvent) HookResult { panic("hook bug") }},
		)
		it, err := d.Dispatch(ctx, fcall("c3", "shell"))
		require.NoError(t, err)
		assert.Equal(t, "exit 0", it.Output.Text)
		assert.Contains(t, logs.String(), "after_tool_use hook failed; continuing")
		assert.Contains(t, logs.String(), "exit 1")
		assert.Contains(t, logs.String(), "after_tool_use hook panicked")
	})

	t.Run("replace", func(t *testing.T) {
		events = nil
		d := build(&syncBuffer{},
			record("redact", func(AfterToolUseEvent) HookResult {
				return HookResult{Action: HookReplace, Output: Output{Content: []ContentItem{InputText("[redacted]")}}}
			}),
			record("after", func(AfterToolUseEvent) HookResult { return HookResult{} }),
		)
		it, err := d.Dispatch(ctx, fcall("c4", "shell"))
		require.NoError(t, err)
		assert.JSONEq(t, `{"type":"function_call_output","call_id":"c4","output":[{"type":"input_text","text":"[redacted]"}]}`, itemJSON(t, it))
		assert.Nil(t, it.Output.Success, "a replacement carries its own success flag")
		require.Len(t, events, 2)
		assert.Equal(t, "[redacted]", events[1].ev.OutputPreview, "later hooks see the replacement")
		assert.False(t, events[1].ev.Success)
	})

	t.Run("abort", func(t *testing.T) {
		events = nil
		logs := &syncBuffer{}
		d := build(logs,
			record("policy", func(AfterToolUseEvent) HookResult {
				return HookResult{Action: HookAbort, Err: errors.New("forbidden command")}
			}),
			record("never", func(AfterToolUseEvent) HookResult { return HookResult{} }),
		)
		items, err := d.DispatchAll(ctx, []Call{fcall("c5", "shell")})
		assert.Nil(t, items)
		require.Error(t, err)
		assert.ErrorIs(t, err, ErrFatal)
		var abort *HookAbortError
		require.ErrorAs(t, err, &abort)
		assert.Equal(t, "policy", abort.Hook)
		assert.EqualError(t, err, "after_tool_use hook 'policy' failed and aborted operation: forbidden command")
		assert.Len(t, events, 1, "the first abort stops the hook chain")
		assert.Contains(t, logs.String(), "aborting operation")
	})
}

func TestTurnEmitter(t *testing.T) {
	ctx := testCtx(t)
	var got []Event
	tc := TurnContext{Emitter: EmitterFunc(func(_ context.Context, ev Event) { got = append(got, ev) })}
	tc.Emit(ctx, testEvent{})
	require.Len(t, got, 1)
	assert.Equal(t, "test/event", got[0].Method())
	TurnContext{}.Emit(ctx, testEvent{}) // no emitter: no-op
}

type testEvent struct{}

func (testEvent) Method() string            { return "test/event" }
func (testEvent) Params(string, string) any { return nil }

func TestDispatchObserveOutcomes(t *testing.T) {
	ctx := testCtx(t)
	clock := newFakeClock()
	b := NewBuilder(Config{Now: clock.Now})
	require.NoError(t, b.Register(fn("good"), &testHandler{handle: func(context.Context, Invocation) (Output, error) {
		clock.Advance(1500 * time.Millisecond)
		return TextOutput("fine", true), nil
	}}, false))
	require.NoError(t, b.Register(fn("bad"), &testHandler{handle: func(context.Context, Invocation) (Output, error) {
		return Output{}, errors.New("permission denied")
	}}, false))
	require.NoError(t, b.Register(fn("fatal"), &testHandler{handle: func(context.Context, Invocation) (Output, error) {
		return Output{}, Fatalf("sandbox is gone")
	}}, false))
	_, reg := b.Build()
	var mu sync.Mutex
	got := map[string]CallResult{}
	d := reg.NewDispatcher(DispatcherConfig{Observe: func(r CallResult) {
		mu.Lock()
		defer mu.Unlock()
		got[r.CallID] = r
	}})

	_, err := d.DispatchAll(ctx, []Call{fcall("1", "good"), fcall("2", "bad"), fcall("3", "nope")})
	require.NoError(t, err)
	_, err = d.Dispatch(ctx, fcall("4", "fatal"))
	require.ErrorIs(t, err, ErrFatal)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = d.Dispatch(cancelled, fcall("5", "good"))
	require.NoError(t, err)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 5)
	assert.Equal(t, CallOK, got["1"].Outcome)
	assert.Equal(t, "good", got["1"].Tool)
	assert.Equal(t, 1500*time.Millisecond, got["1"].Duration)
	assert.Equal(t, CallFailed, got["2"].Outcome)
	assert.Equal(t, "permission denied", got["2"].Output.Text)
	assert.Equal(t, CallUnsupported, got["3"].Outcome)
	assert.Equal(t, CallFatal, got["4"].Outcome)
	assert.ErrorIs(t, got["4"].Err, ErrFatal)
	assert.Equal(t, CallAborted, got["5"].Outcome)
}
