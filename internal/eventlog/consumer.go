package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/service"
	"github.com/appserver/appserver/internal/store"
)

// Defaults of ConsumerConfig.
const (
	DefaultConsumerLeaseTTL   = 15 * time.Second
	DefaultConsumerSaveEvery  = time.Second
	DefaultConsumerRetryAfter = time.Second
	DefaultConsumerResync     = time.Minute
)

// maxQueuedPerThread bounds the live events a consumer keeps for a thread
// it has not handled yet; beyond it they are read back from the log.
const maxQueuedPerThread = 1024

// ConsumerConfig configures a Consumer. Log, Hub, Store, Name, Holder and
// Handle are required; zero durations take the defaults above.
type ConsumerConfig struct {
	// Log is this daemon's event log, where events are read back from.
	Log *Log
	// Hub is where the consumer hears every thread's events live while it
	// holds its lease (an all-threads subscriber).
	Hub *hub.Hub
	// Store keeps the consumer's lease and cursor (the daemon's store).
	Store store.Store
	// Name names the consumer and its durable cursor: a Consumer of the
	// same name, on this daemon or another of the database, resumes where
	// the last one left off. One Consumer per name runs at a time across
	// the daemons (its lease); the others wait for it to stop or die.
	Name string
	// Holder names this daemon in the lease (its node id).
	Holder string
	// Match says whether a thread's events are for this consumer (the
	// threads of a principal, by their originator); nil takes every
	// thread's (the operator's). It is asked once per thread while the
	// consumer holds its lease; a failure is asked again with the thread's
	// next event.
	Match func(ctx context.Context, threadID string) (bool, error)
	// Handle is given each event of a matched thread, one at a time, in
	// its thread's order: the notifications clients get and the hub's own
	// entries (hub.MethodRequestOffered and the others), which carry
	// server requests and archivings. Frame is always set; Params only for
	// events of this daemon's turns. An error (or ctx ending) hands the
	// event again after RetryAfter (or the delay of a RetryIn error), the
	// thread's later events waiting for it. Handle should not block for
	// longer than a third of LeaseTTL: the lease is renewed between
	// events when due. Delivery is at least once: the events handled since the cursor
	// was last saved (SaveEvery) are handed again after a crash or a
	// takeover.
	Handle func(ctx context.Context, ev *hub.Notification) error
	// FromOldest starts the threads the cursor does not know yet at their
	// oldest retained event; otherwise at their first event emitted since
	// the cursor was created.
	FromOldest bool
	// LeaseTTL is how long the lease lasts without renewal (renewed every
	// third of it).
	LeaseTTL time.Duration
	// SaveEvery is how often the cursor is saved while it moves.
	SaveEvery time.Duration
	// RetryAfter is how long a thread whose event failed waits.
	RetryAfter time.Duration
	// Resync is how often the consumer looks for events it was not told
	// about (a notification lost while another daemon's listener
	// reconnected).
	Resync time.Duration
	// Logger receives errors; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Consumer hands the events of every thread (or of the threads Match
// takes) to Handle, in each thread's order, at least once, from a durable
// cursor. It is the event log's consumer for code of the daemon (a webhook
// sender): the hub tells it of events as they are numbered or arrive from
// other daemons, and what it was not told, or could not keep, it reads
// back from the log. Start runs it; Stop saves the cursor, gives the lease
// back and waits.
//
// Several daemons: the consumer's lease is a row of the store; one holder
// at a time hands events, the others retry the claim every half lease. A
// holder that stops releases the lease at once; one that dies keeps it for
// LeaseTTL, then another takes it over with a new token, which fences the
// old holder's cursor saves, and resumes from the saved cursor.
type Consumer struct {
	c   ConsumerConfig
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex // guards threads, dirty and subscribed; Notify takes it
	threads map[string]*consumed
	dirty   map[string]bool
	wake    chan struct{}

	// The lease while serving, the run goroutine's alone: when it expires
	// and when it was last renewed; lost is set once a renewal found it
	// taken.
	until   time.Time
	renewed time.Time
	lost    bool

	base service.Base
}

var _ service.Service = (*Consumer)(nil)

// consumed is what a consumer knows of one thread while it holds its
// lease.
type consumed struct {
	// pos is the last sequence number handled (or passed over); known is
	// set once pos is the cursor's or was settled from the log.
	pos   int64
	known bool
	// saved is the position last saved.
	saved int64
	// queued are live events after pos, in the order they came.
	queued []*hub.Notification
	// match caches Match: 0 not asked yet, 1 taken, -1 not taken.
	match int8
	// retryAt holds the thread back after a failed event.
	retryAt time.Time
}

// NewConsumer returns a Consumer; Start runs it.
func NewConsumer(c ConsumerConfig) (*Consumer, error) {
	if c.Log == nil || c.Hub == nil || c.Store == nil || c.Name == "" || c.Holder == "" || c.Handle == nil {
		return nil, errors.New("eventlog: a consumer needs Log, Hub, Store, Name, Holder and Handle")
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultConsumerLeaseTTL
	}
	if c.SaveEvery <= 0 {
		c.SaveEvery = DefaultConsumerSaveEvery
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = DefaultConsumerRetryAfter
	}
	if c.Resync <= 0 {
		c.Resync = DefaultConsumerResync
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Consumer{c: c, log: c.Logger, now: c.Now, wake: make(chan struct{}, 1)}, nil
}

// Start runs the consumer's goroutine.
func (cs *Consumer) Start(ctx context.Context) error {
	_, run, err := cs.base.Begin(ctx)
	if !run {
		return err
	}
	cs.base.Go(cs.run)
	return cs.base.Started(nil)
}

// Stop stops handing events, saves the cursor, gives the lease back and
// waits. It tolerates a Consumer never started and repeated calls.
func (cs *Consumer) Stop() { cs.base.Stop(nil) }

// run claims the lease, serves while it holds it, and claims again.
func (cs *Consumer) run(ctx context.Context) {
	for ctx.Err() == nil {
		now := cs.now()
		token, ok, err := cs.c.Store.ClaimEventConsumer(ctx, cs.c.Name, cs.c.Holder, now, now.Add(cs.c.LeaseTTL))
		if err != nil && ctx.Err() == nil {
			cs.log.Warn("event consumer: claiming the lease", "consumer", cs.c.Name, "err", err)
		}
		if ok {
			cs.serve(ctx, token, now.Add(cs.c.LeaseTTL))
			continue
		}
		select {
		case <-time.After(cs.c.LeaseTTL / 2):
		case <-ctx.Done():
		}
	}
}

// serve hands events while the lease lasts, and saves the cursor and gives
// the lease back when ctx ends.
func (cs *Consumer) serve(ctx context.Context, token int64, until time.Time) {
	cs.until, cs.renewed, cs.lost = until, cs.now(), false
	cur, err := cs.c.Store.EventCursor(ctx, cs.c.Name)
	if err != nil {
		cs.log.Warn("event consumer: reading the cursor", "consumer", cs.c.Name, "err", err)
		cs.pause(ctx)
		return
	}
	cs.mu.Lock()
	cs.threads, cs.dirty = map[string]*consumed{}, map[string]bool{}
	for thread, seq := range cur.Positions {
		cs.threads[thread] = &consumed{pos: seq, saved: seq, known: true}
	}
	cs.mu.Unlock()
	// Live first, then what the log holds: an event numbered meanwhile is
	// both heard and read, and handled once.
	id := cs.c.Hub.NewConnID()
	cs.c.Hub.Attach(id, consumerSub{cs}, hub.AttachOptions{AllThreads: true})
	defer cs.c.Hub.Detach(id)
	since := cur.Created
	if cs.c.FromOldest {
		since = time.Time{}
	}
	cs.resync(ctx, since)

	renew := time.NewTicker(cs.c.LeaseTTL / 3)
	defer renew.Stop()
	save := time.NewTicker(cs.c.SaveEvery)
	defer save.Stop()
	resync := time.NewTicker(cs.c.Resync)
	defer resync.Stop()
	// retry wakes the loop for the thread held back the shortest time.
	var retry <-chan time.Time
	var retryAt time.Time
	for {
		if wait := cs.drain(ctx, cur.Created); wait > 0 && (retry == nil || cs.now().Add(wait).Before(retryAt)) {
			retry, retryAt = time.After(wait), cs.now().Add(wait)
		}
		if cs.lost {
			return
		}
		select {
		case <-cs.wake:
		case <-retry:
			retry = nil
		case <-resync.C:
			cs.resync(ctx, cs.now().Add(-2*cs.c.Resync))
		case <-save.C:
			if err := cs.save(ctx, token); apperr.Is(err, apperr.Conflict) {
				cs.log.Warn("event consumer: taken over", "consumer", cs.c.Name)
				return
			}
		case <-renew.C:
			if !cs.renew(ctx) {
				return
			}
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := cs.save(sctx, token); err != nil {
				cs.log.Warn("event consumer: saving the cursor", "consumer", cs.c.Name, "err", err)
			}
			if err := cs.c.Store.ReleaseEventConsumer(sctx, cs.c.Name, token, cs.now()); err != nil {
				cs.log.Warn("event consumer: releasing the lease", "consumer", cs.c.Name, "err", err)
			}
			return
		}
	}
}

// renew renews the lease; it reports false once the lease is lost (taken
// over, or expired while the store could not be reached).
func (cs *Consumer) renew(ctx context.Context) bool {
	now := cs.now()
	_, ok, err := cs.c.Store.ClaimEventConsumer(ctx, cs.c.Name, cs.c.Holder, now, now.Add(cs.c.LeaseTTL))
	switch {
	case err == nil && ok:
		cs.until, cs.renewed = now.Add(cs.c.LeaseTTL), now
	case err == nil || now.After(cs.until):
		cs.log.Warn("event consumer: lost the lease", "consumer", cs.c.Name, "err", err)
		cs.lost = true
	}
	return !cs.lost
}

// holding renews the lease when a renewal is due, between two events
// (a slow Handle, such as a webhook's attempt, must not outlast the
// lease while the loop that renews it waits); it reports false once the
// lease is lost, when no more events may be handed.
func (cs *Consumer) holding(ctx context.Context) bool {
	if cs.lost {
		return false
	}
	if cs.now().Sub(cs.renewed) < cs.c.LeaseTTL/3 {
		return true
	}
	return cs.renew(ctx)
}

// pause waits a little after a failure, or until ctx ends.
func (cs *Consumer) pause(ctx context.Context) {
	select {
	case <-time.After(cs.c.RetryAfter):
	case <-ctx.Done():
	}
}

// resync marks the threads with events the consumer may not have handled:
// those with stored events created since since, and those this daemon
// numbered (their newest events may still wait for the store).
func (cs *Consumer) resync(ctx context.Context, since time.Time) {
	spans, err := cs.c.Store.EventSpans(ctx, since)
	if err != nil {
		cs.log.Warn("event consumer: looking for events", "consumer", cs.c.Name, "err", err)
	}
	heads := cs.c.Log.heads()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	mark := func(thread string, last int64) {
		if ts := cs.threads[thread]; ts == nil || !ts.known || last > ts.pos {
			cs.dirty[thread] = true
		}
	}
	for _, sp := range spans {
		mark(sp.ThreadID, sp.Last)
	}
	for thread, last := range heads {
		mark(thread, last)
	}
	cs.signalLocked()
}

func (cs *Consumer) signalLocked() {
	select {
	case cs.wake <- struct{}{}:
	default:
	}
}

// consumerSub is the consumer as the hub's all-threads subscriber.
type consumerSub struct{ cs *Consumer }

// Notify keeps a live event for the consumer's goroutine.
func (s consumerSub) Notify(n *hub.Notification) {
	cs := s.cs
	if n.Seq == 0 || n.ThreadID == "" {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	ts := cs.threads[n.ThreadID]
	if ts == nil {
		ts = &consumed{}
		cs.threads[n.ThreadID] = ts
	}
	if ts.match >= 0 && len(ts.queued) < maxQueuedPerThread {
		ts.queued = append(ts.queued, n)
	}
	cs.dirty[n.ThreadID] = true
	cs.signalLocked()
}

// Request implements hub.Subscriber: a consumer takes no server request.
func (consumerSub) Request(*hub.Request, int64) bool { return false }

// Settled implements hub.Subscriber.
func (consumerSub) Settled(*hub.Request) {}

// drain hands the events of the dirty threads; it returns how long until a
// thread held back after a failure may be tried again, 0 if none is.
func (cs *Consumer) drain(ctx context.Context, created time.Time) time.Duration {
	cs.mu.Lock()
	dirty := cs.dirty
	cs.dirty = map[string]bool{}
	cs.mu.Unlock()
	var wait time.Duration
	for thread := range dirty {
		if ctx.Err() != nil {
			return 0
		}
		if d := cs.drainThread(ctx, thread, created); d > 0 && (wait == 0 || d < wait) {
			wait = d
		}
	}
	return wait
}

// drainThread hands a thread's events after its position; it returns how
// long the thread is held back after a failure, 0 when it is done.
func (cs *Consumer) drainThread(ctx context.Context, thread string, created time.Time) time.Duration {
	cs.mu.Lock()
	ts := cs.threads[thread]
	if ts == nil {
		ts = &consumed{}
		cs.threads[thread] = ts
	}
	if d := ts.retryAt.Sub(cs.now()); d > 0 {
		cs.dirty[thread] = true
		cs.mu.Unlock()
		return d
	}
	match := ts.match
	cs.mu.Unlock()
	if match == 0 {
		match = cs.match(ctx, thread)
		cs.mu.Lock()
		ts.match = match
		if match < 0 {
			ts.queued = nil
		}
		cs.mu.Unlock()
	}
	switch match {
	case 0:
		return cs.holdBack(thread, ts)
	case -1:
		return 0
	}
	// A thread the cursor does not know starts at its first event emitted
	// since the cursor was created (FromOldest: at its oldest).
	cs.mu.Lock()
	fresh := !ts.known && !cs.c.FromOldest
	cs.mu.Unlock()
	for ctx.Err() == nil {
		evs, err := cs.next(ctx, thread, ts)
		if err != nil {
			cs.log.Warn("event consumer: reading the log", "consumer", cs.c.Name, "thread", thread, "err", err)
			return cs.holdBack(thread, ts)
		}
		if len(evs) == 0 {
			return 0
		}
		for _, ev := range evs {
			if fresh && EmittedAt(ev).Before(created.Truncate(time.Millisecond)) {
				cs.advance(ts, ev.Seq) // before the cursor began
				continue
			}
			fresh = false
			if !cs.holding(ctx) {
				cs.mu.Lock()
				cs.dirty[thread] = true
				cs.mu.Unlock()
				return 0
			}
			if err := cs.c.Handle(ctx, ev); err != nil {
				if ctx.Err() == nil {
					cs.log.Info("event consumer: an event failed; retrying", "consumer", cs.c.Name, "thread", thread, "seq", ev.Seq, "err", err)
				}
				return cs.holdBackFor(thread, ts, retryDelay(err, cs.c.RetryAfter))
			}
			cs.advance(ts, ev.Seq)
		}
	}
	return 0
}

// match asks Match about a thread: 1 taken, -1 not, 0 to ask again.
func (cs *Consumer) match(ctx context.Context, thread string) int8 {
	if cs.c.Match == nil {
		return 1
	}
	ok, err := cs.c.Match(ctx, thread)
	switch {
	case err != nil:
		cs.log.Info("event consumer: matching a thread", "consumer", cs.c.Name, "thread", thread, "err", err)
		return 0
	case ok:
		return 1
	}
	return -1
}

// next returns the thread's next events after its position: the live ones
// kept when they follow it without a gap, else a page of the log.
func (cs *Consumer) next(ctx context.Context, thread string, ts *consumed) ([]*hub.Notification, error) {
	cs.mu.Lock()
	q := ts.queued
	for len(q) > 0 && q[0].Seq <= ts.pos {
		q = q[1:]
	}
	ts.queued = q
	contiguous := ts.known && len(q) > 0 && q[0].Seq == ts.pos+1
	for i := 1; contiguous && i < len(q); i++ {
		contiguous = q[i].Seq == q[i-1].Seq+1
	}
	if contiguous {
		ts.queued = nil
		cs.mu.Unlock()
		return q, nil
	}
	pos := ts.pos
	cs.mu.Unlock()
	// The log itself, not the hub's replay: consumers get the hub's own
	// entries too.
	return cs.c.Log.After(ctx, thread, pos, 0)
}

// advance moves a thread's position past seq.
func (cs *Consumer) advance(ts *consumed, seq int64) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	ts.pos, ts.known = max(ts.pos, seq), true
}

// holdBack keeps a thread dirty for RetryAfter.
func (cs *Consumer) holdBack(thread string, ts *consumed) time.Duration {
	return cs.holdBackFor(thread, ts, cs.c.RetryAfter)
}

// holdBackFor keeps a thread dirty for d.
func (cs *Consumer) holdBackFor(thread string, ts *consumed, d time.Duration) time.Duration {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	ts.retryAt = cs.now().Add(d)
	cs.dirty[thread] = true
	return d
}

// retryError is an error of Handle that says when to hand the event
// again.
type retryError struct {
	after time.Duration
	err   error
}

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// RetryIn wraps an error of Handle so that the event is handed again
// after d instead of RetryAfter (a webhook sender's backoff); d <= 0
// means at once.
func RetryIn(d time.Duration, err error) error {
	return &retryError{after: max(d, time.Nanosecond), err: err}
}

// retryDelay is how long a thread waits after Handle failed with err.
func retryDelay(err error, otherwise time.Duration) time.Duration {
	var re *retryError
	if errors.As(err, &re) {
		return re.after
	}
	return otherwise
}

// save stores the positions that moved since the last save.
func (cs *Consumer) save(ctx context.Context, token int64) error {
	cs.mu.Lock()
	moved := map[string]int64{}
	for thread, ts := range cs.threads {
		if ts.known && ts.pos > ts.saved {
			moved[thread] = ts.pos
		}
	}
	cs.mu.Unlock()
	if len(moved) == 0 {
		return nil
	}
	if err := cs.c.Store.SaveEventCursor(ctx, cs.c.Name, token, moved); err != nil {
		return err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for thread, seq := range moved {
		if ts := cs.threads[thread]; ts != nil {
			ts.saved = max(ts.saved, seq)
		}
	}
	return nil
}

// EmittedAt is when an event was emitted (its emittedAtMs stamp).
func EmittedAt(n *hub.Notification) time.Time {
	ms := n.EmittedAtMs
	if ms == 0 {
		var f struct {
			EmittedAtMs int64 `json:"emittedAtMs"`
		}
		if json.Unmarshal(n.Frame(), &f) == nil {
			ms = f.EmittedAtMs
		}
	}
	return time.UnixMilli(ms)
}
