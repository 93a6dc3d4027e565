package turns_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// batchLog records the store batches that append items, and holds the one
// that carries a round's history (as gatedStore does) until released.
type batchLog struct {
	store.Store
	gate chan struct{}
	once sync.Once

	mu      sync.Mutex
	batches []string // per item-appending batch: "items=N history=true|false"
}

func (l *batchLog) Write(ctx context.Context, b *store.Batch) error {
	history := len(b.UpdateTurns) == 1 && len(b.UpdateThreads) == 1 && b.UpdateTurns[0].Meta != nil && b.UpdateTurns[0].Status == ""
	if history {
		<-l.gate
	}
	if len(b.AppendItems) > 0 {
		var types []string
		for _, it := range b.AppendItems {
			types = append(types, it.Type)
		}
		l.mu.Lock()
		l.batches = append(l.batches, map[bool]string{true: "history+", false: ""}[history]+join(types))
		l.mu.Unlock()
	}
	return l.Store.Write(ctx, b)
}

// release lets the held commit (and every later one) through.
func (l *batchLog) release() { l.once.Do(func() { close(l.gate) }) }

func (l *batchLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.batches)
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

// itemTool completes a dynamicToolCall item through the turn's item sink,
// with ItemCompletedFinal when final is set, after waiting for release.
type itemTool struct {
	items   turns.ItemSink
	final   bool
	release chan struct{}
}

func (itemTool) Kind() registry.PayloadKind                           { return registry.PayloadFunction }
func (itemTool) IsMutating(context.Context, registry.Invocation) bool { return false }
func (t itemTool) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	if t.release != nil {
		<-t.release
	}
	ok := true
	item := api.ThreadItem{Body: &api.DynamicToolCallItem{ID: inv.CallID, Tool: inv.Name, Status: api.StatusCompleted, Success: &ok}}
	if t.final {
		t.items.(turns.FinalItemSink).ItemCompletedFinal(ctx, inv.Turn.TurnID, item)
	} else {
		t.items.ItemCompleted(ctx, inv.Turn.TurnID, item)
	}
	return registry.TextOutput("ok", true), nil
}

// finalItemSetup runs a turn whose first response calls the tools named in
// calls (each an itemTool: "fast" and "slow" are final, "plain" is not);
// slow waits for slowRelease.
func finalItemSetup(t *testing.T, calls string, slowRelease chan struct{}) (*batchLog, *noteLog) {
	t.Helper()
	st, _, client := storeAndModel(t, `{"steps":[{"tool_calls":`+calls+`},{"text":"done"}]}`)
	notes := &noteLog{ch: make(chan string, 1024)}
	log := &batchLog{Store: st, gate: make(chan struct{})}
	m, err := turns.New(turns.Config{
		Store: log, Notifier: notes, Models: oneProvider{client},
		Tools: func(tc turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			return noArgTools(map[string]registry.Handler{
				"fast":  itemTool{items: tc.Items, final: true},
				"slow":  itemTool{items: tc.Items, final: true, release: slowRelease},
				"plain": itemTool{items: tc.Items},
			})
		},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	t.Cleanup(log.release) // runs first: a failed test must not leave the turn held
	startPipelineTurn(t, m)
	return log, notes
}

// The item of a round's only call, completed with ItemCompletedFinal, is
// committed in the round's history commit (one commit, not two), and is
// announced once that commit is done, before the round's usage.
func TestFinalItemCommitsWithRoundHistory(t *testing.T) {
	log, notes := finalItemSetup(t, `[{"call_id":"c1","name":"fast","arguments":{}}]`, nil)
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, 1, countOf(notes.snapshot(), "item/completed"), "only the user message: the tool item waits for its commit")
	log.release()
	notes.wait(t, "turn/completed")
	require.Equal(t, []string{"userMessage", "history+dynamicToolCall", "agentMessage"}, log.snapshot())
	lines := notes.snapshot()
	require.Equal(t, 3, countOf(lines, "item/completed"), "%v", lines)
	second := slices.Index(lines[slices.Index(lines, "item/completed")+1:], "item/completed")
	usage := slices.Index(lines[slices.Index(lines, "item/completed")+1:], "thread/tokenUsage/updated")
	require.Less(t, second, usage, "the tool item is announced before the round's usage: %v", lines)
}

// Only the last call of a round waits for the round's commit: an earlier
// one is committed and announced at once, and a call using ItemCompleted
// is never deferred.
func TestOnlyTheLastFinalItemIsDeferred(t *testing.T) {
	release := make(chan struct{})
	log, notes := finalItemSetup(t, `[{"call_id":"c1","name":"fast","arguments":{}},{"call_id":"c2","name":"slow","arguments":{}}]`, release)
	notes.wait(t, "item/completed") // the user message
	notes.wait(t, "item/completed") // fast, while slow still runs
	require.Equal(t, []string{"userMessage", "dynamicToolCall"}, log.snapshot())
	close(release)
	log.release()
	notes.wait(t, "turn/completed")
	require.Equal(t, []string{"userMessage", "dynamicToolCall", "history+dynamicToolCall", "agentMessage"}, log.snapshot())

	log, notes = finalItemSetup(t, `[{"call_id":"c1","name":"plain","arguments":{}}]`, nil)
	log.release()
	notes.wait(t, "turn/completed")
	require.Equal(t, []string{"userMessage", "dynamicToolCall", "agentMessage"}, log.snapshot())
}
