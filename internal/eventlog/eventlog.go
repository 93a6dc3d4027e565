package eventlog

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/appserver/appserver/internal/hub"
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
	// pruneBatch bounds one DELETE, so pruning never holds long locks.
	pruneBatch = 10_000
	// loadTimeout bounds reading a thread's last stored sequence number.
	loadTimeout = 5 * time.Second
	// retryLoadAfter is how long a thread's notifications go on without
	// reading the stored maximum again after a failed read.
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
	// owned is set once this daemon numbered from the stored maximum; a
	// delivery of another daemon's events clears it.
	owned bool
	// retryAt is when, after a failed read of the stored maximum, the
	// next notification reads it again: in between, a store outage costs
	// notifications no wait.
	retryAt time.Time
	// used is when the thread last had an event here, for forgetting
	// threads that went quiet.
	used time.Time
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

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

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
		t = &thread{}
		l.threads[id] = t
	}
	return t
}

// Record implements hub.Journal.
func (l *Log) Record(n *hub.Notification, deliver func()) {
	t := l.threadOf(n.ThreadID)
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.owned && !l.cfg.Now().Before(t.retryAt) {
		ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
		stored, err := l.cfg.Store.LastEventSeq(ctx, n.ThreadID)
		cancel()
		if err != nil {
			// Numbering goes on from what this daemon knows; if that
			// collides with stored events their append fails and is logged.
			l.log.Error("event log: read the last sequence number", "thread", n.ThreadID, "err", err)
			t.retryAt = l.cfg.Now().Add(retryLoadAfter)
		} else {
			t.owned = true
		}
		t.last = max(t.last, stored)
	}
	t.last++
	t.used = l.cfg.Now()
	n.Seq = t.last
	if store.ValidThreadID(n.ThreadID) {
		l.cfg.Queue.Push(&store.Event{ThreadID: n.ThreadID, Seq: n.Seq, Method: n.Method, Data: n.Frame(), CreatedAt: l.cfg.Now()})
	}
	deliver()
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
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.wg.Add(2)
	go l.writeLoop(ctx)
	go l.pruneLoop(ctx)
	return nil
}

// Stop stops the goroutines after the writer stored what was pending. It
// tolerates a Log never started and repeated calls.
func (l *Log) Stop() {
	l.once.Do(func() {
		if l.cancel != nil {
			l.cancel()
			l.wg.Wait()
		}
	})
}

// writeLoop writes the events no commit round took: once events are
// queued it gives the group committer FlushDelay to carry them with the
// transcript, then writes what is left alone.
func (l *Log) writeLoop(ctx context.Context) {
	defer l.wg.Done()
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
	defer l.wg.Done()
	tick := time.NewTicker(l.cfg.PruneEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if _, err := l.Prune(ctx); err != nil && ctx.Err() == nil {
				l.log.Error("event log: prune", "err", err)
			}
			l.forgetQuiet()
		case <-ctx.Done():
			return
		}
	}
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
// afterSeq, then those still on their way to the store, so a client that
// resumes misses none numbered before it subscribed.
func (l *Log) After(ctx context.Context, threadID string, afterSeq int64, limit int) ([]*hub.Notification, error) {
	if limit <= 0 || limit > store.MaxEventsLimit {
		limit = store.MaxEventsLimit
	}
	// The queue first: an event leaves it for the store, so reading the
	// store second cannot miss one in between.
	queued := l.cfg.Queue.Queued(threadID, afterSeq)
	stored, err := l.cfg.Store.ListEvents(ctx, threadID, afterSeq, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*hub.Notification, 0, len(stored)+len(queued))
	last := afterSeq
	for _, ev := range stored {
		out = append(out, hub.StoredNotification(threadID, ev.Seq, ev.Method, ev.Data))
		last = ev.Seq
	}
	if len(stored) == limit {
		return out, nil // a full page: the caller asks again after it
	}
	for _, ev := range queued {
		if ev.Seq > last && len(out) < limit {
			out = append(out, hub.StoredNotification(threadID, ev.Seq, ev.Method, ev.Data))
			last = ev.Seq
		}
	}
	return out, nil
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
