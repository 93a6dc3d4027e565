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

// sent is one notification with its params.
type sent struct {
	method string
	params any
}

// paramLog is a Notifier that keeps every notification's params.
type paramLog struct {
	mu    sync.Mutex
	notes []sent
	done  chan struct{} // closed at turn/completed
}

func (p *paramLog) add(method string, params any) {
	p.mu.Lock()
	p.notes = append(p.notes, sent{method, params})
	p.mu.Unlock()
	if method == "turn/completed" {
		close(p.done)
	}
}

func (p *paramLog) Broadcast(method string, params any)              { p.add(method, params) }
func (p *paramLog) Send(_ []turns.ConnID, method string, params any) { p.add(method, params) }

// planEvent is a registry handler's event, as update_plan sends one.
type planEvent struct {
	Explanation string `json:"explanation"`
}

func (planEvent) Method() string { return "turn/plan/updated" }
func (e planEvent) Params(threadID, turnID string) any {
	return api.TurnPlanUpdatedNotification{ThreadID: threadID, TurnID: turnID, Explanation: &e.Explanation}
}

// speakTool uses every method of the turn's ToolSink once, in order: an
// item with output deltas, the turn's diff, and a handler event through
// the registry's view of the same sink.
type speakTool struct{ sink turns.ToolSink }

func (speakTool) Kind() registry.PayloadKind                           { return registry.PayloadFunction }
func (speakTool) IsMutating(context.Context, registry.Invocation) bool { return false }
func (s speakTool) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	item := &api.CommandExecutionItem{ID: inv.CallID, Command: "echo hi", Status: api.StatusInProgress}
	s.sink.ItemStarted(api.ThreadItem{Body: item})
	s.sink.CommandOutputDelta(inv.CallID, "hi\n")
	done := *item
	done.Status = api.StatusCompleted
	s.sink.ItemCompleted(api.ThreadItem{Body: &done})
	s.sink.TurnDiff("diff --git a/f b/f\n")
	inv.Turn.Emit(ctx, planEvent{Explanation: "why"})
	return registry.TextOutput("ok", true), nil
}

// What a tool says through its sink reaches the thread's subscribers in
// the order it was said, each notification carrying the turn's thread and
// turn ids (the tool names neither), and the turn's diff is repeated after
// the round's token usage.
func TestToolSinkSpeaksForItsTurn(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[{"tool_calls":[{"call_id":"c1","name":"speak","arguments":{}}]},{"text":"done"}]}`)
	notes := &paramLog{done: make(chan struct{})}
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(notes), Models: oneProvider{client},
		Tools: func(tc turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			return noArgTools(false, map[string]registry.Handler{"speak": speakTool{tc.Sink}})
		},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	threadID, turnID := startTurnOn(t, m, "")
	select {
	case <-notes.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the turn did not complete")
	}

	notes.mu.Lock()
	defer notes.mu.Unlock()
	type ids struct{ thread, turn string }
	var got []string
	var gotIDs []ids
	for _, n := range notes.notes {
		var id ids
		switch p := n.params.(type) {
		case api.ItemStartedNotification:
			if p.Item.Body.ItemID() != "c1" {
				continue
			}
			id = ids{p.ThreadID, p.TurnID}
		case api.ItemCompletedNotification:
			if p.Item.Body.ItemID() != "c1" {
				continue
			}
			id = ids{p.ThreadID, p.TurnID}
		case api.ItemDeltaNotification:
			if n.method == "item/agentMessage/delta" {
				continue
			}
			require.Equal(t, "c1", p.ItemID)
			require.Equal(t, "hi\n", p.Delta)
			id = ids{p.ThreadID, p.TurnID}
		case api.TurnDiffUpdatedNotification:
			require.Equal(t, "diff --git a/f b/f\n", p.Diff)
			id = ids{p.ThreadID, p.TurnID}
		case api.ThreadTokenUsageUpdatedNotification:
			id = ids{p.ThreadID, p.TurnID}
		case api.TurnPlanUpdatedNotification:
			require.Equal(t, "why", *p.Explanation)
			id = ids{p.ThreadID, p.TurnID}
		default:
			continue
		}
		got = append(got, n.method)
		gotIDs = append(gotIDs, id)
	}
	require.Equal(t, []string{
		"item/started", "item/commandExecution/outputDelta", "item/completed", "turn/diff/updated", "turn/plan/updated",
		"thread/tokenUsage/updated", "turn/diff/updated", // the tool round's usage, then the diff again
		"thread/tokenUsage/updated", "turn/diff/updated", // the answer's
	}, got)
	for i, id := range gotIDs {
		require.Equal(t, ids{threadID, turnID}, id, "%s", got[i])
	}
}
