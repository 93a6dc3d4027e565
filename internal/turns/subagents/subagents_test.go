package subagents

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// fakeTable is a thread table of fixed threads that counts pins.
type fakeTable struct {
	mu      sync.Mutex
	threads map[string]*fakeThread
	pins    int
}

type fakeThread struct {
	id       string
	sa       *transcript.SubAgent
	injected []model.InputItem
	shown    []api.ThreadItem
	running  bool
}

func (f *fakeTable) Load(_ context.Context, id string) (Thread, func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.threads[id]
	if t == nil {
		return nil, nil, apperr.New(apperr.NotFound, "thread not found: %s", id)
	}
	f.pins++
	return t, func() { f.mu.Lock(); f.pins--; f.mu.Unlock() }, nil
}

func (f *fakeTable) Loaded(id string) Thread {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.threads[id]; t != nil {
		return t
	}
	return nil
}

func (f *fakeTable) LoadedThreads() []Thread { panic("not used") }

func (f *fakeTable) CreateChild(context.Context, string, bool, func(string, time.Time, store.Thread, transcript.ThreadMeta) (store.Thread, transcript.ThreadMeta, transcript.SpawnEdge)) error {
	panic("not used")
}

func (f *fakeTable) StartTurn(context.Context, string, string, []api.UserInput) (func(), error) {
	panic("not used")
}

func (f *fakeTable) SpawnEdges(context.Context, string) ([]transcript.SpawnEdge, error) {
	panic("not used")
}

func (f *fakeTable) DefaultModel() string { return "m" }

func (f *fakeTable) Now() time.Time { return time.UnixMilli(1000) }

func (t *fakeThread) ID() string { return t.id }

func (t *fakeThread) State() (*transcript.SubAgent, <-chan struct{}) {
	if t.running {
		return t.sa, make(chan struct{})
	}
	return t.sa, nil
}

func (t *fakeThread) Interrupt() {}

func (t *fakeThread) Inject(_ context.Context, items []model.InputItem) error {
	t.injected = append(t.injected, items...)
	return nil
}

func (t *fakeThread) UpdateSpawned(context.Context, func([]transcript.SpawnEdge) ([]transcript.SpawnEdge, error)) error {
	panic("not used")
}

func (t *fakeThread) ShowOnTurn(items func() (api.ThreadItem, api.ThreadItem)) {
	if !t.running {
		return
	}
	started, completed := items()
	t.shown = append(t.shown, started, completed)
}

// A thread's Children reach its own children only: another thread's
// child, the parent itself and an unknown id are all "not found", and no
// pin is left behind.
func TestChildrenReachOnlyTheirOwnChildren(t *testing.T) {
	answer := "done"
	tb := &fakeTable{threads: map[string]*fakeThread{
		"p":      {id: "p"},
		"q":      {id: "q"},
		"mine":   {id: "mine", sa: &transcript.SubAgent{ParentThreadID: "p", Depth: 1, LastStatus: api.TurnCompleted, LastAnswer: &answer}},
		"theirs": {id: "theirs", sa: &transcript.SubAgent{ParentThreadID: "q", Depth: 1}},
	}}
	kids := New(Config{Table: tb}).Of(Parent{ThreadID: "p"})
	ctx := context.Background()

	st, err := kids.State(ctx, "mine")
	require.NoError(t, err)
	require.Equal(t, State{Status: api.TurnCompleted, Answer: &answer}, st)
	for _, id := range []string{"theirs", "p", "q", "nobody"} {
		_, err := kids.State(ctx, id)
		require.True(t, apperr.Is(err, apperr.NotFound), id)
		require.EqualError(t, err, "agent with id "+id+" not found")
	}
	require.Zero(t, tb.pins)
}

// A child's end is told to its parent's model, except a v2 child's
// interruption (interrupt_agent answered for it); a v2 child's end is also
// shown on the parent's running turn.
func TestAParentHearsItsChildsEnd(t *testing.T) {
	parent := &fakeThread{id: "p", running: true}
	v1 := &fakeThread{id: "v1", sa: &transcript.SubAgent{ParentThreadID: "p", LastStatus: api.TurnInterrupted, EndedTurnID: "t1"}}
	v2 := &fakeThread{id: "v2", sa: &transcript.SubAgent{ParentThreadID: "p", AgentPath: "/root/a", LastStatus: api.TurnInterrupted, EndedTurnID: "t2"}}
	tb := &fakeTable{threads: map[string]*fakeThread{"p": parent, "v1": v1, "v2": v2}}
	var told []string
	s := New(Config{Table: tb, ChildEnded: func(id, path string, st State) string {
		told = append(told, id+" "+path+" "+string(st.Status))
		return "note about " + id
	}})
	ctx := context.Background()

	s.TellParent(ctx, v2)
	s.ShowEndToParent(v2)
	require.Empty(t, told)
	require.Empty(t, parent.injected)
	require.Empty(t, parent.shown)

	s.TellParent(ctx, v1)
	require.Equal(t, []string{"v1  interrupted"}, told)
	require.Equal(t, []model.InputItem{model.UserMessage("note about v1")}, parent.injected)

	v2.sa = RecordEnd(v2.sa, "t3", api.TurnCompleted, nil, &api.ThreadItem{Body: &api.AgentMessageItem{Text: "hi"}})
	s.TellParent(ctx, v2)
	s.ShowEndToParent(v2)
	require.Equal(t, "v2 /root/a completed", told[1])
	require.Len(t, parent.shown, 2)
	require.Equal(t, &api.SubAgentActivityItem{ID: "subagent-completed-t3", Kind: api.SubAgentCompleted, AgentThreadID: "v2", AgentPath: "/root/a"}, parent.shown[1].Body)
	require.Zero(t, tb.pins)
}

// A child's recorded end follows its last stored turn when that turn is
// not the one recorded (it never finished: recovery marked it), and stays
// while that turn is still in progress.
func TestSettleEnd(t *testing.T) {
	answer := "old"
	sa := &transcript.SubAgent{ParentThreadID: "p", LastStatus: api.TurnCompleted, LastAnswer: &answer, EndedTurnID: "t1"}
	require.Same(t, sa, SettleEnd(sa, store.Turn{ID: "t1", Status: store.TurnCompleted}))
	require.Same(t, sa, SettleEnd(sa, store.Turn{ID: "t2", Status: store.TurnInProgress}))
	got := SettleEnd(sa, store.Turn{ID: "t2", Status: store.TurnInterrupted})
	require.Equal(t, &transcript.SubAgent{ParentThreadID: "p", LastStatus: api.TurnInterrupted, EndedTurnID: "t2"}, got)
	require.Equal(t, "old", *sa.LastAnswer, "the record is copied, never changed in place")
	require.Nil(t, SettleEnd(nil, store.Turn{ID: "t2", Status: store.TurnInterrupted}))
}
