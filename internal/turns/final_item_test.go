package turns_test

import (
	"cmp"
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

// itemTool completes a dynamicToolCall item through the turn's ToolSink,
// with ItemCompletedFinal when final is set, after waiting for release.
// With later set it returns at once and completes an item of its own (as
// an exec session that ends after its call does) once later is closed.
// With itemID set its item has that id rather than the call's.
type itemTool struct {
	items   turns.ToolSink
	final   bool
	release chan struct{}
	later   chan struct{}
	itemID  string
}

func (itemTool) Kind() registry.PayloadKind                           { return registry.PayloadFunction }
func (itemTool) IsMutating(context.Context, registry.Invocation) bool { return false }
func (t itemTool) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	if t.release != nil {
		<-t.release
	}
	ok := true
	if t.later != nil {
		go func() {
			<-t.later
			t.items.ItemCompleted(api.ThreadItem{Body: &api.DynamicToolCallItem{ID: "session-" + inv.CallID, Tool: inv.Name, Status: api.StatusCompleted, Success: &ok}})
		}()
		return registry.TextOutput("started", true), nil
	}
	item := api.ThreadItem{Body: &api.DynamicToolCallItem{ID: cmp.Or(t.itemID, inv.CallID), Tool: inv.Name, Status: api.StatusCompleted, Success: &ok}}
	if t.final {
		t.items.ItemCompletedFinal(item)
	} else {
		t.items.ItemCompleted(item)
	}
	return registry.TextOutput("ok", true), nil
}

// finalItemSetup runs a turn whose first response calls the tools named in
// calls (each an itemTool: "fast" and "slow" are final, "plain" is not,
// "late" completes an item after its call, when later is closed); slow
// waits for slowRelease.
func finalItemSetup(t *testing.T, calls string, slowRelease chan struct{}) (*batchLog, *noteLog) {
	t.Helper()
	return finalItemScript(t, `[{"tool_calls":`+calls+`},{"text":"done"}]`, toolGates{slow: slowRelease})
}

// toolGates are the channels the tools of finalItemScript wait for.
type toolGates struct {
	slow  chan struct{} // slow's release
	gated chan struct{} // gated's release (gated is final, like fast)
	later chan struct{} // late's item
}

// finalItemScript is finalItemSetup with the model's steps given whole.
func finalItemScript(t *testing.T, steps string, g toolGates) (*batchLog, *noteLog) {
	t.Helper()
	st, _, client := storeAndModel(t, `{"steps":`+steps+`}`)
	notes := &noteLog{ch: make(chan string, 1024)}
	log := &batchLog{Store: st, gate: make(chan struct{})}
	m, err := turns.New(turns.Config{
		Store: log, Sink: sinkFor(notes), Models: oneProvider{client},
		Tools: func(tc turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			return noArgTools(true, map[string]registry.Handler{
				"fast":  itemTool{items: tc.Sink, final: true},
				"slow":  itemTool{items: tc.Sink, final: true, release: g.slow},
				"gated": itemTool{items: tc.Sink, final: true, release: g.gated},
				"plain": itemTool{items: tc.Sink},
				"late":  itemTool{items: tc.Sink, later: g.later},
				"taker": itemTool{items: tc.Sink, final: true, itemID: "c2"},
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

// A tool whose item takes the id of a later call (taker's is "c2") makes
// that call's deferred item's insert a unique violation: the round's
// commit fails, so neither the item nor the round's usage is announced,
// and the turn fails (nothing announced is missing from the store). (A
// repeated call id no longer does: the call takes an id of its own.)
func TestDeferredItemFailureFailsTheTurn(t *testing.T) {
	log, notes := finalItemScript(t, `[{"tool_calls":[{"call_id":"c1","name":"taker","arguments":{}}]},
		{"tool_calls":[{"call_id":"c2","name":"fast","arguments":{}}]},{"text":"done"}]`, toolGates{})
	log.release()
	notes.wait(t, "turn/completed")
	lines := notes.snapshot()
	require.Equal(t, api.TurnFailed, notes.lastEnded(t).Status, "%v", lines)
	require.Equal(t, 2, countOf(lines, "item/completed"), "the user message and the first round's item only: %v", lines)
	require.Equal(t, 1, countOf(lines, "thread/tokenUsage/updated"), "only the first round's usage was committed: %v", lines)
}

// An item completed by a call of an earlier round (an exec session ending)
// does not count as a call of the running round: the running round's first
// call is not mistaken for its last.
func TestItemsOfEarlierRoundsDoNotCount(t *testing.T) {
	g := toolGates{slow: make(chan struct{}), gated: make(chan struct{}), later: make(chan struct{})}
	log, notes := finalItemScript(t, `[{"tool_calls":[{"call_id":"c0","name":"late","arguments":{}}]},
		{"tool_calls":[{"call_id":"c1","name":"slow","arguments":{}},{"call_id":"c2","name":"gated","arguments":{}}]},{"text":"done"}]`, g)
	var slowOnce, gatedOnce sync.Once
	releaseSlow := func() { slowOnce.Do(func() { close(g.slow) }) }
	releaseGated := func() { gatedOnce.Do(func() { close(g.gated) }) }
	t.Cleanup(func() { releaseGated(); releaseSlow() }) // runs first: a failed wait must not leave them running
	log.release()
	notes.wait(t, "thread/tokenUsage/updated") // round one's usage: round two is running
	close(g.later)                             // the session of round one ends while slow and gated run
	notes.wait(t, "item/completed")            // the session item
	releaseGated()
	notes.wait(t, "item/completed") // gated, at once: slow still runs
	releaseSlow()
	notes.wait(t, "turn/completed")
}
