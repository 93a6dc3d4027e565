package turns_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// outageStore is a store that goes down at the first write trip matches
// and stays down until up is called: every write then fails as a backend's
// does when its database is unreachable. Reads keep working, so that the
// test can look at what was stored.
type outageStore struct {
	store.Store
	trip func(*store.Batch) bool

	mu    sync.Mutex
	down  bool
	armed bool
	// tripped is closed when the store goes down.
	tripped chan struct{}
	failed  int // writes refused
}

func newOutageStore(st store.Store, trip func(*store.Batch) bool) *outageStore {
	return &outageStore{Store: st, trip: trip, tripped: make(chan struct{}), armed: true}
}

// arm makes trip count from now on (a store starts armed).
func (o *outageStore) arm(on bool) {
	o.mu.Lock()
	o.armed = on
	o.mu.Unlock()
}

func (o *outageStore) Write(ctx context.Context, b *store.Batch) error {
	o.mu.Lock()
	if o.armed && !o.down && o.trip != nil && o.trip(b) {
		o.down = true
		o.trip = nil
		close(o.tripped)
	}
	down := o.down
	if down {
		o.failed++
	}
	o.mu.Unlock()
	if down {
		return apperr.New(apperr.Unavailable, "storage unavailable")
	}
	return o.Store.Write(ctx, b)
}

// up ends the outage.
func (o *outageStore) up() {
	o.mu.Lock()
	o.down = false
	o.mu.Unlock()
}

// announced records what a client was told: completed items and turn ends.
type announced struct {
	mu    sync.Mutex
	items []api.ItemCompletedNotification
	ended []api.TurnCompletedNotification
	ch    chan string
}

func (a *announced) add(method string, params any) {
	a.mu.Lock()
	switch p := params.(type) {
	case api.ItemCompletedNotification:
		a.items = append(a.items, p)
	case api.TurnCompletedNotification:
		a.ended = append(a.ended, p)
	}
	a.mu.Unlock()
	select {
	case a.ch <- method:
	default:
	}
}

func (a *announced) Broadcast(method string, params any)              { a.add(method, params) }
func (a *announced) Send(_ []turns.ConnID, method string, params any) { a.add(method, params) }

// waitEnded waits until n turns have ended.
func (a *announced) waitEnded(t *testing.T, n int) []api.TurnCompletedNotification {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		a.mu.Lock()
		ended := slices.Clone(a.ended)
		a.mu.Unlock()
		if len(ended) >= n {
			return ended
		}
		select {
		case <-a.ch:
		case <-timeout:
			t.Fatalf("%d of %d turns ended", len(ended), n)
		}
	}
}

// hasItem reports whether b appends an item of type typ.
func hasItem(b *store.Batch, typ string) bool {
	return slices.ContainsFunc(b.AppendItems, func(it *store.Item) bool { return it.Type == typ })
}

// During a store outage nothing is announced completed that the store
// lacks afterwards, the turn fails, and once the store is back its end is
// stored as the client saw it, without a restart: whichever write the
// outage hits first (a tool's own item, the round commit carrying the
// round's last item, the last response's usage, the turn's end).
func TestStoreOutageLosesNothingAnnounced(t *testing.T) {
	const threads = 4
	onlyTurnEnd := func(b *store.Batch) bool { return len(b.UpdateTurns) == 1 && b.UpdateTurns[0].Status != "" }
	for _, tc := range []struct {
		name string
		trip func(*store.Batch) bool
	}{
		{"tool item", func(b *store.Batch) bool { return hasItem(b, "dynamicToolCall") && len(b.UpdateTurns) == 0 }},
		{"round commit", func(b *store.Batch) bool { return hasItem(b, "dynamicToolCall") && len(b.UpdateTurns) == 1 }},
		// The last response's usage has no commit of its own: it rides
		// the turn's end.
		{"turn end", onlyTurnEnd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each response calls a plain tool (its item committed on its
			// own) and a final one (its item joins the round's commit).
			sqlite, _, client := storeAndModel(t, `{"steps":[
				{"tool_calls":[{"call_id":"p1","name":"plain","arguments":{}},{"call_id":"f1","name":"fast","arguments":{}}]},
				{"text":"done"}]}`)
			st := newOutageStore(sqlite, tc.trip)
			notes := &announced{ch: make(chan string, 1)}
			m, err := turns.New(turns.Config{
				Store: st, Sink: sinkFor(notes), Models: oneProvider{client},
				Tools: func(tc turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
					return noArgTools(false, map[string]registry.Handler{
						"plain": itemTool{items: tc.Sink},
						"fast":  itemTool{items: tc.Sink, final: true},
					})
				},
				Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
			})
			require.NoError(t, err)
			t.Cleanup(m.Stop)
			// The turns start together, so that the outage hits them all
			// mid-turn.
			st.arm(false)
			ctx := context.Background()
			caller := turns.Caller{Conn: 1}
			var launch []turns.After
			for range threads {
				th, after, err := m.StartThread(ctx, caller, api.ThreadStartParams{})
				require.NoError(t, err)
				after()
				_, after, err = m.StartTurn(ctx, caller, api.TurnStartParams{ThreadID: th.Thread.ID, Input: api.List[api.UserInput]{}})
				require.NoError(t, err)
				launch = append(launch, after)
			}
			st.arm(true)
			for _, after := range launch {
				after()
			}
			ended := notes.waitEnded(t, threads)
			select {
			case <-st.tripped:
			default:
				t.Fatal("the outage never started")
			}
			st.up()
			// Nothing announced completed is missing from the store.
			notes.mu.Lock()
			items := slices.Clone(notes.items)
			notes.mu.Unlock()
			for _, n := range items {
				_, err := sqlite.GetItem(ctx, n.ThreadID, n.Item.Body.ItemID())
				require.NoError(t, err, "item %s of type %T was announced completed but is not stored", n.Item.Body.ItemID(), n.Item.Body)
			}

			// The turns' ends are stored again once the store is back.
			deadline := time.Now().Add(10 * time.Second)
			for {
				left, err := sqlite.ListInProgressTurns(ctx)
				require.NoError(t, err)
				if len(left) == 0 {
					break
				}
				require.True(t, time.Now().Before(deadline), "%d turns stay inProgress in the store after the outage", len(left))
				time.Sleep(20 * time.Millisecond)
			}
			for _, e := range ended {
				stored, err := sqlite.GetTurn(ctx, e.ThreadID, e.Turn.ID)
				require.NoError(t, err)
				require.Equal(t, string(e.Turn.Status), stored.Status, "the store holds the end the client saw")
			}
			failed := 0
			for _, e := range ended {
				if e.Turn.Status == api.TurnFailed {
					failed++
					require.Equal(t, "storage unavailable", e.Turn.Error.Message, "the client is told the store's own words")
				}
			}
			require.Positive(t, failed, "a turn whose writes failed must fail")
		})
	}
}

// turn/start answers once the turn and its user message are stored: a
// daemon killed right after the answer still has the turn (Recover marks
// it interrupted), with its input.
func TestTurnStoredBeforeTurnStartAnswers(t *testing.T) {
	m, st, _ := setup(t, `{"steps":[{"text":"done"}]}`, time.Minute)
	ctx := context.Background()
	caller := turns.Caller{Conn: 1}
	th, after, err := m.StartThread(ctx, caller, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	res, after, err := m.StartTurn(ctx, caller, api.TurnStartParams{ThreadID: th.Thread.ID,
		Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "remember me"}}})
	require.NoError(t, err)
	// Not yet launched: this is what a crash right after the answer leaves.
	stored, err := st.GetTurn(ctx, th.Thread.ID, res.Turn.ID)
	require.NoError(t, err, "the acknowledged turn is not stored")
	require.Equal(t, store.TurnInProgress, stored.Status)
	page, err := st.ListItems(ctx, store.ItemsQuery{ThreadID: th.Thread.ID, TurnID: res.Turn.ID})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.Equal(t, "userMessage", page.Items[0].Type)
	require.Contains(t, string(page.Items[0].Payload), "remember me")
	after()
}

// A turn/start the store cannot take is refused with the store's error,
// and starts nothing: the thread takes the next turn/start.
func TestTurnStartRefusedWhileStoreIsDown(t *testing.T) {
	sqlite, _, client := storeAndModel(t, `{"steps":[{"text":"done"}]}`)
	st := newOutageStore(sqlite, func(b *store.Batch) bool { return len(b.CreateTurns) > 0 })
	notes := &announced{ch: make(chan string, 1)}
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(notes), Models: oneProvider{client},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	ctx := context.Background()
	caller := turns.Caller{Conn: 1}
	th, after, err := m.StartThread(ctx, caller, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	params := api.TurnStartParams{ThreadID: th.Thread.ID, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hi"}}}
	_, _, err = m.StartTurn(ctx, caller, params)
	require.Error(t, err)
	require.Equal(t, apperr.Unavailable, apperr.CodeOf(err))
	require.Equal(t, "storage unavailable", apperr.MessageOf(err))

	st.up()
	res, after, err := m.StartTurn(ctx, caller, params)
	require.NoError(t, err)
	after()
	ended := notes.waitEnded(t, 1)
	require.Equal(t, res.Turn.ID, ended[0].Turn.ID)
	require.Equal(t, api.TurnCompleted, ended[0].Turn.Status)
}

// A turn whose end the store missed, and whose client was told it failed,
// is stored failed at the next start even when the daemon stopped before
// the store came back (Recover would otherwise mark it interrupted).
func TestTurnEndToldFailedSurvivesARestart(t *testing.T) {
	sqlite, _, client := storeAndModel(t, `{"steps":[{"text":"done"}]}`)
	st := newOutageStore(sqlite, func(b *store.Batch) bool { return len(b.UpdateTurns) == 1 && b.UpdateTurns[0].Status != "" })
	journal := filepath.Join(t.TempDir(), "pending-turn-ends.json")
	cfg := turns.Config{
		Store: st, Models: oneProvider{client}, PendingEndsFile: journal,
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	}
	notes := &announced{ch: make(chan string, 1)}
	cfg.Sink = sinkFor(notes)
	m, err := turns.New(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	caller := turns.Caller{Conn: 1}
	th, after, err := m.StartThread(ctx, caller, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	_, after, err = m.StartTurn(ctx, caller, api.TurnStartParams{ThreadID: th.Thread.ID, Input: api.List[api.UserInput]{}})
	require.NoError(t, err)
	after()
	ended := notes.waitEnded(t, 1)[0]
	require.Equal(t, api.TurnFailed, ended.Turn.Status)
	m.Stop() // the store is still down: the last attempt fails too
	stored, err := sqlite.GetTurn(ctx, th.Thread.ID, ended.Turn.ID)
	require.NoError(t, err)
	require.Equal(t, store.TurnInProgress, stored.Status, "the store missed the end")

	// The next start, the store back.
	st.up()
	cfg.Sink = sinkFor(newRecorder())
	m2, err := turns.New(cfg)
	require.NoError(t, err)
	t.Cleanup(m2.Stop)
	require.NoError(t, m2.Recover(ctx))
	stored, err = sqlite.GetTurn(ctx, th.Thread.ID, ended.Turn.ID)
	require.NoError(t, err)
	require.Equal(t, string(api.TurnFailed), stored.Status, "stored as the client was told")
	var turnErr api.TurnError
	require.NoError(t, json.Unmarshal(stored.Error, &turnErr))
	require.Equal(t, ended.Turn.Error.Message, turnErr.Message)
	_, err = os.Stat(journal)
	require.ErrorIs(t, err, fs.ErrNotExist, "the journal is cleared once applied")
}

// refusingStore refuses, as Invalid, every turn end that carries a turn
// meta: a value the store cannot keep.
type refusingStore struct {
	store.Store
}

func (r refusingStore) Write(ctx context.Context, b *store.Batch) error {
	for _, p := range b.UpdateTurns {
		if p.Status != "" && p.Meta != nil {
			return apperr.New(apperr.Invalid, "turn %s meta is refused", p.ID)
		}
	}
	return r.Store.Write(ctx, b)
}

// threadOver starts a manager over st, whose model is client, and a thread
// on it; notes records what connection 1, the thread's, is told.
func threadOver(t *testing.T, st store.Store, client model.Client) (*turns.Manager, *announced, string) {
	t.Helper()
	notes := &announced{ch: make(chan string, 1)}
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(notes), Models: oneProvider{client},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	th, after, err := m.StartThread(context.Background(), turns.Caller{Conn: 1}, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	return m, notes, th.Thread.ID
}

// startText starts a turn of text on the thread and launches it.
func startText(t *testing.T, m *turns.Manager, threadID, text string) {
	t.Helper()
	_, after, err := m.StartTurn(context.Background(), turns.Caller{Conn: 1}, api.TurnStartParams{ThreadID: threadID, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: text}}})
	require.NoError(t, err, "turn %q", text)
	after()
}

// A turn end the store refuses for what it carries is stored without it:
// the turn does not stay inProgress, the client is told it failed and why,
// and the thread's next turn runs with the history kept in memory.
func TestTurnEndRefusedIsStoredSanitised(t *testing.T) {
	sqlite, fake, client := storeAndModel(t, `{"steps":[{"match":{"user_text":"one"},"text":"first"},{"match":{"user_text":"two"},"text":"second"}]}`)
	m, notes, threadID := threadOver(t, refusingStore{sqlite}, client)
	ctx := context.Background()
	for i, text := range []string{"one", "two"} {
		startText(t, m, threadID, text)
		ended := notes.waitEnded(t, i+1)[i]
		require.Equal(t, api.TurnFailed, ended.Turn.Status)
		require.Equal(t, "the turn's end could not be stored: turn "+ended.Turn.ID+" meta is refused", ended.Turn.Error.Message)
		stored, err := sqlite.GetTurn(ctx, threadID, ended.Turn.ID)
		require.NoError(t, err)
		require.Equal(t, store.TurnFailed, stored.Status, "stored as the client was told")
	}
	left, err := sqlite.ListInProgressTurns(ctx)
	require.NoError(t, err)
	require.Empty(t, left)
	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	require.Contains(t, string(reqs[1].Body), "first", "the second turn's request has the first turn's history")
}

// endOutageStore refuses, as unavailable, the writes of the first turn end
// it sees until up is called; every other write passes.
type endOutageStore struct {
	store.Store

	mu   sync.Mutex
	turn string // the turn whose end is refused
	down bool
}

func (s *endOutageStore) Write(ctx context.Context, b *store.Batch) error {
	s.mu.Lock()
	for _, p := range b.UpdateTurns {
		if p.Status == "" {
			continue
		}
		if s.turn == "" {
			s.turn, s.down = p.ID, true
		}
		if s.down && p.ID == s.turn {
			s.mu.Unlock()
			return apperr.New(apperr.Unavailable, "storage unavailable")
		}
	}
	s.mu.Unlock()
	return s.Store.Write(ctx, b)
}

func (s *endOutageStore) up() {
	s.mu.Lock()
	s.down = false
	s.mu.Unlock()
}

// A failover scan may find inProgress a turn that ended here, told failed,
// while its end waits for the store (the thread's lease was given back in
// between), and mark it interrupted. Its clients heard its end already:
// they are not told again that it was interrupted, not even once the
// thread has moved on to another turn, and the end they were told is what
// the store keeps.
func TestTurnRecoveredWhileItsEndWaitsIsNotAnnounced(t *testing.T) {
	sqlite, _, client := storeAndModel(t, `{"steps":[{"match":{"user_text":"one"},"text":"first"},{"match":{"user_text":"two"},"text":"second"}]}`)
	st := &endOutageStore{Store: sqlite}
	m, notes, threadID := threadOver(t, st, client)
	ctx := context.Background()
	for i, text := range []string{"one", "two"} {
		startText(t, m, threadID, text)
		notes.waitEnded(t, i+1)
	}
	ended := notes.waitEnded(t, 2)
	first := ended[0].Turn
	require.Equal(t, api.TurnFailed, first.Status, "the first turn's end was not stored")
	require.Equal(t, api.TurnCompleted, ended[1].Turn.Status)

	// What a failover scan does to the first turn, still inProgress in
	// the store.
	now := time.Now()
	require.NoError(t, sqlite.Write(ctx, &store.Batch{UpdateTurns: []store.TurnPatch{{ThreadID: threadID, ID: first.ID, Status: store.TurnInterrupted, CompletedAt: &now}}}))
	m.TurnRecovered(threadID, first.ID)
	notes.mu.Lock()
	again := slices.Clone(notes.ended[2:])
	notes.mu.Unlock()
	require.Empty(t, again, "the turn's end is announced twice")

	st.up()
	require.Eventually(t, func() bool {
		stored, err := sqlite.GetTurn(ctx, threadID, first.ID)
		return err == nil && stored.Status == store.TurnFailed
	}, 20*time.Second, 20*time.Millisecond, "the store keeps the end the client was told")
	// A scan's report that arrives once the end is written over its own.
	m.TurnRecovered(threadID, first.ID)
	notes.mu.Lock()
	again = slices.Clone(notes.ended[2:])
	notes.mu.Unlock()
	require.Empty(t, again, "the turn's end is announced twice once stored")
}

// publishLog records every thread notification a sink publishes, whoever
// hears it: what the hub's journal would log.
type publishLog struct {
	*testSink
	mu        sync.Mutex
	published []turns.Event
}

func (p *publishLog) Publish(ev turns.Event) {
	p.mu.Lock()
	p.published = append(p.published, ev)
	p.mu.Unlock()
	p.testSink.Publish(ev)
}

// A dead daemon's turn that this daemon marked interrupted ends in the
// thread's log even when nobody here follows the thread and it is not
// loaded: webhooks and event streams read that log, on any daemon. A turn
// whose end its daemon logged itself (it lived on without its lease) is
// not logged again.
func TestTurnRecoveredOfAnUnfollowedThreadIsLogged(t *testing.T) {
	sqlite, _, client := storeAndModel(t, `{"steps":[]}`)
	ctx := context.Background()
	threadID, turnID := "0190a5b2-0000-7000-8000-0000000000c1", "0190a5b2-0000-7000-8000-0000000000c2"
	now := time.Now()
	require.NoError(t, sqlite.Write(ctx, &store.Batch{
		CreateThreads: []*store.Thread{{ID: threadID, Cwd: t.TempDir(), ModelProvider: "fake", Source: "vscode"}},
		CreateTurns:   []*store.Turn{{ThreadID: threadID, ID: turnID, Status: store.TurnInterrupted, CompletedAt: &now}},
	}))
	sink := &publishLog{testSink: sinkFor(&announced{ch: make(chan string, 1)})}
	m, err := turns.New(turns.Config{
		Store: sqlite, Sink: sink, Models: oneProvider{client},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	require.False(t, sink.Watched(threadID))

	// Another thread whose turn's end its own daemon logged.
	const ended, endedTurn = "0190a5b2-0000-7000-8000-0000000000c3", "0190a5b2-0000-7000-8000-0000000000c4"
	require.NoError(t, sqlite.Write(ctx, &store.Batch{
		CreateThreads: []*store.Thread{{ID: ended, Cwd: t.TempDir(), ModelProvider: "fake", Source: "vscode"}},
		CreateTurns:   []*store.Turn{{ThreadID: ended, ID: endedTurn, Status: store.TurnInterrupted, CompletedAt: &now}},
		AppendEvents: []*store.Event{
			{ThreadID: ended, Seq: 1, Method: "turn/completed", CreatedAt: now,
				Data: []byte(`{"method":"turn/completed","params":{"threadId":"` + ended + `","turn":{"id":"` + endedTurn + `","status":"interrupted"}},"emittedAtMs":1}`)},
			{ThreadID: ended, Seq: 2, Method: "thread/name/updated", CreatedAt: now, Data: []byte(`{"method":"thread/name/updated","params":{},"emittedAtMs":1}`)},
		},
	}))
	m.TurnRecovered(ended, endedTurn)
	sink.mu.Lock()
	require.Empty(t, sink.published, "an end the log holds is not logged again")
	sink.mu.Unlock()

	m.TurnRecovered(threadID, turnID)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	require.Len(t, sink.published, 1, "the turn's end is logged")
	ev := sink.published[0]
	require.Equal(t, "turn/completed", ev.Method)
	require.Equal(t, threadID, ev.ThreadID)
	note, ok := ev.Params.(api.TurnCompletedNotification)
	require.True(t, ok, "params %T", ev.Params)
	require.Equal(t, turnID, note.Turn.ID)
	require.Equal(t, api.TurnInterrupted, note.Turn.Status)
}
