package turns

import (
	"context"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/turns/loop"
)

// UpdateTurnSettings changes the model, reasoning effort or summary of the
// running turn from its next model request on; the thread's settings for
// later turns stay as they are. A turn that is not running (any more)
// answers targetUnavailable.
func (m *Manager) UpdateTurnSettings(ctx context.Context, p api.TurnSettingsUpdateParams) (api.TurnSettingsUpdateResult, error) {
	if p.Model != nil && *p.Model == "" {
		return api.TurnSettingsUpdateResult{}, apperr.New(apperr.Invalid, "Invalid request: model must not be empty")
	}
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.TurnSettingsUpdateResult{}, err
	}
	defer t.unpin()
	t.mu.Lock()
	at := t.active
	if at != nil && (at.ending || at.ID != p.TurnID) {
		at = nil
	}
	t.mu.Unlock()
	patch := loop.SettingsPatch{Model: p.Model, Effort: p.Effort}
	if p.Summary != nil {
		s := string(*p.Summary)
		patch.Summary = &s
	}
	if at == nil || !at.PatchSettings(patch) {
		return api.TurnSettingsUpdateResult{Status: api.TurnSettingsTargetUnavailable}, nil
	}
	return api.TurnSettingsUpdateResult{Status: api.TurnSettingsApplied}, nil
}
