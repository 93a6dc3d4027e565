package turns

import (
	"context"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
)

// settingsPatch is a turn/settings/update waiting for the turn's next
// model request; nil fields leave the setting as it is.
type settingsPatch struct {
	model, effort, summary *string
}

// merge adds a later update over p.
func (p *settingsPatch) merge(q settingsPatch) {
	if q.model != nil {
		p.model = q.model
	}
	if q.effort != nil {
		p.effort = q.effort
	}
	if q.summary != nil {
		p.summary = q.summary
	}
}

// patchSettings queues an update for the turn's next model request; false
// once the turn has stopped making requests.
func (at *activeTurn) patchSettings(p settingsPatch) bool {
	at.mu.Lock()
	defer at.mu.Unlock()
	if at.closed {
		return false
	}
	if at.settingsNext == nil {
		at.settingsNext = &settingsPatch{}
	}
	at.settingsNext.merge(p)
	return true
}

// applySettings applies the queued update; only the turn's goroutine,
// the one reader of at.settings, calls it, before each model request.
func (at *activeTurn) applySettings() {
	at.mu.Lock()
	p := at.settingsNext
	at.settingsNext = nil
	at.mu.Unlock()
	if p == nil {
		return
	}
	if p.model != nil {
		at.settings.model = *p.model
	}
	if p.effort != nil {
		at.settings.effort = *p.effort
	}
	if p.summary != nil {
		at.settings.summary = *p.summary
	}
}

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
	if at != nil && (at.ending || at.id != p.TurnID) {
		at = nil
	}
	t.mu.Unlock()
	patch := settingsPatch{model: p.Model, effort: p.Effort}
	if p.Summary != nil {
		s := string(*p.Summary)
		patch.summary = &s
	}
	if at == nil || !at.patchSettings(patch) {
		return api.TurnSettingsUpdateResult{Status: api.TurnSettingsTargetUnavailable}, nil
	}
	return api.TurnSettingsUpdateResult{Status: api.TurnSettingsApplied}, nil
}
