package turns_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/turns"
)

// observed records what a Manager reports to its Observer.
type observed struct {
	mu     sync.Mutex
	turns  []api.TurnStatus
	models []turns.ModelRequestStats
	tools  []string
}

func (o *observed) TurnStarted(ctx context.Context, _ turns.TurnInfo) context.Context { return ctx }

func (o *observed) TurnEnded(_ context.Context, s api.TurnStatus, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.turns = append(o.turns, s)
}

func (o *observed) ModelRequest(_ context.Context, s turns.ModelRequestStats) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.models = append(o.models, s)
}

func (o *observed) ToolCall(_ context.Context, tool, outcome string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tools = append(o.tools, tool+":"+outcome)
}

// TestObserverSeesAnInterruptedTurn: a turn interrupted while its tool
// runs reports one successful model request, the call aborted and the
// turn interrupted; the next turn, interrupted while the model streams,
// reports its request canceled. The manager counts the turn as running
// only while it runs.
func TestObserverSeesAnInterruptedTurn(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[
		{"tool_calls":[{"call_id":"c1","name":"wait","arguments":{}}],"usage":{"input_tokens":7,"output_tokens":2,"total_tokens":9}},
		{"match":{"user_text":"stall"},"text":"never finishes","chunks":3,"fail":{"kind":"stall","after_events":5}}]}`)
	rec := newRecorder()
	obs := &observed{}
	running := make(chan struct{}, 1)
	m, err := turns.New(turns.Config{
		Store: st, Notifier: rec, Models: oneProvider{client}, Observer: obs,
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
		Tools: func(turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			return noArgTools(false, map[string]registry.Handler{"wait": registry.HandlerFunc(func(ctx context.Context, _ registry.Invocation) (registry.Output, error) {
				running <- struct{}{}
				<-ctx.Done()
				return registry.Output{}, ctx.Err()
			})})
		},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	res, after, err := m.StartThread(context.Background(), turns.Caller{Conn: 1}, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	threadID := res.Thread.ID
	interrupt := func(text string, when func()) {
		t.Helper()
		tr, after, err := m.StartTurn(context.Background(), turns.Caller{Conn: 1}, api.TurnStartParams{
			ThreadID: threadID, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: text}},
		})
		require.NoError(t, err)
		after()
		when()
		loaded, runs := m.Counts()
		require.Equal(t, 1, loaded)
		require.Equal(t, 1, runs)
		after, err = m.InterruptTurn(context.Background(), api.TurnInterruptParams{ThreadID: threadID, TurnID: tr.Turn.ID})
		require.NoError(t, err)
		after()
		rec.wait(t, "turn/completed")
	}
	interrupt("go", func() { <-running })
	interrupt("stall", func() { rec.wait(t, "item/agentMessage/delta") })
	// The turn is no longer active once turn/completed is out.
	require.Eventually(t, func() bool { _, runs := m.Counts(); return runs == 0 }, 5*time.Second, time.Millisecond)

	obs.mu.Lock()
	defer obs.mu.Unlock()
	require.Equal(t, []api.TurnStatus{api.TurnInterrupted, api.TurnInterrupted}, obs.turns)
	require.Equal(t, []string{"wait:" + registry.CallAborted}, obs.tools)
	require.Len(t, obs.models, 2)
	require.Equal(t, "ok", obs.models[0].Outcome)
	require.Equal(t, int64(7), obs.models[0].Usage.InputTokens)
	require.Equal(t, "fake", obs.models[0].Provider)
	require.Positive(t, obs.models[0].FirstEvent)
	require.Equal(t, "canceled", obs.models[1].Outcome)
	require.Positive(t, obs.models[1].FirstEvent, "the stalled response streamed before it stalled")
}
