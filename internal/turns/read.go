package turns

import (
	"context"
	"slices"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/transcript"
)

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
	kids, err := m.sub.Descendants(ctx, id)
	if err != nil && !apperr.Is(err, apperr.NotFound) {
		return nil, err
	}
	ids := append([]string{id}, kids...)
	owner := m.ownerOf(ctx, id) // the children's too
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
			m.broadcastThread(tid, owner, "thread/archived", api.ThreadArchivedNotification{ThreadID: tid})
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
		at.Cancel(errInterrupted)
		<-at.Done
		// The caller writes the thread next (archive, delete): without
		// the turn's fence, once the lease is given back.
		<-at.released
	}
	m.mu.Lock()
	if m.threads[t.id] == t {
		delete(m.threads, t.id)
	}
	m.mu.Unlock()
	m.cfg.Sink.Forget(t.id)
	t.stopUnloadTimer()
	if f := m.cfg.ThreadUnloaded; f != nil {
		f(t.id)
	}
	m.broadcastThread(t.id, t.originator(), "thread/status/changed", api.ThreadStatusChangedNotification{ThreadID: t.id, Status: api.ThreadStatus{Type: api.ThreadNotLoaded}})
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
	owner := m.ownerOf(ctx, id)
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
	ownerName := ""
	if owner != nil {
		ownerName = principal.NameOf(*owner)
	}
	m.cfg.Audit.Record(ctx, audit.Entry{Kind: audit.KindThreadDelete, ThreadID: id, Detail: threadDeleteDetail{Owner: ownerName}})
	return func() { m.broadcastThread(id, owner, "thread/deleted", api.ThreadDeletedNotification{ThreadID: id}) }, nil
}

// threadDeleteDetail is the detail of a thread_delete entry.
type threadDeleteDetail struct {
	// Owner is the principal whose thread it was, "" for the operator's.
	Owner string `json:"owner"`
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
		m.broadcastThread(id, th.Originator, "thread/unarchived", api.ThreadUnarchivedNotification{ThreadID: id})
	}, nil
}

// storedThread renders a thread from its record, with its live status if
// it is loaded.
func (m *Manager) storedThread(rec store.Thread) (api.Thread, error) {
	if t := m.loaded(rec.ID); t != nil {
		return t.apiThread(), nil
	}
	meta, err := transcript.DecodeThreadMeta(rec.Meta)
	if err != nil {
		return api.Thread{}, err
	}
	return transcript.ThreadToAPI(rec, meta, api.ThreadStatus{Type: api.ThreadNotLoaded}, false), nil
}

// ListThreads pages stored threads as thread/list does: for a principal,
// only those it sees; each with its read state. As the reference's, it
// lists a thread once a user message has started it (the thread has a
// preview), so that the threads a client starts and never uses (the TUI
// starts one at every launch) stay out of its resume picker; a thread
// with a name or a `!cmd` only is still left out.
func (m *Manager) ListThreads(ctx context.Context, who principal.Principal, p api.ThreadListParams) (api.ThreadListResult, error) {
	return m.list(ctx, who, p, true)
}

// ListAllThreads is ListThreads with the threads no user message has
// started yet too: the HTTP API's list, whose clients create threads
// explicitly and look for them there.
func (m *Manager) ListAllThreads(ctx context.Context, who principal.Principal, p api.ThreadListParams) (api.ThreadListResult, error) {
	return m.list(ctx, who, p, false)
}

// list is ListThreads, with unstarted threads left out when started is set.
func (m *Manager) list(ctx context.Context, who principal.Principal, p api.ThreadListParams, started bool) (api.ThreadListResult, error) {
	res, err := m.listVisible(ctx, who, p, started)
	if err != nil {
		return api.ThreadListResult{}, err
	}
	for _, th := range res.Data {
		state, err := m.readStateOrNil(ctx, th.ID)
		if err != nil {
			return api.ThreadListResult{}, err
		}
		if state != nil {
			res.ReadStates[th.ID] = *state
		}
	}
	return res, nil
}

// listVisible is ListThreads without the read states.
func (m *Manager) listVisible(ctx context.Context, who principal.Principal, p api.ThreadListParams, started bool) (api.ThreadListResult, error) {
	if who.IsOperator() {
		return m.listThreads(ctx, p, started)
	}
	// Other principals' threads are skipped, so a page may hold fewer
	// threads than asked for: the store is read again for the rest, up to
	// maxListPasses pages; the client follows nextCursor until it is null.
	limit := store.DefaultLimit
	if p.Limit != nil && *p.Limit > 0 {
		limit = min(int(*p.Limit), store.MaxLimit)
	}
	out := api.ThreadListResult{Data: api.List[api.Thread]{}, ReadStates: map[string]api.ThreadReadState{}}
	for pass := 0; ; pass++ {
		n := uint32(limit - len(out.Data))
		p.Limit = &n
		res, err := m.listThreads(ctx, p, started)
		if err != nil {
			return api.ThreadListResult{}, err
		}
		for _, th := range res.Data {
			if who.Sees(th) {
				out.Data = append(out.Data, th)
			}
		}
		if pass == 0 {
			out.BackwardsCursor = res.BackwardsCursor
		}
		// A page asks for at most what is still missing, so every thread
		// it returns is used and its cursor is exact.
		out.NextCursor = res.NextCursor
		if len(out.Data) == limit || res.NextCursor == nil || pass+1 >= maxListPasses {
			return out, nil
		}
		p.Cursor = res.NextCursor
	}
}

// maxListPasses bounds the store pages one listing of a principal reads
// while skipping other principals' threads.
const maxListPasses = 10

// listThreads is ListThreads for the operator: one page of the store.
func (m *Manager) listThreads(ctx context.Context, p api.ThreadListParams, started bool) (api.ThreadListResult, error) {
	q := store.ListThreadsQuery{Desc: true, SortKey: store.SortCreatedAt, Cwds: p.Cwd, ModelProviders: p.ModelProviders, HasPreview: started}
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
	res := api.ThreadListResult{Data: api.List[api.Thread]{}, ReadStates: map[string]api.ThreadReadState{}}
	lineage := p.ParentThreadID != nil || p.AncestorThreadID != nil
	if lineage || p.IncludedThreadIDs != nil {
		ids, err := m.lineageIDs(ctx, p.ParentThreadID, p.AncestorThreadID)
		if err != nil {
			return api.ThreadListResult{}, err
		}
		if p.IncludedThreadIDs != nil {
			if ids, err = includedIDs(*p.IncludedThreadIDs, ids, lineage); err != nil {
				return api.ThreadListResult{}, err
			}
		}
		if len(ids) == 0 {
			return res, nil
		}
		q.IDs = ids
	}
	page, err := m.cfg.Store.ListThreads(ctx, q)
	if err != nil {
		return api.ThreadListResult{}, err
	}
	excluded := map[string]bool{}
	for _, id := range p.ExcludedThreadIDs {
		excluded[strings.ToLower(id)] = true
	}
	for _, rec := range page.Threads {
		if excluded[rec.ID] {
			continue
		}
		th, err := m.storedThread(rec)
		if err != nil {
			return api.ThreadListResult{}, err
		}
		if !kindListed(th, p.SourceKinds, lineage) {
			continue
		}
		// The reference's list leaves it unset, loaded or not.
		th.CanAcceptDirectInput = nil
		res.Data = append(res.Data, th)
	}
	res.NextCursor = optString(page.NextCursor)
	res.BackwardsCursor = optString(page.BackwardsCursor)
	return res, nil
}

// kindListed reports whether thread/list's sourceKinds keep th: a spawned
// child only when they name sub-agents, or when the list asks for a
// thread's children (lineage) and names no kinds; another thread when
// they are empty or name its source.
func kindListed(th api.Thread, kinds []api.ThreadSourceKind, lineage bool) bool {
	if th.ParentThreadID != nil {
		return slices.Contains(kinds, api.SourceKindSubAgent) || slices.Contains(kinds, api.SourceKindSubAgentThreadSpawn) ||
			(lineage && len(kinds) == 0)
	}
	return len(kinds) == 0 || slices.Contains(kinds, api.ThreadSourceKind(th.Source.Name))
}

// maxIncludedThreads bounds thread/list's includedThreadIds, as the
// reference's does.
const maxIncludedThreads = 100

// includedIDs are thread/list's includedThreadIds, canonical, kept to
// those of scope too when lineage filters it.
func includedIDs(included, scope []string, lineage bool) ([]string, error) {
	if len(included) > maxIncludedThreads {
		return nil, apperr.New(apperr.Invalid, "includedThreadIds must name at most %d threads, got %d", maxIncludedThreads, len(included))
	}
	out := make([]string, 0, len(included))
	for _, raw := range included {
		id, err := parseThreadID(raw)
		if err != nil {
			return nil, err
		}
		if !lineage || slices.Contains(scope, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// lineageIDs are the threads thread/list's parentThreadId (the children
// of that thread) and ancestorThreadId (its descendants) leave in, both
// when both are given; none for a thread that does not exist.
func (m *Manager) lineageIDs(ctx context.Context, parent, ancestor *string) ([]string, error) {
	var keep []string
	for i, f := range []struct {
		id  *string
		all bool
	}{{parent, false}, {ancestor, true}} {
		if f.id == nil {
			continue
		}
		id, err := parseThreadID(*f.id)
		if err != nil {
			return nil, err
		}
		var ids []string
		if f.all {
			ids, err = m.sub.Descendants(ctx, id)
		} else {
			var edges []transcript.SpawnEdge
			edges, err = m.spawnEdges(ctx, id)
			for _, e := range edges {
				ids = append(ids, e.ID)
			}
		}
		if apperr.Is(err, apperr.NotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if i > 0 && parent != nil {
			ids = slices.DeleteFunc(ids, func(d string) bool { return !slices.Contains(keep, d) })
		}
		keep = ids
	}
	return keep, nil
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
		turns, err := x.APITurns(ctx)
		if err != nil {
			return api.ThreadReadResult{}, err
		}
		th.Turns = turns
	}
	state, err := m.readStateOrNil(ctx, th.ID)
	if err != nil {
		return api.ThreadReadResult{}, err
	}
	return api.ThreadReadResult{Thread: th, ReadState: state}, nil
}

// readTarget returns the thread p reads, loaded or stored, without its
// turns, and where its transcript is read from.
func (m *Manager) readTarget(ctx context.Context, p api.ThreadReadParams) (api.Thread, transcript.Reader, error) {
	id, err := parseThreadID(p.ThreadID)
	if err != nil {
		return api.Thread{}, transcript.Reader{}, err
	}
	if t := m.loaded(id); t != nil {
		return t.apiThread(), t.transcript(), nil
	}
	rec, err := m.cfg.Store.GetThread(ctx, id)
	if apperr.Is(err, apperr.NotFound) {
		return api.Thread{}, transcript.Reader{}, apperr.New(apperr.NotFound, "thread not loaded: %s", p.ThreadID)
	}
	if err != nil {
		return api.Thread{}, transcript.Reader{}, err
	}
	th, err := m.storedThread(rec)
	if err != nil {
		return api.Thread{}, transcript.Reader{}, err
	}
	return th, transcript.Reader{Store: m.cfg.Store, ThreadID: id}, nil
}

// knownThread returns the transcript of a loaded thread or of a stored one.
func (m *Manager) knownThread(ctx context.Context, rawID string) (transcript.Reader, error) {
	id, err := parseThreadID(rawID)
	if err != nil {
		return transcript.Reader{}, err
	}
	if t := m.loaded(id); t != nil {
		return t.transcript(), nil
	}
	if _, err := m.cfg.Store.GetThread(ctx, id); err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return transcript.Reader{}, apperr.New(apperr.NotFound, "thread not loaded: %s", rawID)
		}
		return transcript.Reader{}, err
	}
	return transcript.Reader{Store: m.cfg.Store, ThreadID: id}, nil
}

// SetName names a thread and tells every connection.
func (m *Manager) SetName(ctx context.Context, p api.ThreadNameSetParams) (After, error) {
	id, err := parseThreadID(p.ThreadID)
	if err != nil {
		return nil, err
	}
	name := p.Name
	t := m.loaded(id)
	st := m.cfg.Store
	if t != nil {
		st = t.store
	}
	// A name is no activity: updatedAt (the order of thread/list) stays,
	// as the reference keeps it.
	err = st.Write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{{ID: id, Name: &name}}})
	if apperr.Is(err, apperr.NotFound) {
		return nil, apperr.New(apperr.NotFound, "no rollout found for thread id %s", p.ThreadID)
	}
	if err != nil {
		return nil, err
	}
	if t != nil {
		t.mu.Lock()
		t.rec.Name = &name
		t.mu.Unlock()
	}
	owner := m.ownerOf(ctx, id)
	return func() {
		m.broadcastThread(id, owner, "thread/name/updated", api.ThreadNameUpdatedNotification{ThreadID: id, ThreadName: &name})
	}, nil
}

// TurnStatus returns the status of a turn of a thread: as stored, or, for
// a turn that ended here while the store was down, the end its clients
// were told. An unknown turn is NotFound.
func (m *Manager) TurnStatus(ctx context.Context, threadID, turnID string) (api.TurnStatus, error) {
	tr, err := m.storedTurn(ctx, threadID, turnID)
	return api.TurnStatus(tr.Status), err
}

// TurnRecord returns a turn of a thread with its items (TurnStatus says
// which end it reports).
func (m *Manager) TurnRecord(ctx context.Context, threadID, turnID string) (transcript.TurnRecord, error) {
	tr, err := m.storedTurn(ctx, threadID, turnID)
	if err != nil {
		return transcript.TurnRecord{}, err
	}
	return m.transcriptOf(threadID).TurnRecord(ctx, tr)
}

// ItemRecords returns a page of a thread's stored items and the cursor of
// the next page ("" after the last). A cursor that is not one is Invalid.
func (m *Manager) ItemRecords(ctx context.Context, q transcript.ItemsQuery) ([]transcript.ItemRecord, string, error) {
	return m.transcriptOf(q.ThreadID).ItemRecords(ctx, q)
}

// ListTurns pages a thread's turns (newest first by default).
func (m *Manager) ListTurns(ctx context.Context, p api.ThreadTurnsListParams) (api.TurnsPage, error) {
	x, err := m.knownThread(ctx, p.ThreadID)
	if err != nil {
		return api.TurnsPage{}, err
	}
	return x.ListTurns(ctx, p)
}

// ListItems pages a thread's persisted items (oldest first by default).
func (m *Manager) ListItems(ctx context.Context, p api.ThreadItemsListParams) (api.ThreadItemsListResult, error) {
	x, err := m.knownThread(ctx, p.ThreadID)
	if err != nil {
		return api.ThreadItemsListResult{}, err
	}
	return x.ListItems(ctx, p)
}

// StreamThread returns what ReadThread returns (with includeTurns), as a
// ThreadStream whose items are read while it is written; ctx must outlive
// the call (the connection's).
func (m *Manager) StreamThread(ctx context.Context, p api.ThreadReadParams) (*transcript.ThreadStream, error) {
	th, x, err := m.readTarget(ctx, p)
	if err != nil {
		return nil, err
	}
	state, err := m.readStateOrNil(ctx, th.ID)
	if err != nil {
		return nil, err
	}
	res := api.ThreadReadResult{Thread: th, ReadState: state}
	return x.Stream(ctx, &res, &res.Thread, true)
}

// transcript returns where the thread's turns and items are read from.
func (t *thread) transcript() transcript.Reader {
	return transcript.Reader{Store: t.store, ThreadID: t.id}
}

// Running reports whether a turn of the thread runs on this daemon.
func (m *Manager) Running(threadID string) bool {
	t := m.loaded(threadID)
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.active != nil && !t.active.ending
}

// storedTurn reads a turn from its thread's transcript, with the end its
// clients were told when the store missed it.
func (m *Manager) storedTurn(ctx context.Context, threadID, turnID string) (store.Turn, error) {
	tr, err := m.transcriptOf(threadID).Store.GetTurn(ctx, threadID, turnID)
	if err != nil {
		return store.Turn{}, err
	}
	if tr.Status == store.TurnInProgress {
		if p, ok := m.ends.told(threadID, turnID); ok {
			tr.Status, tr.CompletedAt, tr.Error = p.Status, p.CompletedAt, p.Error
		}
	}
	return tr, nil
}

// transcriptOf is where a thread's transcript is read: a loaded thread's
// own store (memory for an ephemeral one), else the durable store.
func (m *Manager) transcriptOf(threadID string) transcript.Reader {
	if t := m.loaded(threadID); t != nil {
		return t.transcript()
	}
	return transcript.Reader{Store: m.cfg.Store, ThreadID: threadID}
}
