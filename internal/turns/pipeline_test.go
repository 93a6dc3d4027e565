package turns_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// gatedStore holds (or fails) the commit of a tool round's history and
// token usage: the batch that updates both the turn and the thread.
type gatedStore struct {
	store.Store
	gate chan error // each round's commit takes one value; nil is success
}

func (g gatedStore) Write(ctx context.Context, b *store.Batch) error {
	if len(b.UpdateTurns) == 1 && len(b.UpdateThreads) == 1 && b.UpdateTurns[0].Meta != nil && b.UpdateTurns[0].Status == "" {
		if err := <-g.gate; err != nil {
			return err
		}
	}
	return g.Store.Write(ctx, b)
}

type noopTool struct{}

func (noopTool) Kind() registry.PayloadKind                           { return registry.PayloadFunction }
func (noopTool) IsMutating(context.Context, registry.Invocation) bool { return false }
func (noopTool) Handle(context.Context, registry.Invocation) (registry.Output, error) {
	return registry.TextOutput("ok", true), nil
}

func pipelineSetup(t *testing.T) (*turns.Manager, *fakemodel.Server, *noteLog, chan error) {
	t.Helper()
	st, fake, client := storeAndModel(t, `{"steps":[{"tool_calls":[{"call_id":"c1","name":"noop","arguments":{}}]},{"text":"done"}]}`)
	notes := &noteLog{ch: make(chan string, 1024)}
	gate := make(chan error, 1)
	m, err := turns.New(turns.Config{
		Store: gatedStore{Store: st, gate: gate}, Notifier: notes, Models: oneProvider{client},
		Tools: func(tc turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			return noArgTools(false, map[string]registry.Handler{"noop": noopTool{}})
		},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	return m, fake, notes, gate
}

func startPipelineTurn(t *testing.T, m *turns.Manager) {
	t.Helper()
	caller := turns.Caller{Conn: 1}
	th, after, err := m.StartThread(context.Background(), caller, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	_, after, err = m.StartTurn(context.Background(), caller, api.TurnStartParams{ThreadID: th.Thread.ID, Input: api.List[api.UserInput]{}})
	require.NoError(t, err)
	after()
}

func waitRequests(t *testing.T, fake *fakemodel.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(fake.Requests()) < n {
		require.True(t, time.Now().Before(deadline), "the model got %d requests, want %d", len(fake.Requests()), n)
		time.Sleep(5 * time.Millisecond)
	}
}

// The request after a tool round goes out while the round's history is
// still being committed, and nothing is announced until the commit is done.
func TestNextRequestOverlapsHistoryCommit(t *testing.T) {
	m, fake, notes, gate := pipelineSetup(t)
	startPipelineTurn(t, m)
	waitRequests(t, fake, 2) // the commit is still held by the gate
	time.Sleep(50 * time.Millisecond)
	require.NotContains(t, notes.snapshot(), "thread/tokenUsage/updated", "usage announced before its commit")
	before := len(notes.snapshot())
	gate <- nil
	notes.wait(t, "turn/completed")
	lines := notes.snapshot()
	usage := slices.Index(lines[before:], "thread/tokenUsage/updated")
	started := slices.Index(lines[before:], "item/started")
	require.GreaterOrEqual(t, usage, 0, "%v", lines)
	require.Greater(t, started, usage, "the next response's items come after the previous round's usage: %v", lines[before:])
}

// A failed history commit fails the turn, and the response that was
// already requested is not announced.
func TestFailedHistoryCommitFailsTheTurn(t *testing.T) {
	m, fake, notes, gate := pipelineSetup(t)
	startPipelineTurn(t, m)
	waitRequests(t, fake, 2)
	gate <- errors.New("disk full")
	notes.wait(t, "turn/completed")
	lines := notes.snapshot()
	require.NotContains(t, lines, "thread/tokenUsage/updated")
	// Only the user message was announced: not the final answer.
	require.Equal(t, 1, countOf(lines, "item/started"), "%v", lines)
	require.Equal(t, 1, countOf(lines, "item/completed"), "%v", lines)
}

func countOf(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if l == s {
			n++
		}
	}
	return n
}
