package sqlite

import (
	"context"
	"database/sql"
	"errors"
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
		return apperr.Wrap(apperr.Unavailable, err, "storage commit failed")
	}
	p.FillBack()
	if len(w.missed) > 0 {
		s.stmts.prepare(ctx, w.missed)
	}
	return nil
}

func writePlan(w *txWriter, p *backend.Plan) error {
	for _, t := range p.CreateThreads {
		name := ""
		if t.Name != nil {
			name = *t.Name
		}
		_, err := w.exec(insertThread,
			t.ID, t.Name, backend.Fold(name), t.Preview, backend.Fold(t.Preview), t.Cwd,
			t.ModelProvider, t.Model, t.Source, t.ForkedFromID, t.Archived,
			micros(t.CreatedAt), micros(t.UpdatedAt), micros(t.RecencyAt), jsonArg(t.Meta))
		if isUniqueViolation(err) {
			return apperr.Wrap(apperr.Conflict, err, "thread %s already exists", t.ID)
		}
		if err != nil {
			return storageErr(err)
		}
	}
	for _, u := range p.UpdateThreads {
		q, args := threadPatchSQL(u)
		found, err := execOne(w, q, args)
		if err != nil {
			return err
		}
		if !found {
			return backend.ThreadNotFound(u.ID)
		}
	}
	if err := assignSeqs(w, p.TurnGroups, bumpTurnSeq, func(i int, seq int64) { p.CreateTurns[i].Seq = seq }); err != nil {
		return err
	}
	if err := assignSeqs(w, p.ItemGroups, bumpItemSeq, func(i int, seq int64) { p.AppendItems[i].Seq = seq }); err != nil {
		return err
	}
	for _, t := range p.CreateTurns {
		_, err := w.exec(insertTurn,
			t.ThreadID, t.ID, t.Seq, t.Status, jsonArg(t.Error),
			microsPtr(t.StartedAt), microsPtr(t.CompletedAt), jsonArg(t.Meta))
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
		q, args := turnPatchSQL(u)
		found, err := execOne(w, q, args)
		if err != nil {
			return err
		}
		if !found {
			return backend.TurnNotFound(u.ThreadID, u.ID)
		}
	}
	for _, it := range p.AppendItems {
		_, err := w.exec(insertItem, it.ThreadID, it.Seq, it.TurnID, it.ItemID, it.Type, textArg(it.Payload), micros(it.CreatedAt))
		switch {
		case isUniqueViolation(err):
			return apperr.Wrap(apperr.Conflict, err, "item %s already exists in thread %s", it.ItemID, it.ThreadID)
		case isForeignKeyViolation(err):
			return backend.TurnNotFound(it.ThreadID, it.TurnID)
		case err != nil:
			return storageErr(err)
		}
	}
	return nil
}

// The inserts of writePlan.
const (
	insertThread = `INSERT INTO threads (id, name, name_fold, preview, preview_fold, cwd,
	model_provider, model, source, forked_from_id, archived, created_at, updated_at, recency_at, meta)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insertTurn = `INSERT INTO turns (thread_id, id, seq, status, error, started_at, completed_at, meta)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	insertItem = `INSERT INTO items (thread_id, seq, turn_id, item_id, type, payload, created_at)
	VALUES (?, ?, ?, ?, ?, ?, ?)`
)

// The counter bumps of assignSeqs.
const (
	bumpTurnSeq = `UPDATE threads SET turn_seq = turn_seq + ? WHERE id = ? RETURNING turn_seq`
	bumpItemSeq = `UPDATE threads SET item_seq = item_seq + ? WHERE id = ? RETURNING item_seq`
)

// assignSeqs bumps each group's counter once with bump and hands out the
// range it reserved, in the group's order.
func assignSeqs(w *txWriter, groups []backend.Group, bump string, assign func(i int, seq int64)) error {
	for _, g := range groups {
		var last int64
		err := w.queryRow(bump, int64(len(g.Idx)), g.ThreadID).Scan(&last)
		if errors.Is(err, sql.ErrNoRows) {
			return backend.ThreadNotFound(g.ThreadID)
		}
		if err != nil {
			return storageErr(err)
		}
		first := last - int64(len(g.Idx)) + 1
		for k, i := range g.Idx {
			assign(i, first+int64(k))
		}
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

// patchSQL holds the UPDATE texts of one kind of patch, one for every
// combination of the fields a patch may set, so that a write looks its text
// up instead of building it: a turn patch goes out with nearly every tool
// round.
type patchSQL []string

// newPatchSQL builds the texts of a patch of table whose optional SET
// clauses are sets; bit i of an index selects sets[i]. noop is the SET clause
// of a patch that sets nothing, which must still find its row (or report it
// missing).
func newPatchSQL(table string, sets []string, noop, where string) patchSQL {
	texts := make(patchSQL, 1<<len(sets))
	for mask := range texts {
		var set []string
		for i, s := range sets {
			if mask&(1<<i) != 0 {
				set = append(set, s)
			}
		}
		if len(set) == 0 {
			set = append(set, noop)
		}
		texts[mask] = "UPDATE " + table + " SET " + strings.Join(set, ", ") + " WHERE " + where
	}
	return texts
}

// The optional fields of a thread patch, as bits of a threadPatches index.
const (
	threadSetName = 1 << iota
	threadSetPreview
	threadSetArchived
	threadSetModel
	threadSetUpdatedAt
	threadSetRecencyAt
	threadSetMeta
)

// threadPatches is in the order of the threadSet bits.
var threadPatches = newPatchSQL("threads", []string{
	"name = ?, name_fold = ?",
	"preview = ?, preview_fold = ?",
	"archived = ?",
	"model = ?",
	"updated_at = ?",
	"recency_at = ?",
	"meta = ?",
}, "archived = archived", "id = ?")

func threadPatchSQL(u store.ThreadPatch) (string, []any) {
	// Room for every field and the id, so that one allocation suffices.
	args := make([]any, 0, 10)
	mask := 0
	if u.Name != nil {
		mask |= threadSetName
		args = append(args, *u.Name, backend.Fold(*u.Name))
	}
	if u.Preview != nil {
		mask |= threadSetPreview
		args = append(args, *u.Preview, backend.Fold(*u.Preview))
	}
	if u.Archived != nil {
		mask |= threadSetArchived
		args = append(args, *u.Archived)
	}
	if u.Model != nil {
		mask |= threadSetModel
		args = append(args, *u.Model)
	}
	if u.UpdatedAt != nil {
		mask |= threadSetUpdatedAt
		args = append(args, micros(*u.UpdatedAt))
	}
	if u.RecencyAt != nil {
		mask |= threadSetRecencyAt
		args = append(args, micros(*u.RecencyAt))
	}
	if u.Meta != nil {
		mask |= threadSetMeta
		args = append(args, jsonArg(backend.NullableJSON(u.Meta)))
	}
	return threadPatches[mask], append(args, u.ID)
}

// The optional fields of a turn patch, as bits of a turnPatches index.
const (
	turnSetStatus = 1 << iota
	turnSetError
	turnSetStartedAt
	turnSetCompletedAt
	turnSetMeta
)

// turnPatches is in the order of the turnSet bits.
var turnPatches = newPatchSQL("turns", []string{
	"status = ?",
	"error = ?",
	"started_at = ?",
	"completed_at = ?",
	"meta = ?",
}, "status = status", "thread_id = ? AND id = ?")

func turnPatchSQL(u store.TurnPatch) (string, []any) {
	args := make([]any, 0, 7)
	mask := 0
	if u.Status != "" {
		mask |= turnSetStatus
		args = append(args, u.Status)
	}
	if u.Error != nil {
		mask |= turnSetError
		args = append(args, jsonArg(backend.NullableJSON(u.Error)))
	}
	if u.StartedAt != nil {
		mask |= turnSetStartedAt
		args = append(args, micros(*u.StartedAt))
	}
	if u.CompletedAt != nil {
		mask |= turnSetCompletedAt
		args = append(args, micros(*u.CompletedAt))
	}
	if u.Meta != nil {
		mask |= turnSetMeta
		args = append(args, jsonArg(backend.NullableJSON(u.Meta)))
	}
	return turnPatches[mask], append(args, u.ThreadID, u.ID)
}
