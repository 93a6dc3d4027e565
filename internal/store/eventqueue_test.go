package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/store"
)

// heldStore holds every write until it is let go.
type heldStore struct {
	store.Store
	writing, release chan struct{}
}

func (s heldStore) Write(context.Context, *store.Batch) error {
	s.writing <- struct{}{}
	<-s.release
	return nil
}

// TakeThread takes one thread's queued events, after the thread's events
// that a flush is writing are written, and leaves the other threads'
// queued; a failed write gives them back.
func TestEventQueueTakeThread(t *testing.T) {
	q := store.NewEventQueue(10)
	ev := func(thread string, seq int64) *store.Event {
		return &store.Event{ThreadID: thread, Seq: seq, Method: "m", Data: []byte("{}")}
	}
	q.Push(ev("a", 1))
	s := heldStore{writing: make(chan struct{}), release: make(chan struct{})}
	flushed := make(chan error)
	go func() { flushed <- q.Flush(context.Background(), s) }()
	<-s.writing // a's first event is in flight
	q.Push(ev("a", 2))
	q.Push(ev("b", 1))

	took := make(chan []*store.Event)
	var done func(bool)
	go func() {
		evs, d := q.TakeThread("a")
		done = d
		took <- evs
	}()
	select {
	case <-took:
		t.Fatal("took the thread's events while its earlier ones were being written")
	case <-time.After(20 * time.Millisecond):
	}
	close(s.release)
	require.NoError(t, <-flushed)
	evs := <-took
	require.Len(t, evs, 1)
	require.EqualValues(t, 2, evs[0].Seq)
	require.Len(t, q.Queued("a", 0), 1, "in flight, still seen by readers")
	require.Len(t, q.Queued("b", 0), 1, "another thread's stay queued")

	done(false)
	require.Len(t, q.Queued("a", 0), 1, "given back")
	evs, done = q.TakeThread("a")
	require.Len(t, evs, 1)
	done(true)
	require.Empty(t, q.Queued("a", 0))
}
