package turns_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// gatedStore holds (or fails) the commit of a tool round's history and
// token usage: the batch that updates both the turn and the thread.
type gatedStore struct {
	store.Store
	gate chan error // each round's commit takes one value; nil is success
}

func (g gatedStore) Write(ctx context.Context, b *store.Batch) error {
	if len(b.UpdateTurns) == 1 && len(b.UpdateThreads) == 1 && b.UpdateTurns[0].Meta != nil && b.UpdateTurns[0].Status == "" {
		if err := <-g.gate; err != nil {
			return err
		}
	}
	return g.Store.Write(ctx, b)
}

type noopTool struct{}

func (noopTool) Kind() registry.PayloadKind                           { return registry.PayloadFunction }
func (noopTool) IsMutating(context.Context, registry.Invocation) bool { return false }
func (noopTool) Handle(context.Context, registry.Invocation) (registry.Output, error) {
	return registry.TextOutput("ok", true), nil
}

func pipelineSetup(t *testing.T) (*turns.Manager, *fakemodel.Server, *noteLog, chan error) {
	return pipelineSetupWith(t, `{"steps":[{"tool_calls":[{"call_id":"c1","name":"noop","arguments":{}}]},{"text":"done"}]}`, nil)
}

// pipelineSetupWith serves script; wrap, when set, wraps the model client.
func pipelineSetupWith(t *testing.T, script string, wrap func(model.Client) model.Client, opts ...func(*turns.Config)) (*turns.Manager, *fakemodel.Server, *noteLog, chan error) {
	t.Helper()
	m, fake, notes, gate, _ := pipelineSetupStore(t, script, wrap, opts...)
	return m, fake, notes, gate
}

// pipelineSetupStore is pipelineSetupWith that also returns the store
// under the gate.
func pipelineSetupStore(t *testing.T, script string, wrap func(model.Client) model.Client, opts ...func(*turns.Config)) (*turns.Manager, *fakemodel.Server, *noteLog, chan error, store.Store) {
	t.Helper()
	st, fake, client := storeAndModel(t, script)
	if wrap != nil {
		client = wrap(client)
	}
	notes := &noteLog{ch: make(chan string, 1024)}
	gate := make(chan error, 1)
	cfg := turns.Config{
		Store: gatedStore{Store: st, gate: gate}, Sink: sinkFor(notes), Models: oneProvider{client},
		Tools: func(tc turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			return noArgTools(false, map[string]registry.Handler{"noop": noopTool{}})
		},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	}
	for _, o := range opts {
		o(&cfg)
	}
	m, err := turns.New(cfg)
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	// Runs before m.Stop: a test that failed while a commit was held lets
	// every commit through, so that the turn can end.
	t.Cleanup(func() {
		if t.Failed() {
			close(gate)
		}
	})
	return m, fake, notes, gate, st
}

func startPipelineTurn(t *testing.T, m *turns.Manager) {
	t.Helper()
	startTurnOn(t, m, "")
}

func waitRequests(t *testing.T, fake *fakemodel.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(fake.Requests()) < n {
		require.True(t, time.Now().Before(deadline), "the model got %d requests, want %d", len(fake.Requests()), n)
		time.Sleep(5 * time.Millisecond)
	}
}

// The request after a tool round goes out while the round's history is
// still being committed, and nothing is announced until the commit is done.
func TestNextRequestOverlapsHistoryCommit(t *testing.T) {
	m, fake, notes, gate := pipelineSetup(t)
	startPipelineTurn(t, m)
	waitRequests(t, fake, 2) // the commit is still held by the gate
	time.Sleep(50 * time.Millisecond)
	require.NotContains(t, notes.snapshot(), "thread/tokenUsage/updated", "usage announced before its commit")
	before := len(notes.snapshot())
	gate <- nil
	notes.wait(t, "turn/completed")
	lines := notes.snapshot()
	usage := slices.Index(lines[before:], "thread/tokenUsage/updated")
	started := slices.Index(lines[before:], "item/started")
	require.GreaterOrEqual(t, usage, 0, "%v", lines)
	require.Greater(t, started, usage, "the next response's items come after the previous round's usage: %v", lines[before:])
}

// eventLog is a model client that reports each event once the turn has
// handled it.
type eventLog struct {
	model.Client
	handled chan string
}

func (l eventLog) Stream(ctx context.Context, req model.Request, fn func(model.Event) error) (model.Result, error) {
	return l.Client.Stream(ctx, req, func(ev model.Event) error {
		err := fn(ev)
		l.handled <- fmt.Sprintf("%T", ev)
		return err
	})
}

// A response that only calls tools announces and writes nothing until its
// calls run, so it is read to its end while the previous round's history
// is still being committed; its calls still run after that commit.
func TestToolCallResponseReadDuringHistoryCommit(t *testing.T) {
	handled := make(chan string, 64)
	m, fake, notes, gate := pipelineSetupWith(t, `{"steps":[
		{"tool_calls":[{"call_id":"c1","name":"noop","arguments":{}}]},
		{"tool_calls":[{"call_id":"c2","name":"noop","arguments":{}}]},
		{"text":"done"}]}`, func(c model.Client) model.Client { return eventLog{c, handled} })
	startPipelineTurn(t, m)
	waitRequests(t, fake, 2)                      // round one's commit is held by the gate
	waitHandled(t, handled, "model.Completed", 2) // round two read meanwhile
	require.NotContains(t, notes.snapshot(), "thread/tokenUsage/updated", "usage announced before its commit")
	require.Len(t, fake.Requests(), 2, "round two's calls ran before round one's commit")
	gate <- nil
	waitRequests(t, fake, 3)
	gate <- nil
	notes.wait(t, "turn/completed")
	require.Equal(t, 3, countOf(notes.snapshot(), "thread/tokenUsage/updated"), "one per response")
}

// startTurnOn starts a turn on thread ("" starts a thread) and returns
// both ids.
func startTurnOn(t *testing.T, m *turns.Manager, thread string) (string, string) {
	t.Helper()
	caller := turns.Caller{Conn: 1}
	if thread == "" {
		th, after, err := m.StartThread(context.Background(), caller, api.ThreadStartParams{})
		require.NoError(t, err)
		after()
		thread = th.Thread.ID
	}
	res, after, err := m.StartTurn(context.Background(), caller, api.TurnStartParams{ThreadID: thread, Input: api.List[api.UserInput]{}})
	require.NoError(t, err)
	after()
	return thread, res.Turn.ID
}

// waitHandled waits until the turn has handled n events of type typ (as
// eventLog names them).
func waitHandled(t *testing.T, handled chan string, typ string, n int) {
	t.Helper()
	for seen := 0; seen < n; {
		select {
		case ev := <-handled:
			if ev == typ {
				seen++
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the turn handled %d %s events, want %d", seen, typ, n)
		}
	}
}

// When the previous round's commit fails, the tool calls of the response
// read meanwhile never ran: they leave the history, so the thread's next
// request does not carry them.
func TestFailedCommitDropsCallsReadMeanwhile(t *testing.T) {
	handled := make(chan string, 64)
	m, fake, notes, gate := pipelineSetupWith(t, `{"steps":[
		{"tool_calls":[{"call_id":"c1","name":"noop","arguments":{}}]},
		{"tool_calls":[{"call_id":"c2","name":"noop","arguments":{}}]},
		{"text":"done"}]}`, func(c model.Client) model.Client { return eventLog{c, handled} })
	thread, _ := startTurnOn(t, m, "")
	waitHandled(t, handled, "model.Completed", 2) // round two read, round one's commit held
	gate <- errors.New("disk full")
	notes.wait(t, "turn/completed")
	require.Equal(t, api.TurnFailed, notes.lastEnded(t).Status)

	startTurnOn(t, m, thread)
	waitRequests(t, fake, 3)
	notes.wait(t, "turn/completed")
	next := string(fake.Requests()[2].Body)
	require.Contains(t, next, `"c1"`)
	require.NotContains(t, next, `"c2"`, "a call that never ran is in the thread's history")
}

// A failed commit decides the turn even when the response being read also
// ends otherwise: the stream breaks, or the turn is interrupted.
func TestFailedCommitDecidesTheTurn(t *testing.T) {
	for _, tc := range []struct {
		name, round2 string
		interrupt    bool
	}{
		{name: "stream breaks", round2: `{"tool_calls":[{"call_id":"c2","name":"noop","arguments":{}}],"fail":{"kind":"reset","after_events":4}}`},
		{name: "interrupted", round2: `{"tool_calls":[{"call_id":"c2","name":"noop","arguments":{}}],"event_delay_ms":300}`, interrupt: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			handled := make(chan string, 64)
			m, _, notes, gate := pipelineSetupWith(t, `{"steps":[
				{"tool_calls":[{"call_id":"c1","name":"noop","arguments":{}}]},`+tc.round2+`,
				{"text":"done"}]}`, func(c model.Client) model.Client { return eventLog{c, handled} })
			thread, turn := startTurnOn(t, m, "")
			waitHandled(t, handled, "model.OutputItemAdded", 2) // round two is being read
			gate <- errors.New("disk full")
			if tc.interrupt {
				after, err := m.InterruptTurn(context.Background(), api.TurnInterruptParams{ThreadID: thread, TurnID: turn})
				require.NoError(t, err)
				after()
			}
			notes.wait(t, "turn/completed")
			ended := notes.lastEnded(t)
			require.Equal(t, api.TurnFailed, ended.Status, "%+v", ended)
			require.NotNil(t, ended.Error)
			require.NotContains(t, ended.Error.Message, "stream", "the stream's failure was reported instead of the commit's")
			require.NotContains(t, notes.snapshot(), "thread/tokenUsage/updated")
		})
	}
}

// A failed history commit fails the turn, and the response that was
// already requested is not announced.
func TestFailedHistoryCommitFailsTheTurn(t *testing.T) {
	m, fake, notes, gate := pipelineSetup(t)
	startPipelineTurn(t, m)
	waitRequests(t, fake, 2)
	gate <- errors.New("disk full")
	notes.wait(t, "turn/completed")
	lines := notes.snapshot()
	require.NotContains(t, lines, "thread/tokenUsage/updated")
	// Only the user message was announced: not the final answer.
	require.Equal(t, 1, countOf(lines, "item/started"), "%v", lines)
	require.Equal(t, 1, countOf(lines, "item/completed"), "%v", lines)
}

func countOf(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if l == s {
			n++
		}
	}
	return n
}

// A tool round's usage is announced as soon as its commit is over, not
// when the next response starts: a model may take seconds to answer, and
// announcing it then would delay that response's first tool call.
func TestRoundUsageAnnouncedBeforeNextResponse(t *testing.T) {
	m, fake, notes, gate := pipelineSetupWith(t, `{"steps":[
		{"tool_calls":[{"call_id":"c1","name":"noop","arguments":{}}]},
		{"delay_ms":60000,"text":"late"}]}`, nil)
	thread, turn := startTurnOn(t, m, "")
	waitRequests(t, fake, 2) // the second response is 60 s away
	gate <- nil
	notes.wait(t, "thread/tokenUsage/updated")
	lines := notes.snapshot()
	require.Less(t, slices.Index(lines, "item/completed"), slices.Index(lines, "thread/tokenUsage/updated"), "%v", lines)

	after, err := m.InterruptTurn(context.Background(), api.TurnInterruptParams{ThreadID: thread, TurnID: turn})
	require.NoError(t, err)
	after()
	notes.wait(t, "turn/completed")
	require.Equal(t, api.TurnInterrupted, notes.lastEnded(t).Status)
	require.Equal(t, 1, countOf(notes.snapshot(), "thread/tokenUsage/updated"))
}

// sentWatch is a model client that checks, when a request carries Sent,
// that the previous round's commit has not started before Sent runs.
type sentWatch struct {
	model.Client
	t        *testing.T
	commits  chan struct{} // a round's commit entered the store
	sawSent  chan struct{}
	sentOnce sync.Once
}

func (s *sentWatch) Stream(ctx context.Context, req model.Request, fn func(model.Event) error) (model.Result, error) {
	if req.Sent != nil {
		s.sentOnce.Do(func() { close(s.sawSent) })
		select {
		case <-s.commits:
			s.t.Error("the round's commit started before the next request was sent")
		case <-time.After(100 * time.Millisecond):
		}
	}
	return s.Client.Stream(ctx, req, fn)
}

// A tool round's commit starts once the next request is on the wire, so
// that it does not compete with sending it.
func TestRoundCommitStartsOnceRequestSent(t *testing.T) {
	// The watch waits 100 ms.
	slow := func(c *turns.Config) { c.MaxCommitDelay = time.Minute }
	commits := make(chan struct{}, 16)
	watch := &sentWatch{t: t, commits: commits, sawSent: make(chan struct{})}
	m, fake, notes, gate := pipelineSetupWith(t, `{"steps":[
		{"tool_calls":[{"call_id":"c1","name":"noop","arguments":{}}]},
		{"text":"done"}]}`, func(c model.Client) model.Client { watch.Client = c; return watch }, slow)
	stop, stopped := make(chan struct{}), make(chan struct{})
	defer func() { close(stop); <-stopped }()
	go func() {
		defer close(stopped)
		// The gate passes every commit, and tells the watch of each: gate
		// holds one value, so each send after the first completes when a
		// commit has taken one.
		gate <- nil
		for {
			select {
			case gate <- nil:
				commits <- struct{}{}
			case <-stop:
				return
			}
		}
	}()
	startPipelineTurn(t, m)
	notes.wait(t, "turn/completed")
	select {
	case <-watch.sawSent:
	default:
		t.Fatal("the request after the tool round carried no Sent")
	}
	require.Len(t, fake.Requests(), 2)
	require.Equal(t, api.TurnCompleted, notes.lastEnded(t).Status)
	require.Equal(t, 2, countOf(notes.snapshot(), "thread/tokenUsage/updated"))
}

// stalledUpload is a model client whose requests after a tool round take
// long to write: it neither calls Sent nor answers for a while.
type stalledUpload struct {
	model.Client
	stall time.Duration
}

func (s stalledUpload) Stream(ctx context.Context, req model.Request, fn func(model.Event) error) (model.Result, error) {
	if req.Sent != nil {
		select {
		case <-time.After(s.stall):
		case <-ctx.Done():
		}
	}
	return s.Client.Stream(ctx, req, fn)
}

// A request that takes long to write does not hold the round's commit
// back: it starts after MaxCommitDelay at the latest.
func TestRoundCommitNotHeldByStalledUpload(t *testing.T) {
	m, _, notes, gate := pipelineSetupWith(t, `{"steps":[
		{"tool_calls":[{"call_id":"c1","name":"noop","arguments":{}}]},
		{"text":"done"}]}`, func(c model.Client) model.Client { return stalledUpload{c, 30 * time.Second} })
	gate <- nil
	thread, turn := startTurnOn(t, m, "")
	notes.wait(t, "thread/tokenUsage/updated") // within noteLog's wait, far below 30 s
	after, err := m.InterruptTurn(context.Background(), api.TurnInterruptParams{ThreadID: thread, TurnID: turn})
	require.NoError(t, err)
	after()
	notes.wait(t, "turn/completed")
}

// A thread change made while a round's commit is being written reaches the
// store after that commit, not before it: the commit's copy of the thread
// meta, made earlier, does not overwrite it.
func TestThreadUpdateNotOverwrittenByRoundCommit(t *testing.T) {
	m, fake, notes, gate, st := pipelineSetupStore(t, `{"steps":[
		{"tool_calls":[{"call_id":"c1","name":"noop","arguments":{}}]},
		{"delay_ms":60000,"text":"late"}]}`, nil)
	thread, turn := startTurnOn(t, m, "")
	waitRequests(t, fake, 2)          // the round's commit is held by the gate
	time.Sleep(20 * time.Millisecond) // past MaxCommitDelay: it has started
	never := api.AskForApproval{Policy: api.ApprovalNever}
	resumed := make(chan error, 1)
	go func() {
		_, after, err := m.ResumeThread(context.Background(), turns.Caller{Conn: 2}, api.ThreadResumeParams{ThreadID: thread, ApprovalPolicy: &never})
		if after != nil {
			after()
		}
		resumed <- err
	}()
	time.Sleep(50 * time.Millisecond) // the resume writes now, or waits for the commit
	gate <- nil
	require.NoError(t, <-resumed)
	// The round's commit stores the turn's history and the thread's meta
	// in one transaction.
	require.Eventually(t, func() bool {
		tr, err := st.GetTurn(context.Background(), thread, turn)
		return err == nil && bytes.Contains(tr.Meta, []byte(`"c1"`))
	}, 10*time.Second, 5*time.Millisecond)

	rec, err := st.GetThread(context.Background(), thread)
	require.NoError(t, err)
	var meta struct {
		ApprovalPolicy api.AskForApproval `json:"approvalPolicy"`
	}
	require.NoError(t, json.Unmarshal(rec.Meta, &meta))
	require.Equal(t, never, meta.ApprovalPolicy, "stored meta: %s", rec.Meta)

	after, err := m.InterruptTurn(context.Background(), api.TurnInterruptParams{ThreadID: thread, TurnID: turn})
	require.NoError(t, err)
	after()
	notes.wait(t, "turn/completed")
}
