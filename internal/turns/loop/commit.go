package loop

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/stackgrow"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// roundCommitter overlaps a tool round's commit with the next model
// request, and holds the round's deferred tool item for that commit.
//
// The ordering rule, stated here once: a tool round's commit (the turn's
// history, the thread's usage and meta, and the round's deferred tool
// item) starts when the next request has been written, or delay after the
// request was prepared, whichever is first. It announces what it carries
// (the deferred item's item/completed, thread/tokenUsage/updated, the
// turn's diff) itself, as soon as it has succeeded; a failed commit
// announces none of it and fails the turn. Until then the turn
// goroutine writes nothing and announces nothing: it settles first, and
// reads meanwhile only stream events that need neither (quietEvent), and,
// while a turn's first commit runs, events that only announce, whose
// announcements wait for the turn's own (holdable). Tool
// goroutines are not held by this rule: a tool's own items, deltas and
// notifications (ToolSink), and the items of exec sessions that outlive
// their round, go out when the tool makes them, a completed item once it is
// stored (an item whose write fails is never announced and fails the turn);
// the turn goroutine orders a round's end after its tools return.
type roundCommitter struct {
	// delay bounds how long a commit waits for the request to be written
	// (Config.MaxCommitDelay).
	delay time.Duration
	// pending is the commit not yet settled; turn goroutine only.
	pending *roundCommit

	mu sync.Mutex // guards roundCalls and deferred; tools run concurrently
	// roundCalls holds the call ids of the running tool round that have
	// no completed item yet.
	roundCalls map[string]bool
	// deferred is the round's last tool item, committed with its history.
	deferred []deferredItem
}

// pipeline makes c the pending commit; it starts as the rule says.
func (rc *roundCommitter) pipeline(c *roundCommit) { rc.pending = c }

// startOnSend arms the pending commit, if any, to start once req has been
// written (the model takes far longer to answer than the commit takes, so
// the two need not compete) or after delay at the latest, so that a large
// body on a slow link, or a peer that stopped reading, does not hold it
// back. Call stop once the request is over.
func (rc *roundCommitter) startOnSend(req *model.Request) (stop func()) {
	p := rc.pending
	if p == nil || p.inline {
		return func() {}
	}
	req.Sent = p.start
	late := time.AfterFunc(rc.delay, p.start)
	return func() { late.Stop() }
}

// settle waits for the pending commit, starting it if need be, and returns
// its outcome when that decides the turn.
func (rc *roundCommitter) settle() error {
	p := rc.pending
	if p == nil {
		return nil
	}
	rc.pending = nil
	return p.wait()
}

// unsettled reports whether a commit is pending.
func (rc *roundCommitter) unsettled() bool { return rc.pending != nil }

// beginRound records the call ids of a tool round about to run.
func (rc *roundCommitter) beginRound(callIDs map[string]bool) {
	rc.mu.Lock()
	rc.roundCalls = callIDs
	rc.mu.Unlock()
}

// endRound forgets the round's calls: a tool still running after an
// interrupt commits its own item.
func (rc *roundCommitter) endRound() { rc.beginRound(nil) }

// deferItem takes the completed item of call id of the running round when
// it is final and the round's last, and reports whether it did; the
// round's commit then stores and announces it.
func (rc *roundCommitter) deferItem(id string, final bool, d deferredItem) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !rc.roundCalls[id] {
		return false
	}
	delete(rc.roundCalls, id)
	if !final || len(rc.roundCalls) > 0 {
		return false
	}
	rc.deferred = append(rc.deferred, d)
	return true
}

// addDeferred adds d to the items the next round commit stores and
// announces first.
func (rc *roundCommitter) addDeferred(d deferredItem) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.deferred = append(rc.deferred, d)
}

// takeDeferred returns the deferred items and forgets them.
func (rc *roundCommitter) takeDeferred() []deferredItem {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	d := rc.deferred
	rc.deferred = nil
	return d
}

// recordUsage accumulates token usage and emits thread/tokenUsage/updated.
//
// The usage is committed with the thread (and, with withHistory, the turn's
// history, tool calls and outputs included) in one batch, so that resume
// after a crash replays what the client last saw.
func (r *Run) recordUsage(u model.Usage, withHistory bool) error {
	return r.recordUsageAsync(u, withHistory).wait()
}

// roundCommit is a commit prepared by recordUsageAsync: start runs it in
// the background (once, from any goroutine), or, inline, on the goroutine
// that calls it first; wait starts it if need be and waits for it.
type roundCommit struct {
	run func()
	// announce tells the clients what the commit carried, once stored,
	// through emit (the thread's Emit, or a turn end's list of the
	// notifications that ride its commit).
	announce func(emit Emit)
	// deferred are the items the commit stores (deferred tool items, the
	// response's last streamed item), announced first.
	deferred []deferredItem
	done     chan error
	// what names the commit in its error: the turn's history, or the
	// last response's token usage.
	what string
	// inline is set when the commit runs on the goroutine that starts it
	// first, rather than on one of its own (a turn's first,
	// RunInputOverlapped: the answer to turn/start, or the turn's
	// settle). An inline commit may block on what it waits for: no
	// request or timer starts it.
	inline bool
	// claimed is set by the first start; a later one does nothing.
	claimed atomic.Bool
}

func (c *roundCommit) start() {
	if !c.claimed.CompareAndSwap(false, true) {
		return
	}
	if c.inline {
		c.run()
		return
	}
	go func() {
		stackgrow.Grow()
		c.run()
	}()
}

// wait returns the commit's failure, which decides the turn: nothing the
// commit carried has been announced.
func (c *roundCommit) wait() error {
	c.start()
	if err := <-c.done; err != nil {
		return fmt.Errorf("persist %s: %w", c.what, err)
	}
	return nil
}

// recordUsageAsync is recordUsage with the commit prepared on the turn
// goroutine and run in the background once started (see roundCommitter);
// the round's deferred tool item goes in the same commit.
func (r *Run) recordUsageAsync(u model.Usage, withHistory bool) *roundCommit {
	last := breakdown(u)
	r.hist.AddUsage(last)
	t := r.t
	total := t.AddUsage(r.at.ID, last, last, last.TotalTokens)
	b := &store.Batch{}
	what := "token usage"
	if withHistory {
		b.UpdateTurns = []store.TurnPatch{{ThreadID: r.threadID, ID: r.at.ID, Meta: r.metaJSON()}}
		what = "turn history"
	}
	items := r.commits.takeDeferred()
	limits, provider := r.limits, r.at.Settings.Provider
	r.limits = nil
	budget := r.budgetStatus()
	c := &roundCommit{done: make(chan error, 1), what: what, deferred: items}
	c.announce = func(emit Emit) {
		r.announceDeferred(emit, items)
		emit("thread/tokenUsage/updated", api.ThreadTokenUsageUpdatedNotification{
			ThreadID: r.threadID, TurnID: r.at.ID, TokenUsage: api.TokenUsage{Total: total, Last: last, ModelContextWindow: r.d.contextWindow()},
			Budget: budget,
		})
		if rl, changed := t.RateLimitsChanged(provider, limits); changed {
			emit(api.NotifyAccountRateLimitsUpdated, rl)
		}
		// The reference repeats the turn's diff after each response's
		// usage.
		r.emitDiffTo(emit)
	}
	c.run = func() {
		// With the thread's meta as it is when written, with any change
		// made since the usage was added.
		sits, err := r.storeDeferred(items)
		if err == nil {
			b.AppendItems = sits
			err = t.WriteMeta(r.persistCtx(), b)
		}
		// A failed commit announces nothing it carried: the turn fails
		// (wait), so a client never sees an item or usage the store lacks.
		// Announced here rather than when the turn goroutine next
		// settles, with the next response, which a model may take seconds
		// to start.
		if err == nil {
			c.announce(t.Emit)
		}
		c.done <- err
	}
	return c
}

// ItemCompleted commits a tool's finished item, then announces it
// (ToolSink). The commit is not cancelled by an interrupt.
func (r *Run) ItemCompleted(item api.ThreadItem) {
	r.itemCompleted(item, false)
}

// ItemCompletedFinal is ItemCompleted for a call that announces nothing
// after its item (ToolSink). When it is the last call of a tool
// round still running, its item is not committed on its own: it joins the
// round's history and usage commit (roundCommitter), and is announced as
// soon as that commit is done. That
// saves a commit (an fsync on disk) between the tool's answer and the next
// model request. The other items of a round are committed at once, so that
// their announcements do not wait for the slowest call; and a tool that
// announces more after its item (a diff, a status change) must use
// ItemCompleted, or those would overtake its item/completed.
func (r *Run) ItemCompletedFinal(item api.ThreadItem) {
	r.itemCompleted(item, true)
}

func (r *Run) itemCompleted(item api.ThreadItem, final bool) {
	now := r.d.Now()
	ms := now.UnixMilli()
	if item.CompletedAtMs != nil {
		ms = *item.CompletedAtMs
	}
	note := api.ItemCompletedNotification{Item: item, ThreadID: r.threadID, TurnID: r.at.ID, CompletedAtMs: ms}
	// A tool's item carries its call id. Items of calls of other rounds
	// (an exec session ending later) are not deferred. A deferred item is
	// encoded for the store by the commit that takes it, off the path
	// from the tool's answer to the next model request.
	if r.commits.deferItem(item.Body.ItemID(), final, deferredItem{at: now, note: note}) {
		return
	}
	sit, err := transcript.StoreItem(r.threadID, r.at.ID, item, now)
	if err == nil {
		err = r.t.Write(r.persistCtx(), &store.Batch{AppendItems: []*store.Item{sit}})
	}
	if err != nil {
		// Never announced: a client must not see completed what the store
		// lacks. The turn fails instead, if it still runs.
		r.d.Logger.ErrorContext(r.obs, "persist tool item", "thread", r.threadID, "item", item.Body.ItemID(), "err", err)
		r.at.Cancel(fmt.Errorf("persist tool item: %w", err))
		return
	}
	r.t.Emit("item/completed", note)
}

// deferredItem is a completed tool item waiting for its round's commit.
type deferredItem struct {
	at   time.Time // when it completed: the stored item's creation time
	note api.ItemCompletedNotification
}

// storeDeferred encodes deferred items for the store. An item that cannot
// be encoded fails the commit that would carry it, as a failed write does.
func (r *Run) storeDeferred(items []deferredItem) ([]*store.Item, error) {
	out := make([]*store.Item, 0, len(items))
	for _, d := range items {
		sit, err := transcript.StoreItem(r.threadID, d.note.TurnID, d.note.Item, d.at)
		if err != nil {
			return nil, err
		}
		out = append(out, sit)
	}
	return out, nil
}

// announceDeferred announces items whose commit succeeded, through emit.
func (r *Run) announceDeferred(emit Emit, items []deferredItem) {
	for _, d := range items {
		emit("item/completed", d.note)
	}
}

// Emit publishes a notification of the turn's thread: Thread.Emit, or
// what collects the notifications that ride a turn's end commit.
type Emit func(method string, params any)

// breakdown is a response's token usage as the protocol reports it.
func breakdown(u model.Usage) api.TokenUsageBreakdown {
	return api.TokenUsageBreakdown{
		TotalTokens:           u.TotalTokens,
		InputTokens:           u.InputTokens,
		CachedInputTokens:     u.CachedInputTokens,
		OutputTokens:          u.OutputTokens,
		ReasoningOutputTokens: u.ReasoningOutputTokens,
	}
}
