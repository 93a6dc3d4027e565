package backend

import (
	"context"
	"time"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// EventSeqs implements the reservations of event sequence numbers of
// store.Store (migration 00013) once for both SQL backends: one upsert,
// which commits on its own, moves a thread's reservation past both the
// last reservation and the greatest stored number.
type EventSeqs struct {
	db      ConsumerDB
	observe store.ObserveFunc
	usable  func() error

	reserve string
}

// NewEventSeqs returns the reservations of a store in dialect d over db;
// observe and usable are as NewReader's.
func NewEventSeqs(d Dialect, db ConsumerDB, observe store.ObserveFunc, usable func() error) EventSeqs {
	p := d.Param
	// The arguments: thread, thread, n, n, n. A new row starts n past the
	// greatest stored number; an existing one moves n past the greater of
	// itself and that number.
	return EventSeqs{
		db: db, observe: observe, usable: usable,
		reserve: "INSERT INTO event_seq_reservations (thread_id, reserved) VALUES (" + p(1) +
			", (SELECT COALESCE(MAX(seq), 0) FROM events WHERE thread_id = " + p(2) + ") + " + p(3) + ")" +
			" ON CONFLICT (thread_id) DO UPDATE SET reserved = CASE" +
			" WHEN event_seq_reservations.reserved + " + p(4) + " > excluded.reserved" +
			" THEN event_seq_reservations.reserved + " + p(5) + " ELSE excluded.reserved END RETURNING reserved",
	}
}

// ReserveEventSeqs implements store.Store.ReserveEventSeqs.
func (e EventSeqs) ReserveEventSeqs(ctx context.Context, threadID string, n int64) (first int64, err error) {
	defer func(start time.Time) { Observe(e.observe, store.OpReserveEventSeqs, start, err) }(time.Now())
	if err := ValidReservation(threadID, n); err != nil {
		return 0, err
	}
	if err := e.usable(); err != nil {
		return 0, err
	}
	id := CanonicalID(threadID)
	var reserved int64
	if err := e.db.QueryRow(ctx, e.reserve, id, id, n, n, n).Scan(&reserved); err != nil {
		return 0, e.db.StorageErr(err)
	}
	return reserved - n + 1, nil
}

// ValidReservation checks the arguments of store.Store.ReserveEventSeqs.
func ValidReservation(threadID string, n int64) error {
	if !store.ValidThreadID(threadID) {
		return apperr.New(apperr.Invalid, "thread id %q is not a UUID", threadID)
	}
	if n < 1 {
		return apperr.New(apperr.Invalid, "a reservation of %d event numbers", n)
	}
	return nil
}
