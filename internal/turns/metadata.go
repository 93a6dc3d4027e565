package turns

import (
	"context"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// UpdateMetadata patches the Git metadata and the Daybreak choice kept
// with a thread, and returns the thread. appserver has no projects: a
// project id is refused, clearing one ("") changes nothing.
func (m *Manager) UpdateMetadata(ctx context.Context, p api.ThreadMetadataUpdateParams) (api.ThreadMetadataUpdateResult, error) {
	if p.ProjectID != nil && *p.ProjectID != "" {
		return api.ThreadMetadataUpdateResult{}, apperr.New(apperr.Invalid, "project not found: %s", *p.ProjectID)
	}
	if g := p.GitInfo; g != nil {
		for name, f := range map[string]api.Nullable[string]{"sha": g.Sha, "branch": g.Branch, "originUrl": g.OriginURL} {
			if f.Value != nil && *f.Value == "" {
				return api.ThreadMetadataUpdateResult{}, apperr.New(apperr.Invalid, "gitInfo.%s must not be empty: use null to clear it", name)
			}
		}
	}
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.ThreadMetadataUpdateResult{}, err
	}
	defer t.unpin()
	now := m.now()
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	t.mu.Lock()
	if g := p.GitInfo; g != nil {
		info := api.GitInfo{}
		if t.meta.GitInfo != nil {
			info = *t.meta.GitInfo
		}
		patchField(&info.Sha, g.Sha)
		patchField(&info.Branch, g.Branch)
		patchField(&info.OriginURL, g.OriginURL)
		t.meta.GitInfo = &info
		if info == (api.GitInfo{}) {
			t.meta.GitInfo = nil
		}
	}
	if p.DaybreakEnabled != nil {
		t.meta.DaybreakEnabled = p.DaybreakEnabled
	}
	t.rec.UpdatedAt = now
	patch := store.ThreadPatch{ID: t.id, Meta: t.metaJSONLocked(), UpdatedAt: &now}
	t.mu.Unlock()
	if err := t.write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{patch}}); err != nil {
		return api.ThreadMetadataUpdateResult{}, err
	}
	return api.ThreadMetadataUpdateResult{Thread: t.apiThread()}, nil
}

// patchField applies a tri-state field: absent keeps, null clears, a
// value replaces.
func patchField(dst **string, f api.Nullable[string]) {
	if f.Set {
		*dst = f.Value
	}
}
