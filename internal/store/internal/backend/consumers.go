package backend

import (
	"context"
	"time"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// ConsumerDB is what the event consumers' statements need of a backend's
// connection: each statement commits on its own.
type ConsumerDB interface {
	DB
	// Exec runs a statement and returns the rows it affected.
	Exec(ctx context.Context, sql string, args ...any) (int64, error)
}

// Consumers implements the event consumers of store.Store (their leases
// and cursors, migration 00005) once for both SQL backends.
type Consumers struct {
	db      ConsumerDB
	d       Dialect
	observe store.ObserveFunc
	usable  func() error

	claim, release, created, positions, save, spans, dropCursor, drop string
}

// NewConsumers returns the event consumers of a store in dialect d over
// db; observe and usable are as NewReader's.
func NewConsumers(d Dialect, db ConsumerDB, observe store.ObserveFunc, usable func() error) Consumers {
	p := d.Param
	return Consumers{
		db: db, d: d, observe: observe, usable: usable,
		// A new consumer starts with token 1; its holder renews it; another
		// holder takes it once it expired, with the next token.
		claim: "INSERT INTO event_consumers (name, holder, token, expires_at, created_at) VALUES (" +
			p(1) + ", " + p(2) + ", 1, " + p(3) + ", " + p(4) + ") ON CONFLICT (name) DO UPDATE SET" +
			" token = CASE WHEN event_consumers.holder = excluded.holder THEN event_consumers.token ELSE event_consumers.token + 1 END," +
			" holder = excluded.holder, expires_at = excluded.expires_at" +
			" WHERE event_consumers.holder = excluded.holder OR event_consumers.expires_at <= " + p(5) +
			" RETURNING token",
		release:   "UPDATE event_consumers SET expires_at = " + p(1) + " WHERE name = " + p(2) + " AND token = " + p(3),
		created:   "SELECT created_at FROM event_consumers WHERE name = " + p(1),
		positions: "SELECT thread_id, seq FROM event_cursors WHERE consumer = " + p(1),
		// A position moves forward only, and only under the lease's token.
		save: "INSERT INTO event_cursors (consumer, thread_id, seq) SELECT " + p(1) + d.cast("text") + ", " + p(2) + d.cast("text") + ", " + p(3) + d.cast("bigint") +
			" WHERE EXISTS (SELECT 1 FROM event_consumers WHERE name = " + p(4) + " AND token = " + p(5) + ")" +
			" ON CONFLICT (consumer, thread_id) DO UPDATE SET seq = CASE WHEN excluded.seq > event_cursors.seq THEN excluded.seq ELSE event_cursors.seq END",
		spans:      "SELECT thread_id, min(COALESCE(first_seq, seq)), max(seq) FROM events WHERE created_at >= " + p(1) + " GROUP BY thread_id",
		dropCursor: "DELETE FROM event_cursors WHERE consumer = " + p(1),
		drop:       "DELETE FROM event_consumers WHERE name = " + p(1),
	}
}

// ClaimEventConsumer implements store.Store.ClaimEventConsumer.
func (c Consumers) ClaimEventConsumer(ctx context.Context, name, holder string, now, expires time.Time) (token int64, ok bool, err error) {
	defer func(start time.Time) { Observe(c.observe, store.OpEventConsumer, start, err) }(time.Now())
	if err := c.usable(); err != nil {
		return 0, false, err
	}
	at := c.d.TimeArg(Time(now))
	err = c.db.QueryRow(ctx, c.claim, name, holder, c.d.TimeArg(Time(expires)), at, at).Scan(&token)
	switch {
	case c.db.NoRows(err):
		return 0, false, nil
	case err != nil:
		return 0, false, c.db.StorageErr(err)
	}
	return token, true, nil
}

// ReleaseEventConsumer implements store.Store.ReleaseEventConsumer.
func (c Consumers) ReleaseEventConsumer(ctx context.Context, name string, token int64, now time.Time) (err error) {
	defer func(start time.Time) { Observe(c.observe, store.OpEventConsumer, start, err) }(time.Now())
	if err := c.usable(); err != nil {
		return err
	}
	if _, err := c.db.Exec(ctx, c.release, c.d.TimeArg(Time(now)), name, token); err != nil {
		return c.db.StorageErr(err)
	}
	return nil
}

// DeleteEventConsumer implements store.Store.DeleteEventConsumer: the
// cursor first, so that a failure between the two statements leaves a
// lease without positions rather than positions without their consumer.
func (c Consumers) DeleteEventConsumer(ctx context.Context, name string) (err error) {
	defer func(start time.Time) { Observe(c.observe, store.OpEventConsumer, start, err) }(time.Now())
	if err := c.usable(); err != nil {
		return err
	}
	for _, q := range []string{c.dropCursor, c.drop} {
		if _, err := c.db.Exec(ctx, q, name); err != nil {
			return c.db.StorageErr(err)
		}
	}
	return nil
}

// EventCursor implements store.Store.EventCursor.
func (c Consumers) EventCursor(ctx context.Context, name string) (cur store.EventCursor, err error) {
	defer func(start time.Time) { Observe(c.observe, store.OpEventConsumer, start, err) }(time.Now())
	if err := c.usable(); err != nil {
		return cur, err
	}
	var created timeCol
	err = c.db.QueryRow(ctx, c.created, name).Scan(&created)
	switch {
	case c.db.NoRows(err):
		return cur, apperr.New(apperr.NotFound, "event consumer %q not found", name)
	case err != nil:
		return cur, c.db.StorageErr(err)
	}
	cur.Created, cur.Positions = created.t, map[string]int64{}
	rows, err := c.db.Query(ctx, c.positions, name)
	if err != nil {
		return cur, c.db.StorageErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var thread string
		var seq int64
		if err := rows.Scan(&thread, &seq); err != nil {
			return cur, c.db.StorageErr(err)
		}
		cur.Positions[thread] = seq
	}
	if err := rows.Err(); err != nil {
		return cur, c.db.StorageErr(err)
	}
	return cur, nil
}

// SaveEventCursor implements store.Store.SaveEventCursor. Each position is one
// statement that checks the token: a takeover between two of them stops
// the rest, and what was saved before it was handled by this holder.
func (c Consumers) SaveEventCursor(ctx context.Context, name string, token int64, positions map[string]int64) (err error) {
	defer func(start time.Time) { Observe(c.observe, store.OpEventConsumer, start, err) }(time.Now())
	if err := c.usable(); err != nil {
		return err
	}
	for thread, seq := range positions {
		n, err := c.db.Exec(ctx, c.save, name, thread, seq, name, token)
		if err != nil {
			return c.db.StorageErr(err)
		}
		if n == 0 {
			return apperr.New(apperr.Conflict, "event consumer %q was taken over", name)
		}
	}
	return nil
}

// EventSpans implements store.Store.EventSpans.
func (c Consumers) EventSpans(ctx context.Context, since time.Time) (out []store.EventSpan, err error) {
	defer func(start time.Time) { Observe(c.observe, store.OpEventConsumer, start, err) }(time.Now())
	if err := c.usable(); err != nil {
		return nil, err
	}
	rows, err := c.db.Query(ctx, c.spans, c.d.TimeArg(Time(since)))
	if err != nil {
		return nil, c.db.StorageErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var sp store.EventSpan
		if err := rows.Scan(&sp.ThreadID, &sp.First, &sp.Last); err != nil {
			return nil, c.db.StorageErr(err)
		}
		out = append(out, sp)
	}
	if err := rows.Err(); err != nil {
		return nil, c.db.StorageErr(err)
	}
	return out, nil
}
