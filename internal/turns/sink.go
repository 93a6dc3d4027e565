package turns

import (
	"context"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
)

// The turn is its tools' ToolSink. ItemCompleted and ItemCompletedFinal are
// in commit.go, next to the round commit that a final item joins.
var _ ToolSink = (*turnRun)(nil)

// ItemStarted announces an item a tool started (ToolSink).
func (r *turnRun) ItemStarted(item api.ThreadItem) {
	ms := r.t.m.now().UnixMilli()
	if item.StartedAtMs != nil {
		ms = *item.StartedAtMs
	}
	r.t.emit("item/started", api.ItemStartedNotification{Item: item, ThreadID: r.t.id, TurnID: r.at.id, StartedAtMs: ms})
}

// CommandOutputDelta streams a piece of a command's output (ToolSink).
func (r *turnRun) CommandOutputDelta(itemID, delta string) {
	r.t.emit("item/commandExecution/outputDelta", api.ItemDeltaNotification{ThreadID: r.t.id, TurnID: r.at.id, ItemID: itemID, Delta: delta})
}

// TurnDiff records the turn's aggregate diff and announces it (ToolSink);
// recordUsageAsync announces it again after every token usage update of the
// turn, as the reference does.
func (r *turnRun) TurnDiff(diff string) {
	r.mu.Lock()
	r.diff = diff
	r.mu.Unlock()
	r.emitDiff()
}

// emitDiff announces the turn's diff, if it has one.
func (r *turnRun) emitDiff() {
	r.mu.Lock()
	diff := r.diff
	r.mu.Unlock()
	if diff == "" {
		return
	}
	r.t.emit("turn/diff/updated", api.TurnDiffUpdatedNotification{ThreadID: r.t.id, TurnID: r.at.id, Diff: diff})
}

// Emit forwards a registry handler's event as a notification of the
// turn's thread and turn (ToolSink, registry.Emitter).
func (r *turnRun) Emit(_ context.Context, ev registry.Event) {
	r.t.emit(ev.Method(), ev.Params(r.t.id, r.at.id))
}
