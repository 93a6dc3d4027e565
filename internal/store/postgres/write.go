package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

// Write applies b in one transaction of two pipelined round trips: first
// the thread rows (locks, creates, patches and Seq counters), then the turn
// and item rows that need the Seqs the first trip returned.
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
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return storageErr(err)
	}
	// A no-op after Commit; otherwise it undoes everything, counters included.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := runPipeline(ctx, tx, threadSteps(p)); err != nil {
		return err
	}
	if err := runPipeline(ctx, tx, rowSteps(p)); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		// The outcome is unknown to us; the caller may retry.
		return apperr.Wrap(apperr.Unavailable, err, "storage commit failed")
	}
	p.FillBack()
	return nil
}

// step is one queued statement and the reading of its result.
type step struct {
	sql  string
	args []any
	read func(br pgx.BatchResults) error
}

func runPipeline(ctx context.Context, tx pgx.Tx, steps []step) error {
	if len(steps) == 0 {
		return nil
	}
	var b pgx.Batch
	for _, st := range steps {
		b.Queue(st.sql, st.args...)
	}
	br := tx.SendBatch(ctx, &b)
	for _, st := range steps {
		if err := st.read(br); err != nil {
			_ = br.Close()
			return err
		}
	}
	if err := br.Close(); err != nil {
		return storageErr(err)
	}
	return nil
}

// execStep reads a statement's result, mapping its errors with onErr.
func execStep(onErr func(error) error, onDone func(rows int64) error) func(pgx.BatchResults) error {
	return func(br pgx.BatchResults) error {
		ct, err := br.Exec()
		if err != nil {
			return onErr(err)
		}
		if onDone != nil {
			return onDone(ct.RowsAffected())
		}
		return nil
	}
}

const insertThreadSQL = `INSERT INTO threads (id, name, name_fold, preview, preview_fold, cwd,
	model_provider, model, source, forked_from_id, archived, created_at, updated_at, recency_at, meta)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`

func threadSteps(p *backend.Plan) []step {
	var steps []step
	if lockIDs := p.LockIDs(); len(lockIDs) > 0 {
		steps = append(steps, step{
			sql:  `SELECT id FROM threads WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE`,
			args: []any{lockIDs},
			read: execStep(storageErr, nil),
		})
	}
	for _, t := range p.CreateThreads {
		name := ""
		if t.Name != nil {
			name = *t.Name
		}
		steps = append(steps, step{
			sql: insertThreadSQL,
			args: []any{t.ID, t.Name, backend.Fold(name), t.Preview, backend.Fold(t.Preview), t.Cwd,
				t.ModelProvider, t.Model, t.Source, t.ForkedFromID, t.Archived,
				t.CreatedAt, t.UpdatedAt, t.RecencyAt, jsonArg(t.Meta)},
			read: execStep(func(err error) error {
				if pgCode(err) == codeUniqueViolation {
					return apperr.Wrap(apperr.Conflict, err, "thread %s already exists", t.ID)
				}
				return storageErr(err)
			}, nil),
		})
	}
	for _, u := range p.UpdateThreads {
		sql, args := threadPatchSQL(u)
		steps = append(steps, step{sql: sql, args: args, read: execStep(storageErr, func(n int64) error {
			if n == 0 {
				return backend.ThreadNotFound(u.ID)
			}
			return nil
		})})
	}
	seqSteps := func(groups []backend.Group, column string, assign func(i int, seq int64)) {
		for _, g := range groups {
			steps = append(steps, step{
				sql:  fmt.Sprintf(`UPDATE threads SET %[1]s = %[1]s + $2 WHERE id = $1 RETURNING %[1]s`, column),
				args: []any{g.ThreadID, int64(len(g.Idx))},
				read: func(br pgx.BatchResults) error {
					var last int64
					if err := br.QueryRow().Scan(&last); err != nil {
						if isNoRows(err) {
							return backend.ThreadNotFound(g.ThreadID)
						}
						return storageErr(err)
					}
					first := last - int64(len(g.Idx)) + 1
					for k, i := range g.Idx {
						assign(i, first+int64(k))
					}
					return nil
				},
			})
		}
	}
	seqSteps(p.TurnGroups, "turn_seq", func(i int, seq int64) { p.CreateTurns[i].Seq = seq })
	seqSteps(p.ItemGroups, "item_seq", func(i int, seq int64) { p.AppendItems[i].Seq = seq })
	return steps
}

func threadPatchSQL(u store.ThreadPatch) (string, []any) {
	args := []any{u.ID}
	var set []string
	add := func(column string, v any) {
		args = append(args, v)
		set = append(set, fmt.Sprintf("%s = $%d", column, len(args)))
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
		add("updated_at", *u.UpdatedAt)
	}
	if u.RecencyAt != nil {
		add("recency_at", *u.RecencyAt)
	}
	if u.Meta != nil {
		add("meta", jsonArg(backend.NullableJSON(u.Meta)))
	}
	if len(set) == 0 {
		// Still report NotFound for an unknown thread.
		set = append(set, "archived = archived")
	}
	return "UPDATE threads SET " + strings.Join(set, ", ") + " WHERE id = $1", args
}

const insertTurnSQL = `INSERT INTO turns (thread_id, id, seq, status, error, started_at, completed_at, meta)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

const insertItemSQL = `INSERT INTO items (thread_id, seq, turn_id, item_id, type, payload, created_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7)`

func rowSteps(p *backend.Plan) []step {
	var steps []step
	for _, t := range p.CreateTurns {
		steps = append(steps, step{
			sql: insertTurnSQL,
			args: []any{t.ThreadID, t.ID, t.Seq, t.Status, jsonArg(t.Error),
				t.StartedAt, t.CompletedAt, jsonArg(t.Meta)},
			read: execStep(func(err error) error {
				switch pgCode(err) {
				case codeUniqueViolation:
					return apperr.Wrap(apperr.Conflict, err, "turn %s already exists in thread %s", t.ID, t.ThreadID)
				case codeForeignKeyViolation:
					return backend.ThreadNotFound(t.ThreadID)
				}
				return storageErr(err)
			}, nil),
		})
	}
	for _, u := range p.UpdateTurns {
		sql, args := turnPatchSQL(u)
		steps = append(steps, step{sql: sql, args: args, read: execStep(storageErr, func(n int64) error {
			if n == 0 {
				return backend.TurnNotFound(u.ThreadID, u.ID)
			}
			return nil
		})})
	}
	for _, it := range p.AppendItems {
		steps = append(steps, step{
			sql:  insertItemSQL,
			args: []any{it.ThreadID, it.Seq, it.TurnID, it.ItemID, it.Type, string(it.Payload), it.CreatedAt},
			read: execStep(func(err error) error {
				switch pgCode(err) {
				case codeUniqueViolation:
					return apperr.Wrap(apperr.Conflict, err, "item %s already exists in thread %s", it.ItemID, it.ThreadID)
				case codeForeignKeyViolation:
					return backend.TurnNotFound(it.ThreadID, it.TurnID)
				}
				return storageErr(err)
			}, nil),
		})
	}
	return steps
}

func turnPatchSQL(u store.TurnPatch) (string, []any) {
	args := []any{u.ThreadID, u.ID}
	var set []string
	add := func(column string, v any) {
		args = append(args, v)
		set = append(set, fmt.Sprintf("%s = $%d", column, len(args)))
	}
	if u.Status != "" {
		add("status", u.Status)
	}
	if u.Error != nil {
		add("error", jsonArg(backend.NullableJSON(u.Error)))
	}
	if u.StartedAt != nil {
		add("started_at", *u.StartedAt)
	}
	if u.CompletedAt != nil {
		add("completed_at", *u.CompletedAt)
	}
	if u.Meta != nil {
		add("meta", jsonArg(backend.NullableJSON(u.Meta)))
	}
	if len(set) == 0 {
		set = append(set, "status = status")
	}
	return "UPDATE turns SET " + strings.Join(set, ", ") + " WHERE thread_id = $1 AND id = $2", args
}
