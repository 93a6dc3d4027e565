package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// table is an in-memory thread table: children finish when the test says.
type table struct {
	depth int

	mu       sync.Mutex
	n        int
	children map[string]*kid
}

type kid struct {
	state  State
	inputs []string
	done   chan struct{} // closed when the running turn ends
}

func newTable(depth int) *table { return &table{depth: depth, children: map[string]*kid{}} }

func (tb *table) Depth() int { return tb.depth }

func (tb *table) Spawn(_ context.Context, input []api.UserInput, _, _ string) (string, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.n++
	id := fmt.Sprintf("child-%d", tb.n)
	tb.children[id] = &kid{state: State{Running: true}, inputs: []string{input[0].Text}, done: make(chan struct{})}
	return id, nil
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
	k.inputs = append(k.inputs, input[0].Text)
	if !k.state.Running {
		k.state.Running = true
		k.done = make(chan struct{})
	}
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
	k.state = st
	close(k.done)
}

// tools is one turn's namespace handler over tb, for parent "p".
func tools(t *testing.T, s *Service, tb *table) func(name, args string) (string, error) {
	t.Helper()
	b := registry.NewBuilder(registry.Config{})
	require.NoError(t, s.Register(b, "p", tb, nil))
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
// reads; closing an agent frees its slot.
func TestLimits(t *testing.T) {
	s := New(Config{MaxPerThread: 2, MaxTotal: 3})
	tb := newTable(0)
	call := tools(t, s, tb)
	a, err := call(SpawnAgentName, `{"message":"one"}`)
	require.NoError(t, err)
	_, err = call(SpawnAgentName, `{"message":"two"}`)
	require.NoError(t, err)
	_, err = call(SpawnAgentName, `{"message":"three"}`)
	require.ErrorContains(t, err, "this thread has 2 open agents (at most 2)")

	_, err = call(CloseAgentName, `{"target":"`+spawned(t, a)+`"}`)
	require.NoError(t, err)
	_, err = call(SpawnAgentName, `{"message":"three"}`)
	require.NoError(t, err, "a closed agent frees its slot")
	require.Equal(t, 2, s.Open())

	// Another thread shares the daemon's limit.
	b := registry.NewBuilder(registry.Config{})
	require.NoError(t, s.Register(b, "q", newTable(0), nil))
	_, reg := b.Build()
	h, _ := reg.Handler(Namespace, SpawnAgentName)
	other := func() error {
		_, err := h.Handle(context.Background(), registry.Invocation{Call: registry.Call{Namespace: Namespace, Name: SpawnAgentName, Payload: registry.FunctionPayload{Arguments: `{"message":"x"}`}}})
		return err
	}
	require.NoError(t, other())
	require.ErrorContains(t, other(), "the server runs 3 open agents (at most 3)")

	// A thread that unloads releases its agents.
	s.ThreadUnloaded("p")
	require.Equal(t, 1, s.Open())
	require.NoError(t, other())
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
	require.Equal(t, []string{"a", "more"}, k.inputs, "the nickname names the agent")

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
