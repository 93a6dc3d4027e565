package store

import (
	"context"
	"encoding/json"
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
	// Audit, when set, is drained into every commit round like Events:
	// the audit log's entries ride the transcript's transactions. Entries
	// of a round that fails are written alone, or queued again if the
	// store is down.
	Audit *AuditQueue
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
	// A batch that drops turns is written alone, in its place: merged,
	// its drops would apply before the turns and items of the batches
	// queued ahead of it (Batch applies group by group).
	for i, first := 0, true; i < len(claimed); first = false {
		j := i + 1
		if len(claimed[i].batch.DropTurns) == 0 {
			for j < len(claimed) && len(claimed[j].batch.DropTurns) == 0 {
				j++
			}
		}
		g.commitGroup(claimed[i:j], first)
		i = j
	}
	if g.cfg.OnCommit != nil {
		g.cfg.OnCommit(len(claimed), time.Since(start))
	}
}

// commitGroup commits claimed batches in one transaction, with the
// event log's queued events when withRiders, and answers their callers.
func (g *GroupCommitter) commitGroup(claimed []*commitRequest, withRiders bool) {
	var riders []*Event
	var audit []*AuditEntry
	ridden, audited := func() {}, func() {}
	if withRiders && g.cfg.Events != nil {
		riders, ridden = g.cfg.Events.take()
	}
	if withRiders && g.cfg.Audit != nil {
		audit, audited = g.cfg.Audit.take()
	}
	if len(claimed) == 1 && len(riders) == 0 && len(audit) == 0 {
		ridden()
		audited()
		claimed[0].done <- g.write(claimed[0].batch)
	} else {
		m := mergeBatches(claimed)
		m.AppendEvents = append(m.AppendEvents, riders...)
		m.AppendAudit = append(m.AppendAudit, audit...)
		err := g.write(m)
		if err != nil && len(riders) > 0 {
			g.writeRiders(riders, err)
		}
		if err != nil && len(audit) > 0 {
			g.writeAudit(audit, err)
		}
		// Before the callers learn the outcome: whoever reads the log
		// after a write finds its events stored, not queued.
		ridden()
		audited()
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
	g.cfg.Events.drop(len(riders))
}

// writeAudit writes the audit entries of a failed round alone, unless the
// store is down; what is not written is queued again, for a later round
// (entries were validated when queued, so only the store refuses them).
func (g *GroupCommitter) writeAudit(entries []*AuditEntry, err error) {
	if !apperr.Is(err, apperr.Unavailable) {
		if err = g.write(&Batch{AppendAudit: entries}); err == nil {
			return
		}
	}
	g.cfg.Audit.requeue(entries)
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
		m.DropTurns = append(m.DropTurns, b.DropTurns...)
		m.CreateTurns = append(m.CreateTurns, b.CreateTurns...)
		m.UpdateTurns = append(m.UpdateTurns, b.UpdateTurns...)
		m.AppendItems = append(m.AppendItems, b.AppendItems...)
		m.Fences = append(m.Fences, b.Fences...)
		m.AppendEvents = append(m.AppendEvents, b.AppendEvents...)
		m.AppendAudit = append(m.AppendAudit, b.AppendAudit...)
		m.TakeQueued = append(m.TakeQueued, b.TakeQueued...)
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

// ReserveEventSeqs writes through to the wrapped Store: it commits on
// its own, apart from the committer's rounds.
func (g *GroupCommitter) ReserveEventSeqs(ctx context.Context, threadID string, n int64) (int64, error) {
	return g.inner.ReserveEventSeqs(ctx, threadID, n)
}

// PruneEvents goes straight to the wrapped Store: it deletes old rows no
// pending write touches.
func (g *GroupCommitter) PruneEvents(ctx context.Context, before time.Time, limit int) (int64, error) {
	return g.inner.PruneEvents(ctx, before, limit)
}

// PruneThreadEvents goes straight to the wrapped Store, like PruneEvents.
func (g *GroupCommitter) PruneThreadEvents(ctx context.Context, threadID string, maxBytes int64, limit int) (int64, int64, error) {
	return g.inner.PruneThreadEvents(ctx, threadID, maxBytes, limit)
}

// Reclaim goes straight to the wrapped Store.
func (g *GroupCommitter) Reclaim(ctx context.Context) error {
	return g.inner.Reclaim(ctx)
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

// PutCredential goes straight to the wrapped Store.
func (g *GroupCommitter) PutCredential(ctx context.Context, c Credential, now time.Time) error {
	return g.inner.PutCredential(ctx, c, now)
}

// GetCredential goes straight to the wrapped Store.
func (g *GroupCommitter) GetCredential(ctx context.Context, kind CredentialKind, digest []byte) (Credential, bool, error) {
	return g.inner.GetCredential(ctx, kind, digest)
}

// DeleteCredential goes straight to the wrapped Store.
func (g *GroupCommitter) DeleteCredential(ctx context.Context, kind CredentialKind, digest []byte) (Credential, bool, error) {
	return g.inner.DeleteCredential(ctx, kind, digest)
}

// ClaimEventConsumer goes straight to the wrapped Store.
func (g *GroupCommitter) ClaimEventConsumer(ctx context.Context, name, holder string, now, expires time.Time) (int64, bool, error) {
	return g.inner.ClaimEventConsumer(ctx, name, holder, now, expires)
}

// ReleaseEventConsumer goes straight to the wrapped Store.
func (g *GroupCommitter) ReleaseEventConsumer(ctx context.Context, name string, token int64, now time.Time) error {
	return g.inner.ReleaseEventConsumer(ctx, name, token, now)
}

// DeleteEventConsumer goes straight to the wrapped Store.
func (g *GroupCommitter) DeleteEventConsumer(ctx context.Context, name string) error {
	return g.inner.DeleteEventConsumer(ctx, name)
}

// EventCursor goes straight to the wrapped Store.
func (g *GroupCommitter) EventCursor(ctx context.Context, name string) (EventCursor, error) {
	return g.inner.EventCursor(ctx, name)
}

// SaveEventCursor goes straight to the wrapped Store.
func (g *GroupCommitter) SaveEventCursor(ctx context.Context, name string, token int64, positions map[string]int64) error {
	return g.inner.SaveEventCursor(ctx, name, token, positions)
}

// EventSpans goes straight to the wrapped Store: events still waiting in
// the queue are not stored yet.
func (g *GroupCommitter) EventSpans(ctx context.Context, since time.Time) ([]EventSpan, error) {
	return g.inner.EventSpans(ctx, since)
}

// Ping reads through to the wrapped Store.
func (g *GroupCommitter) Ping(ctx context.Context) error {
	return g.inner.Ping(ctx)
}

// AddBudgetSpend goes straight to the wrapped Store.
func (g *GroupCommitter) AddBudgetSpend(ctx context.Context, principal string, periodStart time.Time, add BudgetSpend) (BudgetSpend, error) {
	return g.inner.AddBudgetSpend(ctx, principal, periodStart, add)
}

// GetBudgetSpend goes straight to the wrapped Store.
func (g *GroupCommitter) GetBudgetSpend(ctx context.Context, principal string, periodStart time.Time) (BudgetSpend, error) {
	return g.inner.GetBudgetSpend(ctx, principal, periodStart)
}

// PutWebhook goes straight to the wrapped Store.
func (g *GroupCommitter) PutWebhook(ctx context.Context, w Webhook) error {
	return g.inner.PutWebhook(ctx, w)
}

// GetWebhook goes straight to the wrapped Store.
func (g *GroupCommitter) GetWebhook(ctx context.Context, id string) (Webhook, error) {
	return g.inner.GetWebhook(ctx, id)
}

// ListWebhooks goes straight to the wrapped Store.
func (g *GroupCommitter) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	return g.inner.ListWebhooks(ctx)
}

// DeleteWebhook goes straight to the wrapped Store.
func (g *GroupCommitter) DeleteWebhook(ctx context.Context, id string) error {
	return g.inner.DeleteWebhook(ctx, id)
}

// AppendWebhookDelivery goes straight to the wrapped Store.
func (g *GroupCommitter) AppendWebhookDelivery(ctx context.Context, d WebhookDelivery, keep int) error {
	return g.inner.AppendWebhookDelivery(ctx, d, keep)
}

// ListWebhookDeliveries goes straight to the wrapped Store.
func (g *GroupCommitter) ListWebhookDeliveries(ctx context.Context, webhook string, beforeSeq int64, limit int) ([]WebhookDelivery, error) {
	return g.inner.ListWebhookDeliveries(ctx, webhook, beforeSeq, limit)
}

// ListAudit goes straight to the wrapped Store.
func (g *GroupCommitter) ListAudit(ctx context.Context, q AuditQuery) ([]AuditEntry, error) {
	return g.inner.ListAudit(ctx, q)
}

// PruneAudit goes straight to the wrapped Store: it deletes old rows no
// pending write touches.
func (g *GroupCommitter) PruneAudit(ctx context.Context, before time.Time, limit int) (int64, error) {
	return g.inner.PruneAudit(ctx, before, limit)
}

// AddQueued goes straight to the wrapped Store.
func (g *GroupCommitter) AddQueued(ctx context.Context, q *QueuedSubmission) (bool, error) {
	return g.inner.AddQueued(ctx, q)
}

// ListQueued goes straight to the wrapped Store.
func (g *GroupCommitter) ListQueued(ctx context.Context, threadID string) ([]QueuedSubmission, error) {
	return g.inner.ListQueued(ctx, threadID)
}

// UpdateQueued goes straight to the wrapped Store.
func (g *GroupCommitter) UpdateQueued(ctx context.Context, threadID, id string, payload json.RawMessage) error {
	return g.inner.UpdateQueued(ctx, threadID, id, payload)
}

// DeleteQueued goes straight to the wrapped Store.
func (g *GroupCommitter) DeleteQueued(ctx context.Context, threadID, id string) (bool, error) {
	return g.inner.DeleteQueued(ctx, threadID, id)
}

// ReorderQueued goes straight to the wrapped Store.
func (g *GroupCommitter) ReorderQueued(ctx context.Context, threadID string, ids []string) error {
	return g.inner.ReorderQueued(ctx, threadID, ids)
}

// QueuedThreads goes straight to the wrapped Store.
func (g *GroupCommitter) QueuedThreads(ctx context.Context) ([]string, error) {
	return g.inner.QueuedThreads(ctx)
}
