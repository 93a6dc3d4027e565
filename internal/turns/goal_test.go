package turns_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/turns"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// tickTool moves the clock while the turn runs and reports the goal's time
// as the running turn sees it.
type tickTool struct {
	clock *fakeClock
	by    time.Duration
	seen  func() int64
	out   chan int64
}

func (tickTool) Kind() registry.PayloadKind                           { return registry.PayloadFunction }
func (tickTool) IsMutating(context.Context, registry.Invocation) bool { return false }
func (h tickTool) Handle(context.Context, registry.Invocation) (registry.Output, error) {
	h.clock.advance(h.by)
	h.out <- h.seen()
	return registry.TextOutput("ok", true), nil
}

// A goal's timeUsedSeconds is the time turns ran while it was active: not
// the idle time between turns, nor a turn's while it was paused; a running
// turn's time shows before it ends, and the total is stored with the thread.
func TestGoalTimeCountsActiveTurns(t *testing.T) {
	turnScript := `{"tool_calls":[{"call_id":"c","name":"tick","arguments":{}}]},{"text":"done"}`
	st, _, client := storeAndModel(t, `{"steps":[`+turnScript+`,`+turnScript+`]}`)
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	rec := newRecorder()
	var m *turns.Manager
	var threadID string
	goal := func() api.ThreadGoal {
		res, err := m.Goal(context.Background(), api.ThreadGoalGetParams{ThreadID: threadID})
		require.NoError(t, err)
		require.NotNil(t, res.Goal)
		return *res.Goal
	}
	seen := make(chan int64, 2)
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(rec), Models: oneProvider{client}, Now: clock.Now,
		Tools: func(turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			return noArgTools(false, map[string]registry.Handler{"tick": tickTool{
				clock: clock, by: 30 * time.Second, out: seen,
				seen: func() int64 { return goal().TimeUsedSeconds },
			}})
		},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)

	res, after, err := m.StartThread(context.Background(), turns.Caller{Conn: 1}, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	threadID = res.Thread.ID
	setGoal := func(p api.ThreadGoalSetParams) {
		p.ThreadID = threadID
		_, after, err := m.SetGoal(context.Background(), p)
		require.NoError(t, err)
		after()
	}
	runTurn := func() {
		_, after, err := m.StartTurn(context.Background(), turns.Caller{Conn: 1}, api.TurnStartParams{
			ThreadID: threadID, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "go"}},
		})
		require.NoError(t, err)
		after()
		rec.wait(t, "turn/completed")
	}
	objective := "ship it"
	setGoal(api.ThreadGoalSetParams{Objective: &objective})
	clock.advance(100 * time.Second) // idle: not counted
	require.Zero(t, goal().TimeUsedSeconds)

	runTurn()
	require.Equal(t, int64(30), <-seen, "the running turn's time so far")
	require.Equal(t, int64(30), goal().TimeUsedSeconds)
	th, err := st.GetThread(context.Background(), threadID)
	require.NoError(t, err)
	var meta struct {
		Goal struct {
			TimeUsedMs int64 `json:"timeUsedMs"`
		} `json:"goal"`
	}
	require.NoError(t, json.Unmarshal(th.Meta, &meta))
	require.Equal(t, int64(30_000), meta.Goal.TimeUsedMs, "stored with the thread")

	paused := api.GoalPaused
	setGoal(api.ThreadGoalSetParams{Status: &paused})
	runTurn()
	require.Equal(t, int64(30), <-seen)
	require.Equal(t, int64(30), goal().TimeUsedSeconds, "a paused goal's clock stands")

	active := api.GoalActive
	setGoal(api.ThreadGoalSetParams{Status: &active})
	clock.advance(time.Hour)
	require.Equal(t, int64(30), goal().TimeUsedSeconds, "no turn runs")
}
