package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/registry"
)

// table is an in-memory thread table: children finish when the test says.
// Like the real one, it reports each child's turn starting and ending
// (onTurn, set by tools to the Service's ChildTurn).
type table struct {
	depth  int
	path   string
	onTurn func(id string, running bool)
	// onEnd, when set, is told of each end before it is visible, as the
	// thread table tells Service.ChildEnded.
	onEnd func(id string, st State)

	mu       sync.Mutex
	children map[string]*kid
	order    []string // children ids in spawn order
	spawns   []Spawn  // what each spawn asked for
}

// kidIDs numbers the children of every table.
var kidIDs atomic.Int64

type kid struct {
	state    State
	inputs   []api.UserInput
	messages []string // send_message's texts
	nickname string
	closed   bool
	done     chan struct{} // closed when the running turn ends
}

func newTable(depth int) *table { return &table{depth: depth, children: map[string]*kid{}} }

func (tb *table) Depth() int { return tb.depth }

func (tb *table) AgentPath() string { return tb.path }

func (tb *table) Spawn(_ context.Context, sp Spawn) (Spawned, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	// Unique across tables, as thread ids are.
	id := fmt.Sprintf("child-%d", kidIDs.Add(1))
	tb.children[id] = &kid{state: State{Running: true}, inputs: sp.Input, nickname: sp.Nickname, done: make(chan struct{})}
	tb.order = append(tb.order, id)
	tb.spawns = append(tb.spawns, sp)
	tb.onTurn(id, true)
	return Spawned{ID: id, Model: sp.Model, ReasoningEffort: sp.ReasoningEffort}, nil
}

func (tb *table) Children(context.Context) ([]Child, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	out := make([]Child, 0, len(tb.order))
	for _, id := range tb.order {
		k := tb.children[id]
		out = append(out, Child{ID: id, Nickname: k.nickname, Closed: k.closed})
	}
	return out, nil
}

func (tb *table) SetClosed(_ context.Context, id string, closed bool) error {
	k, err := tb.get(id)
	if err != nil {
		return err
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	k.closed = closed
	return nil
}

// texts are the texts of a child's inputs.
func (k *kid) texts() []string {
	var out []string
	for _, in := range k.inputs {
		out = append(out, in.Text)
	}
	return out
}

func (tb *table) get(id string) (*kid, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	k := tb.children[id]
	if k == nil {
		return nil, apperr.New(apperr.NotFound, "agent with id %s not found", id)
	}
	return k, nil
}

func (tb *table) SendInput(_ context.Context, id string, input []api.UserInput, _ bool) error {
	k, err := tb.get(id)
	if err != nil {
		return err
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	k.inputs = append(k.inputs, input...)
	if !k.state.Running {
		k.state.Running = true
		k.done = make(chan struct{})
		tb.onTurn(id, true)
	}
	return nil
}

func (tb *table) Message(_ context.Context, id, text string) error {
	k, err := tb.get(id)
	if err != nil {
		return err
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	k.messages = append(k.messages, text)
	return nil
}

func (tb *table) Wait(ctx context.Context, id string) (State, error) {
	k, err := tb.get(id)
	if err != nil {
		return State{}, err
	}
	tb.mu.Lock()
	done := k.done
	tb.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return tb.State(ctx, id)
}

func (tb *table) State(_ context.Context, id string) (State, error) {
	k, err := tb.get(id)
	if err != nil {
		return State{}, err
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return k.state, nil
}

func (tb *table) Interrupt(ctx context.Context, id string) (State, error) {
	st, err := tb.State(ctx, id)
	if err == nil && st.Running {
		tb.finish(id, State{Status: "interrupted"})
	}
	return st, err
}

// finish ends a child's running turn with st.
func (tb *table) finish(id string, st State) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	k := tb.children[id]
	if tb.onEnd != nil {
		tb.onEnd(id, st)
	}
	k.state = st
	close(k.done)
	tb.onTurn(id, false)
}

// tools is one turn's namespace handler over tb, for parent "p" of the
// operator.
func tools(t *testing.T, s *Service, tb *table) func(name, args string) (string, error) {
	t.Helper()
	return toolsOf(t, s, tb, "p", "")
}

// toolsOf is one turn's namespace handler over tb, for parent of owner.
func toolsOf(t *testing.T, s *Service, tb *table, parent, owner string) func(name, args string) (string, error) {
	t.Helper()
	tb.onTurn = func(id string, running bool) { s.ChildTurn(id, owner, running) }
	b := registry.NewBuilder(registry.Config{})
	require.NoError(t, s.Register(b, parent, owner, tb, nil))
	_, reg := b.Build()
	h, ok := reg.Handler(Namespace, SpawnAgentName)
	require.True(t, ok)
	return func(name, args string) (string, error) {
		out, err := h.Handle(context.Background(), registry.Invocation{Call: registry.Call{
			CallID: "c", Namespace: Namespace, Name: name, Payload: registry.FunctionPayload{Arguments: args},
		}})
		return out.Text, err
	}
}

func spawned(t *testing.T, out string) string {
	t.Helper()
	var v struct {
		AgentID string `json:"agent_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	return v.AgentID
}

// The per-thread and per-daemon limits refuse a spawn in words the model
// reads; closing an agent frees its place in its thread, and an agent that
// finished its turn its slot in the daemon's count.
func TestLimits(t *testing.T) {
	s := New(Config{MaxPerThread: 2, MaxTotal: 3})
	tb := newTable(0)
	call := tools(t, s, tb)
	a, err := call(SpawnAgentName, `{"message":"one"}`)
	require.NoError(t, err)
	b, err := call(SpawnAgentName, `{"message":"two"}`)
	require.NoError(t, err)
	_, err = call(SpawnAgentName, `{"message":"three"}`)
	require.ErrorContains(t, err, "this thread has 2 open agents (at most 2)")

	_, err = call(CloseAgentName, `{"target":"`+spawned(t, a)+`"}`)
	require.NoError(t, err)
	_, err = call(SpawnAgentName, `{"message":"three"}`)
	require.NoError(t, err, "a closed agent frees its place")
	require.Equal(t, 2, s.Open())
	require.Equal(t, 2, s.Running(""))

	// Another thread shares the daemon's limit.
	q := newTable(0)
	other := toolsOf(t, s, q, "q", "")
	_, err = other(SpawnAgentName, `{"message":"x"}`)
	require.NoError(t, err)
	_, err = other(SpawnAgentName, `{"message":"y"}`)
	require.ErrorContains(t, err, "the server runs 3 agents (at most 3)")

	// A child that finished its turn, still open, frees its slot; input
	// that starts it again needs one.
	tb.finish(spawned(t, b), State{Status: "completed"})
	require.Equal(t, 2, s.Running(""))
	_, err = other(SpawnAgentName, `{"message":"y"}`)
	require.NoError(t, err, "a finished agent frees its slot")
	_, err = call(SendInputName, `{"target":"`+spawned(t, b)+`","message":"again"}`)
	require.ErrorContains(t, err, "the server runs 3 agents (at most 3)")
	require.Equal(t, 4, s.Open())

	// A thread that unloads forgets its open agents; running ones hold
	// their slots until they end.
	s.ThreadUnloaded("p")
	require.Equal(t, 2, s.Open())
	require.Equal(t, 3, s.Running(""))
}

// One principal's threads cannot take another's sub-agent slots: each
// principal runs at most MaxPerPrincipal children at once, the operator is
// bounded by the daemon's limit only, and a finished child frees its
// principal's slot.
func TestPrincipalLimits(t *testing.T) {
	s := New(Config{MaxPerThread: 10, MaxTotal: 10, MaxPerPrincipal: 2})
	alice := newTable(0)
	callA := toolsOf(t, s, alice, "pa", "alice")
	var kids []string
	for i := range 2 {
		out, err := callA(SpawnAgentName, fmt.Sprintf(`{"message":"a%d"}`, i))
		require.NoError(t, err)
		kids = append(kids, spawned(t, out))
	}
	_, err := callA(SpawnAgentName, `{"message":"a2"}`)
	require.ErrorContains(t, err, "this principal's threads run 2 agents (at most 2)")

	// Another thread of alice's shares her count.
	_, err = toolsOf(t, s, newTable(0), "pa2", "alice")(SpawnAgentName, `{"message":"x"}`)
	require.ErrorContains(t, err, "this principal's threads run 2 agents")

	// bob spawns as if alice were not there; so does the operator.
	callB := toolsOf(t, s, newTable(0), "pb", "bob")
	for i := range 2 {
		_, err := callB(SpawnAgentName, fmt.Sprintf(`{"message":"b%d"}`, i))
		require.NoError(t, err)
	}
	callOp := toolsOf(t, s, newTable(0), "po", "")
	for i := range 3 {
		_, err := callOp(SpawnAgentName, fmt.Sprintf(`{"message":"o%d"}`, i))
		require.NoError(t, err)
	}
	require.Equal(t, 2, s.Running("alice"))
	require.Equal(t, 2, s.Running("bob"))

	// Input joins a running child's turn: no new slot.
	_, err = callA(SendInputName, `{"target":"`+kids[0]+`","message":"more"}`)
	require.NoError(t, err)

	// One of alice's children finishes: she may start another.
	alice.finish(kids[0], State{Status: "completed"})
	require.Equal(t, 1, s.Running("alice"))
	_, err = callA(SpawnAgentName, `{"message":"a3"}`)
	require.NoError(t, err)
	_, err = callA(SendInputName, `{"target":"`+kids[0]+`","message":"again"}`)
	require.ErrorContains(t, err, "this principal's threads run 2 agents", "restarting a finished child needs a slot")
}

// MaxDepth lets deeper threads spawn when raised.
func TestDepth(t *testing.T) {
	_, err := tools(t, New(Config{}), newTable(1))(SpawnAgentName, `{"message":"x"}`)
	require.ErrorContains(t, err, "agent depth limit reached")
	_, err = tools(t, New(Config{MaxDepth: 2}), newTable(1))(SpawnAgentName, `{"message":"x"}`)
	require.NoError(t, err)
}

// wait_agent returns when one target finishes, with only the finished
// ones; on timeout the status map is empty; send_input reaches a child by
// nickname; a closed agent is refused until resume_agent reopens it.
func TestWaitSendCloseResume(t *testing.T) {
	s := New(Config{MinWait: time.Millisecond})
	tb := newTable(0)
	call := tools(t, s, tb)
	outA, err := call(SpawnAgentName, `{"message":"a"}`)
	require.NoError(t, err)
	outB, err := call(SpawnAgentName, `{"message":"b"}`)
	require.NoError(t, err)
	a, b := spawned(t, outA), spawned(t, outB)

	out, err := call(WaitAgentName, `{"targets":["`+a+`","`+b+`"],"timeout_ms":5}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"status":{},"timed_out":true}`, out)

	answer := "B's answer"
	go tb.finish(b, State{Status: "completed", Answer: &answer})
	// The timeout is far off: the call returns because b finished.
	type result struct {
		out string
		err error
	}
	res := make(chan result, 1)
	go func() {
		out, err := call(WaitAgentName, `{"targets":["`+a+`","`+b+`"],"timeout_ms":3600000}`)
		res <- result{out, err}
	}()
	var r result
	select {
	case r = <-res:
	case <-time.After(20 * time.Second):
		t.Fatal("wait_agent did not return when one of its targets finished")
	}
	out, err = r.out, r.err
	require.NoError(t, err)
	require.JSONEq(t, `{"status":{"`+b+`":{"completed":"B's answer"}},"timed_out":false}`, out)

	_, err = call(SendInputName, `{"target":"Ada","message":"more"}`)
	require.NoError(t, err)
	k, _ := tb.get(a)
	require.Equal(t, []string{"a", "more"}, k.texts(), "the nickname names the agent")

	out, err = call(CloseAgentName, `{"target":"`+a+`"}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"previous_status":"running"}`, out)
	_, err = call(SendInputName, `{"target":"`+a+`","message":"again"}`)
	require.ErrorContains(t, err, "is not open")
	out, err = call(ResumeName, `{"id":"`+a+`"}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"status":"interrupted"}`, out)
	_, err = call(SendInputName, `{"target":"`+a+`","message":"again"}`)
	require.NoError(t, err)

	_, err = call(ResumeName, `{"id":"not-a-child"}`)
	require.ErrorContains(t, err, "not found")
	_, err = call(SpawnAgentName, `{"message":"x","extra":1}`)
	require.ErrorContains(t, err, "failed to parse function arguments")
}

// A thread's open children count again after a restart (a new Service over
// the same thread table): they hold their slots, the tools reach them
// without resume_agent, closed ones stay closed, and new children get
// nicknames of their own.
func TestOpenChildrenAreRestored(t *testing.T) {
	tb := newTable(0)
	before := tools(t, New(Config{MaxPerThread: 3}), tb)
	outA, err := before(SpawnAgentName, `{"message":"a"}`)
	require.NoError(t, err)
	outB, err := before(SpawnAgentName, `{"message":"b"}`)
	require.NoError(t, err)
	a, b := spawned(t, outA), spawned(t, outB)
	_, err = before(CloseAgentName, `{"target":"`+b+`"}`)
	require.NoError(t, err)
	require.True(t, tb.children[b].closed, "close_agent records the close in the thread table")

	s := New(Config{MaxPerThread: 3}) // the daemon restarted
	after := tools(t, s, tb)
	_, err = after(SendInputName, `{"target":"Ada","message":"more"}`)
	require.NoError(t, err, "the open child is reached by its nickname after the restart")
	require.Equal(t, []string{"a", "more"}, tb.children[a].texts())
	_, err = after(SendInputName, `{"target":"`+b+`","message":"more"}`)
	require.ErrorContains(t, err, "is not open", "a closed child stays closed")
	require.Equal(t, 1, s.Open())

	outC, err := after(SpawnAgentName, `{"message":"c"}`)
	require.NoError(t, err)
	require.Contains(t, outC, `"nickname":"Curie"`, "new children do not reuse the names of the recorded ones")
	_, err = after(SpawnAgentName, `{"message":"d"}`)
	require.NoError(t, err)
	_, err = after(SpawnAgentName, `{"message":"e"}`)
	require.ErrorContains(t, err, "this thread has 3 open agents (at most 3)", "the restored child holds its slot")

	_, err = after(ResumeName, `{"id":"`+b+`"}`)
	require.ErrorContains(t, err, "this thread has 3 open agents")
	_, err = after(CloseAgentName, `{"target":"Ada"}`)
	require.NoError(t, err)
	_, err = after(ResumeName, `{"id":"`+b+`"}`)
	require.NoError(t, err)
	require.False(t, tb.children[b].closed, "resume_agent records the reopening")
	_, err = after(SendInputName, `{"target":"Boole","message":"again"}`)
	require.NoError(t, err, "a resumed child keeps its nickname")
}

// spawn_agent and send_input take their input as message or as items
// (exactly one), and spawn_agent passes the model and effort overrides;
// agent_type knows only the default role; fork_context keeps the caller's
// settings.
func TestSpawnParameters(t *testing.T) {
	tb := newTable(0)
	call := tools(t, New(Config{}), tb)
	out, err := call(SpawnAgentName, `{"items":[{"type":"text","text":"look at this"},{"type":"image","image_url":"https://example.com/a.png"},{"type":"mention","name":"Docs","path":"app://docs"}],"model":"small-model","reasoning_effort":"low","agent_type":"default"}`)
	require.NoError(t, err)
	id := spawned(t, out)
	require.Equal(t, []api.UserInput{
		{Type: api.UserInputText, Text: "look at this"},
		{Type: api.UserInputImage, URL: "https://example.com/a.png"},
		{Type: api.UserInputMention, Name: "Docs", Path: "app://docs"},
	}, tb.children[id].inputs)
	require.Equal(t, "small-model", tb.spawns[0].Model)
	require.Equal(t, "low", tb.spawns[0].ReasoningEffort)

	_, err = call(SendInputName, `{"target":"`+id+`","items":[{"type":"local_image","path":"/images/x.png"}]}`)
	require.NoError(t, err)
	require.Equal(t, api.UserInput{Type: api.UserInputLocalImage, Path: "/images/x.png"}, tb.children[id].inputs[3])

	for args, want := range map[string]string{
		`{}`:                                 "give message or items",
		`{"message":"x","items":[]}`:         "give message or items, not both",
		`{"message":"  "}`:                   "the message is empty: there is nothing to send",
		`{"items":[]}`:                       "items is empty: there is nothing to send",
		`{"items":[{"type":"video"}]}`:       `items[0]: unknown type "video"`,
		`{"message":"x","agent_type":"spy"}`: "unknown agent_type 'spy'",
		`{"message":"x","fork_context":true,"model":"m"}`: "fork_context cannot be combined",
	} {
		_, err := call(SpawnAgentName, args)
		require.ErrorContains(t, err, want, args)
	}
	_, err = call(SendInputName, `{"target":"`+id+`"}`)
	require.ErrorContains(t, err, "give message or items")

	_, err = call(SpawnAgentName, `{"message":"with my context","fork_context":true}`)
	require.NoError(t, err)
	require.True(t, tb.spawns[1].ForkContext)
}
