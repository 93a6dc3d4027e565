package turns

import (
	"context"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns/loop"
)

// CompactThread compacts a thread's context (thread/compact/start): the
// response comes first, then a turn of its own with the contextCompaction
// item; the model's next requests carry the summary instead of the
// history before it.
func (m *Manager) CompactThread(ctx context.Context, c Caller, p api.ThreadCompactStartParams) (api.ThreadCompactStartResult, After, error) {
	_, after, err := m.startTurn(ctx, c, api.TurnStartParams{ThreadID: p.ThreadID}, compactTurn{})
	return api.ThreadCompactStartResult{}, after, err
}

// compactTurn is the turnKind of a compaction the client asked for.
type compactTurn struct{}

func (compactTurn) runTurn(_ *Manager, r *loop.Run, _ ToolContext) { r.RunCompact() }
