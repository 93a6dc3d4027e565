package turns

import (
	"context"
	"encoding/json"
	"math"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/store"
)

// transcript is a thread's turns and items as its store holds them. The
// read side works on transcripts, so that it reads a loaded thread, a
// stored one and an ephemeral one alike.
type transcript struct {
	store store.Store
	id    string
}

// transcript returns where the thread's turns and items are read from.
func (t *thread) transcript() transcript { return transcript{store: t.store, id: t.id} }

// apiTurns returns every turn of the thread with all its items.
func (x transcript) apiTurns(ctx context.Context) (api.List[api.Turn], error) {
	turns, err := x.turns(ctx)
	if err != nil {
		return nil, err
	}
	items, err := x.items(ctx, "")
	if err != nil {
		return nil, err
	}
	byTurn := map[string][]store.Item{}
	for _, it := range items {
		byTurn[it.TurnID] = append(byTurn[it.TurnID], it)
	}
	// Only byTurn holds the stored items now, and each turn's are
	// forgotten once converted, so that a big thread's stored items and
	// their converted form are not both held whole.
	items = nil
	out := make(api.List[api.Turn], 0, len(turns))
	for _, tr := range turns {
		at, err := turnToAPI(tr, byTurn[tr.ID], api.ItemsFull)
		if err != nil {
			return nil, apperr.Wrap(apperr.Internal, err, "corrupt item")
		}
		delete(byTurn, tr.ID)
		out = append(out, at)
	}
	return out, nil
}

// modelHistory is the model history the thread's next turn starts from:
// that of its turns since the last compaction, read newest first so that
// the turns before it are never read.
func (x transcript) modelHistory(ctx context.Context) (history, error) {
	var since [][]model.InputItem // newest first
	cursor := ""
pages:
	for {
		page, err := x.store.ListTurns(ctx, store.TurnsQuery{ThreadID: x.id, Desc: true, Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			return history{}, err
		}
		for _, tr := range page.Turns {
			items, compacted, err := turnHistory(tr)
			if err != nil {
				return history{}, err
			}
			since = append(since, items)
			if compacted {
				break pages
			}
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	var h history
	for i := len(since) - 1; i >= 0; i-- {
		h.addUnencoded(since[i]...)
	}
	return h, nil
}

// turns lists every turn of the thread in order.
func (x transcript) turns(ctx context.Context) ([]store.Turn, error) {
	var out []store.Turn
	cursor := ""
	for {
		page, err := x.store.ListTurns(ctx, store.TurnsQuery{ThreadID: x.id, Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Turns...)
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

// items lists every item of the thread (or of one turn) in order.
func (x transcript) items(ctx context.Context, turnID string) ([]store.Item, error) {
	var out []store.Item
	err := x.eachItem(ctx, turnID, math.MaxInt64, func(it store.Item) error {
		out = append(out, it)
		return nil
	})
	return out, err
}

// eachItem calls f with every item of the thread (or of one turn) in
// order, up to sequence number lastSeq (math.MaxInt64: all; 0: none, as for
// a thread that had no items when a reply was made), reading them a page at a
// time, and stops at f's first error.
func (x transcript) eachItem(ctx context.Context, turnID string, lastSeq int64, f func(store.Item) error) error {
	cursor := ""
	for {
		page, err := x.store.ListItems(ctx, store.ItemsQuery{ThreadID: x.id, TurnID: turnID, Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			return err
		}
		for _, it := range page.Items {
			if it.Seq > lastSeq {
				return nil
			}
			if err := f(it); err != nil {
				return err
			}
		}
		if page.NextCursor == "" {
			return nil
		}
		cursor = page.NextCursor
	}
}

// ArchiveThread unloads (interrupting a running turn) and archives a
// thread with the sub-agents it spawned, theirs and so on, as the
// reference does: every one is unloaded, archived and announced, the
// thread first.
func (m *Manager) ArchiveThread(ctx context.Context, p api.ThreadArchiveParams) (After, error) {
	id, err := parseThreadID(p.ThreadID)
	if err != nil {
		return nil, err
	}
	if t := m.loaded(id); t != nil && t.ephemeral() {
		return nil, apperr.New(apperr.Invalid, "ephemeral thread %s cannot be archived", id)
	}
	kids, err := m.descendants(ctx, id)
	if err != nil && !apperr.Is(err, apperr.NotFound) {
		return nil, err
	}
	ids := append([]string{id}, kids...)
	archived, now := true, m.now()
	patches := make([]store.ThreadPatch, 0, len(ids))
	for _, tid := range ids {
		if t := m.loaded(tid); t != nil {
			m.unloadNow(t)
		}
		patches = append(patches, store.ThreadPatch{ID: tid, Archived: &archived, UpdatedAt: &now})
	}
	if err := m.cfg.Store.Write(ctx, &store.Batch{UpdateThreads: patches}); err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return nil, apperr.New(apperr.NotFound, "no rollout found for thread id %s", p.ThreadID)
		}
		return nil, err
	}
	return func() {
		for _, tid := range ids {
			m.cfg.Notifier.Broadcast("thread/archived", api.ThreadArchivedNotification{ThreadID: tid})
		}
	}, nil
}

// unloadNow takes a loaded thread out of memory at once, interrupting its
// running turn and ending its exec sessions, and tells every connection.
func (m *Manager) unloadNow(t *thread) {
	t.mu.Lock()
	at := t.active
	t.mu.Unlock()
	if at != nil {
		at.cancel(errInterrupted)
		<-at.done
	}
	m.mu.Lock()
	if m.threads[t.id] == t {
		delete(m.threads, t.id)
	}
	m.mu.Unlock()
	t.stopUnloadTimer()
	if f := m.cfg.ThreadUnloaded; f != nil {
		f(t.id)
	}
	m.cfg.Notifier.Broadcast("thread/status/changed", api.ThreadStatusChangedNotification{ThreadID: t.id, Status: api.ThreadStatus{Type: api.ThreadNotLoaded}})
}

// DeleteThread removes a thread for good, with its turns and items: a
// loaded one is unloaded first (interrupting a running turn, ending its
// exec sessions); every connection hears thread/deleted.
func (m *Manager) DeleteThread(ctx context.Context, p api.ThreadDeleteParams) (After, error) {
	id, err := parseThreadID(p.ThreadID)
	if err != nil {
		return nil, err
	}
	st := m.cfg.Store
	if t := m.loaded(id); t != nil {
		st = t.store
		m.unloadNow(t)
	}
	if err := st.DeleteThread(ctx, id); err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return nil, apperr.New(apperr.NotFound, "thread not found: %s", p.ThreadID)
		}
		return nil, err
	}
	return func() { m.cfg.Notifier.Broadcast("thread/deleted", api.ThreadDeletedNotification{ThreadID: id}) }, nil
}

// UnarchiveThread restores an archived thread to the list.
func (m *Manager) UnarchiveThread(ctx context.Context, p api.ThreadUnarchiveParams) (api.ThreadUnarchiveResult, After, error) {
	id, err := parseThreadID(p.ThreadID)
	if err != nil {
		return api.ThreadUnarchiveResult{}, nil, err
	}
	archived, now := false, m.now()
	if err := m.cfg.Store.Write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{{ID: id, Archived: &archived, UpdatedAt: &now}}}); err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return api.ThreadUnarchiveResult{}, nil, apperr.New(apperr.NotFound, "no rollout found for thread id %s", p.ThreadID)
		}
		return api.ThreadUnarchiveResult{}, nil, err
	}
	rec, err := m.cfg.Store.GetThread(ctx, id)
	if err != nil {
		return api.ThreadUnarchiveResult{}, nil, err
	}
	th, err := m.storedThread(rec)
	if err != nil {
		return api.ThreadUnarchiveResult{}, nil, err
	}
	return api.ThreadUnarchiveResult{Thread: th}, func() {
		m.cfg.Notifier.Broadcast("thread/unarchived", api.ThreadUnarchivedNotification{ThreadID: id})
	}, nil
}

// storedThread renders a thread from its record, with its live status if
// it is loaded.
func (m *Manager) storedThread(rec store.Thread) (api.Thread, error) {
	if t := m.loaded(rec.ID); t != nil {
		return t.apiThread(), nil
	}
	var meta threadMeta
	if len(rec.Meta) > 0 {
		if err := json.Unmarshal(rec.Meta, &meta); err != nil {
			return api.Thread{}, apperr.Wrap(apperr.Internal, err, "corrupt thread metadata")
		}
	}
	return threadToAPI(rec, meta, api.ThreadStatus{Type: api.ThreadNotLoaded}, false), nil
}

// ListThreads pages stored threads.
func (m *Manager) ListThreads(ctx context.Context, p api.ThreadListParams) (api.ThreadListResult, error) {
	q := store.ListThreadsQuery{Desc: true, SortKey: store.SortCreatedAt, Cwds: p.Cwd, ModelProviders: p.ModelProviders}
	if p.SortKey != nil {
		switch *p.SortKey {
		case api.ThreadSortCreatedAt:
		case api.ThreadSortUpdatedAt:
			q.SortKey = store.SortUpdatedAt
		case api.ThreadSortRecencyAt, api.ThreadSortSectionPosition:
			// appserver has no thread sections, so every thread is in the
			// one unsectioned group, whose order is recency.
			q.SortKey = store.SortRecencyAt
		default:
			return api.ThreadListResult{}, apperr.New(apperr.Invalid, "unsupported sortKey `%s`", *p.SortKey)
		}
	}
	if p.SortDirection != nil && *p.SortDirection == api.SortAsc {
		q.Desc = false
	}
	if p.Archived != nil {
		q.Archived = *p.Archived
	}
	if p.Limit != nil {
		q.Limit = int(*p.Limit)
	}
	if p.Cursor != nil {
		q.Cursor = *p.Cursor
	}
	if p.SearchTerm != nil {
		q.SearchTerm = *p.SearchTerm
	}
	if len(p.Originators) > 0 {
		return api.ThreadListResult{}, apperr.New(apperr.Invalid, "filtering by originators is not supported")
	}
	page, err := m.cfg.Store.ListThreads(ctx, q)
	if err != nil {
		return api.ThreadListResult{}, err
	}
	excluded := map[string]bool{}
	for _, id := range p.ExcludedThreadIDs {
		excluded[strings.ToLower(id)] = true
	}
	res := api.ThreadListResult{Data: api.List[api.Thread]{}, ReadStates: map[string]api.ThreadReadState{}}
	for _, rec := range page.Threads {
		if excluded[rec.ID] {
			continue
		}
		th, err := m.storedThread(rec)
		if err != nil {
			return api.ThreadListResult{}, err
		}
		if th.ParentThreadID != nil && !listsSubAgents(p.SourceKinds) {
			// Children are listed under their parent, and on their own
			// only when asked for.
			continue
		}
		res.Data = append(res.Data, th)
	}
	res.NextCursor = optString(page.NextCursor)
	res.BackwardsCursor = optString(page.BackwardsCursor)
	return res, nil
}

// listsSubAgents reports whether a thread/list sourceKinds filter asks for
// spawned children.
func listsSubAgents(kinds []api.ThreadSourceKind) bool {
	for _, k := range kinds {
		if k == api.SourceKindSubAgent || k == api.SourceKindSubAgentThreadSpawn {
			return true
		}
	}
	return false
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ReadThread returns a thread, loaded or stored, optionally with turns.
func (m *Manager) ReadThread(ctx context.Context, p api.ThreadReadParams) (api.ThreadReadResult, error) {
	th, x, err := m.readTarget(ctx, p)
	if err != nil {
		return api.ThreadReadResult{}, err
	}
	if p.IncludeTurns != nil && *p.IncludeTurns {
		turns, err := x.apiTurns(ctx)
		if err != nil {
			return api.ThreadReadResult{}, err
		}
		th.Turns = turns
	}
	return api.ThreadReadResult{Thread: th}, nil
}

// readTarget returns the thread p reads, loaded or stored, without its
// turns, and where its transcript is read from.
func (m *Manager) readTarget(ctx context.Context, p api.ThreadReadParams) (api.Thread, transcript, error) {
	id, err := parseThreadID(p.ThreadID)
	if err != nil {
		return api.Thread{}, transcript{}, err
	}
	if t := m.loaded(id); t != nil {
		return t.apiThread(), t.transcript(), nil
	}
	rec, err := m.cfg.Store.GetThread(ctx, id)
	if apperr.Is(err, apperr.NotFound) {
		return api.Thread{}, transcript{}, apperr.New(apperr.NotFound, "thread not loaded: %s", p.ThreadID)
	}
	if err != nil {
		return api.Thread{}, transcript{}, err
	}
	th, err := m.storedThread(rec)
	if err != nil {
		return api.Thread{}, transcript{}, err
	}
	return th, transcript{store: m.cfg.Store, id: id}, nil
}

// knownThread returns the transcript of a loaded thread or of a stored one.
func (m *Manager) knownThread(ctx context.Context, rawID string) (transcript, error) {
	id, err := parseThreadID(rawID)
	if err != nil {
		return transcript{}, err
	}
	if t := m.loaded(id); t != nil {
		return t.transcript(), nil
	}
	if _, err := m.cfg.Store.GetThread(ctx, id); err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return transcript{}, apperr.New(apperr.NotFound, "thread not loaded: %s", rawID)
		}
		return transcript{}, err
	}
	return transcript{store: m.cfg.Store, id: id}, nil
}

// ListTurns pages a thread's turns (newest first by default).
func (m *Manager) ListTurns(ctx context.Context, p api.ThreadTurnsListParams) (api.TurnsPage, error) {
	x, err := m.knownThread(ctx, p.ThreadID)
	if err != nil {
		return api.TurnsPage{}, err
	}
	view := api.ItemsSummary
	if p.ItemsView != nil {
		view = *p.ItemsView
	}
	desc := p.SortDirection == nil || *p.SortDirection == api.SortDesc
	q := store.TurnsQuery{ThreadID: x.id, Desc: desc}
	if p.Limit != nil {
		q.Limit = int(*p.Limit)
	}
	if p.Cursor != nil {
		q.Cursor = *p.Cursor
	}
	page, err := x.store.ListTurns(ctx, q)
	if err != nil {
		return api.TurnsPage{}, err
	}
	turns := page.Turns
	if len(turns) == 0 && (p.Cursor == nil || *p.Cursor == "") {
		return api.TurnsPage{}, apperr.New(apperr.Invalid, "thread %s is not materialized yet; thread/turns/list is unavailable before first user message", x.id)
	}
	res := api.TurnsPage{Data: make(api.List[api.Turn], 0, len(turns)), NextCursor: optString(page.NextCursor), BackwardsCursor: optString(page.BackwardsCursor)}
	for _, tr := range turns {
		var items []store.Item
		if view != api.ItemsNotLoaded {
			if items, err = x.items(ctx, tr.ID); err != nil {
				return api.TurnsPage{}, err
			}
		}
		at, err := turnToAPI(tr, items, view)
		if err != nil {
			return api.TurnsPage{}, apperr.Wrap(apperr.Internal, err, "corrupt item")
		}
		res.Data = append(res.Data, at)
	}
	return res, nil
}

// ListItems pages a thread's persisted items (oldest first by default).
func (m *Manager) ListItems(ctx context.Context, p api.ThreadItemsListParams) (api.ThreadItemsListResult, error) {
	x, err := m.knownThread(ctx, p.ThreadID)
	if err != nil {
		return api.ThreadItemsListResult{}, err
	}
	q := store.ItemsQuery{ThreadID: x.id, Desc: p.SortDirection != nil && *p.SortDirection == api.SortDesc}
	if p.TurnID != nil {
		q.TurnID = *p.TurnID
	}
	if p.Limit != nil {
		q.Limit = int(*p.Limit)
	}
	if c := p.Cursor; c != nil {
		switch {
		case c.AnchorItemID != "":
			if q.TurnID == "" {
				return api.ThreadItemsListResult{}, apperr.New(apperr.Invalid, "an item cursor requires turnId")
			}
			if q.Desc {
				return api.ThreadItemsListResult{}, apperr.New(apperr.Invalid, "an item cursor is only supported with sortDirection asc")
			}
			anchor, err := x.anchorItem(ctx, c.AnchorItemID)
			if err != nil {
				return api.ThreadItemsListResult{}, err
			}
			q.AfterSeq = anchor
		default:
			q.Cursor = c.Opaque
		}
	}
	page, err := x.store.ListItems(ctx, q)
	if err != nil {
		return api.ThreadItemsListResult{}, err
	}
	items := page.Items
	res := api.ThreadItemsListResult{Data: make(api.List[api.ThreadItemEntry], 0, len(items)), NextCursor: optString(page.NextCursor), BackwardsCursor: optString(page.BackwardsCursor)}
	for _, it := range items {
		var ti api.ThreadItem
		if err := json.Unmarshal(it.Payload, &ti); err != nil {
			return api.ThreadItemsListResult{}, apperr.Wrap(apperr.Internal, err, "corrupt item")
		}
		res.Data = append(res.Data, api.ThreadItemEntry{TurnID: it.TurnID, Item: ti, StartedAtMs: ti.StartedAtMs, CompletedAtMs: ti.CompletedAtMs})
	}
	return res, nil
}

func (x transcript) anchorItem(ctx context.Context, itemID string) (int64, error) {
	it, err := x.store.GetItem(ctx, x.id, itemID)
	if apperr.Is(err, apperr.NotFound) {
		return 0, apperr.New(apperr.Invalid, "invalid cursor: item %s not found", itemID)
	}
	return it.Seq, err
}

// SetName names a thread and tells every connection.
func (m *Manager) SetName(ctx context.Context, p api.ThreadNameSetParams) (After, error) {
	id, err := parseThreadID(p.ThreadID)
	if err != nil {
		return nil, err
	}
	name := p.Name
	now := m.now()
	t := m.loaded(id)
	st := m.cfg.Store
	if t != nil {
		st = t.store
	}
	err = st.Write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{{ID: id, Name: &name, UpdatedAt: &now}}})
	if apperr.Is(err, apperr.NotFound) {
		return nil, apperr.New(apperr.NotFound, "no rollout found for thread id %s", p.ThreadID)
	}
	if err != nil {
		return nil, err
	}
	if t != nil {
		t.mu.Lock()
		t.rec.Name, t.rec.UpdatedAt = &name, now
		t.mu.Unlock()
	}
	return func() {
		m.cfg.Notifier.Broadcast("thread/name/updated", api.ThreadNameUpdatedNotification{ThreadID: id, ThreadName: &name})
	}, nil
}
