package turns_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// writeLog records every batch written, as "items:<types> turn:<status>".
type writeLog struct {
	store.Store
	mu     sync.Mutex
	writes []string
}

func (l *writeLog) Write(ctx context.Context, b *store.Batch) error {
	var parts []string
	for _, it := range b.AppendItems {
		parts = append(parts, "item:"+it.Type)
	}
	for _, tp := range b.UpdateTurns {
		if tp.Status != "" {
			parts = append(parts, "end:"+tp.Status)
		}
	}
	l.mu.Lock()
	l.writes = append(l.writes, strings.Join(parts, " "))
	l.mu.Unlock()
	return l.Store.Write(ctx, b)
}

func (l *writeLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.writes)
}

// toolFreeManager is a Manager on st and sink whose turns have no tools
// and ask the model client.
func toolFreeManager(t *testing.T, st store.Store, sink turns.Sink, client model.Client, obs ...turns.Observer) *turns.Manager {
	t.Helper()
	cfg := toolFreeConfig(t, st, sink, client)
	if len(obs) > 0 {
		cfg.Observer = obs[0]
	}
	return newManager(t, cfg)
}

// toolFreeConfig is the configuration toolFreeManager starts from.
func toolFreeConfig(t *testing.T, st store.Store, sink turns.Sink, client model.Client) turns.Config {
	return turns.Config{
		Store: st, Sink: sink, Models: oneProvider{client},
		Tools: func(tc turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			return noArgTools(false, nil)
		},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	}
}

func newManager(t *testing.T, cfg turns.Config) *turns.Manager {
	t.Helper()
	m, err := turns.New(cfg)
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	return m
}

// A plain turn commits twice: its user message before turn/start is
// answered, then its answer with its usage and its end. The answer's
// item/completed still comes first, once stored, then the usage, then
// turn/completed.
func TestPlainTurnCommitsTwice(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[{"text":"the answer","chunks":3}]}`)
	notes := &noteLog{ch: make(chan string, 1024)}
	log := &writeLog{Store: st}
	m := toolFreeManager(t, log, sinkFor(notes), client)
	caller := turns.Caller{Conn: 1}
	th, after, err := m.StartThread(context.Background(), caller, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	before := len(log.snapshot())
	_, after, err = m.StartTurn(context.Background(), caller, api.TurnStartParams{ThreadID: th.Thread.ID,
		Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hello"}}})
	require.NoError(t, err)
	after()
	notes.wait(t, "turn/completed")
	require.Equal(t, []string{"item:userMessage", "item:agentMessage end:completed"}, log.snapshot()[before:])

	lines := notes.snapshot()
	done := slices.Index(lines, "item/completed")
	require.GreaterOrEqual(t, done, 0)
	answer := done + 1 + slices.Index(lines[done+1:], "item/completed") // the first is the user message
	usage := slices.Index(lines, "thread/tokenUsage/updated")
	end := slices.Index(lines, "turn/completed")
	require.True(t, answer > done && answer < usage && usage < end, "answer, usage, end in that order: %v", lines)
}

// readCount counts the reads a turn's end could make for the read state.
type readCount struct {
	store.Store
	mu    sync.Mutex
	reads int
}

func (r *readCount) GetThread(ctx context.Context, id string) (store.Thread, error) {
	r.count()
	return r.Store.GetThread(ctx, id)
}

func (r *readCount) ListTurns(ctx context.Context, q store.TurnsQuery) (store.TurnPage, error) {
	r.count()
	return r.Store.ListTurns(ctx, q)
}

func (r *readCount) count() { r.mu.Lock(); r.reads++; r.mu.Unlock() }

func (r *readCount) n() int { r.mu.Lock(); defer r.mu.Unlock(); return r.reads }

// readStates keeps the read states of thread/readState/changed.
type readStates struct {
	*noteLog
	mu     sync.Mutex
	states []api.ThreadReadState
}

func (r *readStates) add(params any) {
	if c, ok := params.(api.ThreadReadStateChangedNotification); ok {
		r.mu.Lock()
		r.states = append(r.states, c.ReadState)
		r.mu.Unlock()
	}
}

func (r *readStates) Broadcast(method string, params any) {
	r.add(params)
	r.noteLog.Broadcast(method, params)
}

func (r *readStates) Send(to []turns.ConnID, method string, params any) {
	r.add(params)
	r.noteLog.Send(to, method, params)
}

func (r *readStates) last() api.ThreadReadState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.states[len(r.states)-1]
}

// A turn's end on a daemon alone on its store announces the read state
// from what the thread kept at the last end, reading nothing; it is the
// state the store gives, across marks read and unread and a revert.
func TestTurnEndReadsNoReadState(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[{"text":"1"},{"text":"2"},{"text":"3"},{"text":"4"},{"text":"5"},{"text":"6"},{"text":"7"},{"text":"8"}]}`)
	notes := &readStates{noteLog: &noteLog{ch: make(chan string, 1024)}}
	counted := &readCount{Store: st}
	m := toolFreeManager(t, counted, sinkFor(notes), client)
	ctx := context.Background()
	id, turn := readStateTurns(t, m, counted, notes)
	mark := func(op string) {
		t.Helper()
		cur, err := m.ReadState(ctx, id)
		require.NoError(t, err)
		_, _, after, err := m.UpdateReadState(ctx, api.ThreadReadStateUpdateParams{ThreadID: id, ExpectedRevision: cur.Revision,
			Operation: api.ThreadReadStateOperation{Type: op}})
		require.NoError(t, err)
		after()
	}

	first, _ := turn()
	require.Equal(t, first, notes.last().FirstUnread.TurnID)
	_, reads := turn()
	require.Zero(t, reads, "the second end reads nothing")
	require.Equal(t, first, notes.last().FirstUnread.TurnID, "unread from the first turn on")

	mark("read")
	third, _ := turn()
	require.Equal(t, third, notes.last().FirstUnread.TurnID)
	_, reads = turn()
	require.Zero(t, reads)
	require.Equal(t, third, notes.last().FirstUnread.TurnID)

	mark("unread")
	turn()
	require.Equal(t, "threadStart", notes.last().FirstUnread.Type)

	mark("read")
	sixth, _ := turn()
	require.Equal(t, sixth, notes.last().FirstUnread.TurnID)
	// The revert takes the mark back to before the third turn.
	_, after, err := m.RevertThread(ctx, api.ThreadRevertParams{ThreadID: id, BeforeTurnID: third})
	require.NoError(t, err)
	after()
	next, _ := turn()
	require.Equal(t, next, notes.last().FirstUnread.TurnID, "the turns after a revert are unread")
	_, reads = turn()
	require.Zero(t, reads)
	require.Equal(t, next, notes.last().FirstUnread.TurnID)
}

// readStateTurns starts a thread of m and returns its id and what runs a
// turn of it, checks that the read state its end announced is the
// store's, and returns the turn's id and how many reads its end made.
func readStateTurns(t *testing.T, m *turns.Manager, counted *readCount, notes *readStates) (string, func() (string, int)) {
	t.Helper()
	ctx, caller := context.Background(), turns.Caller{Conn: 1}
	th, after, err := m.StartThread(ctx, caller, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	id := th.Thread.ID
	return id, func() (string, int) {
		t.Helper()
		res, after, err := m.StartTurn(ctx, caller, api.TurnStartParams{ThreadID: id,
			Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hello"}}})
		require.NoError(t, err)
		before := counted.n()
		after()
		notes.wait(t, "turn/completed")
		reads := counted.n() - before
		want, err := m.ReadState(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, notes.last(), "the announced state is the store's")
		return res.Turn.ID, reads
	}
}

// leases is an Ownership of one daemon whose lease another daemon can
// take between turns (takeOver): the next Acquire then reports that
// daemon's token as the one it replaced.
type leases struct {
	mu         sync.Mutex
	next, last int64
	held       int
}

func (l *leases) Acquire(ctx context.Context, threadID string) (token, prev int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held > 0 {
		l.held++
		return l.last, l.last, nil
	}
	l.next++
	prev, l.last, l.held = l.last, l.next, 1
	return l.last, prev, nil
}

func (l *leases) Release(threadID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = max(l.held-1, 0)
}

func (l *leases) Forward(ctx context.Context, threadID, method string, params any) (json.RawMessage, bool, error) {
	return nil, false, nil
}

// takeOver stands for another daemon that held the thread's lease since.
func (l *leases) takeOver() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	l.last = l.next
}

// With daemons sharing the store, a turn's end reads the thread's record
// alone, for its mark, while the facts kept at the last end still hold:
// not after another daemon marked the thread, nor after it ran a turn.
// The announced state is the store's every time.
func TestSharedTurnEndReadsOnlyTheMark(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[{"text":"1"},{"text":"2"},{"text":"3"},{"text":"4"},{"text":"5"},{"text":"6"}]}`)
	notes := &readStates{noteLog: &noteLog{ch: make(chan string, 1024)}}
	counted := &readCount{Store: st}
	own := &leases{}
	cfg := toolFreeConfig(t, counted, sinkFor(notes), client)
	cfg.Ownership = own
	m := newManager(t, cfg)
	ctx := context.Background()
	id, turn := readStateTurns(t, m, counted, notes)
	// markElsewhere writes a mark as another daemon's thread/readState/update
	// does: to the store, with nothing said to this daemon.
	markElsewhere := func(mark string, through int64) {
		t.Helper()
		raw, err := json.Marshal(map[string]any{"mark": mark, "throughSeq": through})
		require.NoError(t, err)
		require.NoError(t, st.Write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{{ID: id, ReadState: raw}}}))
	}

	first, _ := turn()
	require.Equal(t, first, notes.last().FirstUnread.TurnID)
	_, reads := turn()
	require.Equal(t, 1, reads, "the second end reads the record alone")
	require.Equal(t, first, notes.last().FirstUnread.TurnID)

	markElsewhere("read", 2)
	third, reads := turn()
	require.Greater(t, reads, 1, "a mark made elsewhere: the facts are read again")
	require.Equal(t, third, notes.last().FirstUnread.TurnID)
	_, reads = turn()
	require.Equal(t, 1, reads)
	require.Equal(t, third, notes.last().FirstUnread.TurnID)

	// Marked elsewhere read through the next turn, the fifth: nothing is
	// unread once it ends, and the facts kept say so.
	markElsewhere("read", 5)
	_, reads = turn()
	require.Greater(t, reads, 1)
	require.Nil(t, notes.last().FirstUnread)
	// Another daemon takes the thread and runs a turn, the sixth, which
	// is then the first unread: the facts kept here, with the same mark,
	// do not know it.
	own.takeOver()
	elsewhere := "turn-elsewhere"
	require.NoError(t, st.Write(ctx, &store.Batch{CreateTurns: []*store.Turn{{ThreadID: id, ID: elsewhere, Status: store.TurnCompleted}}}))
	_, reads = turn()
	require.Greater(t, reads, 1, "after another daemon's turns the facts are read again")
	require.Equal(t, elsewhere, notes.last().FirstUnread.TurnID)
}

// A turn another daemon left in progress, whose end that daemon stores
// later (its retry of an end the store missed, with no lease), changes
// the read state without a turn ending here: the facts read while it ran
// are not kept.
func TestSharedTurnEndKeepsNoFactsBesideARunningTurn(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[{"text":"1"},{"text":"2"}]}`)
	notes := &readStates{noteLog: &noteLog{ch: make(chan string, 1024)}}
	counted := &readCount{Store: st}
	cfg := toolFreeConfig(t, counted, sinkFor(notes), client)
	cfg.Ownership = &leases{}
	m := newManager(t, cfg)
	ctx := context.Background()
	id, turn := readStateTurns(t, m, counted, notes)
	const late = "turn-late"
	require.NoError(t, st.Write(ctx, &store.Batch{CreateTurns: []*store.Turn{{ThreadID: id, ID: late, Status: store.TurnInProgress}}}))

	second, _ := turn()
	require.Equal(t, second, notes.last().FirstUnread.TurnID, "the late turn has not ended")
	require.NoError(t, st.Write(ctx, &store.Batch{UpdateTurns: []store.TurnPatch{{ThreadID: id, ID: late, Status: store.TurnCompleted}}}))
	turn() // checks that the announced state is the store's
	require.Equal(t, late, notes.last().FirstUnread.TurnID)
}
