package turns

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/store"
)

// settle waits for a commit started by recordUsageAsync, which makes the
// round's announcements once it is over. Every store write and
// notification of the turn goroutine comes after it.
func (r *turnRun) settle() error {
	p := r.pending
	if p == nil {
		return nil
	}
	r.pending = nil
	return p.wait()
}

// recordUsage accumulates token usage and emits thread/tokenUsage/updated.
//
// The usage is committed with the thread (and, with withHistory, the turn's
// history, tool calls and outputs included) in one batch, so that resume
// after a crash replays what the client last saw.
func (r *turnRun) recordUsage(u model.Usage, withHistory bool) error {
	return r.recordUsageAsync(u, withHistory).wait()
}

// maxCommitDelay bounds how long a round's commit waits for the next
// request to be written (a variable for tests).
var maxCommitDelay = 5 * time.Millisecond

// roundCommit is a commit prepared by recordUsageAsync: start runs it in
// the background (once, from any goroutine), wait starts it if need be and
// waits for it.
type roundCommit struct {
	once sync.Once
	run  func()
	done chan error
	// withHistory makes a failure the turn's.
	withHistory bool
}

func (c *roundCommit) start() { c.once.Do(func() { go c.run() }) }

func (c *roundCommit) wait() error {
	c.start()
	if err := <-c.done; err != nil && c.withHistory {
		return fmt.Errorf("persist turn history: %w", err)
	}
	return nil
}

// recordUsageAsync is recordUsage with the commit prepared on the turn
// goroutine and run in the background once started; it announces the
// usage once it is over. The round's deferred tool item (ItemCompleted)
// goes in the same commit.
func (r *turnRun) recordUsageAsync(u model.Usage, withHistory bool) *roundCommit {
	last := api.TokenUsageBreakdown{
		TotalTokens:           u.TotalTokens,
		InputTokens:           u.InputTokens,
		CachedInputTokens:     u.CachedInputTokens,
		OutputTokens:          u.OutputTokens,
		ReasoningOutputTokens: u.ReasoningOutputTokens,
	}
	t := r.t
	t.mu.Lock()
	total := api.TokenUsageBreakdown{}
	if t.meta.TokenTotal != nil {
		total = *t.meta.TokenTotal
	}
	total.TotalTokens += last.TotalTokens
	total.InputTokens += last.InputTokens
	total.CachedInputTokens += last.CachedInputTokens
	total.OutputTokens += last.OutputTokens
	total.ReasoningOutputTokens += last.ReasoningOutputTokens
	t.meta.TokenTotal = &total
	t.meta.LastUsage = &last
	t.meta.LastTurnID = r.at.id
	t.mu.Unlock()
	b := &store.Batch{}
	if withHistory {
		b.UpdateTurns = []store.TurnPatch{{ThreadID: t.id, ID: r.at.id, Meta: r.hist.metaJSON()}}
	}
	items := r.takeDeferred()
	c := &roundCommit{done: make(chan error, 1), withHistory: withHistory}
	c.run = func() {
		// The thread's meta as it is now, with any change made since
		// the usage was added.
		t.metaMu.Lock()
		t.mu.Lock()
		b.UpdateThreads = []store.ThreadPatch{{ID: t.id, Meta: t.metaJSONLocked()}}
		t.mu.Unlock()
		b.AppendItems = r.storeDeferred(items)
		err := t.write(r.persistCtx(), b)
		itemErr := err
		if err != nil && len(b.AppendItems) > 0 {
			// The items may be what failed (a repeated call id is a
			// unique violation): commit the rest alone, whose outcome
			// decides the turn as it did before items joined it, then
			// the items, whose failure is only logged.
			rest := *b
			rest.AppendItems = nil
			err = t.write(r.persistCtx(), &rest)
			itemErr = t.write(r.persistCtx(), &store.Batch{AppendItems: b.AppendItems})
		}
		t.metaMu.Unlock()
		// The round's last tool item and its usage are announced as soon
		// as they are committed, not when the turn goroutine next settles
		// (with the next response, which a model may take seconds to
		// start): the turn goroutine announces nothing before it has
		// settled, which waits for this.
		r.announceDeferred(items, itemErr)
		if err != nil && !withHistory {
			t.m.log.Error("persist token usage", "thread", t.id, "err", err)
		}
		if err == nil || !withHistory {
			t.emit("thread/tokenUsage/updated", api.ThreadTokenUsageUpdatedNotification{
				ThreadID: t.id, TurnID: r.at.id, TokenUsage: api.TokenUsage{Total: total, Last: last},
			})
			// The reference repeats the turn's diff after each response's
			// usage.
			r.emitDiff()
		}
		c.done <- err
	}
	return c
}

// ItemCompleted commits a tool's finished item, then announces it
// (turns.ItemSink). The commit is not cancelled by an interrupt.
func (r *turnRun) ItemCompleted(_ context.Context, turnID string, item api.ThreadItem) {
	r.itemCompleted(turnID, item, false)
}

// ItemCompletedFinal is ItemCompleted for a call that announces nothing
// after its item (turns.FinalItemSink). When it is the last call of a tool
// round still running, its item is not committed on its own: it joins the
// round's history and usage commit, which starts as soon as the round ends
// (recordUsageAsync), and is announced as soon as that commit is done. That
// saves a commit (an fsync on disk) between the tool's answer and the next
// model request. The other items of a round are committed at once, so that
// their announcements do not wait for the slowest call; and a tool that
// announces more after its item (a diff, a status change) must use
// ItemCompleted, or those would overtake its item/completed.
func (r *turnRun) ItemCompletedFinal(_ context.Context, turnID string, item api.ThreadItem) {
	r.itemCompleted(turnID, item, true)
}

func (r *turnRun) itemCompleted(turnID string, item api.ThreadItem, final bool) {
	now := r.t.m.now()
	ms := now.UnixMilli()
	if item.CompletedAtMs != nil {
		ms = *item.CompletedAtMs
	}
	note := api.ItemCompletedNotification{Item: item, ThreadID: r.t.id, TurnID: turnID, CompletedAtMs: ms}
	// A tool's item carries its call id. Items of calls of other rounds
	// (an exec session ending later) do not count.
	id := item.Body.ItemID()
	r.mu.Lock()
	deferred := false
	if r.roundCalls[id] && turnID == r.at.id {
		delete(r.roundCalls, id)
		deferred = final && len(r.roundCalls) == 0
	}
	if deferred {
		// The commit that takes it encodes it for the store, off the
		// path from the tool's answer to the next model request.
		r.deferred = append(r.deferred, deferredItem{at: now, note: note})
	}
	r.mu.Unlock()
	if deferred {
		return
	}
	sit, err := storeItem(r.t.id, turnID, item, now)
	if err == nil {
		err = r.t.write(r.persistCtx(), &store.Batch{AppendItems: []*store.Item{sit}})
	}
	if err != nil {
		// The item is still announced: the client already saw it start,
		// and the model gets the tool's output either way.
		r.t.m.log.Error("persist tool item", "thread", r.t.id, "item", item.Body.ItemID(), "err", err)
	}
	r.t.emit("item/completed", note)
}

// deferredItem is a completed tool item waiting for its round's commit.
type deferredItem struct {
	at   time.Time // when it completed: the stored item's creation time
	note api.ItemCompletedNotification
}

// storeDeferred encodes deferred items for the store. An item that cannot
// be encoded is logged and left out; it is announced all the same.
func (r *turnRun) storeDeferred(items []deferredItem) []*store.Item {
	var out []*store.Item
	for _, d := range items {
		sit, err := storeItem(r.t.id, d.note.TurnID, d.note.Item, d.at)
		if err != nil {
			r.t.m.log.Error("persist tool item", "thread", r.t.id, "item", d.note.Item.Body.ItemID(), "err", err)
			continue
		}
		out = append(out, sit)
	}
	return out
}

// takeDeferred returns the deferred items and forgets them.
func (r *turnRun) takeDeferred() []deferredItem {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.deferred
	r.deferred = nil
	return d
}

// announceDeferred announces items whose commit is over; err is the
// commit's outcome (logged: the items are announced either way, as
// ItemCompleted does).
func (r *turnRun) announceDeferred(items []deferredItem, err error) {
	for _, d := range items {
		if err != nil {
			r.t.m.log.Error("persist tool item", "thread", r.t.id, "item", d.note.Item.Body.ItemID(), "err", err)
		}
		r.t.emit("item/completed", d.note)
	}
}
