package eventlog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/eventlog"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/pgnotify"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/memory"
	"github.com/appserver/appserver/internal/store/pgtest"
	"github.com/appserver/appserver/internal/store/postgres"
	"github.com/appserver/appserver/internal/turns"
)

// Most tests here publish deltas as the cheapest notification and expect
// them stored, as a daemon sharing its database does (StoreDeltas);
// TestRunningItemsDeltasAreNotStored covers the embedded store's rule.

// client is a hub subscriber that records what it gets.
type client struct {
	id    hub.ConnID
	notes chan *hub.Notification
}

func newClient() *client                           { return &client{notes: make(chan *hub.Notification, 1024)} }
func (c *client) Notify(n *hub.Notification)       { c.notes <- n }
func (c *client) Request(*hub.Request, int64) bool { return false }
func (c *client) Settled(*hub.Request)             {}
func (c *client) next(t *testing.T) *hub.Notification {
	t.Helper()
	select {
	case n := <-c.notes:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
	}
	return nil
}

// subscribe attaches a client to a thread of h, as the turns layer would.
func subscribe(h *hub.Hub, thread string) *client {
	c := newClient()
	c.id = h.NewConnID()
	h.Attach(c.id, c, hub.AttachOptions{})
	h.Subscribe(thread, c.id)
	return c
}

// publish sends a delta of a thread as the turns layer would.
func publish(h *hub.Hub, thread string, d api.AgentMessageDeltaNotification) {
	h.Publish(turns.Event{ThreadID: thread, Method: "item/agentMessage/delta", Params: d})
}

func delta(i int) api.AgentMessageDeltaNotification {
	return api.AgentMessageDeltaNotification{ThreadID: "t", TurnID: "u", ItemID: "i", Delta: string(rune('a' + i%26))}
}

func newLog(t *testing.T, st store.Store, cfg eventlog.Config) *eventlog.Log {
	t.Helper()
	cfg.Store = st
	l, err := eventlog.New(cfg)
	require.NoError(t, err)
	require.NoError(t, l.Start(t.Context()))
	t.Cleanup(l.Stop)
	return l
}

// Numbering continues from what the store holds (a restart), every
// notification is stored once with its frame, in order, and the local
// subscribers get the same numbers.
func TestNumbersContinueFromTheStore(t *testing.T) {
	st := memory.New(memory.Config{})
	thread := uuid.NewString()
	require.NoError(t, st.Write(t.Context(), &store.Batch{AppendEvents: []*store.Event{
		{ThreadID: thread, Seq: 1, Method: "m", Data: []byte("{}")},
		{ThreadID: thread, Seq: 2, Method: "m", Data: []byte("{}")},
	}}))
	l, err := eventlog.New(eventlog.Config{Store: st, StoreDeltas: true})
	require.NoError(t, err)
	require.NoError(t, l.Start(t.Context()))
	h := hub.New(hub.Config{Journal: l})
	c := subscribe(h, thread)
	require.EqualValues(t, 2, h.LastSeq(thread))
	const n = 50
	for i := range n {
		publish(h, thread, delta(i))
	}
	for i := range n {
		require.EqualValues(t, 3+i, c.next(t).Seq)
	}
	l.Stop() // writes what is pending
	evs, err := st.ListEvents(context.Background(), thread, 2, 1000)
	require.NoError(t, err)
	require.Len(t, evs, n)
	for i, ev := range evs {
		require.EqualValues(t, 3+i, ev.Seq)
		require.Equal(t, "item/agentMessage/delta", ev.Method)
		require.Contains(t, string(ev.Data), `"delta":"`+string(rune('a'+i%26))+`"`)
	}
}

// A daemon that dies before the events it numbered are stored (its
// clients got them live) leaves numbers that a daemon numbering the thread
// next never hands out again: a client resuming after the last number it
// saw misses nothing numbered after the restart. Numbering past a block
// reserves the next one first.
func TestNumbersAreNotReusedAfterACrash(t *testing.T) {
	st := memory.New(memory.Config{})
	thread := uuid.NewString()
	// Never started, so never flushed: the daemon dies with its events
	// queued.
	dead, err := eventlog.New(eventlog.Config{Store: st, StoreDeltas: true, SeqBlock: 4})
	require.NoError(t, err)
	h := hub.New(hub.Config{Journal: dead})
	c := subscribe(h, thread)
	for i := range 10 {
		publish(h, thread, delta(i))
		require.EqualValues(t, 1+i, c.next(t).Seq)
	}
	stored, err := st.LastEventSeq(t.Context(), thread)
	require.NoError(t, err)
	require.Zero(t, stored, "nothing was stored")

	l := newLog(t, st, eventlog.Config{StoreDeltas: true, SeqBlock: 4})
	h = hub.New(hub.Config{Journal: l})
	c = subscribe(h, thread)
	publish(h, thread, delta(10))
	// The dead daemon reserved three blocks of four (1-12).
	require.EqualValues(t, 13, c.next(t).Seq)
}

// Events older than the retention go, the others stay.
func TestPruneByAge(t *testing.T) {
	st := memory.New(memory.Config{})
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	l := newLog(t, st, eventlog.Config{StoreDeltas: true, Retention: time.Hour, PruneEvery: time.Hour, Now: clock})
	h := hub.New(hub.Config{Journal: l})
	thread := uuid.NewString()
	publish(h, thread, delta(0))
	advance(40 * time.Minute)
	publish(h, thread, delta(1))
	require.Eventually(t, func() bool {
		evs, _ := st.ListEvents(t.Context(), thread, 0, 10)
		return len(evs) == 2
	}, 10*time.Second, 5*time.Millisecond)

	advance(30 * time.Minute) // the first is 70 minutes old, the second 30
	n, err := l.Prune(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	evs, err := st.ListEvents(t.Context(), thread, 0, 10)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.EqualValues(t, 2, evs[0].Seq)
}

// Two daemons on one Postgres: a subscriber on B gets every notification
// of a thread A runs, in order, once, with A's numbers.
func TestCrossNodeFanOut(t *testing.T) {
	url := pgtest.URL(t)
	pa, pb := openPG(t, url), openPG(t, url)
	ga := store.NewGroupCommitter(pa, store.GroupCommitConfig{})
	gb := store.NewGroupCommitter(pb, store.GroupCommitConfig{})
	la := newLog(t, ga, eventlog.Config{StoreDeltas: true})
	lb := newLog(t, gb, eventlog.Config{StoreDeltas: true})
	ha := hub.New(hub.Config{Journal: la})
	hb := hub.New(hub.Config{Journal: lb})
	for _, x := range []struct {
		l *eventlog.Log
		h *hub.Hub
		p *postgres.Store
	}{{la, ha, pa}, {lb, hb, pb}} {
		t.Cleanup(listen(t, x.l, x.h, x.p))
	}
	thread := uuid.NewString()
	onA := subscribe(ha, thread)
	onB := subscribe(hb, thread)
	// Let B's listener be LISTENing before A commits.
	waitListening(t, pa)

	const n = 200
	for i := range n {
		publish(ha, thread, delta(i))
	}
	for i := range n {
		a := onA.next(t)
		b := onB.next(t)
		require.EqualValues(t, i+1, a.Seq)
		require.EqualValues(t, i+1, b.Seq, "in order, once")
		require.Equal(t, string(a.Frame()), string(b.Frame()))
	}
	select {
	case extra := <-onA.notes:
		t.Fatalf("A's subscriber got its own event twice: %d", extra.Seq)
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, ga.Close())
	require.NoError(t, gb.Close())
}

// When daemon B's LISTEN connection drops, what daemon A commits
// meanwhile reaches B's subscribers once the connection is back, without
// waiting for the thread's next event.
func TestRelayCatchesUpAfterAReconnection(t *testing.T) {
	url := pgtest.URL(t)
	pa, pb := openPG(t, url), openPG(t, url)
	ga := store.NewGroupCommitter(pa, store.GroupCommitConfig{})
	gb := store.NewGroupCommitter(pb, store.GroupCommitConfig{})
	t.Cleanup(func() { _ = ga.Close(); _ = gb.Close() })
	la := newLog(t, ga, eventlog.Config{StoreDeltas: true})
	lb := newLog(t, gb, eventlog.Config{StoreDeltas: true})
	ha := hub.New(hub.Config{Journal: la})
	hb := hub.New(hub.Config{Journal: lb})
	// B listens through a proxy that can cut its connection.
	proxy := pgtest.NewProxy(t, url)
	pool, err := pgxpool.New(t.Context(), proxy.URL())
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	notes, err := pgnotify.New(pgnotify.Config{Pool: pool, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, eventlog.NewListener(eventlog.ListenerConfig{Log: lb, Hub: hb, Notifier: notes, Channel: postgres.EventsChannel}))
	require.NoError(t, notes.Start(t.Context()))
	t.Cleanup(notes.Stop)
	select {
	case <-notes.Listening():
	case <-time.After(10 * time.Second):
		t.Fatal("B's notifier does not listen")
	}

	thread := uuid.NewString()
	onB := subscribe(hb, thread)
	publish(ha, thread, delta(0))
	require.EqualValues(t, 1, onB.next(t).Seq)

	proxy.Down()
	for i := 1; i < 4; i++ {
		publish(ha, thread, delta(i))
	}
	// Stored by A while B hears nothing.
	require.Eventually(t, func() bool {
		last, err := pa.LastEventSeq(t.Context(), thread)
		return err == nil && last == 4
	}, 10*time.Second, 5*time.Millisecond)
	proxy.Up()
	for i := 1; i < 4; i++ {
		n := onB.next(t)
		require.EqualValues(t, i+1, n.Seq, "in order, once")
		require.Equal(t, string(delta(i).Delta), deltaText(t, n.Frame()))
	}
	// And the relay goes on as before.
	publish(ha, thread, delta(4))
	require.EqualValues(t, 5, onB.next(t).Seq)
	select {
	case extra := <-onB.notes:
		t.Fatalf("an event delivered twice: %d", extra.Seq)
	case <-time.After(100 * time.Millisecond):
	}

	// B's subscriber leaves; A goes on; a new subscriber comes. Neither a
	// reconnection nor A's next event hands it what A committed while
	// nobody on B followed the thread.
	require.True(t, hb.Unsubscribe(thread, onB.id))
	for i := 5; i < 8; i++ {
		publish(ha, thread, delta(i))
	}
	// B handles the notifications of a channel in order: once it relayed
	// an event of another thread published after those, it went past them.
	sentinel := uuid.NewString()
	onS := subscribe(hb, sentinel)
	publish(ha, sentinel, delta(0))
	onS.next(t)
	again := subscribe(hb, thread)
	proxy.Down()
	proxy.Up()
	publish(ha, thread, delta(8))
	require.EqualValues(t, 9, again.next(t).Seq, "nothing from before the subscription")
}

// openPG opens a store of its own on the database at url.
func openPG(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), postgres.Config{URL: url, MaxConns: 4, Migrate: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// listen runs the cross-daemon listener of l and h on a notifier of its
// own on p's pool and returns the notifier's Stop.
func listen(tb testing.TB, l *eventlog.Log, h *hub.Hub, p *postgres.Store) func() {
	tb.Helper()
	notes, err := pgnotify.New(pgnotify.Config{Pool: p.Pool()})
	require.NoError(tb, err)
	require.NoError(tb, eventlog.NewListener(eventlog.ListenerConfig{Log: l, Hub: h, Notifier: notes, Channel: postgres.EventsChannel}))
	require.NoError(tb, notes.Start(tb.Context()))
	return notes.Stop
}

// waitListening waits until two connections LISTEN on the events channel.
func waitListening(t *testing.T, p *postgres.Store) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := p.Pool().QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'`).Scan(&n)
		return err == nil && n >= 2
	}, 10*time.Second, 10*time.Millisecond)
}

// A thread quiet for long is forgotten; its next number comes from the
// store again, so events another daemon wrote meanwhile are not numbered
// twice.
func TestQuietThreadRenumbersFromTheStore(t *testing.T) {
	st := memory.New(memory.Config{})
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	l := newLog(t, st, eventlog.Config{StoreDeltas: true, PruneEvery: 5 * time.Millisecond, Now: clock})
	h := hub.New(hub.Config{Journal: l})
	thread := uuid.NewString()
	publish(h, thread, delta(0))
	publish(h, thread, delta(1))
	require.EqualValues(t, 2, h.LastSeq(thread))
	require.Eventually(t, func() bool {
		seq, _ := st.LastEventSeq(t.Context(), thread)
		return seq == 2
	}, 10*time.Second, time.Millisecond)
	// Another daemon runs the thread for a while: it reserves a block of
	// numbers, past this daemon's, and stores three events of it.
	first, err := st.ReserveEventSeqs(t.Context(), thread, 100)
	require.NoError(t, err)
	require.EqualValues(t, eventlog.DefaultSeqBlock+1, first)
	var evs []*store.Event
	for seq := first; seq < first+3; seq++ {
		evs = append(evs, &store.Event{ThreadID: thread, Seq: seq, Method: "m", Data: []byte("{}")})
	}
	require.NoError(t, st.Write(t.Context(), &store.Batch{AppendEvents: evs}))
	require.EqualValues(t, 2, h.LastSeq(thread), "still remembered")

	mu.Lock()
	now = now.Add(11 * time.Minute)
	mu.Unlock()
	require.Eventually(t, func() bool { return h.LastSeq(thread) == first+2 }, 10*time.Second, time.Millisecond)
	c := subscribe(h, thread)
	publish(h, thread, delta(2))
	require.EqualValues(t, first+100, c.next(t).Seq, "past the other daemon's block")
}

// storedBytes is the bytes of a thread's stored events.
func storedBytes(t *testing.T, st store.Store, thread string) (n int64, seqs []int64) {
	t.Helper()
	evs, err := st.ListEvents(t.Context(), thread, 0, store.MaxEventsLimit)
	require.NoError(t, err)
	for _, ev := range evs {
		n += int64(len(ev.Data))
		seqs = append(seqs, ev.Seq)
	}
	return n, seqs
}

// An item's deltas are logged up to the item bound; the ones beyond reach
// the subscribers here without a number and are not logged; another item's
// deltas and the other notifications are logged as before, and a new turn
// starts counting again.
func TestDeltasBeyondTheItemBoundAreLiveOnly(t *testing.T) {
	st := memory.New(memory.Config{})
	l := newLog(t, st, eventlog.Config{StoreDeltas: true, ItemMaxBytes: 1000})
	h := hub.New(hub.Config{Journal: l})
	thread := uuid.NewString()
	c := subscribe(h, thread)
	out := func(item string) api.CommandExecutionOutputDeltaNotification {
		return api.CommandExecutionOutputDeltaNotification{ThreadID: thread, TurnID: "u", ItemID: item, Delta: strings.Repeat("x", 200)}
	}
	send := func(method string, params any) *hub.Notification {
		h.Publish(turns.Event{ThreadID: thread, Method: method, Params: params})
		return c.next(t)
	}
	var logged, live, size int
	for range 10 {
		n := send("item/commandExecution/outputDelta", out("call_a"))
		size = len(n.Frame())
		if n.Seq > 0 {
			logged++
		} else {
			live++
			require.NotContains(t, string(n.SeqFrame()), `"seq"`)
		}
	}
	require.Equal(t, 1000/size, logged, "as many frames as fit the bound")
	require.Equal(t, 10-logged, live, "the rest is delivered all the same")
	next := int64(logged + 1)
	require.Equal(t, next, send("item/commandExecution/outputDelta", out("call_b")).Seq, "another item has its own bound")
	require.Equal(t, next+1, send("item/completed", map[string]any{"threadId": thread, "item": map[string]any{"id": "call_a"}}).Seq)
	require.Equal(t, next+2, send("turn/started", map[string]any{"threadId": thread}).Seq)
	require.Equal(t, next+3, send("item/commandExecution/outputDelta", out("call_a")).Seq, "a new turn counts again")

	l.Stop()
	_, seqs := storedBytes(t, st, thread)
	require.Len(t, seqs, int(next+3), "numbers without gaps, live-only deltas left out")
	require.Equal(t, next+3, seqs[len(seqs)-1])
}

// A thread's log is cut to its bound, oldest events first, by the pruner;
// a thread within the bound keeps everything, and numbering goes on.
func TestThreadLogIsPrunedToItsBound(t *testing.T) {
	st := memory.New(memory.Config{})
	l := newLog(t, st, eventlog.Config{StoreDeltas: true, ThreadMaxBytes: 2000, PruneEvery: time.Hour})
	h := hub.New(hub.Config{Journal: l})
	big, small := uuid.NewString(), uuid.NewString()
	msg := func(thread string, i int) api.AgentMessageDeltaNotification {
		return api.AgentMessageDeltaNotification{ThreadID: thread, TurnID: "u", ItemID: fmt.Sprint("m", i), Delta: strings.Repeat("y", 100)}
	}
	for i := range 40 {
		h.Publish(turns.Event{ThreadID: big, Method: "item/agentMessage/delta", Params: msg(big, i)})
	}
	for i := range 3 {
		h.Publish(turns.Event{ThreadID: small, Method: "item/agentMessage/delta", Params: msg(small, i)})
	}
	n, err := l.PruneThreads(t.Context())
	require.NoError(t, err)
	require.Positive(t, n)
	bigBytes, bigSeqs := storedBytes(t, st, big)
	require.LessOrEqual(t, bigBytes, int64(2000))
	require.Equal(t, int64(40), bigSeqs[len(bigSeqs)-1], "the newest stay")
	require.Greater(t, bigSeqs[0], int64(1), "the oldest went")
	_, smallSeqs := storedBytes(t, st, small)
	require.Len(t, smallSeqs, 3)

	// Nothing new: nothing to look at again.
	n, err = l.PruneThreads(t.Context())
	require.NoError(t, err)
	require.Zero(t, n)
	h.Publish(turns.Event{ThreadID: big, Method: "item/agentMessage/delta", Params: msg(big, 40)})
	require.EqualValues(t, 41, h.LastSeq(big))
	n, err = l.PruneThreads(t.Context())
	require.NoError(t, err)
	require.Positive(t, n, "a new event takes it past the bound again")
	bigBytes, _ = storedBytes(t, st, big)
	require.LessOrEqual(t, bigBytes, int64(2000))
}

// Without StoreDeltas (the embedded store) a delta is numbered and
// delivered like any notification but never stored: while its item runs,
// After returns it in its place, so a client resuming mid-item gets the
// text it missed and then the rest; once the item completes only the
// stored completion remains, carrying the whole item.
func TestRunningItemsDeltasAreNotStored(t *testing.T) {
	st := memory.New(memory.Config{})
	l := newLog(t, st, eventlog.Config{})
	h := hub.New(hub.Config{Journal: l})
	thread := uuid.NewString()
	c := subscribe(h, thread)
	send := func(method string, params any) int64 {
		h.Publish(turns.Event{ThreadID: thread, Method: method, Params: params})
		return c.next(t).Seq
	}
	text := func(i string) api.AgentMessageDeltaNotification {
		return api.AgentMessageDeltaNotification{ThreadID: thread, TurnID: "u", ItemID: "msg", Delta: i}
	}
	seqsOf := func(after int64) (seqs []int64, got string) {
		t.Helper()
		evs, err := l.After(t.Context(), thread, after, 0)
		require.NoError(t, err)
		for _, n := range evs {
			seqs = append(seqs, n.Seq)
			if n.Method == "item/agentMessage/delta" {
				got += deltaText(t, n.Frame())
			}
		}
		return seqs, got
	}
	require.EqualValues(t, 1, send("turn/started", map[string]any{"threadId": thread}))
	require.EqualValues(t, 2, send("item/started", map[string]any{"threadId": thread}))
	for i, d := range []string{"one ", "two ", "three"} {
		require.EqualValues(t, 3+i, send("item/agentMessage/delta", text(d)))
	}
	// Another item runs alongside: its deltas stay while the message's go.
	require.EqualValues(t, 6, send("item/commandExecution/outputDelta",
		api.CommandExecutionOutputDeltaNotification{ThreadID: thread, TurnID: "u", ItemID: "cmd", Delta: "out"}))

	seqs, got := seqsOf(0)
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, seqs)
	require.Equal(t, "one two three", got, "the text so far")
	seqs, got = seqsOf(3)
	require.Equal(t, []int64{4, 5, 6}, seqs)
	require.Equal(t, "two three", got, "the text after what the client saw, none twice")
	seqs, _ = seqsOf(1)
	require.Equal(t, []int64{2, 3, 4, 5, 6}, seqs, "stored and live in number order")

	done := api.ItemCompletedNotification{ThreadID: thread, TurnID: "u",
		Item: api.ThreadItem{Body: &api.AgentMessageItem{ID: "msg", Text: "one two three"}}}
	require.EqualValues(t, 7, send("item/completed", done))
	seqs, _ = seqsOf(0)
	require.Equal(t, []int64{1, 2, 6, 7}, seqs, "the completed item whole, the running one's deltas")
	require.EqualValues(t, 8, send("turn/completed", map[string]any{"threadId": thread}))
	seqs, _ = seqsOf(0)
	require.Equal(t, []int64{1, 2, 7, 8}, seqs, "a completed turn keeps no deltas")

	l.Stop()
	_, stored := storedBytes(t, st, thread)
	require.Equal(t, []int64{1, 2, 7, 8}, stored, "no delta stored")
}

// deltaText returns the delta of an item/agentMessage/delta frame.
func deltaText(t *testing.T, frame []byte) string {
	t.Helper()
	var f struct {
		Params api.AgentMessageDeltaNotification `json:"params"`
	}
	require.NoError(t, json.Unmarshal(frame, &f))
	return f.Params.Delta
}

// Notifications published with a write of the caller's (a turn's end) are
// numbered as Record numbers them and handed to that write, framed as
// subscribers get them, after the thread's events still queued, so that
// they are stored in the caller's transaction and never ahead of the
// thread's earlier ones; they go out only once it succeeded, each after
// its hook. A failed write delivers nothing, gives its numbers back and
// leaves the queued events queued.
func TestRecordWithRidesTheCallersWrite(t *testing.T) {
	st := memory.New(memory.Config{})
	thread := uuid.NewString()
	// Not started: nothing is flushed behind the test's back.
	queue := store.NewEventQueue(100)
	l, err := eventlog.New(eventlog.Config{Store: st, Queue: queue})
	require.NoError(t, err)
	h := hub.New(hub.Config{Journal: l})
	c := subscribe(h, thread)
	ev := func(method string) turns.Event {
		return turns.Event{ThreadID: thread, Method: method, Params: map[string]string{"threadId": thread}}
	}
	h.Publish(ev("turn/started"))
	started := c.next(t)
	require.EqualValues(t, 1, started.Seq)
	end := []turns.Event{ev("thread/tokenUsage/updated"), ev("turn/completed")}
	seqs := func(evs []*store.Event) []int64 {
		var out []int64
		for _, ev := range evs {
			out = append(out, ev.Seq)
		}
		return out
	}

	boom := errors.New("the store is down")
	var written []*store.Event
	err = h.PublishWith(end, func(evs []*store.Event) error {
		written = evs
		return boom
	}, func(int) { t.Error("a hook ran after a failed write") })
	require.ErrorIs(t, err, boom)
	require.Equal(t, []int64{1, 2, 3}, seqs(written), "the queued event, then the new ones")
	require.Empty(t, c.notes, "delivered without its write")
	require.Len(t, queue.Queued(thread, 0), 1, "the queued event is queued again")

	var hooks []int
	err = h.PublishWith(end, func(evs []*store.Event) error {
		require.Empty(t, c.notes, "delivered before its write")
		written = evs
		return st.Write(t.Context(), &store.Batch{AppendEvents: evs})
	}, func(i int) {
		require.Len(t, c.notes, i, "hook %d after its notification", i)
		hooks = append(hooks, i)
	})
	require.NoError(t, err)
	require.Equal(t, []int{0, 1}, hooks)
	require.Equal(t, []int64{1, 2, 3}, seqs(written), "the failed write's numbers are used again")
	require.Equal(t, string(started.Frame()), string(written[0].Data))
	for i, want := range end {
		n := c.next(t)
		require.EqualValues(t, 2+i, n.Seq)
		require.Equal(t, want.Method, n.Method)
		ev := written[1+i]
		require.Equal(t, thread, ev.ThreadID)
		require.Equal(t, n.Method, ev.Method)
		require.Equal(t, string(n.Frame()), string(ev.Data))
		require.False(t, ev.CreatedAt.IsZero())
	}
	stored, err := st.ListEvents(t.Context(), thread, 0, 10)
	require.NoError(t, err)
	require.Len(t, stored, 3)
	require.Empty(t, queue.Queued(thread, 0), "nothing left queued")

	h.Publish(ev("thread/name/updated"))
	require.EqualValues(t, 4, c.next(t).Seq)
}
