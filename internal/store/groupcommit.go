package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appserver/appserver/internal/apperr"
)

// GroupCommitConfig configures a GroupCommitter; zero fields take defaults.
type GroupCommitConfig struct {
	// MaxBatches caps how many callers' batches share one transaction
	// (default 128).
	MaxBatches int
	// QueueSize bounds how many batches may wait for the committer (default
	// 1024); beyond it Write blocks until there is room or ctx ends.
	QueueSize int
	// CommitTimeout bounds each transaction (default 30s), so that a hung
	// database cannot hold callers forever.
	CommitTimeout time.Duration
	// OnCommit, when set, is called after each commit round with the number
	// of callers' batches it carried and how long it took.
	OnCommit func(batches int, d time.Duration)
	// Events, when set, is drained into every commit round: the event log's
	// entries ride the transcript's transactions. Events of a round that
	// fails are written alone, or counted dropped if the store is down.
	Events *EventQueue
}

// GroupCommitter is a Store that merges the batches of concurrent Write
// callers into one transaction, so that many threads persisting items at
// once pay for one commit. Reads go straight to the wrapped Store, which the
// GroupCommitter owns: Close drains pending writes, then closes it.
type GroupCommitter struct {
	inner Store
	cfg   GroupCommitConfig
	queue chan *commitRequest
	done  chan struct{}

	// mu guards closed and the sends on queue, so that Close never closes
	// queue under a sender.
	mu     sync.RWMutex
	closed bool

	closeOnce sync.Once
	closeErr  error
}

// Request states; a request moves from pending to exactly one of the others.
const (
	reqPending  int32 = iota
	reqClaimed        // taken by the committer: its outcome will be reported
	reqCanceled       // withdrawn by its caller before being taken
)

type commitRequest struct {
	batch *Batch
	state atomic.Int32
	done  chan error // buffered: the committer never blocks on a caller
}

var _ Store = (*GroupCommitter)(nil)

// NewGroupCommitter returns a running GroupCommitter that writes through
// inner; Close stops it.
func NewGroupCommitter(inner Store, cfg GroupCommitConfig) *GroupCommitter {
	if cfg.MaxBatches <= 0 {
		cfg.MaxBatches = 128
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 1024
	}
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = 30 * time.Second
	}
	g := &GroupCommitter{
		inner: inner,
		cfg:   cfg,
		queue: make(chan *commitRequest, cfg.QueueSize),
		done:  make(chan struct{}),
	}
	go g.run()
	return g
}

// Write queues b for the next group commit and waits for its outcome. Once
// the committer has taken b, Write waits for the outcome even if ctx ends, so
// that its result always tells whether b was stored; before that, an ended
// ctx withdraws b and nothing is written.
func (g *GroupCommitter) Write(ctx context.Context, b *Batch) error {
	if b.Empty() {
		return nil
	}
	// Invalid batches fail here, alone, rather than aborting a merged
	// transaction and forcing the fallback on everybody.
	if err := b.Validate(); err != nil {
		return err
	}
	r := &commitRequest{batch: b, done: make(chan error, 1)}
	if err := g.enqueue(ctx, r); err != nil {
		return err
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqPending, reqCanceled) {
			return apperr.Wrap(apperr.Unavailable, ctx.Err(), "store write canceled")
		}
		return <-r.done
	}
}

func (g *GroupCommitter) enqueue(ctx context.Context, r *commitRequest) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return apperr.New(apperr.Unavailable, "store is closed")
	}
	select {
	case g.queue <- r:
		return nil
	case <-ctx.Done():
		return apperr.Wrap(apperr.Unavailable, ctx.Err(), "store write canceled")
	}
}

func (g *GroupCommitter) run() {
	defer close(g.done)
	reqs := make([]*commitRequest, 0, g.cfg.MaxBatches)
	for r := range g.queue {
		reqs = append(reqs[:0], r)
		// Whatever queued up while the previous commit ran goes into this
		// one; there is no artificial delay.
	gather:
		for len(reqs) < g.cfg.MaxBatches {
			select {
			case r, ok := <-g.queue:
				if !ok {
					break gather
				}
				reqs = append(reqs, r)
			default:
				break gather
			}
		}
		g.commit(reqs)
	}
}

func (g *GroupCommitter) commit(reqs []*commitRequest) {
	claimed := reqs[:0]
	for _, r := range reqs {
		if r.state.CompareAndSwap(reqPending, reqClaimed) {
			claimed = append(claimed, r)
		}
	}
	if len(claimed) == 0 {
		return
	}
	start := time.Now()
	var riders []*Event
	ridden := func() {}
	if g.cfg.Events != nil {
		riders, ridden = g.cfg.Events.take()
	}
	if len(claimed) == 1 && len(riders) == 0 {
		ridden()
		claimed[0].done <- g.write(claimed[0].batch)
	} else {
		m := mergeBatches(claimed)
		m.AppendEvents = append(m.AppendEvents, riders...)
		err := g.write(m)
		if err != nil && len(riders) > 0 {
			g.writeRiders(riders, err)
		}
		// Before the callers learn the outcome: whoever reads the log
		// after a write finds its events stored, not queued.
		ridden()
		switch {
		case err == nil:
			for _, r := range claimed {
				r.done <- nil
			}
		case apperr.Is(err, apperr.Unavailable):
			// The database itself is failing: committing each batch on its
			// own would only multiply the wait.
			for _, r := range claimed {
				r.done <- err
			}
		default:
			// One batch spoiled the transaction for all; commit each on its
			// own so that only the culprit fails.
			for _, r := range claimed {
				r.done <- g.write(r.batch)
			}
		}
	}
	if g.cfg.OnCommit != nil {
		g.cfg.OnCommit(len(claimed), time.Since(start))
	}
}

// writeRiders writes the events of a failed round alone, unless the store
// is down (then they are counted dropped: the clients that were live got
// them, and waiting here would hold up the transcript).
func (g *GroupCommitter) writeRiders(riders []*Event, err error) {
	if !apperr.Is(err, apperr.Unavailable) {
		if err = g.write(&Batch{AppendEvents: riders}); err == nil {
			return
		}
	}
	g.cfg.Events.mu.Lock()
	g.cfg.Events.dropped += int64(len(riders))
	g.cfg.Events.mu.Unlock()
}

func (g *GroupCommitter) write(b *Batch) error {
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.CommitTimeout)
	defer cancel()
	return g.inner.Write(ctx, b)
}

// mergeBatches concatenates the batches group by group. Each caller's
// records keep their relative order, and its items get consecutive Seqs,
// because the merged batch holds the callers' own pointers; the store fills
// them back only when the merged transaction commits.
func mergeBatches(reqs []*commitRequest) *Batch {
	m := &Batch{}
	for _, r := range reqs {
		b := r.batch
		m.CreateThreads = append(m.CreateThreads, b.CreateThreads...)
		m.UpdateThreads = append(m.UpdateThreads, b.UpdateThreads...)
		m.CreateTurns = append(m.CreateTurns, b.CreateTurns...)
		m.UpdateTurns = append(m.UpdateTurns, b.UpdateTurns...)
		m.AppendItems = append(m.AppendItems, b.AppendItems...)
		m.Fences = append(m.Fences, b.Fences...)
		m.AppendEvents = append(m.AppendEvents, b.AppendEvents...)
	}
	return m
}

// Queued returns how many batches wait for the committer, for a queue-depth
// gauge (and for tests that need batches to be waiting).
func (g *GroupCommitter) Queued() int { return len(g.queue) }

// Close stops accepting writes, commits every batch already queued, stops
// the committer and closes the wrapped Store. Later calls return the first
// call's result.
func (g *GroupCommitter) Close() error {
	g.closeOnce.Do(func() {
		g.mu.Lock()
		g.closed = true
		close(g.queue)
		g.mu.Unlock()
		<-g.done
		g.closeErr = g.inner.Close()
	})
	return g.closeErr
}

// GetThread reads through to the wrapped Store.
func (g *GroupCommitter) GetThread(ctx context.Context, id string) (Thread, error) {
	return g.inner.GetThread(ctx, id)
}

// ListThreads reads through to the wrapped Store.
func (g *GroupCommitter) ListThreads(ctx context.Context, q ListThreadsQuery) (ThreadPage, error) {
	return g.inner.ListThreads(ctx, q)
}

// GetTurn reads through to the wrapped Store.
func (g *GroupCommitter) GetTurn(ctx context.Context, threadID, turnID string) (Turn, error) {
	return g.inner.GetTurn(ctx, threadID, turnID)
}

// ListTurns reads through to the wrapped Store.
func (g *GroupCommitter) ListTurns(ctx context.Context, q TurnsQuery) (TurnPage, error) {
	return g.inner.ListTurns(ctx, q)
}

// GetItem reads through to the wrapped Store.
func (g *GroupCommitter) GetItem(ctx context.Context, threadID, itemID string) (Item, error) {
	return g.inner.GetItem(ctx, threadID, itemID)
}

// ListItems reads through to the wrapped Store.
func (g *GroupCommitter) ListItems(ctx context.Context, q ItemsQuery) (ItemPage, error) {
	return g.inner.ListItems(ctx, q)
}

// DeleteThread goes straight to the wrapped Store: the thread is unloaded
// first, so no write of it is waiting in a group.
func (g *GroupCommitter) DeleteThread(ctx context.Context, id string) error {
	return g.inner.DeleteThread(ctx, id)
}

// ListInProgressTurns reads through to the wrapped Store.
func (g *GroupCommitter) ListInProgressTurns(ctx context.Context) ([]Turn, error) {
	return g.inner.ListInProgressTurns(ctx)
}

// ListEvents reads through to the wrapped Store.
func (g *GroupCommitter) ListEvents(ctx context.Context, threadID string, afterSeq int64, limit int) ([]Event, error) {
	return g.inner.ListEvents(ctx, threadID, afterSeq, limit)
}

// LastEventSeq reads through to the wrapped Store.
func (g *GroupCommitter) LastEventSeq(ctx context.Context, threadID string) (int64, error) {
	return g.inner.LastEventSeq(ctx, threadID)
}

// PruneEvents goes straight to the wrapped Store: it deletes old rows no
// pending write touches.
func (g *GroupCommitter) PruneEvents(ctx context.Context, before time.Time, limit int) (int64, error) {
	return g.inner.PruneEvents(ctx, before, limit)
}

// ClaimIdempotencyKey goes straight to the wrapped Store.
func (g *GroupCommitter) ClaimIdempotencyKey(ctx context.Context, scope, key string, hash []byte, now, expires time.Time) (bool, string, error) {
	return g.inner.ClaimIdempotencyKey(ctx, scope, key, hash, now, expires)
}

// CompleteIdempotencyKey goes straight to the wrapped Store.
func (g *GroupCommitter) CompleteIdempotencyKey(ctx context.Context, scope, key, turnID string) error {
	return g.inner.CompleteIdempotencyKey(ctx, scope, key, turnID)
}

// ReleaseIdempotencyKey goes straight to the wrapped Store.
func (g *GroupCommitter) ReleaseIdempotencyKey(ctx context.Context, scope, key string) error {
	return g.inner.ReleaseIdempotencyKey(ctx, scope, key)
}

// PruneIdempotencyKeys goes straight to the wrapped Store.
func (g *GroupCommitter) PruneIdempotencyKeys(ctx context.Context, now time.Time) (int64, error) {
	return g.inner.PruneIdempotencyKeys(ctx, now)
}

// Ping reads through to the wrapped Store.
func (g *GroupCommitter) Ping(ctx context.Context) error {
	return g.inner.Ping(ctx)
}
