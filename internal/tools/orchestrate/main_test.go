package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/turns"
)

// epochMs is the first reading of the test clock; each reading advances
// it by one second, so every timestamp an item carries is traceable.
const epochMs = 1_700_000_000_000

// testClock is an injected clock that ticks one second per reading.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.UnixMilli(epochMs)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.t
	c.t = c.t.Add(time.Second)
	return now
}

// sinkEvent is one item published by the tools, snapshotted when it was
// published (the tools keep mutating their item structs afterwards).
type sinkEvent struct {
	completed bool
	// final: completed through ItemCompletedFinal, after which the call
	// announces nothing more.
	final     bool
	command   *api.CommandExecutionItem
	file      *api.FileChangeItem
	startedMs *int64
	doneMs    *int64
	// raised is how many approval flags were raised at that moment.
	raised int
}

// fakeSink is the turn's turns.ToolSink: it keeps the items, output deltas,
// diffs and handler events the tools send.
type fakeSink struct {
	mu     sync.Mutex
	events []sinkEvent
	deltas []delta
	diffs  []string
	client *fakeClient
	// changed is signalled after every item event.
	changed chan struct{}
}

// delta is one item/commandExecution/outputDelta a tool sent.
type delta struct{ itemID, text string }

var _ turns.ToolSink = (*fakeSink)(nil)

func (s *fakeSink) record(completed bool, it api.ThreadItem) { s.recordAs(completed, false, it) }

func (s *fakeSink) recordAs(completed, final bool, it api.ThreadItem) {
	ev := sinkEvent{completed: completed, final: final, startedMs: it.StartedAtMs, doneMs: it.CompletedAtMs, raised: s.client.raisedNow()}
	switch b := it.Body.(type) {
	case *api.CommandExecutionItem:
		c := *b
		ev.command = &c
	case *api.FileChangeItem:
		c := *b
		ev.file = &c
	}
	s.mu.Lock()
	s.events = append(s.events, ev)
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *fakeSink) ItemStarted(it api.ThreadItem)   { s.record(false, it) }
func (s *fakeSink) ItemCompleted(it api.ThreadItem) { s.record(true, it) }

// ItemCompletedFinal is recorded as ItemCompleted, marked final: the two
// differ only in when the turn commits the item.
func (s *fakeSink) ItemCompletedFinal(it api.ThreadItem) { s.recordAs(true, true, it) }

func (s *fakeSink) CommandOutputDelta(itemID, text string) {
	s.mu.Lock()
	s.deltas = append(s.deltas, delta{itemID, text})
	s.mu.Unlock()
}

func (s *fakeSink) TurnDiff(d string) {
	s.mu.Lock()
	s.diffs = append(s.diffs, d)
	s.mu.Unlock()
}

// Emit discards the registry handlers' events (update_plan, write_stdin):
// they are the turns layer's and those handlers' to test.
func (s *fakeSink) Emit(context.Context, registry.Event) {}

func (s *fakeSink) snapshot() []sinkEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sinkEvent(nil), s.events...)
}

// waitCompleted waits until the item id completed and returns the event.
func (s *fakeSink) waitCompleted(t *testing.T, id string) sinkEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		for _, ev := range s.snapshot() {
			if ev.completed && ev.itemID() == id {
				return ev
			}
		}
		select {
		case <-s.changed:
		case <-timeout:
			t.Fatalf("item %s never completed; events: %+v", id, s.snapshot())
		}
	}
}

func (ev sinkEvent) itemID() string {
	switch {
	case ev.command != nil:
		return ev.command.ID
	case ev.file != nil:
		return ev.file.ID
	}
	return ""
}

// answerFunc answers one client request.
type answerFunc func(ctx context.Context, req turns.ClientRequest) (json.RawMessage, error)

// fakeClient is the turn's turns.ClientRequests: it keeps the requests,
// runs BeforeSend as the turns layer does and counts the raised flags.
type fakeClient struct {
	answer answerFunc

	mu       sync.Mutex
	requests []turns.ClientRequest
	raised   map[api.ThreadActiveFlag]int
}

func (c *fakeClient) Request(ctx context.Context, req turns.ClientRequest) (json.RawMessage, func(), error) {
	c.mu.Lock()
	c.requests = append(c.requests, req)
	c.raised[req.Flag]++
	c.mu.Unlock()
	var once sync.Once
	release := func() {
		once.Do(func() {
			c.mu.Lock()
			c.raised[req.Flag]--
			c.mu.Unlock()
		})
	}
	if req.BeforeSend != nil {
		req.BeforeSend()
	}
	if c.answer == nil {
		return nil, release, turns.ErrNoClient
	}
	res, err := c.answer(ctx, req)
	return res, release, err
}

func (c *fakeClient) raisedNow() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.raised {
		n += v
	}
	return n
}

func (c *fakeClient) sent() []turns.ClientRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]turns.ClientRequest(nil), c.requests...)
}

// decision answers every approval with d (a decision's JSON).
func decision(d string) answerFunc {
	return func(context.Context, turns.ClientRequest) (json.RawMessage, error) {
		return json.RawMessage(`{"decision":` + d + `}`), nil
	}
}

// turn is one turn's tool context with fakes behind every interface the
// turns layer hands the tools.
type turn struct {
	t       *testing.T
	s       *Service
	tc      turns.ToolContext
	sink    *fakeSink
	client  *fakeClient
	specs   []registry.ConfiguredToolSpec
	reg     *registry.Registry
	mu      sync.Mutex
	stopped int // Interrupt calls
}

// turnOpts are the policies of a test turn.
type turnOpts struct {
	approval   string // "never" when empty
	sandbox    api.SandboxPolicyType
	answer     answerFunc
	mode       string
	model      string
	approvals  *policy.SessionApprovals
	threadID   string
	policy     *api.SandboxPolicy // the whole sandbox policy, over sandbox
	originator string
}

// newService returns a service on the test clock, closed by the test.
func newService(t *testing.T, cfg Config) *Service {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = newTestClock().Now
	}
	s, err := New(cfg, nil, nil)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// newTurn builds the tools of one turn in cwd.
func newTurn(t *testing.T, s *Service, cwd string, o turnOpts) *turn {
	t.Helper()
	if o.approval == "" {
		o.approval = "never"
	}
	if o.sandbox == "" {
		o.sandbox = api.SandboxPolicyDangerFullAccess
	}
	if o.approvals == nil {
		o.approvals = policy.NewSessionApprovals()
	}
	if o.threadID == "" {
		o.threadID = "thread-1"
	}
	client := &fakeClient{answer: o.answer, raised: map[api.ThreadActiveFlag]int{}}
	tu := &turn{t: t, s: s, client: client, sink: &fakeSink{client: client, changed: make(chan struct{}, 1)}}
	tu.tc = turns.ToolContext{
		ThreadID: o.threadID, TurnID: "turn-1", Cwd: cwd, Originator: o.originator, Sink: tu.sink,
		Model: o.model, ApprovalPolicy: api.AskForApproval{Policy: api.ApprovalPolicy(o.approval)},
		Sandbox:           api.SandboxPolicy{Type: o.sandbox},
		CollaborationMode: o.mode, Approvals: o.approvals, Client: client,
		Interrupt: func() {
			tu.mu.Lock()
			tu.stopped++
			tu.mu.Unlock()
		},
	}
	if o.policy != nil {
		tu.tc.Sandbox = *o.policy
	}
	var err error
	tu.specs, tu.reg, err = s.Build(tu.tc)
	require.NoError(t, err)
	return tu
}

// call dispatches one call as the turn's agent loop does.
func (tu *turn) call(ctx context.Context, callID, name string, payload registry.Payload) registry.Output {
	tu.t.Helper()
	d := tu.reg.NewDispatcher(registry.DispatcherConfig{Turn: registry.TurnContext{TurnID: tu.tc.TurnID, Cwd: tu.tc.Cwd, Emitter: tu.sink}})
	item, err := d.Dispatch(ctx, registry.Call{CallID: callID, Name: name, Payload: payload})
	require.NoError(tu.t, err)
	return item.Output
}

// fn calls a function tool with JSON arguments.
func (tu *turn) fn(callID, name string, args any) registry.Output {
	tu.t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(tu.t, err)
	return tu.call(context.Background(), callID, name, registry.FunctionPayload{Arguments: string(raw)})
}

func (tu *turn) interrupts() int {
	tu.mu.Lock()
	defer tu.mu.Unlock()
	return tu.stopped
}

func (tu *turn) turnDiffs() []string {
	tu.sink.mu.Lock()
	defer tu.sink.mu.Unlock()
	return append([]string(nil), tu.sink.diffs...)
}

// deltas joins the output deltas of item id.
func (tu *turn) deltas(id string) string {
	tu.sink.mu.Lock()
	defer tu.sink.mu.Unlock()
	out := ""
	for _, d := range tu.sink.deltas {
		if d.itemID == id {
			out += d.text
		}
	}
	return out
}

// workspace is a temp dir with symlinks resolved (macOS /var → /private).
func workspace(t *testing.T) string {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return ws
}

var errClient = errors.New("client said no: -32000 boom")

// registryFn is a function payload with raw arguments.
func registryFn(args string) registry.Payload { return registry.FunctionPayload{Arguments: args} }

// The parameter types of an answerFunc, for short literals.
type (
	contextT = context.Context
	requestT = turns.ClientRequest
	rawT     = json.RawMessage
)

// customToolName is the name of the first freeform tool offered, or "".
func customToolName(specs []registry.ConfiguredToolSpec) string {
	for _, s := range specs {
		if c, ok := s.Spec.(registry.FreeformSpec); ok {
			return c.Name
		}
	}
	return ""
}

// modelShell configures model id with a shell_type.
func modelShell(id, shellType string) map[string]config.ModelEntry {
	return map[string]config.ModelEntry{id: {ShellType: shellType}}
}
