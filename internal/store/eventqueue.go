package store

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/appserver/appserver/internal/apperr"
)

// riders holds records waiting to ride the next commit round of a
// GroupCommitter: the committer takes everything queued into each round,
// so that they share the transcript's transactions instead of paying for
// their own; whoever fills the queue flushes what no round took. It is
// safe for concurrent use.
type riders[T any] struct {
	max int

	mu       sync.Mutex
	pending  []T
	inflight map[*[]T]struct{} // taken, not yet committed or failed
	dropped  int64
	wake     chan struct{} // buffered(1): records are pending
	// landed is closed (and replaced) whenever records in flight are done
	// with.
	landed chan struct{}
}

func newRiders[T any](max int) riders[T] {
	return riders[T]{max: max, inflight: map[*[]T]struct{}{}, wake: make(chan struct{}, 1), landed: make(chan struct{})}
}

// Push queues a record; it reports false, and counts the record dropped,
// when the queue is full.
func (q *riders[T]) Push(r T) bool {
	q.mu.Lock()
	if len(q.pending) >= q.max {
		q.dropped++
		q.mu.Unlock()
		return false
	}
	q.pending = append(q.pending, r)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// Wake is signalled after a Push to an idle queue.
func (q *riders[T]) Wake() <-chan struct{} { return q.wake }

// Dropped returns and resets the count of records dropped.
func (q *riders[T]) Dropped() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.dropped
	q.dropped = 0
	return n
}

// drop counts n records dropped.
func (q *riders[T]) drop(n int) {
	q.mu.Lock()
	q.dropped += int64(n)
	q.mu.Unlock()
}

// take removes every pending record; they stay in flight until done is
// called with the outcome of their write.
func (q *riders[T]) take() (rs []T, done func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		return nil, func() {}
	}
	rs = q.pending
	q.pending = nil
	key := &rs
	q.inflight[key] = struct{}{}
	return rs, func() {
		q.mu.Lock()
		q.landLocked(key)
		q.mu.Unlock()
	}
}

// landLocked forgets records in flight and wakes whoever waits for them.
// q.mu is held.
func (q *riders[T]) landLocked(key *[]T) {
	delete(q.inflight, key)
	close(q.landed)
	q.landed = make(chan struct{})
}

// EventQueue holds event log entries waiting for the store (see riders).
type EventQueue struct {
	riders[*Event]
}

// NewEventQueue returns a queue that holds at most max events (beyond it
// Push drops them).
func NewEventQueue(max int) *EventQueue {
	return &EventQueue{newRiders[*Event](max)}
}

// Flush writes what is pending through s, alone; it is for the events no
// commit round took.
func (q *EventQueue) Flush(ctx context.Context, s Store) error {
	evs, done := q.take()
	defer done()
	if len(evs) == 0 {
		return nil
	}
	return s.Write(ctx, &Batch{AppendEvents: evs})
}

// TakeThread removes the pending events of one thread, for a write of the
// caller's that carries them ahead of its own events of the thread, so
// that the store never holds a thread's later events without its earlier
// ones. It first waits for the thread's events that a commit round or a
// flush is writing. The events stay in flight (Queued returns them) until
// done reports the write's outcome: a failed write gives them back to the
// queue, for the next round or flush.
func (q *EventQueue) TakeThread(threadID string) (evs []*Event, done func(written bool)) {
	q.mu.Lock()
	for q.inflightOf(threadID) {
		landed := q.landed
		q.mu.Unlock()
		<-landed
		q.mu.Lock()
	}
	defer q.mu.Unlock()
	kept := q.pending[:0]
	for _, ev := range q.pending {
		if ev.ThreadID == threadID {
			evs = append(evs, ev)
		} else {
			kept = append(kept, ev)
		}
	}
	clear(q.pending[len(kept):])
	q.pending = kept
	if len(evs) == 0 {
		return nil, func(bool) {}
	}
	key := &evs
	q.inflight[key] = struct{}{}
	return evs, func(written bool) {
		q.mu.Lock()
		if !written {
			q.pending = append(q.pending, evs...)
		}
		q.landLocked(key)
		q.mu.Unlock()
		if !written {
			select {
			case q.wake <- struct{}{}:
			default:
			}
		}
	}
}

// inflightOf reports whether events of the thread are being written. q.mu
// is held.
func (q *EventQueue) inflightOf(threadID string) bool {
	for k := range q.inflight {
		for _, ev := range *k {
			if ev.ThreadID == threadID {
				return true
			}
		}
	}
	return false
}

// Queued returns the events of a thread with Seq above afterSeq that are
// queued or being written, in Seq order: what a reader of the store may
// not see yet.
func (q *EventQueue) Queued(threadID string, afterSeq int64) []*Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*Event
	add := func(evs []*Event) {
		for _, ev := range evs {
			if ev.ThreadID == threadID && ev.Seq > afterSeq {
				out = append(out, ev)
			}
		}
	}
	for k := range q.inflight {
		add(*k)
	}
	add(q.pending)
	slices.SortFunc(out, func(a, b *Event) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// AuditQueue holds audit log entries waiting for the store (see riders):
// an action's entry rides the commit round that stores the transcript of
// the turn it happened in, or the next one.
type AuditQueue struct {
	riders[*AuditEntry]
}

// NewAuditQueue returns a queue that holds at most max entries (beyond it
// Push drops them).
func NewAuditQueue(max int) *AuditQueue {
	return &AuditQueue{newRiders[*AuditEntry](max)}
}

// Push queues a valid entry: an invalid one is refused here (Invalid), so
// that it never spoils a commit round, and a full queue drops it
// (Unavailable, counted by Dropped).
func (q *AuditQueue) Push(a *AuditEntry) error {
	if err := a.validate(); err != nil {
		return err
	}
	if !q.riders.Push(a) {
		return apperr.New(apperr.Unavailable, "audit queue is full")
	}
	return nil
}

// Flush writes what is pending through s, alone; it is for the entries no
// commit round took. Entries it could not write are queued again (as room
// allows), for the next round or flush.
func (q *AuditQueue) Flush(ctx context.Context, s Store) error {
	as, done := q.take()
	defer done()
	if len(as) == 0 {
		return nil
	}
	err := s.Write(ctx, &Batch{AppendAudit: as})
	if err != nil {
		q.requeue(as)
	}
	return err
}

// requeue queues entries again after a failed write, as room allows.
func (q *AuditQueue) requeue(as []*AuditEntry) {
	for _, a := range as {
		q.riders.Push(a)
	}
}
