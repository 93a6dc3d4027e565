package loop

import (
	"context"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
)

// The turn is its tools' sink (the thread table's ToolSink). ItemCompleted
// and ItemCompletedFinal are in commit.go, next to the round commit that a
// final item joins.

// ItemStarted announces an item a tool started (ToolSink).
func (r *Run) ItemStarted(item api.ThreadItem) {
	ms := r.d.Now().UnixMilli()
	if item.StartedAtMs != nil {
		ms = *item.StartedAtMs
	}
	r.t.Emit("item/started", api.ItemStartedNotification{Item: item, ThreadID: r.threadID, TurnID: r.at.ID, StartedAtMs: ms})
}

// CommandOutputDelta streams a piece of a command's output (ToolSink).
func (r *Run) CommandOutputDelta(itemID, delta string) {
	r.t.Emit("item/commandExecution/outputDelta", api.ItemDeltaNotification{ThreadID: r.threadID, TurnID: r.at.ID, ItemID: itemID, Delta: delta})
}

// TurnDiff records the turn's aggregate diff and announces it (ToolSink);
// recordUsageAsync announces it again after every token usage update of the
// turn, as the reference does.
func (r *Run) TurnDiff(diff string) {
	r.mu.Lock()
	r.diff = diff
	r.mu.Unlock()
	r.emitDiff()
}

// emitDiff announces the turn's diff, if it has one.
func (r *Run) emitDiff() { r.emitDiffTo(r.t.Emit) }

// emitDiffTo is emitDiff through emit.
func (r *Run) emitDiffTo(emit Emit) {
	r.mu.Lock()
	diff := r.diff
	r.mu.Unlock()
	if diff == "" {
		return
	}
	emit("turn/diff/updated", api.TurnDiffUpdatedNotification{ThreadID: r.threadID, TurnID: r.at.ID, Diff: diff})
}

// Emit forwards a registry handler's event as a notification of the
// turn's thread and turn (ToolSink, registry.Emitter).
func (r *Run) Emit(_ context.Context, ev registry.Event) {
	r.t.Emit(ev.Method(), ev.Params(r.threadID, r.at.ID))
}
