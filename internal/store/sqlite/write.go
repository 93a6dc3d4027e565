package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

// Write applies b in one transaction on the writer connection.
func (s *Store) Write(ctx context.Context, b *store.Batch) (err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpWrite, start, err) }(time.Now())
	if b.Empty() {
		return nil
	}
	if len(b.Fences) > 0 {
		return store.ErrNoLeases
	}
	if err := s.usable(); err != nil {
		return err
	}
	p, err := backend.NewPlan(b, s.cfg.Now())
	if err != nil {
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return storageErr(err)
	}
	// A no-op after Commit; otherwise it undoes everything, counters included.
	defer func() { _ = tx.Rollback() }()
	w := &txWriter{ctx: ctx, tx: tx, cache: s.stmts}
	if err := writePlan(w, p); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		// The outcome is unknown to us (the log says the commit failed);
		// the caller may retry. Clients get the outage's usual words.
		return apperr.Wrap(apperr.Unavailable, fmt.Errorf("commit: %w", err), "storage unavailable")
	}
	p.FillBack()
	if len(w.missed) > 0 {
		s.stmts.prepare(ctx, w.missed)
	}
	if storesMessages(b) {
		s.kickIndexer()
	}
	return nil
}

// DeleteThread removes a thread with its turns and items in one
// transaction.
func (s *Store) DeleteThread(ctx context.Context, id string) (err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpDeleteThread, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return err
	}
	if !store.ValidThreadID(id) {
		return backend.ThreadNotFound(id)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return storageErr(err)
	}
	defer func() { _ = tx.Rollback() }()
	key := backend.CanonicalID(id)
	var deleted int64
	for _, q := range backend.DeleteThreadSQL("?") {
		res, err := tx.ExecContext(ctx, q, key)
		if err != nil {
			return storageErr(err)
		}
		deleted, _ = res.RowsAffected()
	}
	if deleted == 0 {
		return backend.ThreadNotFound(id)
	}
	if err := tx.Commit(); err != nil {
		return apperr.Wrap(apperr.Unavailable, fmt.Errorf("commit: %w", err), "storage unavailable")
	}
	return nil
}

func writePlan(w *txWriter, p *backend.Plan) error {
	for _, t := range p.CreateThreads {
		_, err := w.exec(statements.InsertThread, statements.ThreadArgs(&t)...)
		if isUniqueViolation(err) {
			return apperr.Wrap(apperr.Conflict, err, "thread %s already exists", t.ID)
		}
		if err != nil {
			return storageErr(err)
		}
	}
	if err := updateThreads(w, p); err != nil {
		return err
	}
	for _, t := range p.CreateTurns {
		_, err := w.exec(statements.InsertTurn, statements.TurnArgs(&t)...)
		switch {
		case isUniqueViolation(err):
			return apperr.Wrap(apperr.Conflict, err, "turn %s already exists in thread %s", t.ID, t.ThreadID)
		case isForeignKeyViolation(err):
			return backend.ThreadNotFound(t.ThreadID)
		case err != nil:
			return storageErr(err)
		}
	}
	for _, u := range p.UpdateTurns {
		q, args := statements.TurnPatch(u)
		found, err := execOne(w, q, args)
		if err != nil {
			return err
		}
		if !found {
			return backend.TurnNotFound(u.ThreadID, u.ID)
		}
	}
	for _, q := range p.TakeQueued {
		found, err := execOne(w, takeQueued, []any{q.TurnID, q.ThreadID, q.ID})
		if err != nil {
			return err
		}
		if !found {
			return backend.NotQueued(q)
		}
	}
	if err := writeEvents(w, p.AppendEvents); err != nil {
		return err
	}
	for _, it := range p.AppendItems {
		_, err := w.exec(statements.InsertItem, statements.ItemArgs(&it)...)
		switch {
		case isUniqueViolation(err):
			return apperr.Wrap(apperr.Conflict, err, "item %s already exists in thread %s", it.ItemID, it.ThreadID)
		case isForeignKeyViolation(err):
			return backend.TurnNotFound(it.ThreadID, it.TurnID)
		case err != nil:
			return storageErr(err)
		}
	}
	for i := range p.AppendAudit {
		if err := w.queryRow(statements.InsertAudit, statements.AuditArgs(&p.AppendAudit[i])...).Scan(&p.AppendAudit[i].Seq); err != nil {
			return storageErr(err)
		}
	}
	return nil
}

// maxEventRow bounds the data of a row of the log that holds several
// events (their frames, the separators and the bytes of the numbers they
// skip), so that pruning by size, which deletes rows whole, keeps a fine
// grain.
const maxEventRow = 64 << 10

// insertEventRow inserts a row of the log, one event or a run of a
// thread's events (backend/eventrows.go), unless a stored row of the thread
// holds one of its events. Arguments: thread, last seq, first seq (NULL for
// one event), method, data, created_at; then thread, first seq, last seq.
const insertEventRow = `INSERT INTO events (thread_id, seq, first_seq, method, data, created_at)
	SELECT ?, ?, ?, ?, ?, ? WHERE NOT EXISTS
	(SELECT 1 FROM events WHERE thread_id = ? AND seq >= ? AND COALESCE(first_seq, seq) <= ?)`

// writeEvents stores a plan's events, each thread's consecutive ones (those
// that may share a row, up to maxEventRow bytes of frames, whatever
// numbers the batch skips between them) in one row: a plain turn's
// half dozen events cost one insert per commit, not one each.
// It reorders evs, the plan's copy, by thread and Seq.
func writeEvents(w *txWriter, evs []store.Event) error {
	if len(evs) > 1 {
		slices.SortStableFunc(evs, func(a, b store.Event) int {
			return cmp.Or(strings.Compare(a.ThreadID, b.ThreadID), cmp.Compare(a.Seq, b.Seq))
		})
	}
	for i := 0; i < len(evs); {
		j, size := i+1, len(evs[i].Data)
		if backend.JoinableEvent(&evs[i]) {
			// Numbers the batch skips (deltas, which this store does not
			// keep) do not split a row: a plain turn's end stores one.
			for j < len(evs) && evs[j].ThreadID == evs[i].ThreadID && evs[j].Seq > evs[j-1].Seq && backend.JoinableEvent(&evs[j]) {
				if evs[j].Seq-evs[j-1].Seq > maxEventRow {
					break // and no size to overflow
				}
				add := backend.EventJoinSize(&evs[j-1], &evs[j])
				if size+add > maxEventRow {
					break
				}
				size += add
				j++
			}
		}
		if err := insertEvents(w, evs[i:j], size); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// insertEvents writes run, events of one thread in increasing Seq whose
// row data (backend.AppendEventRun) is size bytes, as one row.
func insertEvents(w *txWriter, run []store.Event, size int) error {
	first, last := &run[0], &run[len(run)-1]
	data, created := first.Data, first.CreatedAt
	var firstSeq any // NULL: a row of one event
	if len(run) > 1 {
		firstSeq = first.Seq
		data = backend.AppendEventRun(make([]byte, 0, size), run)
		for k := range run {
			if run[k].CreatedAt.After(created) {
				created = run[k].CreatedAt
			}
		}
	}
	res, err := w.exec(insertEventRow, first.ThreadID, last.Seq, firstSeq, first.Method, data,
		backend.SQLite.TimeArg(created), first.ThreadID, first.Seq, last.Seq)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	switch {
	case err != nil && !isUniqueViolation(err):
		return storageErr(err)
	case n == 1:
		return nil
	case len(run) == 1:
		return apperr.Wrap(apperr.Conflict, err, "event %d of thread %s: its number is taken in the thread's log", first.Seq, first.ThreadID)
	}
	return apperr.Wrap(apperr.Conflict, err, "events %d to %d of thread %s: a number among them is taken in the thread's log", first.Seq, last.Seq, first.ThreadID)
}

// statements are the write statements in SQLite's dialect. JSON binds as
// TEXT: a []byte would bind as a BLOB, which SQLite's JSON functions read as
// JSONB.
var statements = backend.NewStatements(backend.SQLite, func(raw []byte) any { return textArg(raw) })

var dropTurns = backend.DropTurnsSQL(backend.SQLite)

// updateThreads applies the plan's thread patches, drops its dropped
// turns and bumps the turn and item counters of its threads, handing out
// the seqs of the turns and items it creates: one UPDATE a thread
// (Plan.ThreadWrites) before the drops, and one after for the counters a
// patch did not bump.
func updateThreads(w *txWriter, p *backend.Plan) error {
	before, after := p.ThreadWrites()
	if err := threadWrites(w, p, before); err != nil {
		return err
	}
	for _, d := range p.DropTurns {
		for i, q := range dropTurns {
			res, err := w.exec(q, backend.DropTurnsArgs(i, d)...)
			if err != nil {
				return storageErr(err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return storageErr(err)
			} else if i == 1 && n == 0 {
				return backend.TurnNotFound(d.ThreadID, d.TurnID)
			}
		}
	}
	return threadWrites(w, p, after)
}

// threadWrites runs writes in order.
func threadWrites(w *txWriter, p *backend.Plan, writes []backend.ThreadWrite) error {
	for _, tw := range writes {
		q, args := tw.SQL(statements)
		if !tw.Bumps() {
			found, err := execOne(w, q, args)
			if err != nil {
				return err
			}
			if !found {
				return backend.ThreadNotFound(tw.ID)
			}
			continue
		}
		var turnSeq, itemSeq int64
		err := w.queryRow(q, args...).Scan(&turnSeq, &itemSeq)
		if errors.Is(err, sql.ErrNoRows) {
			return backend.ThreadNotFound(tw.ID)
		}
		if err != nil {
			return storageErr(err)
		}
		tw.Assign(p, turnSeq, itemSeq)
	}
	return nil
}

// execOne runs an UPDATE that must touch a row and reports whether it did;
// the caller builds its NotFound error only when needed.
func execOne(w *txWriter, q string, args []any) (found bool, err error) {
	res, err := w.exec(q, args...)
	if err != nil {
		return false, storageErr(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, storageErr(err)
	}
	return n > 0, nil
}

var takeQueued = backend.TakeQueuedSQL(backend.SQLite)

var pruneEvents = backend.PruneEventsSQL(backend.SQLite)

// PruneEvents deletes the rows of the log created before `before`, up to
// limit of them, on the writer connection like every other write, and
// returns the events they held.
func (s *Store) PruneEvents(ctx context.Context, before time.Time, limit int) (n int64, err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpPruneEvents, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return 0, err
	}
	return backend.PruneEvents(ctx, s.writerPool(), pruneEvents, backend.SQLite, before, limit)
}

// PruneThreadEvents deletes a thread's oldest events beyond maxBytes, on
// the writer connection.
func (s *Store) PruneThreadEvents(ctx context.Context, threadID string, maxBytes int64, limit int) (deleted, remaining int64, err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpPruneThreadEvents, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return 0, 0, err
	}
	return backend.PruneThreadEvents(ctx, s.writerPool(), backend.SQLite, threadID, maxBytes, limit)
}

// Reclaim returns the database's free pages to the file system (the file
// is in incremental auto-vacuum mode, see Migrate), then checkpoints the
// WAL and truncates it, so that the files shrink after pruning. A
// checkpoint that readers hold up is left for SQLite's own.
func (s *Store) Reclaim(ctx context.Context) (err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpReclaim, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return err
	}
	// A few MiB at a time: each step holds the one writer connection, and
	// commits queued meanwhile get it in between.
	for prev := int64(-1); ; {
		var free int64
		if err := s.w.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&free); err != nil {
			return storageErr(err)
		}
		if free == 0 || free == prev { // nothing left, or a file not in incremental mode
			break
		}
		prev = free
		if _, err := s.w.ExecContext(ctx, "PRAGMA incremental_vacuum(1024)"); err != nil {
			return storageErr(err)
		}
	}
	var busy, logged, done int
	if err := s.w.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &done); err != nil {
		return storageErr(err)
	}
	return nil
}
