package eventlog

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/service"
	"github.com/appserver/appserver/internal/store"
)

// Defaults of Config.
const (
	// DefaultRetention is how long events are kept.
	DefaultRetention = 24 * time.Hour
	// DefaultPruneEvery is how often old events are deleted.
	DefaultPruneEvery = time.Minute
	// DefaultMaxPending bounds the events waiting for the store.
	DefaultMaxPending = 100_000
	// DefaultFlushDelay is how long queued events wait for a transcript
	// commit to ride before they are written alone.
	DefaultFlushDelay = 2 * time.Millisecond
	// DefaultItemMaxBytes bounds the delta frames logged for one item: the
	// size at which a command's aggregated output is cut (1 MiB).
	DefaultItemMaxBytes = 1 << 20
	// DefaultThreadMaxBytes bounds what one thread's log keeps.
	DefaultThreadMaxBytes = 64 << 20
	// DefaultSeqBlock is how many sequence numbers of a thread a daemon
	// reserves in the store at a time.
	DefaultSeqBlock = 10_000
	// pruneBatch bounds one DELETE by age, so pruning never holds long
	// locks.
	pruneBatch = 10_000
	// pruneThreadBatch bounds one DELETE of a thread's oldest events: they
	// may be large (a delta frame is up to 32 KiB of output).
	pruneThreadBatch = 1_000
	// loadTimeout bounds reading a thread's last stored sequence number,
	// and reserving its next numbers.
	loadTimeout = 5 * time.Second
	// retryLoadAfter is how long a thread's notifications go on without
	// asking the store for numbers again after a failed reservation.
	retryLoadAfter = time.Second
)

// Config configures a Log. Store is required; zero fields take the
// defaults noted.
type Config struct {
	// Store keeps the events (the daemon's group committer).
	Store store.Store
	// Queue is where events wait for the store; give the same queue to
	// the group committer (GroupCommitConfig.Events), so that they ride its
	// commits. Nil makes a queue of MaxPending events that only the Log's
	// own flushes write.
	Queue *store.EventQueue
	// FlushDelay is how long queued events wait for a commit to ride
	// before the Log writes them alone (default DefaultFlushDelay).
	FlushDelay time.Duration
	// Retention is how long events are kept (default DefaultRetention).
	Retention time.Duration
	// PruneEvery is how often old events are deleted (default
	// DefaultPruneEvery).
	PruneEvery time.Duration
	// MaxPending bounds the events waiting for the store in a queue the
	// Log makes (default DefaultMaxPending); beyond it new events are
	// dropped from the log (live subscribers still get them) and logged.
	MaxPending int
	// ItemMaxBytes bounds the bytes of the delta notifications (methods
	// ending in "Delta" or "/delta") logged for one item of a turn
	// (default DefaultItemMaxBytes). The deltas beyond it are neither
	// numbered nor logged: this daemon's subscribers still get them live,
	// without a sequence number; other daemons' subscribers and a replay
	// do not (the item's completion carries its capped output).
	ItemMaxBytes int64
	// StoreDeltas stores the delta notifications (methods ending in
	// "Delta" or "/delta") with the others. Set it when other daemons
	// share the database: their subscribers get a thread's events from
	// the store. Unset, a delta is numbered like any notification and
	// delivered live, kept in memory while its item runs (After returns
	// it, so a client resuming mid-item gets the item's text so far and
	// then the rest) and dropped when its item or turn completes, whose
	// stored notification carries the whole item: it is never stored.
	StoreDeltas bool
	// ThreadMaxBytes bounds the bytes a thread's log keeps (default
	// DefaultThreadMaxBytes): every PruneEvery the oldest events of the
	// threads that had events since and went past it are deleted.
	ThreadMaxBytes int64
	// SeqBlock is how many sequence numbers of a thread are reserved in
	// the store at a time (default DefaultSeqBlock): numbering a thread
	// here first reserves a block, and so does numbering past its end, so
	// the store is written once per SeqBlock notifications, and a daemon
	// that takes a thread over, or starts again after a crash, numbers at
	// most SeqBlock past the last number handed out before.
	SeqBlock int64
	// Logger receives errors; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// thread is what the Log knows of one thread's numbering.
type thread struct {
	mu sync.Mutex
	// last is the last sequence number delivered here, numbered here or
	// read from the store.
	last int64
	// owned is set once this daemon reserved numbers of the thread in the
	// store; a delivery of another daemon's events clears it.
	owned bool
	// reserved is the greatest number of the block this daemon reserved:
	// numbering past it reserves the next block first.
	reserved int64
	// retryAt is when, after a failed reservation, the next notification
	// asks the store again: in between, a store outage costs
	// notifications no wait.
	retryAt time.Time
	// used is when the thread last had an event here, for forgetting
	// threads that went quiet.
	used time.Time
	// itemBytes are the bytes of the delta frames logged for each item of
	// the thread's turn (Config.ItemMaxBytes), cleared when a turn starts
	// or completes.
	itemBytes map[string]int64
	// live are the numbered deltas of the items still running, in
	// sequence order, when deltas are not stored (Config.StoreDeltas):
	// what a resuming client needs of them. An item's go when it
	// completes, all when its turn does.
	live []liveDelta
	// stored is the bytes of the thread's stored events as its last prune
	// left them, -1 before the first; appended is the bytes logged since.
	stored, appended int64
}

// liveDelta is a numbered delta kept in memory while its item runs.
type liveDelta struct {
	item string
	n    *hub.Notification
}

// forgetAfter is how long a quiet thread's numbering is kept in memory;
// after it the next event reads the stored maximum again, long after the
// thread's last events were written.
const forgetAfter = 10 * time.Minute

// Log is the durable event log; it implements hub.Journal. Start runs its
// writer, pruner and listener; Stop flushes and stops them.
//
// Lock order: Log.mu is never held while waiting for a thread.mu
// (forgetQuiet only tries it).
type Log struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	threads map[string]*thread
	// catchingUp lets one catch-up after a reconnection run at a time.
	catchingUp sync.Mutex

	base service.Base
}

var _ service.Service = (*Log)(nil)

var _ hub.Journal = (*Log)(nil)

// New returns a Log writing to cfg.Store; Start runs it.
func New(cfg Config) (*Log, error) {
	if cfg.Store == nil {
		return nil, errors.New("eventlog: Store is required")
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.PruneEvery <= 0 {
		cfg.PruneEvery = DefaultPruneEvery
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.ItemMaxBytes <= 0 {
		cfg.ItemMaxBytes = DefaultItemMaxBytes
	}
	if cfg.ThreadMaxBytes <= 0 {
		cfg.ThreadMaxBytes = DefaultThreadMaxBytes
	}
	if cfg.SeqBlock <= 0 {
		cfg.SeqBlock = DefaultSeqBlock
	}
	if cfg.Queue == nil {
		cfg.Queue = store.NewEventQueue(cfg.MaxPending)
	}
	if cfg.FlushDelay <= 0 {
		cfg.FlushDelay = DefaultFlushDelay
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Log{cfg: cfg, log: cfg.Logger, threads: map[string]*thread{}}, nil
}

func (l *Log) threadOf(id string) *thread {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.threads[id]
	if t == nil {
		t = &thread{stored: -1}
		l.threads[id] = t
	}
	return t
}

// Record implements hub.Journal. A delta beyond its item's bound
// (Config.ItemMaxBytes) is delivered without a number and not logged.
func (l *Log) Record(n *hub.Notification, deliver func()) {
	t := l.threadOf(n.ThreadID)
	t.mu.Lock()
	defer t.mu.Unlock()
	if ev := l.numberLocked(t, n); ev != nil && l.cfg.Queue.Push(ev) {
		t.appended += int64(len(ev.Data))
	}
	deliver()
}

// RecordWith implements hub.Journal: ns are numbered as Record numbers
// them, and the events Record would queue go to write instead, to be
// stored with the caller's batch, after the thread's events still queued.
// The thread's lock is held from the first number to the last delivery,
// so a failed write can give the numbers back: nothing else numbered the
// thread meanwhile.
func (l *Log) RecordWith(ns []*hub.Notification, write func([]*store.Event) error, deliver func()) error {
	if len(ns) == 0 {
		if err := write(nil); err != nil {
			return err
		}
		deliver()
		return nil
	}
	t := l.threadOf(ns[0].ThreadID)
	t.mu.Lock()
	defer t.mu.Unlock()
	// What numbering changes, for a failed write to undo. A block
	// reserved meanwhile is let go: numbering past the old one reserves
	// another, so numbers jump, as after a crash, but none is handed out
	// twice.
	last, owned, reserved := t.last, t.owned, t.reserved
	itemBytes, live := maps.Clone(t.itemBytes), slices.Clone(t.live)
	var evs []*store.Event
	var bytes int64
	for _, n := range ns {
		if ev := l.numberLocked(t, n); ev != nil {
			evs = append(evs, ev)
			bytes += int64(len(ev.Data))
		}
	}
	// The thread's events still queued go first, in the same write:
	// whoever finds the new ones stored finds those too.
	queued, done := l.cfg.Queue.TakeThread(ns[0].ThreadID)
	err := write(append(queued, evs...))
	done(err == nil)
	if err != nil {
		t.last, t.owned, t.reserved = last, owned, reserved
		t.itemBytes, t.live = itemBytes, live
		for _, n := range ns {
			n.Seq = 0
		}
		return err
	}
	t.appended += bytes
	deliver()
	return nil
}

// numberLocked gives n the thread's next number, reserving a block first
// when the reserved one is used up, and returns the event to store for
// it: nil for a notification that is not numbered (a delta past its
// item's bound), kept in memory only (a delta of a running item, unless
// Config.StoreDeltas) or of a thread id the store cannot hold. t.mu is
// held.
func (l *Log) numberLocked(t *thread, n *hub.Notification) *store.Event {
	item, admit := l.admitLocked(t, n)
	if !admit {
		return nil
	}
	if (!t.owned || t.last >= t.reserved) && !l.cfg.Now().Before(t.retryAt) {
		l.reserveLocked(t, n.ThreadID)
	}
	t.last++
	t.used = l.cfg.Now()
	n.Seq = t.last
	switch {
	case !store.ValidThreadID(n.ThreadID):
		return nil
	case item != "" && !l.cfg.StoreDeltas:
		t.live = append(t.live, liveDelta{item: item, n: n})
		return nil
	}
	return &store.Event{ThreadID: n.ThreadID, Seq: n.Seq, Method: n.Method, Data: n.Frame(), CreatedAt: l.cfg.Now()}
}

// reserveLocked reserves the thread's next block of numbers in the store
// (Config.SeqBlock), past every number reserved or stored before: after a
// crash, a restart or a hand-over the numbers handed out before, stored
// or not, are never handed out again. When the store cannot reserve,
// numbering goes on from what this daemon knows (numbers that collide
// with stored events fail to append, and are logged) and the store is
// asked again after retryLoadAfter, so an outage costs notifications no
// wait. t.mu is held.
func (l *Log) reserveLocked(t *thread, threadID string) {
	if !store.ValidThreadID(threadID) {
		// Nothing of such a thread is stored: its numbers live here.
		t.owned, t.reserved = true, math.MaxInt64
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	first, err := l.cfg.Store.ReserveEventSeqs(ctx, threadID, l.cfg.SeqBlock)
	cancel()
	if err != nil {
		l.log.Error("event log: reserve sequence numbers", "thread", threadID, "err", err)
		t.retryAt = l.cfg.Now().Add(retryLoadAfter)
		return
	}
	t.owned = true
	t.last = max(t.last, first-1)
	t.reserved = first - 1 + l.cfg.SeqBlock
}

// known returns the threads the Log remembers, with their ids.
func (l *Log) known() ([]string, []*thread) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]string, 0, len(l.threads))
	ts := make([]*thread, 0, len(l.threads))
	for id, t := range l.threads {
		ids, ts = append(ids, id), append(ts, t)
	}
	return ids, ts
}

// heads returns the last sequence number of each thread this daemon
// numbered and still remembers.
func (l *Log) heads() map[string]int64 {
	ids, ts := l.known()
	out := make(map[string]int64, len(ts))
	for i, t := range ts {
		t.mu.Lock()
		if t.owned && t.last > 0 {
			out[ids[i]] = t.last
		}
		t.mu.Unlock()
	}
	return out
}

// admitLocked reports whether n is numbered: not a delta of an item whose
// logged deltas would pass Config.ItemMaxBytes. item is the item of a
// delta, "" for other notifications. It drops the live deltas of the
// items and turns n completes. t.mu is held.
func (l *Log) admitLocked(t *thread, n *hub.Notification) (item string, admit bool) {
	switch {
	case n.Method == "turn/started" || n.Method == "turn/completed":
		clear(t.itemBytes)
		t.live = nil
		return "", true
	case n.Method == "item/completed":
		t.dropLiveLocked(n)
		return "", true
	case !strings.HasSuffix(n.Method, "Delta") && !strings.HasSuffix(n.Method, "/delta"):
		return "", true
	}
	frame := n.Frame()
	id := deltaItemID(frame)
	if id == "" {
		return "", true
	}
	used := t.itemBytes[id] + int64(len(frame))
	if used > l.cfg.ItemMaxBytes {
		return id, false
	}
	if t.itemBytes == nil {
		t.itemBytes = map[string]int64{}
	}
	t.itemBytes[id] = used
	return id, true
}

// dropLiveLocked forgets the live deltas of the item an item/completed
// carries whole. Without the typed item (an item/completed of unknown
// shape) they stay until the turn completes. t.mu is held.
func (t *thread) dropLiveLocked(n *hub.Notification) {
	if len(t.live) == 0 {
		return
	}
	done, ok := n.Params.(api.ItemCompletedNotification)
	if !ok || done.Item.Body == nil {
		return
	}
	id := done.Item.Body.ItemID()
	kept := t.live[:0]
	for _, d := range t.live {
		if d.item != id {
			kept = append(kept, d)
		}
	}
	clear(t.live[len(kept):])
	t.live = kept
}

// liveAfter returns the live deltas of a thread numbered after afterSeq.
func (l *Log) liveAfter(threadID string, afterSeq int64) []*hub.Notification {
	l.mu.Lock()
	t := l.threads[threadID]
	l.mu.Unlock()
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*hub.Notification
	for _, d := range t.live {
		if d.n.Seq > afterSeq {
			out = append(out, d.n)
		}
	}
	return out
}

// deltaItemID returns the itemId of a delta notification's frame, as its
// JSON spells it ("" when it has none). Every delta's params name the item
// before the delta, so the search stops early.
func deltaItemID(frame []byte) string {
	const key = `"itemId":"`
	i := bytes.Index(frame, []byte(key))
	if i < 0 {
		return ""
	}
	rest := frame[i+len(key):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return ""
	}
	return string(rest[:end])
}

// LastSeq implements hub.Journal: the last sequence number numbered or
// delivered here, or stored.
func (l *Log) LastSeq(threadID string) int64 {
	t := l.threadOf(threadID)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.owned {
		return t.last
	}
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	stored, err := l.cfg.Store.LastEventSeq(ctx, threadID)
	if err != nil {
		l.log.Error("event log: read the last sequence number", "thread", threadID, "err", err)
	}
	return max(t.last, stored)
}

// Start runs the writer and the pruner.
func (l *Log) Start(ctx context.Context) error {
	_, run, err := l.base.Begin(ctx)
	if !run {
		return err
	}
	l.base.Go(l.writeLoop)
	l.base.Go(l.pruneLoop)
	return l.base.Started(nil)
}

// Stop stops the goroutines after the writer stored what was pending. It
// tolerates a Log never started and repeated calls.
func (l *Log) Stop() { l.base.Stop(nil) }

// writeLoop writes the events no commit round took: once events are
// queued it gives the group committer FlushDelay to carry them with the
// transcript, then writes what is left alone.
func (l *Log) writeLoop(ctx context.Context) {
	delay := time.NewTimer(0)
	<-delay.C
	defer delay.Stop()
	for {
		select {
		case <-l.cfg.Queue.Wake():
		case <-ctx.Done():
			l.flush(context.Background())
			return
		}
		delay.Reset(l.cfg.FlushDelay)
		select {
		case <-delay.C:
		case <-ctx.Done():
		}
		l.flush(ctx)
	}
}

// flush writes what is queued; a failed write is logged and its events are
// dropped from the log (they reached the live subscribers already).
func (l *Log) flush(ctx context.Context) {
	if n := l.cfg.Queue.Dropped(); n > 0 {
		l.log.Error("event log: events dropped, the store is too slow or down", "dropped", n)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := l.cfg.Queue.Flush(wctx, l.cfg.Store); err != nil {
		l.log.Error("event log: append", "err", err)
	}
}

func (l *Log) pruneLoop(ctx context.Context) {
	tick := time.NewTicker(l.cfg.PruneEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			l.pruneOnce(ctx)
			l.forgetQuiet()
		case <-ctx.Done():
			return
		}
	}
}

// pruneOnce deletes the events past the retention and those past each
// thread's bound, then gives the space back to the file system.
func (l *Log) pruneOnce(ctx context.Context) {
	old, err := l.Prune(ctx)
	if err != nil && ctx.Err() == nil {
		l.log.Error("event log: prune", "err", err)
	}
	big, err := l.PruneThreads(ctx)
	if err != nil && ctx.Err() == nil {
		l.log.Error("event log: prune threads past their bound", "err", err)
	}
	if old+big == 0 {
		return
	}
	if err := l.cfg.Store.Reclaim(ctx); err != nil && ctx.Err() == nil {
		l.log.Error("event log: reclaim the pruned space", "err", err)
	}
}

// PruneThreads deletes the oldest events of the threads whose log may hold
// more than Config.ThreadMaxBytes, and returns how many. A thread is
// looked at once it had events here: first to learn how much its log
// holds, then whenever what it logged since may take it past the bound.
// It runs apart from Record, which only counts the bytes it logs.
func (l *Log) PruneThreads(ctx context.Context) (int64, error) {
	type candidate struct {
		id       string
		t        *thread
		appended int64
	}
	l.mu.Lock()
	threads := make(map[string]*thread, len(l.threads))
	maps.Copy(threads, l.threads)
	l.mu.Unlock()
	var todo []candidate
	for id, t := range threads {
		t.mu.Lock()
		if t.appended > 0 && (t.stored < 0 || t.stored+t.appended > l.cfg.ThreadMaxBytes) {
			todo = append(todo, candidate{id, t, t.appended})
		}
		t.mu.Unlock()
	}
	if len(todo) == 0 {
		return 0, nil
	}
	// The store counts what it holds: what is still queued goes first.
	l.flush(ctx)
	var total int64
	for _, c := range todo {
		var remaining int64
		for {
			n, left, err := l.cfg.Store.PruneThreadEvents(ctx, c.id, l.cfg.ThreadMaxBytes, pruneThreadBatch)
			total += n
			if err != nil {
				return total, err
			}
			remaining = left
			if n < pruneThreadBatch {
				break
			}
		}
		c.t.mu.Lock()
		// Bytes logged meanwhile are counted again; the next prune corrects
		// the estimate.
		c.t.stored, c.t.appended = remaining, c.t.appended-c.appended
		c.t.mu.Unlock()
	}
	return total, nil
}

// forgetQuiet drops the numbering of threads without events for
// forgetAfter, so the table follows the active threads, not every thread
// the daemon ever ran.
func (l *Log) forgetQuiet() {
	cutoff := l.cfg.Now().Add(-forgetAfter)
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, t := range l.threads {
		if t.mu.TryLock() {
			if t.used.Before(cutoff) {
				delete(l.threads, id)
			}
			t.mu.Unlock()
		}
	}
}

// Prune deletes the events older than the retention and returns how many.
func (l *Log) Prune(ctx context.Context) (int64, error) {
	before := l.cfg.Now().Add(-l.cfg.Retention)
	var total int64
	for {
		n, err := l.cfg.Store.PruneEvents(ctx, before, pruneBatch)
		total += n
		if err != nil || n < pruneBatch {
			return total, err
		}
	}
}

// After implements hub.Journal: the stored events of a thread after
// afterSeq, then those still on their way to the store, with the deltas of
// the items still running (kept in memory, Config.StoreDeltas) in their
// places, so a client that resumes misses none numbered before it
// subscribed. The deltas of completed items are not among them (their
// numbers are gaps): the item's stored completion carries it whole.
func (l *Log) After(ctx context.Context, threadID string, afterSeq int64, limit int) ([]*hub.Notification, error) {
	if limit <= 0 || limit > store.MaxEventsLimit {
		limit = store.MaxEventsLimit
	}
	// The queue first: an event leaves it for the store, so reading the
	// store second cannot miss one in between. The live deltas were
	// numbered before anything now queued or stored that follows them, and
	// leave memory only when their item completes: read last, they miss
	// none of those the store and queue skip.
	queued := l.cfg.Queue.Queued(threadID, afterSeq)
	stored, err := l.cfg.Store.ListEvents(ctx, threadID, afterSeq, limit)
	if err != nil {
		return nil, err
	}
	live := l.liveAfter(threadID, afterSeq)
	out := make([]*hub.Notification, 0, len(stored)+len(queued)+len(live))
	last := afterSeq
	for _, ev := range stored {
		out = append(out, hub.StoredNotification(threadID, ev.Seq, ev.Method, ev.Data))
		last = ev.Seq
	}
	full := len(stored) == limit // a full page: the caller asks again after it
	if !full {
		for _, ev := range queued {
			if ev.Seq > last {
				out = append(out, hub.StoredNotification(threadID, ev.Seq, ev.Method, ev.Data))
				last = ev.Seq
			}
		}
	}
	if len(live) == 0 {
		return out[:min(len(out), limit)], nil
	}
	bound := last // a full page ends at its last stored event
	for _, n := range live {
		if !full || n.Seq < bound {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b *hub.Notification) int { return cmp.Compare(a.Seq, b.Seq) })
	return out[:min(len(out), limit)], nil
}

// reconnectCatchUpTimeout bounds the catch-up after a reconnection.
const reconnectCatchUpTimeout = 30 * time.Second

// catchUpAllLater runs catchUpAll on a goroutine of the Log's, one at a
// time, within reconnectCatchUpTimeout: the LISTEN connection's handler
// goes on with the notifications meanwhile (a thread's catch-ups, from
// either, deliver in order under its lock), and so do the other
// channels that connection serves.
func (l *Log) catchUpAllLater(listening func(threadID string) bool, deliver func(*hub.Notification)) {
	l.base.Go(func(ctx context.Context) {
		l.catchingUp.Lock()
		defer l.catchingUp.Unlock()
		ctx, cancel := context.WithTimeout(ctx, reconnectCatchUpTimeout)
		defer cancel()
		l.catchUpAll(ctx, listening, deliver)
	})
}

// catchUpAll catches up every thread with a position here (a number
// delivered or numbered) that listening reports followed: the store's
// events past that position, another daemon's, are delivered, as a
// notification of them would have had them delivered. It runs when the
// LISTEN connection is made again, for the notifications sent while it
// was down.
func (l *Log) catchUpAll(ctx context.Context, listening func(threadID string) bool, deliver func(*hub.Notification)) {
	ids, ts := l.known()
	for i, t := range ts {
		if ctx.Err() != nil {
			l.log.Error("event log: catch-up after a reconnection stopped", "threads_left", len(ts)-i, "err", ctx.Err())
			return
		}
		t.mu.Lock()
		last := t.last
		t.mu.Unlock()
		if last == 0 || !store.ValidThreadID(ids[i]) || !listening(ids[i]) {
			continue
		}
		stored, err := l.cfg.Store.LastEventSeq(ctx, ids[i])
		if err != nil {
			l.log.Error("event log: read the last sequence number after a reconnection", "thread", ids[i], "err", err)
			continue
		}
		if stored > last {
			l.catchUp(ctx, ids[i], last+1, stored, deliver)
		}
	}
}

// passed moves the position kept of a thread nobody here follows past
// the events another daemon committed up to last: a subscriber that
// comes later starts from what it reads then, and a catch-up after a
// reconnection must not hand it these. A thread without a position, or
// not known here, is left so.
func (l *Log) passed(threadID string, last int64) {
	l.mu.Lock()
	t := l.threads[threadID]
	l.mu.Unlock()
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last > 0 && last > t.last {
		// Numbers past this daemon's: another daemon numbers the thread.
		t.last, t.owned = last, false
	}
}

// catchUp delivers a thread's stored events after the last one delivered
// (or numbered) here, up to last, the end of a span of events another
// daemon committed that starts at first.
func (l *Log) catchUp(ctx context.Context, threadID string, first, last int64, deliver func(*hub.Notification)) {
	t := l.threadOf(threadID)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == 0 {
		// The first span seen since subscribers came: what came before it
		// they read from the log when they subscribed.
		t.last = first - 1
	}
	for t.last < last {
		evs, err := l.cfg.Store.ListEvents(ctx, threadID, t.last, store.MaxEventsLimit)
		if err != nil {
			l.log.Error("event log: read events of another daemon", "thread", threadID, "err", err)
			return
		}
		if len(evs) == 0 {
			return
		}
		for _, ev := range evs {
			deliver(hub.StoredNotification(threadID, ev.Seq, ev.Method, ev.Data))
			t.last = ev.Seq
		}
		t.used = l.cfg.Now()
		// The thread runs elsewhere: numbering here must start again from
		// the store.
		t.owned = false
	}
}
