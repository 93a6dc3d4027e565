package backend

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// Plan is a validated Batch with every value normalised the way the store
// keeps it. Backends write the plan's copies, assign Seqs into them, and call
// FillBack only after their transaction committed, so that a failed write
// leaves the caller's records untouched.
type Plan struct {
	CreateThreads []store.Thread
	UpdateThreads []store.ThreadPatch
	DropTurns     []store.TurnDrop
	CreateTurns   []store.Turn
	UpdateTurns   []store.TurnPatch
	AppendItems   []store.Item
	// AppendEvents are the events with canonical thread ids and times; the
	// store assigns them nothing, so there is nothing to fill back.
	AppendEvents []store.Event
	// AppendAudit are the audit entries with normalised times; the store
	// assigns their Seq, filled back into the batch's records.
	AppendAudit []store.AuditEntry
	// TakeQueued are the queued entries the batch consumes, with
	// canonical thread ids.
	TakeQueued []store.QueueTake

	// TurnGroups and ItemGroups index CreateTurns and AppendItems by thread,
	// in order of first appearance, so each thread's counter is bumped once.
	TurnGroups []Group
	ItemGroups []Group

	src *store.Batch
}

// Group is the positions of one thread's records within a plan slice.
type Group struct {
	ThreadID string
	Idx      []int
}

// NewPlan validates b and normalises a copy of it; now supplies defaults
// for zero timestamps.
func NewPlan(b *store.Batch, now time.Time) (*Plan, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	now = Time(now)
	p := &Plan{src: b}
	for _, t := range b.CreateThreads {
		c := *t
		c.ID = CanonicalID(c.ID)
		if c.ForkedFromID != nil {
			id := CanonicalID(*c.ForkedFromID)
			c.ForkedFromID = &id
		}
		if c.CreatedAt.IsZero() {
			c.CreatedAt = now
		}
		c.CreatedAt = Time(c.CreatedAt)
		if c.UpdatedAt.IsZero() {
			c.UpdatedAt = c.CreatedAt
		}
		c.UpdatedAt = Time(c.UpdatedAt)
		if c.RecencyAt.IsZero() {
			c.RecencyAt = c.UpdatedAt
		}
		c.RecencyAt = Time(c.RecencyAt)
		c.Meta = NullableJSON(c.Meta)
		p.CreateThreads = append(p.CreateThreads, c)
	}
	for _, u := range b.UpdateThreads {
		u.ID = CanonicalID(u.ID)
		u.UpdatedAt = TimePtr(u.UpdatedAt)
		u.RecencyAt = TimePtr(u.RecencyAt)
		p.UpdateThreads = append(p.UpdateThreads, u)
	}
	for _, d := range b.DropTurns {
		d.ThreadID = CanonicalID(d.ThreadID)
		p.DropTurns = append(p.DropTurns, d)
	}
	turnGroups := map[string]int{}
	for _, t := range b.CreateTurns {
		c := *t
		c.ThreadID = CanonicalID(c.ThreadID)
		c.Seq = 0
		c.StartedAt = TimePtr(c.StartedAt)
		c.CompletedAt = TimePtr(c.CompletedAt)
		c.Error = NullableJSON(c.Error)
		c.Meta = NullableJSON(c.Meta)
		p.CreateTurns = append(p.CreateTurns, c)
		p.TurnGroups = addToGroup(p.TurnGroups, turnGroups, c.ThreadID, len(p.CreateTurns)-1)
	}
	for _, u := range b.UpdateTurns {
		u.ThreadID = CanonicalID(u.ThreadID)
		u.StartedAt = TimePtr(u.StartedAt)
		u.CompletedAt = TimePtr(u.CompletedAt)
		p.UpdateTurns = append(p.UpdateTurns, u)
	}
	itemGroups := map[string]int{}
	for _, it := range b.AppendItems {
		c := *it
		c.ThreadID = CanonicalID(c.ThreadID)
		c.Seq = 0
		if c.CreatedAt.IsZero() {
			c.CreatedAt = now
		}
		c.CreatedAt = Time(c.CreatedAt)
		p.AppendItems = append(p.AppendItems, c)
		p.ItemGroups = addToGroup(p.ItemGroups, itemGroups, c.ThreadID, len(p.AppendItems)-1)
	}
	for _, ev := range b.AppendEvents {
		c := *ev
		c.ThreadID = CanonicalID(c.ThreadID)
		if c.CreatedAt.IsZero() {
			c.CreatedAt = now
		}
		c.CreatedAt = Time(c.CreatedAt)
		p.AppendEvents = append(p.AppendEvents, c)
	}
	for _, a := range b.AppendAudit {
		c := *a
		c.Seq = 0
		if c.At.IsZero() {
			c.At = now
		}
		c.At = Time(c.At)
		c.ThreadID = CanonicalID(c.ThreadID)
		p.AppendAudit = append(p.AppendAudit, c)
	}
	for _, q := range b.TakeQueued {
		q.ThreadID = CanonicalID(q.ThreadID)
		p.TakeQueued = append(p.TakeQueued, q)
	}
	return p, nil
}

// LockIDs returns the sorted ids of the existing threads the plan touches;
// locking them in this order first keeps concurrent writers from
// deadlocking. It is computed on demand because only Postgres locks: the
// SQLite store has a single writer.
func (p *Plan) LockIDs() []string {
	var ids []string
	for _, u := range p.UpdateThreads {
		ids = append(ids, u.ID)
	}
	for _, d := range p.DropTurns {
		ids = append(ids, d.ThreadID)
	}
	for _, t := range p.CreateTurns {
		ids = append(ids, t.ThreadID)
	}
	for _, u := range p.UpdateTurns {
		ids = append(ids, u.ThreadID)
	}
	for _, it := range p.AppendItems {
		ids = append(ids, it.ThreadID)
	}
	if len(p.CreateThreads) > 0 {
		// A thread created by this batch is new: nobody else can hold it.
		created := make(map[string]bool, len(p.CreateThreads))
		for _, t := range p.CreateThreads {
			created[t.ID] = true
		}
		ids = slices.DeleteFunc(ids, func(id string) bool { return created[id] })
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func addToGroup(groups []Group, index map[string]int, threadID string, i int) []Group {
	g, ok := index[threadID]
	if !ok {
		g = len(groups)
		index[threadID] = g
		groups = append(groups, Group{ThreadID: threadID})
	}
	groups[g].Idx = append(groups[g].Idx, i)
	return groups
}

// FillBack copies the normalised records, with their Seqs, into the batch
// the plan was made from.
func (p *Plan) FillBack() {
	for i, t := range p.CreateThreads {
		*p.src.CreateThreads[i] = t
	}
	for i, t := range p.CreateTurns {
		*p.src.CreateTurns[i] = t
	}
	for i, it := range p.AppendItems {
		*p.src.AppendItems[i] = it
	}
	for i, a := range p.AppendAudit {
		*p.src.AppendAudit[i] = a
	}
}

// CanonicalID returns the canonical lower-case form of a thread id, or id
// itself when it is no UUID.
func CanonicalID(id string) string {
	if isCanonicalUUID(id) {
		// Nearly every id already is canonical; returning it as is spares
		// formatting a copy of it.
		return id
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return id
	}
	return u.String()
}

// isCanonicalUUID reports whether id is a UUID written the way uuid.UUID's
// String writes it: 36 characters, lower-case hex digits with dashes after
// the 8th, 12th, 16th and 20th.
func isCanonicalUUID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := range len(id) {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// Time returns t as the store keeps it: UTC, truncated to microseconds.
func Time(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// TimePtr is Time for optional times.
func TimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := Time(*t)
	return &v
}

// NullableJSON maps both an absent value and JSON null to nil, which the
// backends store as SQL NULL.
func NullableJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// Fold is the case folding shared by search terms and the *_fold columns.
func Fold(s string) string { return strings.ToLower(s) }

// Limit applies the default and the cap to a query's page size.
func Limit(n int) int {
	if n <= 0 {
		return store.DefaultLimit
	}
	return min(n, store.MaxLimit)
}

// SortColumn returns the column of a thread sort key and the cursor scope of
// listings in that order.
func SortColumn(k store.SortKey) (column, scope string, err error) {
	switch k {
	case "", store.SortCreatedAt:
		return "created_at", "threads/created_at", nil
	case store.SortUpdatedAt:
		return "updated_at", "threads/updated_at", nil
	case store.SortRecencyAt:
		return "recency_at", "threads/recency_at", nil
	}
	return "", "", apperr.New(apperr.Invalid, "invalid sort key: %s", k)
}

// TurnsScope is the cursor scope of a thread's turn listing.
func TurnsScope(threadID string) string { return store.TurnsScope(threadID) }

// ItemsScope is the cursor scope of a thread's item listing.
func ItemsScope(threadID string) string { return store.ItemsScope(threadID) }

// NotQueued is the Conflict of a batch whose queued entry is gone (taken
// by another write, or deleted).
func NotQueued(q store.QueueTake) error {
	return apperr.New(apperr.Conflict, "queued submission %s of thread %s is no longer queued", q.ID, q.ThreadID)
}

// ThreadNotFound is the error for an unknown thread id.
func ThreadNotFound(id string) error {
	return apperr.New(apperr.NotFound, "thread %s not found", id)
}

// TurnNotFound is the error for an unknown turn.
func TurnNotFound(threadID, turnID string) error {
	return apperr.New(apperr.NotFound, "turn %s not found in thread %s", turnID, threadID)
}

// Observe reports one operation to fn, if set.
func Observe(fn store.ObserveFunc, op string, start time.Time, err error) {
	if fn != nil {
		fn(op, time.Since(start), err)
	}
}

// Page trims rows, fetched with LIMIT limit+1, to one page and returns the
// cursors of its ends: next when more rows follow, back when the page is not
// empty.
func Page[T any](rows []T, limit int, cursorOf func(T) Cursor) (page []T, next, back string) {
	if len(rows) > limit {
		rows = rows[:limit]
		next = cursorOf(rows[limit-1]).Encode()
	}
	if len(rows) > 0 {
		back = cursorOf(rows[0]).Encode()
	}
	return rows, next, back
}

// ThreadWrite is one statement of a plan's writes to a thread's row: its
// patch, the bumps of its turn and item counters, or both.
type ThreadWrite struct {
	ID    string
	Patch *store.ThreadPatch
	// Turns and Items are the thread's new turns and items, when the plan
	// makes some: the counters' bumps.
	Turns, Items *Group
}

// Bumps reports whether w bumps a counter (then it is a ThreadUpdate,
// which returns the counters; else a ThreadPatch).
func (w *ThreadWrite) Bumps() bool { return w.Turns != nil || w.Items != nil }

// SQL returns w's statement and arguments in st.
func (w *ThreadWrite) SQL(st *Statements) (string, []any) {
	if !w.Bumps() {
		return st.ThreadPatch(*w.Patch)
	}
	turns, items := w.counts()
	return st.ThreadUpdate(w.ID, w.Patch, turns, items)
}

func (w *ThreadWrite) counts() (turns, items int64) {
	if w.Turns != nil {
		turns = int64(len(w.Turns.Idx))
	}
	if w.Items != nil {
		items = int64(len(w.Items.Idx))
	}
	return turns, items
}

// Assign hands out the seqs of w's turns and items in p from the counters
// its ThreadUpdate returned.
func (w *ThreadWrite) Assign(p *Plan, turnSeq, itemSeq int64) {
	turns, items := w.counts()
	if w.Turns != nil {
		for k, i := range w.Turns.Idx {
			p.CreateTurns[i].Seq = turnSeq - turns + 1 + int64(k)
		}
	}
	if w.Items != nil {
		for k, i := range w.Items.Idx {
			p.AppendItems[i].Seq = itemSeq - items + 1 + int64(k)
		}
	}
}

// ThreadWrites returns the writes to p's threads' rows in two parts, to
// run in order with the plan's turn drops between them: before, its
// patches; after, the bumps its patches do not carry. A thread's counters
// are bumped together, by its first patch unless the plan drops turns
// (whose reset of the counters must come between the patches and the
// bumps). One statement a thread where there were one for the patch and
// one for each counter, each rewriting the row: a plain turn's two
// commits made four and make two (BenchmarkPlainTurnWrites/events=7 of
// internal/store/sqlite, 3,000 turns, builds alternating: 648–688
// against 689–709 µs of CPU a turn; bench/README.md "One UPDATE of a
// thread a commit").
func (p *Plan) ThreadWrites() (before, after []ThreadWrite) {
	writes := make([]ThreadWrite, 0, len(p.UpdateThreads)+len(p.TurnGroups)+len(p.ItemGroups))
	for i := range p.UpdateThreads {
		writes = append(writes, ThreadWrite{ID: p.UpdateThreads[i].ID, Patch: &p.UpdateThreads[i]})
	}
	patches := len(writes)
	from := 0
	if len(p.DropTurns) > 0 {
		from = patches
	}
	// The write that carries thread id's bumps: its first patch, or a
	// write of its own. (writes never grows past its capacity, so the
	// pointer holds until the next call.)
	carrier := func(id string) *ThreadWrite {
		for k := from; k < len(writes); k++ {
			if writes[k].ID == id {
				return &writes[k]
			}
		}
		writes = append(writes, ThreadWrite{ID: id})
		return &writes[len(writes)-1]
	}
	for g := range p.TurnGroups {
		carrier(p.TurnGroups[g].ThreadID).Turns = &p.TurnGroups[g]
	}
	for g := range p.ItemGroups {
		carrier(p.ItemGroups[g].ThreadID).Items = &p.ItemGroups[g]
	}
	return writes[:patches], writes[patches:]
}
