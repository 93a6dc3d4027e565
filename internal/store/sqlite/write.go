package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
	if err := writePlan(ctx, tx, p); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return apperr.Wrap(apperr.Unavailable, err, "storage commit failed")
	}
	p.FillBack()
	return nil
}

func writePlan(ctx context.Context, tx *sql.Tx, p *backend.Plan) error {
	for _, t := range p.CreateThreads {
		name := ""
		if t.Name != nil {
			name = *t.Name
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO threads (id, name, name_fold, preview, preview_fold, cwd,
			model_provider, model, source, forked_from_id, archived, created_at, updated_at, recency_at, meta)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
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
		if err := execOne(ctx, tx, q, args, backend.ThreadNotFound(u.ID)); err != nil {
			return err
		}
	}
	if err := assignSeqs(ctx, tx, p.TurnGroups, "turn_seq", func(i int, seq int64) { p.CreateTurns[i].Seq = seq }); err != nil {
		return err
	}
	if err := assignSeqs(ctx, tx, p.ItemGroups, "item_seq", func(i int, seq int64) { p.AppendItems[i].Seq = seq }); err != nil {
		return err
	}
	for _, t := range p.CreateTurns {
		_, err := tx.ExecContext(ctx, `INSERT INTO turns (thread_id, id, seq, status, error, started_at, completed_at, meta)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
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
		if err := execOne(ctx, tx, q, args, backend.TurnNotFound(u.ThreadID, u.ID)); err != nil {
			return err
		}
	}
	if len(p.AppendItems) == 0 {
		return nil
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO items (thread_id, seq, turn_id, item_id, type, payload, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return storageErr(err)
	}
	defer ins.Close()
	for _, it := range p.AppendItems {
		_, err := ins.ExecContext(ctx, it.ThreadID, it.Seq, it.TurnID, it.ItemID, it.Type, string(it.Payload), micros(it.CreatedAt))
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

// assignSeqs bumps each group's counter once and hands out the range it
// reserved, in the group's order.
func assignSeqs(ctx context.Context, tx *sql.Tx, groups []backend.Group, column string, assign func(i int, seq int64)) error {
	for _, g := range groups {
		var last int64
		err := tx.QueryRowContext(ctx,
			fmt.Sprintf(`UPDATE threads SET %[1]s = %[1]s + ? WHERE id = ? RETURNING %[1]s`, column),
			int64(len(g.Idx)), g.ThreadID).Scan(&last)
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

// execOne runs an UPDATE that must touch a row, returning notFound otherwise.
func execOne(ctx context.Context, tx *sql.Tx, q string, args []any, notFound error) error {
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return storageErr(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return storageErr(err)
	}
	if n == 0 {
		return notFound
	}
	return nil
}

func threadPatchSQL(u store.ThreadPatch) (string, []any) {
	var set []string
	var args []any
	add := func(column string, v any) {
		set = append(set, column+" = ?")
		args = append(args, v)
	}
	if u.Name != nil {
		add("name", *u.Name)
		add("name_fold", backend.Fold(*u.Name))
	}
	if u.Preview != nil {
		add("preview", *u.Preview)
		add("preview_fold", backend.Fold(*u.Preview))
	}
	if u.Archived != nil {
		add("archived", *u.Archived)
	}
	if u.Model != nil {
		add("model", *u.Model)
	}
	if u.UpdatedAt != nil {
		add("updated_at", micros(*u.UpdatedAt))
	}
	if u.RecencyAt != nil {
		add("recency_at", micros(*u.RecencyAt))
	}
	if u.Meta != nil {
		add("meta", jsonArg(backend.NullableJSON(u.Meta)))
	}
	if len(set) == 0 {
		// Still report NotFound for an unknown thread.
		set = append(set, "archived = archived")
	}
	return "UPDATE threads SET " + strings.Join(set, ", ") + " WHERE id = ?", append(args, u.ID)
}

func turnPatchSQL(u store.TurnPatch) (string, []any) {
	var set []string
	var args []any
	add := func(column string, v any) {
		set = append(set, column+" = ?")
		args = append(args, v)
	}
	if u.Status != "" {
		add("status", u.Status)
	}
	if u.Error != nil {
		add("error", jsonArg(backend.NullableJSON(u.Error)))
	}
	if u.StartedAt != nil {
		add("started_at", micros(*u.StartedAt))
	}
	if u.CompletedAt != nil {
		add("completed_at", micros(*u.CompletedAt))
	}
	if u.Meta != nil {
		add("meta", jsonArg(backend.NullableJSON(u.Meta)))
	}
	if len(set) == 0 {
		set = append(set, "status = status")
	}
	return "UPDATE turns SET " + strings.Join(set, ", ") + " WHERE thread_id = ? AND id = ?", append(args, u.ThreadID, u.ID)
}
