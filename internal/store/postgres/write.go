package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

// Write applies b in one transaction of three round trips: BEGIN with the
// thread rows (locks, creates, patches and Seq counters), then the turn and
// item rows that need the Seqs the first trip returned, then COMMIT. BEGIN
// rides the first trip instead of taking one of its own (pgx's Begin): a
// group commit of several daemons' writes, which each node makes for every
// few turns, pays one round trip less. COMMIT cannot ride the second trip:
// a step that checks what a statement did (a row not found) must still be
// able to roll the transaction back.
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
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return storageErr(err)
	}
	// A connection given back inside a transaction (its ROLLBACK failed)
	// is closed by the pool, not reused.
	defer conn.Release()
	ended := false // by COMMIT, whatever its outcome
	defer func() {
		if !ended {
			// Undoes everything, counters included.
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	begin := step{sql: "BEGIN", read: execStep(storageErr, nil)}
	if err := runPipeline(ctx, conn, append([]step{begin}, threadSteps(p, b.Fences)...)); err != nil {
		return err
	}
	if err := runPipeline(ctx, conn, rowSteps(p)); err != nil {
		return err
	}
	tag, err := conn.Exec(ctx, "COMMIT")
	if err == nil && tag.String() == "ROLLBACK" {
		// The transaction had failed: Postgres rolled it back.
		ended, err = true, pgx.ErrTxCommitRollback
	}
	if err != nil {
		// The outcome is unknown to us (the log says the commit failed);
		// the caller may retry. Clients get the outage's usual words.
		return apperr.Wrap(apperr.Unavailable, fmt.Errorf("commit: %w", err), "storage unavailable")
	}
	ended = true
	p.FillBack()
	return nil
}

// step is one queued statement and the reading of its result.
type step struct {
	sql  string
	args []any
	read func(br pgx.BatchResults) error
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
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return storageErr(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	key := backend.CanonicalID(id)
	var deleted int64
	for _, q := range backend.DeleteThreadSQL("$1") {
		tag, err := tx.Exec(ctx, q, key)
		if err != nil {
			return storageErr(err)
		}
		deleted = tag.RowsAffected()
	}
	if deleted == 0 {
		return backend.ThreadNotFound(id)
	}
	if err := tx.Commit(ctx); err != nil {
		return storageErr(err)
	}
	return nil
}

// batcher sends a batch of statements in one round trip.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

func runPipeline(ctx context.Context, tx batcher, steps []step) error {
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

var takeQueued = backend.TakeQueuedSQL(backend.Postgres)

// statements are the write statements in Postgres's dialect. pgx sends a
// string bound to a json or jsonb parameter verbatim.
var statements = backend.NewStatements(backend.Postgres, func(raw []byte) any { return string(raw) })

var dropTurns = backend.DropTurnsSQL(backend.Postgres)

func threadSteps(p *backend.Plan, fences []store.Fence) []step {
	var steps []step
	if lockIDs := p.LockIDs(); len(lockIDs) > 0 {
		steps = append(steps, step{
			sql:  `SELECT id FROM threads WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE`,
			args: []any{lockIDs},
			read: execStep(storageErr, nil),
		})
	}
	// After the thread locks: a lease changes hands only under its
	// thread's lock (internal/cluster), so the lease read here stays the
	// lease until this transaction ends.
	if len(fences) > 0 {
		steps = append(steps, fenceStep(fences))
	}
	for _, t := range p.CreateThreads {
		steps = append(steps, step{
			sql:  statements.InsertThread,
			args: statements.ThreadArgs(&t),
			read: execStep(func(err error) error {
				if pgCode(err) == codeUniqueViolation {
					return apperr.Wrap(apperr.Conflict, err, "thread %s already exists", t.ID)
				}
				return storageErr(err)
			}, nil),
		})
	}
	before, after := p.ThreadWrites()
	steps = appendThreadWrites(steps, p, before)
	for _, d := range p.DropTurns {
		for i, q := range dropTurns {
			steps = append(steps, step{sql: q, args: backend.DropTurnsArgs(i, d), read: execStep(storageErr, func(n int64) error {
				if i == 1 && n == 0 {
					return backend.TurnNotFound(d.ThreadID, d.TurnID)
				}
				return nil
			})})
		}
	}
	return appendThreadWrites(steps, p, after)
}

// appendThreadWrites appends the steps of writes, in order (one UPDATE of a
// thread's row each: Plan.ThreadWrites).
func appendThreadWrites(steps []step, p *backend.Plan, writes []backend.ThreadWrite) []step {
	for _, tw := range writes {
		sql, args := tw.SQL(statements)
		if !tw.Bumps() {
			steps = append(steps, step{sql: sql, args: args, read: execStep(storageErr, func(n int64) error {
				if n == 0 {
					return backend.ThreadNotFound(tw.ID)
				}
				return nil
			})})
			continue
		}
		steps = append(steps, step{sql: sql, args: args, read: func(br pgx.BatchResults) error {
			var turnSeq, itemSeq int64
			if err := br.QueryRow().Scan(&turnSeq, &itemSeq); err != nil {
				if isNoRows(err) {
					return backend.ThreadNotFound(tw.ID)
				}
				return storageErr(err)
			}
			tw.Assign(p, turnSeq, itemSeq)
			return nil
		}})
	}
	return steps
}

// eventSteps insert the events with one statement, whatever their number,
// and announce them: one pg_notify per thread, naming the thread and its
// first and last event in this transaction, which Postgres delivers to the listening daemons when (and
// only if) the transaction commits.
func eventSteps(evs []store.Event) []step {
	threads := make([]string, len(evs))
	seqs := make([]int64, len(evs))
	methods := make([]string, len(evs))
	data := make([][]byte, len(evs))
	created := make([]time.Time, len(evs))
	type span struct{ first, last int64 }
	spans := map[string]span{}
	for i, ev := range evs {
		threads[i], seqs[i], methods[i], data[i], created[i] = ev.ThreadID, ev.Seq, ev.Method, ev.Data, ev.CreatedAt
		sp, ok := spans[ev.ThreadID]
		if !ok {
			sp = span{ev.Seq, ev.Seq}
		}
		spans[ev.ThreadID] = span{min(sp.first, ev.Seq), max(sp.last, ev.Seq)}
	}
	notes := make([]string, 0, len(spans))
	for id, sp := range spans {
		notes = append(notes, id+":"+strconv.FormatInt(sp.first, 10)+":"+strconv.FormatInt(sp.last, 10))
	}
	return []step{{
		sql: `INSERT INTO events (thread_id, seq, method, data, created_at)
			SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bytea[], $5::timestamptz[])`,
		args: []any{threads, seqs, methods, data, created},
		read: execStep(func(err error) error {
			if pgCode(err) == codeUniqueViolation {
				return apperr.Wrap(apperr.Conflict, err, "event already stored")
			}
			return storageErr(err)
		}, nil),
	}, {
		sql:  `SELECT pg_notify('` + EventsChannel + `', n) FROM unnest($1::text[]) AS n`,
		args: []any{notes},
		read: execStep(storageErr, nil),
	}}
}

// EventsChannel is the channel every commit of events notifies, with the
// payload "<thread id>:<first seq>:<last seq>".
const EventsChannel = "appserver_events"

// PruneEvents deletes up to limit events created before `before`.
func (s *Store) PruneEvents(ctx context.Context, before time.Time, limit int) (n int64, err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpPruneEvents, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return 0, err
	}
	return backend.PruneEvents(ctx, readDB{s.pool}, pruneEvents, backend.Postgres, before, limit)
}

var pruneEvents = backend.PruneEventsSQL(backend.Postgres)

// PruneThreadEvents deletes a thread's oldest events beyond maxBytes.
func (s *Store) PruneThreadEvents(ctx context.Context, threadID string, maxBytes int64, limit int) (deleted, remaining int64, err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpPruneThreadEvents, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return 0, 0, err
	}
	return backend.PruneThreadEvents(ctx, readDB{s.pool}, backend.Postgres, threadID, maxBytes, limit)
}

// Reclaim does nothing: autovacuum makes the space of deleted rows
// reusable, and giving it back to the file system (VACUUM FULL) would lock
// the table.
func (s *Store) Reclaim(context.Context) error { return s.usable() }

func rowSteps(p *backend.Plan) []step {
	var steps []step
	for _, t := range p.CreateTurns {
		steps = append(steps, step{
			sql:  statements.InsertTurn,
			args: statements.TurnArgs(&t),
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
		sql, args := statements.TurnPatch(u)
		steps = append(steps, step{sql: sql, args: args, read: execStep(storageErr, func(n int64) error {
			if n == 0 {
				return backend.TurnNotFound(u.ThreadID, u.ID)
			}
			return nil
		})})
	}
	for _, it := range p.AppendItems {
		steps = append(steps, step{
			sql:  statements.InsertItem,
			args: statements.ItemArgs(&it),
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
	for _, q := range p.TakeQueued {
		steps = append(steps, step{sql: takeQueued, args: []any{q.TurnID, q.ThreadID, q.ID}, read: execStep(storageErr, func(n int64) error {
			if n == 0 {
				return backend.NotQueued(q)
			}
			return nil
		})})
	}
	if len(p.AppendEvents) > 0 {
		steps = append(steps, eventSteps(p.AppendEvents)...)
	}
	for i := range p.AppendAudit {
		a := &p.AppendAudit[i]
		steps = append(steps, step{
			sql:  statements.InsertAudit,
			args: statements.AuditArgs(a),
			read: func(br pgx.BatchResults) error {
				if err := br.QueryRow().Scan(&a.Seq); err != nil {
					return storageErr(err)
				}
				return nil
			},
		})
	}
	return steps
}

// fenceSQL counts the fences whose lease still carries their token and has
// not expired. It runs once the batch holds its threads' row locks, and a
// lease changes hands only under its thread's row lock, so a takeover
// either waits for this transaction or was committed before this read and
// is seen: never both. The lease rows themselves are not locked (a lock
// would write each row on every write). The clock is the database's, the
// one every node's leases are measured by.
//
// A fence of token 0 counts when the thread has no live lease: the write
// must not land on a thread whose lease another node holds. (A failover
// takeover leaves the lease expired, its turn settled: the thread is idle
// then, and such a write lands as any write of an idle thread does.)
const fenceSQL = `SELECT count(*) FROM unnest($1::uuid[], $2::bigint[]) AS f(thread_id, token)
	WHERE (f.token <> 0) = EXISTS (SELECT 1 FROM thread_leases l
		WHERE l.thread_id = f.thread_id AND l.expires_at > clock_timestamp()
		  AND (f.token = 0 OR l.token = f.token))`

// fenceStep checks a batch's fences before anything is written.
func fenceStep(fences []store.Fence) step {
	ids := make([]string, 0, len(fences))
	tokens := make([]int64, 0, len(fences))
	seen := make(map[store.Fence]bool, len(fences))
	for _, f := range fences {
		// A merged batch repeats the fence of a thread once per caller.
		if seen[f] {
			continue
		}
		seen[f] = true
		ids = append(ids, f.ThreadID)
		tokens = append(tokens, f.Token)
	}
	return step{sql: fenceSQL, args: []any{ids, tokens}, read: func(br pgx.BatchResults) error {
		var held int
		if err := br.QueryRow().Scan(&held); err != nil {
			return storageErr(err)
		}
		if held != len(ids) {
			return apperr.New(apperr.Conflict, "thread lease lost: another node owns the thread now")
		}
		return nil
	}}
}
