package turns_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// firstWriteGate holds the write of the batch that creates a turn until
// the fake model has received a request past the first skip, or a second
// went by; fail makes that write fail instead of storing it.
type firstWriteGate struct {
	store.Store
	fake *fakemodel.Server
	skip int
	fail error

	mu       sync.Mutex
	waited   bool // the write saw the model's request before it went on
	returned atomic.Bool
}

func (g *firstWriteGate) Write(ctx context.Context, b *store.Batch) error {
	if len(b.CreateTurns) == 0 {
		return g.Store.Write(ctx, b)
	}
	defer g.returned.Store(true)
	g.mu.Lock()
	skip := g.skip
	g.mu.Unlock()
	deadline := time.Now().Add(time.Second)
	for len(g.fake.Requests()) <= skip && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	g.mu.Lock()
	g.waited = len(g.fake.Requests()) > skip
	fail := g.fail
	g.mu.Unlock()
	if fail != nil {
		return fail
	}
	return g.Store.Write(ctx, b)
}

func (g *firstWriteGate) sawRequest() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waited
}

// streamLog records how each model request ended.
type streamLog struct {
	model.Client
	ended chan error
}

func (s streamLog) Stream(ctx context.Context, req model.Request, fn func(model.Event) error) (model.Result, error) {
	res, err := s.Client.Stream(ctx, req, fn)
	s.ended <- err
	return res, err
}

// A turn started by input sends its first model request while its turn
// record and user message are being written: the write sees the request
// arrive. turn/start still answers once the write has returned, nothing
// of the turn is announced before the answer is handed over (After), and
// the notifications keep their order.
func TestFirstRequestOverlapsFirstCommit(t *testing.T) {
	st, fake, client := storeAndModel(t, `{"steps":[{"text":"the answer","chunks":3}]}`)
	notes := &noteLog{ch: make(chan string, 1024)}
	gate := &firstWriteGate{Store: st, fake: fake}
	m := toolFreeManager(t, gate, sinkFor(notes), client)
	caller := turns.Caller{Conn: 1}
	th, after, err := m.StartThread(context.Background(), caller, api.ThreadStartParams{})
	require.NoError(t, err)
	after()

	_, after, err = m.StartTurn(context.Background(), caller, api.TurnStartParams{ThreadID: th.Thread.ID,
		Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hello"}}})
	require.NoError(t, err)
	// Called once, here or, should the test stop before, ahead of the
	// manager's Stop, which waits for the turn.
	after = sync.OnceFunc(after)
	t.Cleanup(after)
	require.True(t, gate.returned.Load(), "turn/start answers once the turn is stored")
	require.True(t, gate.sawRequest(), "the model request went out while the turn was being stored")

	// The response may have streamed whole by now: none of it, nor the
	// turn, is announced before the answer is handed over.
	time.Sleep(100 * time.Millisecond)
	for _, line := range notes.snapshot() {
		require.NotContains(t, []string{"turn/started", "item/started", "item/completed", "item/agentMessage/delta", "turn/completed"}, line,
			"announced before the answer: %v", notes.snapshot())
	}
	before := len(notes.snapshot())
	after()
	notes.wait(t, "turn/completed")

	lines := notes.snapshot()[before:]
	require.GreaterOrEqual(t, len(lines), 6, "%v", lines)
	require.Equal(t, []string{"thread/status/changed active[]", "turn/started", "item/started", "item/completed", "item/started"}, lines[:5],
		"the turn, its user message, then the response")
	require.Contains(t, lines, "item/agentMessage/delta")
	require.Equal(t, "turn/completed", lines[len(lines)-1])
	require.Equal(t, api.TurnCompleted, notes.lastEnded(t).Status)
}

// A turn whose record and user message fail to be written answers
// turn/start with the error and leaves no trace: nothing of it is
// announced, the model request sent meanwhile is cancelled (and not
// reported), and the thread starts its next turn.
func TestFirstCommitFailureLeavesNoTrace(t *testing.T) {
	st, fake, client := storeAndModel(t, `{"steps":[{"text":"never","delay_ms":30000},{"text":"the answer"}]}`)
	notes := &noteLog{ch: make(chan string, 1024)}
	boom := errors.New("disk on fire")
	gate := &firstWriteGate{Store: st, fake: fake, fail: boom}
	streams := streamLog{Client: client, ended: make(chan error, 4)}
	obs := &observed{}
	m := toolFreeManager(t, gate, sinkFor(notes), streams, obs)
	caller := turns.Caller{Conn: 1}
	th, after, err := m.StartThread(context.Background(), caller, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	before := len(notes.snapshot())

	start := time.Now()
	_, after, err = m.StartTurn(context.Background(), caller, api.TurnStartParams{ThreadID: th.Thread.ID,
		Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hello"}}})
	require.ErrorIs(t, err, boom)
	require.Nil(t, after)
	require.True(t, gate.sawRequest(), "the model request went out while the turn was being stored")
	select {
	case serr := <-streams.ended:
		var me *model.Error
		require.ErrorAs(t, serr, &me)
		require.Equal(t, model.KindCanceled, me.Kind, "the request is cancelled: %v", serr)
	default:
		t.Fatal("the model request still runs after turn/start failed")
	}
	require.Less(t, time.Since(start), 10*time.Second)
	_, running := m.Counts()
	require.Zero(t, running)
	time.Sleep(50 * time.Millisecond)
	for _, line := range notes.snapshot()[before:] {
		require.NotContains(t, []string{"turn/started", "item/started", "item/completed", "turn/completed"}, line,
			"a turn that failed to start announced: %v", notes.snapshot()[before:])
	}
	turnsOf, err := st.ListTurns(context.Background(), store.TurnsQuery{ThreadID: th.Thread.ID})
	require.NoError(t, err)
	require.Empty(t, turnsOf.Turns, "nothing of the turn is stored")
	// The Observer counts no turn, and ends what it began for it.
	obs.mu.Lock()
	require.Equal(t, 1, obs.started)
	require.Equal(t, 1, obs.abandoned, "TurnAbandoned ends what TurnStarted began")
	require.Empty(t, obs.turns, "a turn that never was is not counted")
	obs.mu.Unlock()

	// The thread is free: the next turn runs.
	gate.mu.Lock()
	gate.fail, gate.skip = nil, 1
	gate.mu.Unlock()
	_, after, err = m.StartTurn(context.Background(), caller, api.TurnStartParams{ThreadID: th.Thread.ID,
		Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "again"}}})
	require.NoError(t, err)
	after()
	notes.wait(t, "turn/completed")
	require.Equal(t, api.TurnCompleted, notes.lastEnded(t).Status)
	lines := notes.snapshot()[before:]
	require.Equal(t, 1, countOf(lines, "turn/started"), "%v", lines)
}
