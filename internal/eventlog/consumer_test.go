package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/eventlog"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/memory"
	"github.com/appserver/appserver/internal/store/pgtest"
	"github.com/appserver/appserver/internal/store/postgres"
)

// handled is what a fake consumer (a webhook sender) was handed: thread id
// and sequence number, in order.
type handled struct {
	mu   sync.Mutex
	got  []string
	seen chan struct{}
}

func newHandled() *handled { return &handled{seen: make(chan struct{}, 1)} }

func (h *handled) handle(_ context.Context, ev *hub.Notification) error {
	if len(ev.Frame()) == 0 {
		return errors.New("an event without its frame")
	}
	h.mu.Lock()
	h.got = append(h.got, key(ev.ThreadID, ev.Seq))
	h.mu.Unlock()
	select {
	case h.seen <- struct{}{}:
	default:
	}
	return nil
}

func (h *handled) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

// waitFor waits until the consumer was handed n events.
func (h *handled) waitFor(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if got := h.list(); len(got) >= n {
			return got
		}
		select {
		case <-h.seen:
		case <-deadline:
			t.Fatalf("the consumer got %d events, want %d: %v", len(h.list()), n, h.list())
		}
	}
}

func key(thread string, seq int64) string { return fmt.Sprintf("%s#%d", thread, seq) }

// keys lists the events of thread from..to.
func keys(thread string, from, to int64) []string {
	var out []string
	for seq := from; seq <= to; seq++ {
		out = append(out, key(thread, seq))
	}
	return out
}

// inThreadOrder keeps the events of one thread, in the order handed.
func inThreadOrder(got []string, thread string) []string {
	var out []string
	for _, k := range got {
		if len(k) > len(thread) && k[:len(thread)] == thread {
			out = append(out, k)
		}
	}
	return out
}

// holding waits until the consumer "webhooks" exists: its first holder
// claimed it, and the threads it does not know yet start from then on.
func holding(t *testing.T, st store.Store) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := st.EventCursor(t.Context(), "webhooks")
		return err == nil
	}, 10*time.Second, time.Millisecond, "the consumer holds its lease")
}

func newConsumer(t *testing.T, cfg eventlog.ConsumerConfig) *eventlog.Consumer {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "webhooks"
	}
	if cfg.Holder == "" {
		cfg.Holder = "node-a"
	}
	if cfg.SaveEvery == 0 {
		cfg.SaveEvery = 5 * time.Millisecond
	}
	c, err := eventlog.NewConsumer(cfg)
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(c.Stop)
	return c
}

// A consumer is handed every event of every thread in its thread's order,
// those logged before it started (from the log) and those numbered while
// it runs (live); a consumer of the same name started after it stopped
// resumes from the stored cursor: nothing missed, nothing handed twice.
func TestConsumerResumesFromItsCursor(t *testing.T) {
	st := memory.New(memory.Config{})
	l := newLog(t, st, eventlog.Config{StoreDeltas: true})
	h := hub.New(hub.Config{Journal: l})
	a, b := uuid.NewString(), uuid.NewString()
	for i := range 5 {
		publish(h, a, delta(i))
	}
	first := newHandled()
	c1 := newConsumer(t, eventlog.ConsumerConfig{Log: l, Hub: h, Store: st, Handle: first.handle, FromOldest: true})
	for i := range 5 {
		publish(h, b, delta(i))
		publish(h, a, delta(5+i))
	}
	got := first.waitFor(t, 15)
	require.Equal(t, keys(a, 1, 10), inThreadOrder(got, a))
	require.Equal(t, keys(b, 1, 5), inThreadOrder(got, b))
	c1.Stop()

	// Meanwhile the threads go on, and a new one starts.
	c := uuid.NewString()
	for i := range 3 {
		publish(h, a, delta(10+i))
		publish(h, c, delta(i))
	}
	second := newHandled()
	newConsumer(t, eventlog.ConsumerConfig{Log: l, Hub: h, Store: st, Handle: second.handle, FromOldest: true})
	publish(h, b, delta(5))
	got = second.waitFor(t, 7)
	require.Equal(t, keys(a, 11, 13), inThreadOrder(got, a), "from the cursor on")
	require.Equal(t, keys(b, 6, 6), inThreadOrder(got, b))
	require.Equal(t, keys(c, 1, 3), inThreadOrder(got, c))
	time.Sleep(50 * time.Millisecond)
	require.Len(t, second.list(), 7, "nothing handed twice")
}

// failingSaves is a store whose cursor saves and lease releases fail while
// fail is set: the daemon died before it could save or give the lease
// back.
type failingSaves struct {
	store.Store
	fail atomic.Bool
}

func (f *failingSaves) SaveEventCursor(ctx context.Context, name string, token int64, positions map[string]int64) error {
	if f.fail.Load() {
		return apperr.New(apperr.Unavailable, "storage unavailable")
	}
	return f.Store.SaveEventCursor(ctx, name, token, positions)
}

func (f *failingSaves) ReleaseEventConsumer(ctx context.Context, name string, token int64, now time.Time) error {
	if f.fail.Load() {
		return apperr.New(apperr.Unavailable, "storage unavailable")
	}
	return f.Store.ReleaseEventConsumer(ctx, name, token, now)
}

// savedAt waits until the stored cursor of "webhooks" reaches seq in thread.
func savedAt(t *testing.T, st store.Store, thread string, seq int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		cur, err := st.EventCursor(t.Context(), "webhooks")
		return err == nil && cur.Positions[thread] == seq
	}, 10*time.Second, time.Millisecond, "the cursor is saved")
}

// At least once: what a consumer handled after its cursor was last saved is
// handed again to the next one, and nothing after it is missed.
func TestConsumerHandsAgainWhatItDidNotSave(t *testing.T) {
	mem := memory.New(memory.Config{})
	st := &failingSaves{Store: mem}
	l := newLog(t, mem, eventlog.Config{StoreDeltas: true})
	h := hub.New(hub.Config{Journal: l})
	a := uuid.NewString()
	first := newHandled()
	c1 := newConsumer(t, eventlog.ConsumerConfig{Log: l, Hub: h, Store: st, Handle: first.handle})
	holding(t, mem)
	for i := range 3 {
		publish(h, a, delta(i))
	}
	first.waitFor(t, 3)
	savedAt(t, mem, a, 3)
	st.fail.Store(true)
	for i := range 2 {
		publish(h, a, delta(3+i))
	}
	require.Equal(t, keys(a, 1, 5), inThreadOrder(first.waitFor(t, 5), a))
	c1.Stop() // its last save fails too

	st.fail.Store(false)
	second := newHandled()
	newConsumer(t, eventlog.ConsumerConfig{Log: l, Hub: h, Store: st, Handle: second.handle})
	publish(h, a, delta(5))
	require.Equal(t, keys(a, 4, 6), inThreadOrder(second.waitFor(t, 3), a), "4 and 5 again, then 6")
}

// A thread Match does not take is not handed; a thread's failed event is
// handed again, its later events waiting for it, while other threads go on.
func TestConsumerMatchAndRetry(t *testing.T) {
	st := memory.New(memory.Config{})
	l := newLog(t, st, eventlog.Config{StoreDeltas: true})
	h := hub.New(hub.Config{Journal: l})
	mine, theirs, flaky := uuid.NewString(), uuid.NewString(), uuid.NewString()
	got := newHandled()
	var failed atomic.Int32
	newConsumer(t, eventlog.ConsumerConfig{
		Log: l, Hub: h, Store: st, RetryAfter: 20 * time.Millisecond,
		Match: func(_ context.Context, thread string) (bool, error) { return thread != theirs, nil },
		Handle: func(ctx context.Context, ev *hub.Notification) error {
			if ev.ThreadID == flaky && ev.Seq == 2 && failed.Add(1) <= 2 {
				return errors.New("the receiver is down")
			}
			return got.handle(ctx, ev)
		},
	})
	holding(t, st)
	for i := range 3 {
		publish(h, theirs, delta(i))
		publish(h, flaky, delta(i))
		publish(h, mine, delta(i))
	}
	all := got.waitFor(t, 6)
	require.Equal(t, keys(mine, 1, 3), inThreadOrder(all, mine))
	require.Equal(t, keys(flaky, 1, 3), inThreadOrder(all, flaky), "in order, after two failures")
	require.Empty(t, inThreadOrder(all, theirs))
	require.EqualValues(t, 3, failed.Load())
}

// An event whose Handle failed with RetryIn is handed again after the
// delay it names, not after RetryAfter, while the other threads go on.
func TestConsumerRetryIn(t *testing.T) {
	st := memory.New(memory.Config{})
	l := newLog(t, st, eventlog.Config{StoreDeltas: true})
	h := hub.New(hub.Config{Journal: l})
	slow, quick := uuid.NewString(), uuid.NewString()
	got := newHandled()
	var failedAt atomic.Int64
	retried := make(chan time.Duration, 1)
	newConsumer(t, eventlog.ConsumerConfig{
		Log: l, Hub: h, Store: st, RetryAfter: time.Hour,
		Handle: func(ctx context.Context, ev *hub.Notification) error {
			if ev.ThreadID == slow {
				if at := failedAt.Load(); at == 0 {
					failedAt.Store(time.Now().UnixNano())
					return eventlog.RetryIn(50*time.Millisecond, errors.New("the receiver answered 500"))
				} else if ev.Seq == 1 {
					retried <- time.Since(time.Unix(0, at))
				}
			}
			return got.handle(ctx, ev)
		},
	})
	holding(t, st)
	publish(h, slow, delta(0))
	publish(h, quick, delta(0))
	got.waitFor(t, 1)
	select {
	case d := <-retried:
		require.GreaterOrEqual(t, d, 50*time.Millisecond, "not before the delay it named")
	case <-time.After(20 * time.Second):
		t.Fatal("the failed event was not handed again within its delay (RetryAfter is an hour)")
	}
	all := got.waitFor(t, 2)
	require.Equal(t, keys(slow, 1, 1), inThreadOrder(all, slow))
}

// A consumer whose Handle is slow (a webhook's attempts) renews its lease
// between events, so that the events of a long drain are never handed to
// a second consumer of the name: the lease does not expire under it.
func TestSlowHandleKeepsTheLease(t *testing.T) {
	st := memory.New(memory.Config{})
	l := newLog(t, st, eventlog.Config{StoreDeltas: true})
	h := hub.New(hub.Config{Journal: l})
	const ttl = 300 * time.Millisecond
	onA, onB := newHandled(), newHandled()
	newConsumer(t, eventlog.ConsumerConfig{Log: l, Hub: h, Store: st, Holder: "a", LeaseTTL: ttl,
		Handle: func(ctx context.Context, ev *hub.Notification) error {
			time.Sleep(ttl / 3)
			return onA.handle(ctx, ev)
		}})
	holding(t, st)
	newConsumer(t, eventlog.ConsumerConfig{Log: l, Hub: h, Store: st, Holder: "b", LeaseTTL: ttl, Handle: onB.handle})
	th := uuid.NewString()
	for i := range 10 { // a drain of 10 × ttl/3, over three leases long
		publish(h, th, delta(i))
	}
	require.Equal(t, keys(th, 1, 10), onA.waitFor(t, 10))
	require.Empty(t, onB.list(), "the second consumer never got the lease")
}

// Two daemons on one Postgres, each running a consumer of the same name:
// one holds the lease and is handed every event, the events of threads
// either daemon runs; when it stops the other takes over from the cursor,
// and when that one dies (saving nothing, releasing nothing) the first
// takes over again once the lease expired, handing again at most what the
// dead one handled unsaved. Together they miss nothing.
func TestConsumersOnTwoDaemons(t *testing.T) {
	url := pgtest.URL(t)
	var stores []*postgres.Store
	node := func() (*hub.Hub, *eventlog.Log, *failingSaves) {
		p, err := postgres.Open(t.Context(), postgres.Config{URL: url, MaxConns: 4, Migrate: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		stores = append(stores, p)
		g := store.NewGroupCommitter(p, store.GroupCommitConfig{})
		t.Cleanup(func() { _ = g.Close() })
		l := newLog(t, g, eventlog.Config{StoreDeltas: true})
		h := hub.New(hub.Config{Journal: l})
		t.Cleanup(listen(t, l, h, p))
		return h, l, &failingSaves{Store: g}
	}
	ha, la, sa := node()
	hb, lb, sb := node()
	const ttl = 400 * time.Millisecond
	onA, onB := newHandled(), newHandled()
	ca := newConsumer(t, eventlog.ConsumerConfig{Log: la, Hub: ha, Store: sa, Holder: "a", Handle: onA.handle, LeaseTTL: ttl})
	holding(t, sa)
	cb := newConsumer(t, eventlog.ConsumerConfig{Log: lb, Hub: hb, Store: sb, Holder: "b", Handle: onB.handle, LeaseTTL: ttl})
	waitListening(t, stores[0])

	x, y := uuid.NewString(), uuid.NewString()
	for i := range 4 {
		publish(ha, x, delta(i)) // a thread A runs
		publish(hb, y, delta(i)) // one B runs
	}
	got := onA.waitFor(t, 8)
	require.Equal(t, keys(x, 1, 4), inThreadOrder(got, x))
	require.Equal(t, keys(y, 1, 4), inThreadOrder(got, y))
	require.Empty(t, onB.list(), "one holder at a time")

	// A stops: B takes over from A's cursor.
	ca.Stop()
	for i := range 2 {
		publish(ha, x, delta(4+i))
	}
	got = onB.waitFor(t, 2)
	require.Equal(t, keys(x, 5, 6), inThreadOrder(got, x))
	savedAt(t, sb, x, 6)

	// B dies: nothing more is saved, the lease is not given back.
	sb.fail.Store(true)
	publish(hb, y, delta(4))
	onB.waitFor(t, 3)
	cb.Stop()
	publish(hb, y, delta(5))
	again := newHandled()
	newConsumer(t, eventlog.ConsumerConfig{Log: la, Hub: ha, Store: sa, Holder: "a", Handle: again.handle, LeaseTTL: ttl})
	got = again.waitFor(t, 2)
	require.Equal(t, keys(y, 5, 6), inThreadOrder(got, y), "y#5 again (B handled it unsaved), then y#6")
	require.Empty(t, inThreadOrder(got, x), "x was saved")
}
