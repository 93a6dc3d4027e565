package store

import (
	"cmp"
	"context"
	"slices"
	"sync"
)

// EventQueue holds event log entries waiting for the store. A
// GroupCommitter given the queue takes everything queued into each commit
// round, so events ride the transcript's transactions instead of paying for
// their own; whoever fills the queue flushes what no round took (Flush).
// It is safe for concurrent use.
type EventQueue struct {
	max int

	mu       sync.Mutex
	pending  []*Event
	inflight map[*[]*Event]struct{} // taken, not yet committed or failed
	dropped  int64
	wake     chan struct{} // buffered(1): events are pending
}

// NewEventQueue returns a queue that holds at most max events (beyond it
// Push drops them).
func NewEventQueue(max int) *EventQueue {
	return &EventQueue{max: max, inflight: map[*[]*Event]struct{}{}, wake: make(chan struct{}, 1)}
}

// Push queues an event; it reports false, and counts the event dropped,
// when the queue is full.
func (q *EventQueue) Push(ev *Event) bool {
	q.mu.Lock()
	if len(q.pending) >= q.max {
		q.dropped++
		q.mu.Unlock()
		return false
	}
	q.pending = append(q.pending, ev)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// Wake is signalled after a Push to an idle queue.
func (q *EventQueue) Wake() <-chan struct{} { return q.wake }

// Dropped returns and resets the count of events dropped.
func (q *EventQueue) Dropped() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.dropped
	q.dropped = 0
	return n
}

// take removes every pending event; they stay visible to Queued until done
// is called with the outcome of their write.
func (q *EventQueue) take() (evs []*Event, done func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		return nil, func() {}
	}
	evs = q.pending
	q.pending = nil
	key := &evs
	q.inflight[key] = struct{}{}
	return evs, func() {
		q.mu.Lock()
		delete(q.inflight, key)
		q.mu.Unlock()
	}
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
