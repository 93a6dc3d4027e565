package turns_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// readGate holds the write of the batch that creates a turn until the
// turn's first model response has been read far enough (read is closed),
// or two seconds went by, then linger longer; fail makes that write fail
// instead of storing it. It records the writes of turns and items made
// while that write is not stored: before it returned, or after it failed.
type readGate struct {
	store.Store
	read   chan struct{}
	linger time.Duration
	fail   error
	// readFirst is set when read was closed before the write went on.
	readFirst atomic.Bool

	mu        sync.Mutex
	stored    bool     // the write that creates the turn is stored
	outOfTurn []string // the writes made meanwhile
}

func (g *readGate) Write(ctx context.Context, b *store.Batch) error {
	if len(b.CreateTurns) == 0 {
		g.mu.Lock()
		if !g.stored && (len(b.AppendItems) > 0 || len(b.UpdateTurns) > 0) {
			g.outOfTurn = append(g.outOfTurn, fmt.Sprintf("%d items, %d turn patches", len(b.AppendItems), len(b.UpdateTurns)))
		}
		g.mu.Unlock()
		return g.Store.Write(ctx, b)
	}
	select {
	case <-g.read:
		g.readFirst.Store(true)
	case <-time.After(2 * time.Second):
	}
	time.Sleep(g.linger)
	if g.fail != nil {
		return g.fail
	}
	err := g.Store.Write(ctx, b)
	g.mu.Lock()
	g.stored = err == nil
	g.mu.Unlock()
	return err
}

// writesOutOfTurn returns the writes of turns and items made while the
// turn's creation was not stored.
func (g *readGate) writesOutOfTurn() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.outOfTurn)
}

// readWhole closes read once a model request's response has been read
// to its end: the stream's last event handled.
type readWhole struct {
	model.Client
	read chan struct{}
	once sync.Once
}

func (c *readWhole) Stream(ctx context.Context, req model.Request, fn func(model.Event) error) (model.Result, error) {
	res, err := c.Client.Stream(ctx, req, fn)
	c.once.Do(func() { close(c.read) })
	return res, err
}

// A quick model's answer, which arrives while the turn and its user
// message are still being written (here, held until it has been read),
// is read meanwhile rather than after the write: the turn goroutine
// handles the response whole and holds what it would announce. None of
// it goes out before the turn's own announcement, which still waits for
// the write and the answer to turn/start; then the held notifications
// follow in order.
func TestAnswerReadWhileFirstCommitSyncs(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[{"text":"the answer","chunks":3}]}`)
	notes := &noteLog{ch: make(chan string, 1024)}
	started := &startedLog{noteLog: notes}
	read := make(chan struct{})
	gate := &readGate{Store: st, read: read}
	m := toolFreeManager(t, gate, sinkFor(started), &readWhole{Client: client, read: read})
	threadID, before, after, err := startHelloTurn(t, m, notes)
	require.NoError(t, err)
	after = sync.OnceFunc(after)
	t.Cleanup(after)
	require.True(t, gate.readFirst.Load(), "the response was read whole while the turn was being stored")
	time.Sleep(50 * time.Millisecond)
	require.Empty(t, notes.snapshot()[before:], "announced before the answer")

	after()
	notes.wait(t, "turn/completed")
	lines := notes.snapshot()[before:]
	require.Equal(t, []string{"thread/status/changed active[]", "turn/started", "item/started", "item/completed",
		"item/started", "item/agentMessage/delta", "item/agentMessage/delta", "item/agentMessage/delta", "item/completed"}, lines[:9],
		"the turn, its user message, then the response held meanwhile")
	require.Equal(t, "turn/completed", lines[len(lines)-1])
	require.Equal(t, api.TurnCompleted, notes.lastEnded(t).Status)
	require.Equal(t, []string{`{"type":"userMessage"}`, `{"type":"agentMessage","text":""}`}, started.bodies(),
		"item/started tells the item as it started, though the answer was read whole before it went out")
	items, err := st.ListItems(context.Background(), store.ItemsQuery{ThreadID: threadID})
	require.NoError(t, err)
	require.Len(t, items.Items, 2, "the user message and the answer are stored")
}

// startedLog is a noteLog that also keeps, for each item/started, the
// item's type and, for an agent message, its text, as encoded when sent.
type startedLog struct {
	*noteLog
	mu  sync.Mutex
	got []string
}

func (l *startedLog) Send(to []turns.ConnID, method string, params any) {
	if method == "item/started" {
		raw, err := json.Marshal(params.(api.ItemStartedNotification).Item)
		var body struct {
			Type string  `json:"type"`
			Text *string `json:"text,omitempty"`
		}
		if err == nil {
			err = json.Unmarshal(raw, &body)
		}
		if err != nil {
			panic(err)
		}
		if body.Type != "agentMessage" {
			body.Text = nil
		}
		b, _ := json.Marshal(body)
		l.mu.Lock()
		l.got = append(l.got, string(b))
		l.mu.Unlock()
	}
	l.noteLog.Send(to, method, params)
}

func (l *startedLog) bodies() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// stallAfterDelta closes read once the first text delta of a response
// has been handled, then holds every later event of that response until
// resume is closed: a model that pauses in the middle of its answer.
type stallAfterDelta struct {
	model.Client
	read, resume chan struct{}
	once         sync.Once
}

func (c *stallAfterDelta) Stream(ctx context.Context, req model.Request, fn func(model.Event) error) (model.Result, error) {
	stalled := false
	return c.Client.Stream(ctx, req, func(ev model.Event) error {
		if stalled {
			<-c.resume
		}
		err := fn(ev)
		if _, ok := ev.(model.TextDelta); ok && !stalled {
			stalled = true
			c.once.Do(func() { close(c.read) })
		}
		return err
	})
}

// What the turn goroutine held while the first write ran goes out right
// after the turn's own announcement, not when the model next sends
// something: a model that pauses after its first delta does not hold the
// client's view of the answer back.
func TestHeldAnswerGoesOutWithTheTurn(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[{"text":"the answer","chunks":3}]}`)
	notes := &noteLog{ch: make(chan string, 1024)}
	read, resume := make(chan struct{}), make(chan struct{})
	gate := &readGate{Store: st, read: read}
	m := toolFreeManager(t, gate, sinkFor(notes), &stallAfterDelta{Client: client, read: read, resume: resume})
	_, before, after, err := startHelloTurn(t, m, notes)
	require.NoError(t, err)
	// Called once, here or, should the test stop before, ahead of the
	// manager's Stop, which waits for the turn.
	after = sync.OnceFunc(after)
	t.Cleanup(after)
	resumed := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(resumed)
	require.True(t, gate.readFirst.Load(), "the first delta was handled while the turn was being stored")
	after()
	want := []string{"thread/status/changed active[]", "turn/started", "item/started", "item/completed", "item/started", "item/agentMessage/delta"}
	require.Eventually(t, func() bool { return len(notes.snapshot()[before:]) >= len(want) }, 5*time.Second, 5*time.Millisecond,
		"the held answer waits for the model: %v", notes.snapshot()[before:])
	require.Equal(t, want, notes.snapshot()[before:], "the turn, its user message, then the answer so far")

	resumed()
	notes.wait(t, "turn/completed")
	lines := notes.snapshot()[before:]
	require.Equal(t, 3, countOf(lines, "item/agentMessage/delta"), "%v", lines)
	require.Equal(t, "turn/completed", lines[len(lines)-1])
	require.Equal(t, api.TurnCompleted, notes.lastEnded(t).Status)
}

// A response read while the first write runs stops being read where an
// event would write: here the tool call that follows a message, whose
// start stores the completed message. The message is stored, and
// announced, after the turn's first write.
func TestHeldAnswerWritesNothingBeforeTheTurn(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[
		{"text":"First, a plan.","chunks":2,"tool_calls":[{"call_id":"call_r","name":"update_plan","arguments":{"plan":[{"step":"R","status":"completed"}]}}]},
		{"match":{"call_output":"call_r"},"text":"Done."}]}`)
	notes := &noteLog{ch: make(chan string, 1024)}
	read, resume := make(chan struct{}), make(chan struct{})
	close(resume)
	// Long enough for the turn goroutine to reach the tool call.
	gate := &readGate{Store: st, read: read, linger: 100 * time.Millisecond}
	m := toolFreeManager(t, gate, sinkFor(notes), &stallAfterDelta{Client: client, read: read, resume: resume})
	threadID, before, after, err := startHelloTurn(t, m, notes)
	require.NoError(t, err)
	after()
	notes.wait(t, "turn/completed")
	require.Equal(t, api.TurnCompleted, notes.lastEnded(t).Status)
	require.Empty(t, gate.writesOutOfTurn(), "written before the turn was stored")
	lines := notes.snapshot()[before:]
	require.Equal(t, []string{"thread/status/changed active[]", "turn/started", "item/started", "item/completed",
		"item/started", "item/agentMessage/delta", "item/agentMessage/delta", "item/completed"}, lines[:8], "%v", lines)
	items, err := st.ListItems(context.Background(), store.ItemsQuery{ThreadID: threadID})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(items.Items), 3, "the user message, the first message, and what came after")
}

// startHelloTurn starts a thread on m, then a turn of it with the input
// "hello"; before is how many notifications came before the turn.
func startHelloTurn(t *testing.T, m *turns.Manager, notes *noteLog) (threadID string, before int, after turns.After, err error) {
	t.Helper()
	caller := turns.Caller{Conn: 1}
	th, started, err := m.StartThread(context.Background(), caller, api.ThreadStartParams{})
	require.NoError(t, err)
	started()
	before = len(notes.snapshot())
	_, after, err = m.StartTurn(context.Background(), caller, api.TurnStartParams{ThreadID: th.Thread.ID,
		Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hello"}}})
	return th.Thread.ID, before, after, err
}

// closeAtSecondItem closes read when the second item of a response
// starts, before that start is handled: the first item is done by then,
// and its completion waits to be stored.
type closeAtSecondItem struct {
	model.Client
	read chan struct{}
	once sync.Once
}

func (c *closeAtSecondItem) Stream(ctx context.Context, req model.Request, fn func(model.Event) error) (model.Result, error) {
	started := 0
	return c.Client.Stream(ctx, req, func(ev model.Event) error {
		if _, ok := ev.(model.OutputItemAdded); ok {
			if started++; started == 2 {
				c.once.Do(func() { close(c.read) })
			}
		}
		return fn(ev)
	})
}

// A turn whose first write fails after some or all of its answer was
// read meanwhile announces nothing, not even what it held, and writes
// nothing more: not the whole answer read, nor a completed item waiting
// to be stored when the next item starts (a message after reasoning, a
// tool call after a message).
func TestAnswerReadWhileFirstCommitFailsLeavesNoTrace(t *testing.T) {
	for name, tc := range map[string]struct {
		script string
		client func(model.Client, chan struct{}) model.Client
	}{
		"whole answer": {`{"steps":[{"text":"the answer","chunks":3},{"text":"again"}]}`,
			func(c model.Client, read chan struct{}) model.Client { return &readWhole{Client: c, read: read} }},
		"reasoning then message": {`{"steps":[{"reasoning":{"summary":["a thought"]},"text":"the answer"},{"text":"again"}]}`,
			func(c model.Client, read chan struct{}) model.Client {
				return &closeAtSecondItem{Client: c, read: read}
			}},
		"message then tool call": {`{"steps":[{"text":"First, a plan.","tool_calls":[{"call_id":"call_r","name":"update_plan","arguments":{}}]},{"text":"again"}]}`,
			func(c model.Client, read chan struct{}) model.Client {
				return &closeAtSecondItem{Client: c, read: read}
			}},
	} {
		t.Run(name, func(t *testing.T) {
			st, _, client := storeAndModel(t, tc.script)
			notes := &noteLog{ch: make(chan string, 1024)}
			read := make(chan struct{})
			boom := errors.New("disk on fire")
			gate := &readGate{Store: st, read: read, fail: boom}
			m := toolFreeManager(t, gate, sinkFor(notes), tc.client(client, read))
			threadID, before, after, err := startHelloTurn(t, m, notes)
			require.ErrorIs(t, err, boom)
			require.Nil(t, after)
			require.True(t, gate.readFirst.Load(), "the answer was read before the write failed")
			require.Eventually(t, func() bool { _, running := m.Counts(); return running == 0 }, 5*time.Second, 5*time.Millisecond)
			time.Sleep(50 * time.Millisecond)
			require.Empty(t, gate.writesOutOfTurn(), "the abandoned turn went on writing")
			require.Empty(t, notes.snapshot()[before:], "a turn that failed to start announced")
			turnsOf, err := st.ListTurns(context.Background(), store.TurnsQuery{ThreadID: threadID})
			require.NoError(t, err)
			require.Empty(t, turnsOf.Turns, "nothing of the turn is stored")
			items, err := st.ListItems(context.Background(), store.ItemsQuery{ThreadID: threadID})
			require.NoError(t, err)
			require.Empty(t, items.Items)
		})
	}
}
