package turns_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/logtest"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/reqlog"
	"github.com/appserver/appserver/internal/turns"
)

// observed records what a Manager reports to its Observer.
type observed struct {
	mu        sync.Mutex
	started   int
	abandoned int
	turns     []api.TurnStatus
	models    []turns.ModelRequestStats
	tools     []string
}

func (o *observed) TurnStarted(ctx context.Context, _ turns.TurnInfo) context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started++
	return ctx
}

func (o *observed) TurnAbandoned(context.Context) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.abandoned++
}

func (o *observed) ModelRequestStarted(ctx context.Context, _, _ string) context.Context { return ctx }

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
		Store: st, Sink: sinkFor(rec), Models: oneProvider{client}, Observer: obs,
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

type ctxKey string

// tagging is an Observer that marks the contexts it returns and records
// what it is given.
type tagging struct {
	observed
	caller   chan any // the value "caller" of each TurnInfo.Caller
	reported chan any // the value "model" of each ModelRequest's ctx
}

func (o *tagging) TurnStarted(ctx context.Context, t turns.TurnInfo) context.Context {
	o.caller <- t.Caller.Value(ctxKey("caller"))
	return context.WithValue(ctx, ctxKey("turn"), t.TurnID)
}

func (o *tagging) ModelRequestStarted(ctx context.Context, provider, model string) context.Context {
	return context.WithValue(ctx, ctxKey("model"), provider+"/"+model+" of "+ctx.Value(ctxKey("turn")).(string))
}

func (o *tagging) ModelRequest(ctx context.Context, s turns.ModelRequestStats) {
	o.reported <- ctx.Value(ctxKey("model"))
}

// ctxClient records the context values its requests are sent under.
type ctxClient struct {
	model.Client
	seen chan [2]any // "model", request id
}

func (c ctxClient) Stream(ctx context.Context, req model.Request, fn func(model.Event) error) (model.Result, error) {
	c.seen <- [2]any{ctx.Value(ctxKey("model")), reqlog.ID(ctx)}
	return c.Client.Stream(ctx, req, fn)
}

// The Observer sees the caller's context; the contexts it returns are the
// turn's work's: the model request is sent under ModelRequestStarted's
// (derived from TurnStarted's), which ModelRequest gets back, and tools
// run under TurnStarted's. The turn keeps the caller's request id and
// nothing else of its context, and logs with it.
func TestObserverContexts(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[
		{"tool_calls":[{"call_id":"c1","name":"probe","arguments":{}}]},
		{"text":"done"}]}`)
	obs := &tagging{caller: make(chan any, 1), reported: make(chan any, 2)}
	seen := make(chan [2]any, 2)
	toolCtx := make(chan [3]any, 1)
	rec := newRecorder()
	var logs logtest.Buffer
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(rec), Models: oneProvider{ctxClient{client, seen}}, Observer: obs,
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "prov", Cwd: t.TempDir()},
		Logger:   slog.New(reqlog.NewHandler(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		Tools: func(turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			return noArgTools(false, map[string]registry.Handler{"probe": registry.HandlerFunc(func(ctx context.Context, _ registry.Invocation) (registry.Output, error) {
				toolCtx <- [3]any{ctx.Value(ctxKey("turn")), reqlog.ID(ctx), ctx.Value(ctxKey("caller"))}
				return registry.TextOutput("ok", true), nil
			})})
		},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	res, after, err := m.StartThread(context.Background(), turns.Caller{Conn: 1}, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	caller, _ := reqlog.Start(context.WithValue(context.Background(), ctxKey("caller"), "the request"), "req-7")
	caller, cancel := context.WithCancel(caller)
	tr, after, err := m.StartTurn(caller, turns.Caller{Conn: 1}, api.TurnStartParams{
		ThreadID: res.Thread.ID, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "go"}},
	})
	require.NoError(t, err)
	cancel() // the request has ended; the turn goes on
	after()
	rec.wait(t, "turn/completed")

	require.Equal(t, "the request", <-obs.caller)
	want := "prov/fake of " + tr.Turn.ID
	for range 2 {
		require.Equal(t, [2]any{want, "req-7"}, <-seen)
		require.Equal(t, want, <-obs.reported)
	}
	require.Equal(t, [3]any{tr.Turn.ID, "req-7", nil}, <-toolCtx, "the tool runs in the turn's context, without the caller's values")

	var started map[string]any
	if recs := logs.Records(t, "turn started"); len(recs) == 1 {
		started = recs[0]
	}
	require.NotNil(t, started, logs.String())
	require.Equal(t, "req-7", started[reqlog.Key])
	require.Equal(t, tr.Turn.ID, started["turn"])
	require.Equal(t, "prov", started["provider"])
}
