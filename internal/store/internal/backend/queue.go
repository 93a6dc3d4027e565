package backend

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// Queue implements the queued submissions of store.Store (migration
// 00009) once for both SQL backends; each statement commits on its own.
// Taking an entry is part of a batch (Plan.TakeQueued, TakeQueuedSQL), in
// the transaction that stores the turn it became.
type Queue struct {
	db      ConsumerDB
	d       Dialect
	observe store.ObserveFunc
	usable  func() error
	now     func() time.Time

	insert, byClient, list, count, update, del, threads string
}

const queueColumns = "thread_id, id, client_id, payload, ord, created_at, turn_id"

// TakeQueuedSQL marks one queued entry taken by a turn, (turn_id,
// thread_id, id) its parameters in dialect d; a batch that took nothing
// is a Conflict.
func TakeQueuedSQL(d Dialect) string {
	return "UPDATE queued_submissions SET turn_id = " + d.Param(1) + " WHERE thread_id = " + d.Param(2) + " AND id = " + d.Param(3) + " AND turn_id IS NULL"
}

// NewQueue returns the queues of a store in dialect d over db; observe
// and usable are as NewReader's, now the clock of defaulted times.
func NewQueue(d Dialect, db ConsumerDB, observe store.ObserveFunc, usable func() error, now func() time.Time) Queue {
	p := d.Param
	return Queue{
		db: db, d: d, observe: observe, usable: usable, now: now,
		// The thread's own row supplies thread_id: no row, no entry (an
		// unknown thread), and the parameters' types are the columns'.
		insert: "INSERT INTO queued_submissions (thread_id, id, client_id, payload, ord, created_at) SELECT id, " + p(1) + d.cast("text") + ", " + p(2) + d.cast("text") + ", " +
			p(3) + d.cast("text") + ", COALESCE((SELECT MAX(ord) FROM queued_submissions WHERE thread_id = " + p(4) + "), -1) + 1, " +
			p(5) + d.cast("timestamptz") + " FROM threads WHERE id = " + p(6) + " ON CONFLICT (thread_id, client_id) DO NOTHING",
		byClient: "SELECT " + queueColumns + " FROM queued_submissions WHERE thread_id = " + p(1) + " AND client_id = " + p(2),
		list:     "SELECT " + queueColumns + " FROM queued_submissions WHERE thread_id = " + p(1) + " AND turn_id IS NULL ORDER BY ord, created_at, id",
		count:    "SELECT COUNT(*) FROM queued_submissions WHERE thread_id = " + p(1) + " AND turn_id IS NULL",
		update:   "UPDATE queued_submissions SET payload = " + p(1) + " WHERE thread_id = " + p(2) + " AND id = " + p(3) + " AND turn_id IS NULL",
		del:      "DELETE FROM queued_submissions WHERE thread_id = " + p(1) + " AND id = " + p(2) + " AND turn_id IS NULL",
		threads:  "SELECT DISTINCT thread_id FROM queued_submissions WHERE turn_id IS NULL",
	}
}

func scanQueued(r Row) (store.QueuedSubmission, error) {
	var q store.QueuedSubmission
	var payload string
	var created timeCol
	var turnID *string
	if err := r.Scan(&q.ThreadID, &q.ID, &q.ClientID, &payload, &q.Ord, &created, &turnID); err != nil {
		return q, err
	}
	q.Payload = json.RawMessage(payload)
	q.CreatedAt = created.t
	if turnID != nil {
		q.TurnID = *turnID
	}
	return q, nil
}

// AddQueued implements store.Store.AddQueued.
func (qs Queue) AddQueued(ctx context.Context, q *store.QueuedSubmission) (added bool, err error) {
	defer func(start time.Time) { Observe(qs.observe, store.OpQueue, start, err) }(time.Now())
	if err := qs.usable(); err != nil {
		return false, err
	}
	if !store.ValidThreadID(q.ThreadID) {
		return false, ThreadNotFound(q.ThreadID)
	}
	if err := store.CheckQueued(q); err != nil {
		return false, err
	}
	tid := CanonicalID(q.ThreadID)
	if found, err := qs.getByClient(ctx, tid, q.ClientID); err == nil {
		*q = found
		return false, nil
	} else if !apperr.Is(err, apperr.NotFound) {
		return false, err
	}
	var n int64
	if err := qs.db.QueryRow(ctx, qs.count, tid).Scan(&n); err != nil {
		return false, qs.db.StorageErr(err)
	}
	if n >= store.MaxQueued {
		return false, apperr.New(apperr.Invalid, "thread %s has %d queued submissions, the most it may have", tid, store.MaxQueued)
	}
	created := q.CreatedAt
	if created.IsZero() {
		created = qs.now()
	}
	created = Time(created)
	rows, err := qs.db.Exec(ctx, qs.insert, q.ID, q.ClientID, string(q.Payload), tid, qs.d.TimeArg(created), tid)
	if err != nil {
		return false, qs.db.StorageErr(err)
	}
	// Inserted, or another add of the same client id won: either way the
	// stored entry is the answer. None: the thread is unknown.
	found, err := qs.getByClient(ctx, tid, q.ClientID)
	if apperr.Is(err, apperr.NotFound) {
		return false, ThreadNotFound(q.ThreadID)
	}
	if err != nil {
		return false, err
	}
	*q = found
	return rows == 1 && found.ID == q.ID, nil
}

func (qs Queue) getByClient(ctx context.Context, threadID, clientID string) (store.QueuedSubmission, error) {
	q, err := scanQueued(qs.db.QueryRow(ctx, qs.byClient, threadID, clientID))
	switch {
	case qs.db.NoRows(err):
		return q, apperr.New(apperr.NotFound, "no queued submission with client id %q", clientID)
	case err != nil:
		return q, qs.db.StorageErr(err)
	}
	return q, nil
}

// ListQueued implements store.Store.ListQueued.
func (qs Queue) ListQueued(ctx context.Context, threadID string) (out []store.QueuedSubmission, err error) {
	defer func(start time.Time) { Observe(qs.observe, store.OpQueue, start, err) }(time.Now())
	if err := qs.usable(); err != nil {
		return nil, err
	}
	if !store.ValidThreadID(threadID) {
		return nil, nil
	}
	rows, err := qs.db.Query(ctx, qs.list, CanonicalID(threadID))
	if err != nil {
		return nil, qs.db.StorageErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		q, err := scanQueued(rows)
		if err != nil {
			return nil, qs.db.StorageErr(err)
		}
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, qs.db.StorageErr(err)
	}
	return out, nil
}

// UpdateQueued implements store.Store.UpdateQueued.
func (qs Queue) UpdateQueued(ctx context.Context, threadID, id string, payload json.RawMessage) (err error) {
	defer func(start time.Time) { Observe(qs.observe, store.OpQueue, start, err) }(time.Now())
	if err := qs.usable(); err != nil {
		return err
	}
	if err := store.CheckQueued(&store.QueuedSubmission{ThreadID: threadID, ID: id, Payload: payload}); err != nil {
		return err
	}
	n := int64(0)
	if store.ValidThreadID(threadID) {
		if n, err = qs.db.Exec(ctx, qs.update, string(payload), CanonicalID(threadID), id); err != nil {
			return qs.db.StorageErr(err)
		}
	}
	if n == 0 {
		return store.QueuedNotFound(id)
	}
	return nil
}

// DeleteQueued implements store.Store.DeleteQueued.
func (qs Queue) DeleteQueued(ctx context.Context, threadID, id string) (deleted bool, err error) {
	defer func(start time.Time) { Observe(qs.observe, store.OpQueue, start, err) }(time.Now())
	if err := qs.usable(); err != nil {
		return false, err
	}
	if !store.ValidThreadID(threadID) {
		return false, nil
	}
	n, err := qs.db.Exec(ctx, qs.del, CanonicalID(threadID), id)
	if err != nil {
		return false, qs.db.StorageErr(err)
	}
	return n > 0, nil
}

// ReorderQueued implements store.Store.ReorderQueued in one UPDATE, so
// that concurrent reorders do not interleave.
func (qs Queue) ReorderQueued(ctx context.Context, threadID string, ids []string) (err error) {
	defer func(start time.Time) { Observe(qs.observe, store.OpQueue, start, err) }(time.Now())
	stored, err := qs.ListQueued(ctx, threadID)
	if err != nil {
		return err
	}
	if err := store.CheckReorder(stored, ids); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	var b strings.Builder
	args := make([]any, 0, len(ids)+1)
	b.WriteString("UPDATE queued_submissions SET ord = CASE id")
	for i, id := range ids {
		args = append(args, id)
		b.WriteString(" WHEN " + qs.d.Param(len(args)) + " THEN " + strconv.Itoa(i))
	}
	// An entry added meanwhile keeps its place after the others.
	args = append(args, CanonicalID(threadID))
	b.WriteString(" ELSE ord + " + strconv.Itoa(len(ids)) + " END WHERE thread_id = " + qs.d.Param(len(args)) + " AND turn_id IS NULL")
	if _, err := qs.db.Exec(ctx, b.String(), args...); err != nil {
		return qs.db.StorageErr(err)
	}
	return nil
}

// QueuedThreads implements store.Store.QueuedThreads.
func (qs Queue) QueuedThreads(ctx context.Context) (out []string, err error) {
	defer func(start time.Time) { Observe(qs.observe, store.OpQueue, start, err) }(time.Now())
	if err := qs.usable(); err != nil {
		return nil, err
	}
	rows, err := qs.db.Query(ctx, qs.threads)
	if err != nil {
		return nil, qs.db.StorageErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, qs.db.StorageErr(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, qs.db.StorageErr(err)
	}
	slices.Sort(out)
	return out, nil
}
