package memory

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

// Config configures a Store; zero fields take defaults.
type Config struct {
	// Now supplies the default timestamps of writes (default time.Now).
	Now func() time.Time
}

// Store is an in-memory store.Store. It is safe for concurrent use; every
// Write is applied atomically under one lock.
type Store struct {
	now func() time.Time

	mu      sync.RWMutex // guards the maps and closed
	threads map[string]*threadData
	events  map[string][]store.Event    // per thread, in Seq order
	keys    map[[2]string]*idemKey      // by scope and key
	creds   map[string]store.Credential // by digest
	// consumers are the event consumers by name.
	consumers map[string]*consumer
	// webhooks are the subscriptions by id; deliveries the delivery logs
	// by webhook id, oldest first, and deliverySeq the last Seq given.
	webhooks    map[string]store.Webhook
	deliveries  map[string][]store.WebhookDelivery
	deliverySeq int64
	// audit is the audit log in Seq order; auditSeq the last Seq given.
	audit    []store.AuditEntry
	auditSeq int64
	// queued are the queued submissions by thread, in order.
	queued map[string][]store.QueuedSubmission
	// budgets are what principals spent, by principal and period start.
	budgets map[budgetKey]store.BudgetSpend
	// reserved is each thread's greatest reserved event number.
	reserved map[string]int64
	closed   bool
}

// consumer is one event consumer: its lease and its cursor.
type consumer struct {
	holder    string
	token     int64
	expires   time.Time
	created   time.Time
	positions map[string]int64
}

// idemKey is one claimed idempotency key.
type idemKey struct {
	hash    []byte
	turnID  string
	expires time.Time
}

// threadData is one thread with its transcript; turns[i].Seq == i+1 and
// items[i].Seq == i+1.
type threadData struct {
	rec     store.Thread
	turns   []store.Turn
	turnIdx map[string]int // turn id → index in turns
	items   []store.Item
	itemIdx map[string]int // item id → index in items
}

var _ store.Store = (*Store)(nil)

// New returns an empty Store.
func New(cfg Config) *Store {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{now: cfg.Now, threads: map[string]*threadData{}, events: map[string][]store.Event{},
		keys: map[[2]string]*idemKey{}, creds: map[string]store.Credential{}, consumers: map[string]*consumer{},
		webhooks: map[string]store.Webhook{}, deliveries: map[string][]store.WebhookDelivery{},
		queued:  map[string][]store.QueuedSubmission{},
		budgets: map[budgetKey]store.BudgetSpend{}, reserved: map[string]int64{}}
}

// Migrate does nothing: memory has no schema. It is there so that the
// Store can stand wherever a migrating backend does.
func (s *Store) Migrate(context.Context) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.usableLocked()
}

// Forget drops a thread and its transcript; an unknown id is ignored.
func (s *Store) Forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.threads, backend.CanonicalID(id))
}

// Len returns how many threads the store holds.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.threads)
}

func (s *Store) usableLocked() error {
	if s.closed {
		return apperr.New(apperr.Unavailable, "store is closed")
	}
	return nil
}

// Write applies b atomically: every check runs before anything changes.
func (s *Store) Write(_ context.Context, b *store.Batch) error {
	if b.Empty() {
		return nil
	}
	if len(b.Fences) > 0 {
		return store.ErrNoLeases
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	p, err := backend.NewPlan(b, s.now())
	if err != nil {
		return err
	}
	if err := s.checkLocked(p); err != nil {
		return err
	}
	s.applyLocked(p)
	p.FillBack()
	return nil
}

// DeleteThread removes a thread with its transcript.
func (s *Store) DeleteThread(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	if s.threadLocked(id) == nil {
		return backend.ThreadNotFound(id)
	}
	delete(s.threads, backend.CanonicalID(id))
	delete(s.events, backend.CanonicalID(id))
	delete(s.reserved, backend.CanonicalID(id))
	delete(s.queued, backend.CanonicalID(id))
	return nil
}

// eventIndex returns where seq is or belongs in evs.
func eventIndex(evs []store.Event, seq int64) (int, bool) {
	return slices.BinarySearchFunc(evs, seq, func(ev store.Event, seq int64) int { return cmp.Compare(ev.Seq, seq) })
}

// ListEvents returns up to limit events of a thread after afterSeq.
func (s *Store) ListEvents(_ context.Context, threadID string, afterSeq int64, limit int) ([]store.Event, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usableLocked(); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > store.MaxEventsLimit {
		limit = store.MaxEventsLimit
	}
	evs := s.events[backend.CanonicalID(threadID)]
	i, found := eventIndex(evs, afterSeq)
	if found {
		i++
	}
	evs = evs[i:min(len(evs), i+limit)]
	out := make([]store.Event, len(evs))
	for k, ev := range evs {
		ev.Data = slices.Clone(ev.Data)
		out[k] = ev
	}
	return out, nil
}

// ReserveEventSeqs reserves the next n numbers of a thread's log, past
// the last reservation and the greatest stored number.
func (s *Store) ReserveEventSeqs(_ context.Context, threadID string, n int64) (int64, error) {
	if err := backend.ValidReservation(threadID, n); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return 0, err
	}
	id := backend.CanonicalID(threadID)
	base := s.reserved[id]
	if evs := s.events[id]; len(evs) > 0 {
		base = max(base, evs[len(evs)-1].Seq)
	}
	s.reserved[id] = base + n
	return base + 1, nil
}

// LastEventSeq returns the greatest Seq of a thread's log, 0 if none.
func (s *Store) LastEventSeq(_ context.Context, threadID string) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usableLocked(); err != nil {
		return 0, err
	}
	evs := s.events[backend.CanonicalID(threadID)]
	if len(evs) == 0 {
		return 0, nil
	}
	return evs[len(evs)-1].Seq, nil
}

// PruneThreadEvents deletes a thread's oldest events beyond maxBytes.
func (s *Store) PruneThreadEvents(_ context.Context, threadID string, maxBytes int64, limit int) (deleted, remaining int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return 0, 0, err
	}
	id := backend.CanonicalID(threadID)
	evs := s.events[id]
	for _, ev := range evs {
		remaining += int64(len(ev.Data))
	}
	n := 0
	for n < len(evs) && n < limit && remaining > maxBytes {
		remaining -= int64(len(evs[n].Data))
		n++
	}
	if n == len(evs) {
		delete(s.events, id)
	} else if n > 0 {
		s.events[id] = slices.Delete(evs, 0, n)
	}
	return int64(n), remaining, nil
}

// Reclaim does nothing: deleted events are garbage.
func (s *Store) Reclaim(context.Context) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.usableLocked()
}

// PruneEvents deletes up to limit events created before `before`, oldest
// first.
func (s *Store) PruneEvents(_ context.Context, before time.Time, limit int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return 0, err
	}
	var old []store.Event
	for _, evs := range s.events {
		for _, ev := range evs {
			if ev.CreatedAt.Before(before) {
				old = append(old, ev)
			}
		}
	}
	slices.SortFunc(old, func(a, b store.Event) int { return a.CreatedAt.Compare(b.CreatedAt) })
	old = old[:min(len(old), limit)]
	for _, ev := range old {
		evs := s.events[ev.ThreadID]
		if i, ok := eventIndex(evs, ev.Seq); ok {
			evs = slices.Delete(evs, i, i+1)
		}
		if len(evs) == 0 {
			delete(s.events, ev.ThreadID)
		} else {
			s.events[ev.ThreadID] = evs
		}
	}
	return int64(len(old)), nil
}

// checkLocked finds the error the plan would meet, in the order the SQL
// backends meet theirs: thread creates, thread updates, turn creates, turn
// updates, item appends.
func (s *Store) checkLocked(p *backend.Plan) error {
	created := map[string]bool{}
	for _, t := range p.CreateThreads {
		if s.threads[t.ID] != nil || created[t.ID] {
			return apperr.New(apperr.Conflict, "thread %s already exists", t.ID)
		}
		created[t.ID] = true
	}
	exists := func(id string) bool { return s.threads[id] != nil || created[id] }
	taken := map[store.QueueTake]bool{}
	for _, q := range p.TakeQueued {
		if taken[q] || s.queuedIndexLocked(q.ThreadID, q.ID) < 0 {
			return backend.NotQueued(q)
		}
		taken[q] = true
	}
	for _, u := range p.UpdateThreads {
		if !exists(u.ID) {
			return backend.ThreadNotFound(u.ID)
		}
	}
	// dropped holds, per thread, the index of the first turn a drop
	// removes.
	dropped := map[string]int{}
	for _, d := range p.DropTurns {
		td := s.threads[d.ThreadID]
		if td == nil {
			if created[d.ThreadID] {
				return backend.TurnNotFound(d.ThreadID, d.TurnID)
			}
			return backend.ThreadNotFound(d.ThreadID)
		}
		i, ok := td.turnIdx[d.TurnID]
		if prev, seen := dropped[d.ThreadID]; !ok || seen && i >= prev {
			return backend.TurnNotFound(d.ThreadID, d.TurnID)
		}
		dropped[d.ThreadID] = i
	}
	newTurns := map[[2]string]bool{}
	turnExists := func(threadID, turnID string) bool {
		if newTurns[[2]string{threadID, turnID}] {
			return true
		}
		if td := s.threads[threadID]; td != nil {
			i, ok := td.turnIdx[turnID]
			if from, seen := dropped[threadID]; seen && i >= from {
				return false
			}
			return ok
		}
		return false
	}
	for _, t := range p.CreateTurns {
		if !exists(t.ThreadID) {
			return backend.ThreadNotFound(t.ThreadID)
		}
		if turnExists(t.ThreadID, t.ID) {
			return apperr.New(apperr.Conflict, "turn %s already exists in thread %s", t.ID, t.ThreadID)
		}
		newTurns[[2]string{t.ThreadID, t.ID}] = true
	}
	for _, u := range p.UpdateTurns {
		if !turnExists(u.ThreadID, u.ID) {
			return backend.TurnNotFound(u.ThreadID, u.ID)
		}
	}
	newItems := map[[2]string]bool{}
	for _, it := range p.AppendItems {
		if !exists(it.ThreadID) {
			return backend.ThreadNotFound(it.ThreadID)
		}
		if !turnExists(it.ThreadID, it.TurnID) {
			return backend.TurnNotFound(it.ThreadID, it.TurnID)
		}
		key := [2]string{it.ThreadID, it.ItemID}
		stored := false
		if td := s.threads[it.ThreadID]; td != nil {
			var i int
			i, stored = td.itemIdx[it.ItemID]
			if from, seen := dropped[it.ThreadID]; stored && seen {
				stored = td.turnIdx[td.items[i].TurnID] < from
			}
		}
		if stored || newItems[key] {
			return apperr.New(apperr.Conflict, "item %s already exists in thread %s", it.ItemID, it.ThreadID)
		}
		newItems[key] = true
	}
	type evKey struct {
		thread string
		seq    int64
	}
	newEvents := map[evKey]bool{}
	for _, ev := range p.AppendEvents {
		k := evKey{ev.ThreadID, ev.Seq}
		_, stored := eventIndex(s.events[ev.ThreadID], ev.Seq)
		if stored || newEvents[k] {
			return apperr.New(apperr.Conflict, "event %d of thread %s already stored", ev.Seq, ev.ThreadID)
		}
		newEvents[k] = true
	}
	return nil
}

// applyLocked writes a checked plan and assigns its Seqs.
func (s *Store) applyLocked(p *backend.Plan) {
	for _, q := range p.TakeQueued {
		s.takeQueuedLocked(q)
	}
	for _, t := range p.CreateThreads {
		s.threads[t.ID] = &threadData{rec: cloneThread(t), turnIdx: map[string]int{}, itemIdx: map[string]int{}}
	}
	for _, u := range p.UpdateThreads {
		patchThread(&s.threads[u.ID].rec, u)
	}
	for _, d := range p.DropTurns {
		s.threads[d.ThreadID].dropFrom(d.TurnID)
	}
	for i := range p.CreateTurns {
		t := &p.CreateTurns[i]
		td := s.threads[t.ThreadID]
		t.Seq = int64(len(td.turns) + 1)
		td.turnIdx[t.ID] = len(td.turns)
		td.turns = append(td.turns, cloneTurn(*t))
	}
	for _, u := range p.UpdateTurns {
		td := s.threads[u.ThreadID]
		patchTurn(&td.turns[td.turnIdx[u.ID]], u)
	}
	for i := range p.AppendItems {
		it := &p.AppendItems[i]
		td := s.threads[it.ThreadID]
		it.Seq = int64(len(td.items) + 1)
		td.itemIdx[it.ItemID] = len(td.items)
		c := *it
		c.Payload = cloneJSON(c.Payload)
		td.items = append(td.items, c)
	}
	for _, ev := range p.AppendEvents {
		evs := s.events[ev.ThreadID]
		i, _ := eventIndex(evs, ev.Seq)
		ev.Data = slices.Clone(ev.Data)
		s.events[ev.ThreadID] = slices.Insert(evs, i, ev)
	}
	for i := range p.AppendAudit {
		a := &p.AppendAudit[i]
		s.auditSeq++
		a.Seq = s.auditSeq
		c := *a
		c.Detail = cloneJSON(c.Detail)
		s.audit = append(s.audit, c)
	}
}

// ListAudit implements store.Store.ListAudit.
func (s *Store) ListAudit(_ context.Context, q store.AuditQuery) ([]store.AuditEntry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usableLocked(); err != nil {
		return nil, err
	}
	if err := q.Validate(); err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = store.DefaultLimit
	}
	limit = min(limit, store.MaxAuditLimit)
	thread := backend.CanonicalID(q.ThreadID)
	// Bounds at the stored precision, as the SQL stores compare them.
	since, until := backend.Time(q.Since), backend.Time(q.Until)
	var out []store.AuditEntry
	for _, a := range s.audit {
		switch {
		case a.Seq <= q.AfterSeq,
			q.Kind != "" && a.Kind != q.Kind,
			thread != "" && a.ThreadID != thread,
			q.Principal != nil && a.Principal != *q.Principal,
			!q.Since.IsZero() && a.At.Before(since),
			!q.Until.IsZero() && !a.At.Before(until):
			continue
		}
		a.Detail = cloneJSON(a.Detail)
		out = append(out, a)
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// PruneAudit implements store.Store.PruneAudit.
func (s *Store) PruneAudit(_ context.Context, before time.Time, limit int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return 0, err
	}
	var n int64
	before = backend.Time(before)
	s.audit = slices.DeleteFunc(s.audit, func(a store.AuditEntry) bool {
		if n < int64(limit) && a.At.Before(before) {
			n++
			return true
		}
		return false
	})
	return n, nil
}

// dropFrom removes the turn turnID, every later turn and their items.
// Items are appended to the thread's latest turn, so those of the dropped
// turns are the tail of items, and items[i].Seq == i+1 still holds.
func (td *threadData) dropFrom(turnID string) {
	from := td.turnIdx[turnID]
	for _, t := range td.turns[from:] {
		delete(td.turnIdx, t.ID)
	}
	td.turns = td.turns[:from:from]
	kept := td.items[:0:0]
	for _, it := range td.items {
		if _, ok := td.turnIdx[it.TurnID]; ok {
			kept = append(kept, it)
		}
	}
	td.items = kept
	td.itemIdx = make(map[string]int, len(kept))
	for i, it := range kept {
		td.itemIdx[it.ItemID] = i
	}
}

func patchThread(rec *store.Thread, u store.ThreadPatch) {
	if u.Name != nil {
		rec.Name = ptr(*u.Name)
	}
	if u.Preview != nil {
		rec.Preview = *u.Preview
	}
	if u.Archived != nil {
		rec.Archived = *u.Archived
	}
	if u.Model != nil {
		rec.Model = ptr(*u.Model)
	}
	if u.UpdatedAt != nil {
		rec.UpdatedAt = *u.UpdatedAt
	}
	if u.RecencyAt != nil {
		rec.RecencyAt = *u.RecencyAt
	}
	if u.Meta != nil {
		rec.Meta = cloneJSON(backend.NullableJSON(u.Meta))
	}
	if u.ReadState != nil {
		rec.ReadState = cloneJSON(backend.NullableJSON(u.ReadState))
	}
}

func patchTurn(t *store.Turn, u store.TurnPatch) {
	if u.Status != "" {
		t.Status = u.Status
	}
	if u.Error != nil {
		t.Error = cloneJSON(backend.NullableJSON(u.Error))
	}
	if u.StartedAt != nil {
		t.StartedAt = ptr(*u.StartedAt)
	}
	if u.CompletedAt != nil {
		t.CompletedAt = ptr(*u.CompletedAt)
	}
	if u.Meta != nil {
		t.Meta = cloneJSON(backend.NullableJSON(u.Meta))
	}
}

// The clones keep the store's records apart from the callers' memory: a
// caller may reuse what it wrote, and may change what it read.

func cloneThread(t store.Thread) store.Thread {
	t.Name, t.Model, t.ForkedFromID = clonePtr(t.Name), clonePtr(t.Model), clonePtr(t.ForkedFromID)
	t.Meta, t.ReadState = cloneJSON(t.Meta), cloneJSON(t.ReadState)
	return t
}

func cloneTurn(t store.Turn) store.Turn {
	t.StartedAt, t.CompletedAt = clonePtr(t.StartedAt), clonePtr(t.CompletedAt)
	t.Error, t.Meta = cloneJSON(t.Error), cloneJSON(t.Meta)
	return t
}

func cloneItem(it store.Item) store.Item {
	it.Payload = cloneJSON(it.Payload)
	return it
}

func cloneJSON(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	return append(json.RawMessage(nil), raw...)
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	return ptr(*p)
}

func ptr[T any](v T) *T { return &v }

// threadLocked returns the thread with id, or nil; an id that is no UUID
// names no thread.
func (s *Store) threadLocked(id string) *threadData {
	if !store.ValidThreadID(id) {
		return nil
	}
	return s.threads[backend.CanonicalID(id)]
}

// GetThread returns the thread with the given id.
func (s *Store) GetThread(_ context.Context, id string) (store.Thread, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usableLocked(); err != nil {
		return store.Thread{}, err
	}
	td := s.threadLocked(id)
	if td == nil {
		return store.Thread{}, backend.ThreadNotFound(id)
	}
	return cloneThread(td.rec), nil
}

// ListThreads returns a page of threads in keyset order on (sort key, id).
func (s *Store) ListThreads(_ context.Context, q store.ListThreadsQuery) (store.ThreadPage, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var page store.ThreadPage
	if err := s.usableLocked(); err != nil {
		return page, err
	}
	if err := q.Validate(); err != nil {
		return page, err
	}
	col, scope, err := backend.SortColumn(q.SortKey)
	if err != nil {
		return page, err
	}
	sortValue := func(t *store.Thread) int64 {
		switch col {
		case "updated_at":
			return t.UpdatedAt.UnixMicro()
		case "recency_at":
			return t.RecencyAt.UnixMicro()
		}
		return t.CreatedAt.UnixMicro()
	}
	order := func(a, b *store.Thread) int {
		c := cmp.Compare(sortValue(a), sortValue(b))
		if c == 0 {
			c = strings.Compare(a.ID, b.ID)
		}
		if q.Desc {
			c = -c
		}
		return c
	}
	var after *store.Thread
	if q.Cursor != "" {
		c, err := backend.DecodeCursor(q.Cursor, scope)
		if err != nil {
			return page, err
		}
		if !store.ValidThreadID(c.ID) {
			return page, apperr.New(apperr.Invalid, "invalid cursor: %s", q.Cursor)
		}
		// A stand-in with the cursor's sort value in every column.
		at := time.UnixMicro(c.Value)
		after = &store.Thread{ID: backend.CanonicalID(c.ID), CreatedAt: at, UpdatedAt: at, RecencyAt: at}
	}
	term := backend.Fold(q.SearchTerm)
	var rows []*store.Thread
	for _, td := range s.threads {
		t := &td.rec
		switch {
		case t.Archived != q.Archived,
			len(q.Cwds) > 0 && !slices.Contains(q.Cwds, t.Cwd),
			len(q.ModelProviders) > 0 && !slices.Contains(q.ModelProviders, t.ModelProvider),
			term != "" && !matches(td, term),
			q.HasPreview && t.Preview == "",
			len(q.IDs) > 0 && !slices.Contains(q.IDs, t.ID),
			after != nil && order(t, after) <= 0:
			continue
		}
		rows = append(rows, t)
	}
	slices.SortFunc(rows, order)
	limit := backend.Limit(q.Limit)
	rows, page.NextCursor, page.BackwardsCursor = backend.Page(rows, limit, func(t *store.Thread) backend.Cursor {
		return backend.Cursor{Scope: scope, Value: sortValue(t), ID: t.ID}
	})
	page.Threads = make([]store.Thread, len(rows))
	for i, t := range rows {
		page.Threads[i] = cloneThread(*t)
	}
	return page, nil
}

// matches reports whether the thread's name or preview contains the
// folded search term.
// matches reports whether the thread's name, preview, or the text of one
// of its user or agent messages contains term (folded), as the SQL
// stores' search does.
func matches(td *threadData, term string) bool {
	t := &td.rec
	if t.Name != nil && strings.Contains(backend.Fold(*t.Name), term) {
		return true
	}
	if strings.Contains(backend.Fold(t.Preview), term) {
		return true
	}
	for _, it := range td.items {
		for _, text := range store.MessageTexts(it) {
			if strings.Contains(backend.Fold(text), term) {
				return true
			}
		}
	}
	return false
}

// GetTurn returns one turn of a thread.
func (s *Store) GetTurn(_ context.Context, threadID, turnID string) (store.Turn, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usableLocked(); err != nil {
		return store.Turn{}, err
	}
	td := s.threadLocked(threadID)
	if td == nil {
		return store.Turn{}, backend.TurnNotFound(threadID, turnID)
	}
	i, ok := td.turnIdx[turnID]
	if !ok {
		return store.Turn{}, backend.TurnNotFound(threadID, turnID)
	}
	return cloneTurn(td.turns[i]), nil
}

// ListTurns returns a page of a thread's turns in Seq order.
func (s *Store) ListTurns(_ context.Context, q store.TurnsQuery) (store.TurnPage, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var page store.TurnPage
	if err := s.usableLocked(); err != nil {
		return page, err
	}
	td := s.threadLocked(q.ThreadID)
	if td == nil {
		return page, backend.ThreadNotFound(q.ThreadID)
	}
	scope := backend.TurnsScope(td.rec.ID)
	turns, next, back, err := seqPage(td.turns, q.Desc, q.Limit, q.Cursor, scope, 0,
		func(t store.Turn) bool { return true }, func(t store.Turn) int64 { return t.Seq })
	if err != nil {
		return page, err
	}
	page.NextCursor, page.BackwardsCursor = next, back
	for _, t := range turns {
		page.Turns = append(page.Turns, cloneTurn(t))
	}
	return page, nil
}

// GetItem returns one item of a thread by its protocol item id.
func (s *Store) GetItem(_ context.Context, threadID, itemID string) (store.Item, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usableLocked(); err != nil {
		return store.Item{}, err
	}
	if td := s.threadLocked(threadID); td != nil {
		if i, ok := td.itemIdx[itemID]; ok {
			return cloneItem(td.items[i]), nil
		}
	}
	return store.Item{}, apperr.New(apperr.NotFound, "item %s not found in thread %s", itemID, threadID)
}

// ListItems returns a page of a thread's items in Seq order.
func (s *Store) ListItems(_ context.Context, q store.ItemsQuery) (store.ItemPage, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var page store.ItemPage
	if err := s.usableLocked(); err != nil {
		return page, err
	}
	td := s.threadLocked(q.ThreadID)
	if td == nil {
		return page, backend.ThreadNotFound(q.ThreadID)
	}
	if q.TurnID != "" {
		if _, ok := td.turnIdx[q.TurnID]; !ok {
			return page, backend.TurnNotFound(td.rec.ID, q.TurnID)
		}
	}
	scope := backend.ItemsScope(td.rec.ID)
	items, next, back, err := seqPage(td.items, q.Desc, q.Limit, q.Cursor, scope, q.AfterSeq,
		func(it store.Item) bool { return q.TurnID == "" || it.TurnID == q.TurnID },
		func(it store.Item) int64 { return it.Seq })
	if err != nil {
		return page, err
	}
	page.NextCursor, page.BackwardsCursor = next, back
	for _, it := range items {
		page.Items = append(page.Items, cloneItem(it))
	}
	return page, nil
}

// seqPage pages rows held in Seq order (Seq i+1 at index i): those that
// keep accepts, with a Seq above afterSeq and beyond the cursor, in the
// asked direction.
func seqPage[T any](rows []T, desc bool, limit int, cursor, scope string, afterSeq int64,
	keep func(T) bool, seqOf func(T) int64,
) (page []T, next, back string, err error) {
	lo, hi := afterSeq, int64(len(rows))+1 // exclusive bounds on Seq
	if cursor != "" {
		c, err := backend.DecodeCursor(cursor, scope)
		if err != nil {
			return nil, "", "", err
		}
		v := c.Value
		if c.Incl { // the row itself starts the page
			v = c.Value + 1
			if !desc {
				v = c.Value - 1
			}
		}
		if desc {
			hi = min(hi, v)
		} else {
			lo = max(lo, v)
		}
	}
	limit = backend.Limit(limit)
	var out []T
	for k := range max(hi-lo-1, 0) {
		seq := lo + 1 + k
		if desc {
			seq = hi - 1 - k
		}
		if r := rows[seq-1]; keep(r) {
			if out = append(out, r); len(out) > limit {
				break
			}
		}
	}
	page, next, back = backend.Page(out, limit, func(r T) backend.Cursor {
		return backend.Cursor{Scope: scope, Value: seqOf(r)}
	})
	return page, next, back, nil
}

// ListInProgressTurns returns every turn still marked inProgress.
func (s *Store) ListInProgressTurns(context.Context) ([]store.Turn, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usableLocked(); err != nil {
		return nil, err
	}
	var out []store.Turn
	for _, td := range s.threads {
		for _, t := range td.turns {
			if t.Status == store.TurnInProgress {
				out = append(out, cloneTurn(t))
			}
		}
	}
	slices.SortFunc(out, func(a, b store.Turn) int {
		return cmp.Or(strings.Compare(a.ThreadID, b.ThreadID), cmp.Compare(a.Seq, b.Seq))
	})
	return out, nil
}

// Ping reports whether the store is open.
func (s *Store) Ping(context.Context) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.usableLocked()
}

// Close drops every thread; later calls fail with Unavailable. Close may be
// called again.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.threads = map[string]*threadData{}
	return nil
}

// ClaimIdempotencyKey claims a key; see store.Store.
func (s *Store) ClaimIdempotencyKey(_ context.Context, scope, key string, hash []byte, now, expires time.Time) (bool, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return false, "", err
	}
	k := [2]string{scope, key}
	if e := s.keys[k]; e != nil && e.expires.After(now) {
		if !bytes.Equal(e.hash, hash) {
			return false, "", apperr.New(apperr.Conflict, "idempotency key %q was used with another request", key)
		}
		return false, e.turnID, nil
	}
	s.keys[k] = &idemKey{hash: slices.Clone(hash), expires: expires}
	return true, "", nil
}

// CompleteIdempotencyKey records the turn a claimed key started.
func (s *Store) CompleteIdempotencyKey(_ context.Context, scope, key, turnID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	if e := s.keys[[2]string{scope, key}]; e != nil {
		e.turnID = turnID
	}
	return nil
}

// ReleaseIdempotencyKey forgets an unfinished claim.
func (s *Store) ReleaseIdempotencyKey(_ context.Context, scope, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	k := [2]string{scope, key}
	if e := s.keys[k]; e != nil && e.turnID == "" {
		delete(s.keys, k)
	}
	return nil
}

// PruneIdempotencyKeys deletes the keys expired at now.
func (s *Store) PruneIdempotencyKeys(_ context.Context, now time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return 0, err
	}
	var n int64
	for k, e := range s.keys {
		if !e.expires.After(now) {
			delete(s.keys, k)
			n++
		}
	}
	return n, nil
}

// ClaimEventConsumer takes or renews an event consumer's lease; see
// store.Store.
func (s *Store) ClaimEventConsumer(_ context.Context, name, holder string, now, expires time.Time) (int64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return 0, false, err
	}
	c := s.consumers[name]
	switch {
	case c == nil:
		c = &consumer{token: 1, created: backend.Time(now), positions: map[string]int64{}}
		s.consumers[name] = c
	case c.holder == holder:
	case c.expires.After(now):
		return 0, false, nil
	default:
		c.token++
	}
	c.holder, c.expires = holder, expires
	return c.token, true, nil
}

// ReleaseEventConsumer ends an event consumer's lease.
func (s *Store) ReleaseEventConsumer(_ context.Context, name string, token int64, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	if c := s.consumers[name]; c != nil && c.token == token {
		c.expires = now
	}
	return nil
}

// DeleteEventConsumer deletes an event consumer's lease and cursor.
func (s *Store) DeleteEventConsumer(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	delete(s.consumers, name)
	return nil
}

// EventCursor returns an event consumer's cursor.
func (s *Store) EventCursor(_ context.Context, name string) (store.EventCursor, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usableLocked(); err != nil {
		return store.EventCursor{}, err
	}
	c := s.consumers[name]
	if c == nil {
		return store.EventCursor{}, apperr.New(apperr.NotFound, "event consumer %q not found", name)
	}
	return store.EventCursor{Created: c.created, Positions: maps.Clone(c.positions)}, nil
}

// SaveEventCursor moves an event consumer's cursor forward.
func (s *Store) SaveEventCursor(_ context.Context, name string, token int64, positions map[string]int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	c := s.consumers[name]
	if c == nil || c.token != token {
		return apperr.New(apperr.Conflict, "event consumer %q was taken over", name)
	}
	for thread, seq := range positions {
		c.positions[thread] = max(c.positions[thread], seq)
	}
	return nil
}

// EventSpans returns the threads with events created since since.
func (s *Store) EventSpans(_ context.Context, since time.Time) ([]store.EventSpan, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usableLocked(); err != nil {
		return nil, err
	}
	since = backend.Time(since) // as the stored times
	var out []store.EventSpan
	for thread, evs := range s.events {
		sp := store.EventSpan{ThreadID: thread}
		for _, ev := range evs {
			if ev.CreatedAt.Before(since) {
				continue
			}
			if sp.First == 0 {
				sp.First = ev.Seq
			}
			sp.Last = ev.Seq
		}
		if sp.First > 0 {
			out = append(out, sp)
		}
	}
	return out, nil
}

// PutCredential stores a credential and prunes the expired ones.
func (s *Store) PutCredential(_ context.Context, c store.Credential, now time.Time) error {
	if err := c.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	for k, e := range s.creds {
		if !e.Expires.After(now) {
			delete(s.creds, k)
		}
	}
	if _, dup := s.creds[string(c.Digest)]; dup {
		return apperr.New(apperr.Conflict, "a credential with this digest is stored already")
	}
	c.Digest = slices.Clone(c.Digest)
	c.Expires = backend.Time(c.Expires)
	s.creds[string(c.Digest)] = c
	return nil
}

// GetCredential reads a credential.
func (s *Store) GetCredential(_ context.Context, kind store.CredentialKind, digest []byte) (store.Credential, bool, error) {
	return s.findCredential(kind, digest, false)
}

// DeleteCredential deletes a credential and returns it.
func (s *Store) DeleteCredential(_ context.Context, kind store.CredentialKind, digest []byte) (store.Credential, bool, error) {
	return s.findCredential(kind, digest, true)
}

// findCredential returns the credential of that kind and digest, and
// deletes it when del is set.
func (s *Store) findCredential(kind store.CredentialKind, digest []byte, del bool) (store.Credential, bool, error) {
	if err := store.ValidateCredentialKey(kind, digest); err != nil {
		return store.Credential{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return store.Credential{}, false, err
	}
	c, ok := s.creds[string(digest)]
	if !ok || c.Kind != kind {
		return store.Credential{}, false, nil
	}
	if del {
		delete(s.creds, string(digest))
	}
	c.Digest = slices.Clone(c.Digest)
	return c, true, nil
}

// budgetKey names a principal's budget period.
type budgetKey struct {
	principal string
	start     int64 // microseconds since the epoch
}

// AddBudgetSpend adds to what principal spent in the period.
func (s *Store) AddBudgetSpend(_ context.Context, principal string, periodStart time.Time, add store.BudgetSpend) (store.BudgetSpend, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return store.BudgetSpend{}, err
	}
	k := budgetKey{principal, periodStart.UnixMicro()}
	sum := s.budgets[k]
	sum.Tokens += add.Tokens
	sum.CostMicros += add.CostMicros
	s.budgets[k] = sum
	return sum, nil
}

// GetBudgetSpend reads what principal spent in the period.
func (s *Store) GetBudgetSpend(_ context.Context, principal string, periodStart time.Time) (store.BudgetSpend, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usableLocked(); err != nil {
		return store.BudgetSpend{}, err
	}
	return s.budgets[budgetKey{principal, periodStart.UnixMicro()}], nil
}

// PutWebhook stores a new webhook subscription.
func (s *Store) PutWebhook(_ context.Context, w store.Webhook) error {
	if err := w.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	if _, dup := s.webhooks[w.ID]; dup {
		return apperr.New(apperr.Conflict, "webhook %q exists", w.ID)
	}
	w.Events = slices.Clone(w.Events)
	if len(w.Events) == 0 {
		w.Events = nil
	}
	w.CreatedAt = backend.Time(w.CreatedAt)
	s.webhooks[w.ID] = w
	return nil
}

// GetWebhook reads a webhook subscription.
func (s *Store) GetWebhook(_ context.Context, id string) (store.Webhook, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usableLocked(); err != nil {
		return store.Webhook{}, err
	}
	w, ok := s.webhooks[id]
	if !ok {
		return store.Webhook{}, apperr.New(apperr.NotFound, "webhook %q not found", id)
	}
	w.Events = slices.Clone(w.Events)
	return w, nil
}

// ListWebhooks reads every webhook subscription, oldest first.
func (s *Store) ListWebhooks(context.Context) ([]store.Webhook, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usableLocked(); err != nil {
		return nil, err
	}
	var out []store.Webhook
	for _, w := range s.webhooks {
		w.Events = slices.Clone(w.Events)
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b store.Webhook) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// DeleteWebhook deletes a webhook subscription and its delivery log.
func (s *Store) DeleteWebhook(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	if _, ok := s.webhooks[id]; !ok {
		return apperr.New(apperr.NotFound, "webhook %q not found", id)
	}
	delete(s.webhooks, id)
	delete(s.deliveries, id)
	return nil
}

// AppendWebhookDelivery logs a webhook's attempt, keeping the newest keep.
func (s *Store) AppendWebhookDelivery(_ context.Context, d store.WebhookDelivery, keep int) error {
	if err := d.Validate(); err != nil {
		return err
	}
	if keep < 1 {
		return apperr.New(apperr.Invalid, "a webhook's delivery log keeps at least one attempt, got %d", keep)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	s.deliverySeq++
	d.Seq = s.deliverySeq
	d.At = backend.Time(d.At)
	d.Duration = d.Duration.Truncate(time.Microsecond)
	d.NextRetry = backend.TimePtr(d.NextRetry)
	log := append(s.deliveries[d.Webhook], d)
	if len(log) > keep {
		log = slices.Clone(log[len(log)-keep:])
	}
	s.deliveries[d.Webhook] = log
	return nil
}

// ListWebhookDeliveries reads a page of a webhook's delivery log, newest
// first.
func (s *Store) ListWebhookDeliveries(_ context.Context, webhook string, beforeSeq int64, limit int) ([]store.WebhookDelivery, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usableLocked(); err != nil {
		return nil, err
	}
	limit = max(1, min(limit, store.MaxWebhookDeliveriesLimit))
	var out []store.WebhookDelivery
	log := s.deliveries[webhook]
	for i := len(log) - 1; i >= 0 && len(out) < limit; i-- {
		if beforeSeq > 0 && log[i].Seq >= beforeSeq {
			continue
		}
		out = append(out, log[i])
	}
	return out, nil
}
