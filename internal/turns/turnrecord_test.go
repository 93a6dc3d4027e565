package turns_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/turns"
)

// The read side answers for a turn from its transcript, whoever watched
// it: its end, its items as stored, and its token usage summed over its
// model responses, the same after a restart.
func TestTurnRecordComesFromTheTranscript(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[
		{"tool_calls":[{"call_id":"c1","name":"noop","arguments":{}}],"usage":{"input_tokens":10,"output_tokens":2,"total_tokens":12}},
		{"text":"done","usage":{"input_tokens":20,"output_tokens":3,"total_tokens":23}}]}`)
	newManager := func(rec *recorder) *turns.Manager {
		m, err := turns.New(turns.Config{
			Store: st, Sink: sinkFor(rec), Models: oneProvider{client},
			Tools: func(turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
				return noArgTools(false, map[string]registry.Handler{"noop": registry.HandlerFunc(func(context.Context, registry.Invocation) (registry.Output, error) {
					return registry.TextOutput("ok", true), nil
				})})
			},
			Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
		})
		require.NoError(t, err)
		return m
	}
	rec := newRecorder()
	m := newManager(rec)
	defer m.Stop()
	ctx := context.Background()
	thread, turn := startTurnOn(t, m, "")
	rec.wait(t, "turn/completed")
	require.False(t, m.Running(thread))

	check := func(m *turns.Manager) {
		t.Helper()
		status, err := m.TurnStatus(ctx, thread, turn)
		require.NoError(t, err)
		require.Equal(t, api.TurnCompleted, status)
		got, err := m.TurnRecord(ctx, thread, turn)
		require.NoError(t, err)
		require.Equal(t, api.TurnCompleted, got.Status)
		require.NotNil(t, got.StartedAt)
		require.NotNil(t, got.CompletedAt)
		require.Len(t, got.Items, 2, "the user message and the answer")
		require.Equal(t, &api.TokenUsageBreakdown{InputTokens: 30, OutputTokens: 5, TotalTokens: 35}, got.Usage)
	}
	check(m)
	m.Stop()
	again := newManager(newRecorder())
	defer again.Stop()
	check(again)

	_, err := again.TurnStatus(ctx, thread, "no-such-turn")
	require.True(t, apperr.Is(err, apperr.NotFound), "%v", err)
}
