package turns

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/store"
)

// injectableTypes are the Responses API item types thread/inject_items
// adds to the model history. Items of any other type are accepted and
// dropped, as the reference does with item types it does not know: they
// would make every later model request fail.
var injectableTypes = map[string]bool{
	model.ItemMessage:              true,
	model.ItemReasoning:            true,
	model.ItemFunctionCall:         true,
	model.ItemFunctionCallOutput:   true,
	model.ItemCustomToolCall:       true,
	model.ItemCustomToolCallOutput: true,
	model.ItemToolSearchCall:       true,
	model.ItemToolSearchOutput:     true,
	"local_shell_call":             true,
	"web_search_call":              true,
	"image_generation_call":        true,
}

// parseInjected decodes thread/inject_items' items: all of them or none.
func parseInjected(raw []json.RawMessage) ([]model.InputItem, error) {
	if len(raw) == 0 {
		return nil, apperr.New(apperr.Invalid, "items must not be empty")
	}
	out := make([]model.InputItem, 0, len(raw))
	for i, r := range raw {
		bad := func(why string) error {
			return apperr.New(apperr.Invalid, "items[%d] is not a valid response item: %s", i, why)
		}
		t := bytes.TrimSpace(r)
		if len(t) == 0 || t[0] != '{' {
			return nil, bad("expected an object")
		}
		var it model.InputItem
		if err := json.Unmarshal(t, &it); err != nil {
			return nil, bad(err.Error())
		}
		if !injectableTypes[it.Type] {
			continue
		}
		if it.Type == model.ItemMessage {
			if it.Role == "" {
				return nil, bad("missing field `role`")
			}
			if it.Content == nil {
				return nil, bad("missing field `content`")
			}
		}
		if it.ID != "" && it.Type == model.ItemMessage {
			// An id names an item of an earlier response; replayed
			// without one, as the items this server creates.
			it.ID = ""
		}
		out = append(out, it)
	}
	return out, nil
}

// InjectItems adds Responses API items to a thread's model history without
// starting a turn (thread/inject_items). A running turn takes them before
// its next model request (and makes one more if it was about to end); an
// idle thread keeps them, stored with its metadata, for its next turn,
// whose model history has them before its user message. Nothing is
// announced: the items are model context, not thread items.
func (m *Manager) InjectItems(ctx context.Context, p api.ThreadInjectItemsParams) (api.ThreadInjectItemsResult, error) {
	var res api.ThreadInjectItemsResult
	if ok, err := m.remote(ctx, p.ThreadID, "thread/inject_items", p, &res); ok {
		return res, err
	}
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return res, err
	}
	defer t.unpin()
	items, err := parseInjected(p.Items)
	if err != nil || len(items) == 0 {
		return res, err
	}
	return res, t.inject(ctx, items)
}

// inject adds items to t's model history: the running turn's next model
// request takes them, or, when t is idle, its next turn.
func (t *thread) inject(ctx context.Context, items []model.InputItem) error {
	for {
		t.metaMu.Lock()
		t.mu.Lock()
		at := t.active
		if at != nil && at.ending {
			at = nil
		}
		if at == nil {
			err := t.keepInjectedLocked(ctx, items)
			t.metaMu.Unlock()
			return err
		}
		t.mu.Unlock()
		t.metaMu.Unlock()
		if at.AddInjected(items) {
			return nil
		}
		// The turn is settling and takes no more input: the items wait
		// for the next one.
		select {
		case <-at.Done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// keepInjectedLocked stores items for the thread's next turn; t.metaMu and
// t.mu are held, and t.mu is released.
func (t *thread) keepInjectedLocked(ctx context.Context, items []model.InputItem) error {
	prev := t.meta.Injected
	t.meta.Injected = append(append([]model.InputItem(nil), prev...), items...)
	patch := store.ThreadPatch{ID: t.id, Meta: t.metaJSONLocked()}
	t.mu.Unlock()
	if err := t.write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{patch}}); err != nil {
		t.mu.Lock()
		t.meta.Injected = prev
		t.mu.Unlock()
		return err
	}
	return nil
}

// takeInjected returns the items injected while the thread was idle and
// the thread patch that stores their removal, nil when there are none.
// t.metaMu is held; the caller clears t.meta.Injected once the patch is
// stored with the turn that took them.
func (t *thread) takeInjected() ([]model.InputItem, *store.ThreadPatch) {
	t.mu.Lock()
	defer t.mu.Unlock()
	items := t.meta.Injected
	if len(items) == 0 {
		return nil, nil
	}
	t.meta.Injected = nil
	patch := store.ThreadPatch{ID: t.id, Meta: t.metaJSONLocked()}
	t.meta.Injected = items
	return items, &patch
}

// mergeThreadPatch adds p's metadata to the batch's patch of the same
// thread, or adds p.
func mergeThreadPatch(patches []store.ThreadPatch, p store.ThreadPatch) []store.ThreadPatch {
	for i := range patches {
		if patches[i].ID == p.ID {
			patches[i].Meta = p.Meta
			return patches
		}
	}
	return append(patches, p)
}
