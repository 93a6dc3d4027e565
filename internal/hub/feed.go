package hub

import (
	"slices"
	"sync/atomic"
	"time"
)

// The distant feed: broadcasts about a thread, kept once for the
// subscribers that do not hear the thread (Notification.Distant), which
// each follower takes from the feed when it next writes, instead of the
// hub queueing a copy on every connection.
//
// With one thread running per connection, every turn broadcasts three
// notifications (the thread's status twice, its read state) that reach
// every connection: at 400 connections 1,200 copies a turn, queued one by
// one under each connection's lock while its writer ran on the other core.
// That queueing was a quarter of the daemon's CPU a turn
// (BenchmarkCrowdTurns/threads=400, bench/README.md "The distant feed").
// A follower now walks the entries published since its last look,
// skipping those not meant for it, under its own lock only.

// feedBlockSize is the number of entries a block of the feed holds.
const feedBlockSize = 256

// feedEntry is one distant broadcast: its Distant copy and the thread's
// subscribers when it was made (they got the notification itself).
type feedEntry struct {
	n    *Notification
	near []ConnID
}

// feedBlock is a block of the feed. Entries below n are published and
// never change; next is set before the first entry past this block is
// published. Blocks no cursor points into are garbage.
type feedBlock struct {
	entries [feedBlockSize]feedEntry
	n       atomic.Int32
	next    atomic.Pointer[feedBlock]
}

// FeedCursor is a follower's place in the distant feed. Its calls must be
// serialized by the follower (a connection calls it under its outbound
// queue's lock).
type FeedCursor struct {
	id    ConnID
	opts  AttachOptions
	block *feedBlock
	i     int32
}

// Next returns the next distant broadcast meant for the cursor's
// follower, or nil when it has taken every one published so far. A
// broadcast is meant for it when it was attached at the time, hears the
// method and did not hear the thread (which sent it the notification
// itself).
func (c *FeedCursor) Next() *Notification {
	for c.block != nil {
		if c.i == feedBlockSize {
			next := c.block.next.Load()
			if next == nil {
				return nil
			}
			c.block, c.i = next, 0
			continue
		}
		if c.i >= c.block.n.Load() {
			return nil
		}
		e := &c.block.entries[c.i]
		c.i++
		if _, near := slices.BinarySearch(e.near, c.id); near || !c.opts.hears(e.n.Method) {
			continue
		}
		return e.n
	}
	return nil
}

// follower is a subscriber that takes its distant broadcasts from the
// feed: due asks it to take them now.
type follower struct {
	cursor *FeedCursor
	due    func()
}

// AttachFollower is Attach for a subscriber that takes the distant
// broadcasts (those about a thread it does not hear) from the feed
// through the cursor it returns, positioned at the feed's end, rather
// than through Notify: it should take them whenever it is about to write
// something else, so that they keep their place among its frames, and
// when the hub calls due, which it does within Config.FeedDelay of the
// first of them. due is called without hub locks held and must not block.
// With no FeedDelay configured the hub keeps no feed: AttachFollower is
// Attach and returns nil.
func (h *Hub) AttachFollower(id ConnID, sub Subscriber, opts AttachOptions, due func()) *FeedCursor {
	if h.cfg.FeedDelay == nil || opts.Recorder || opts.AllThreads {
		h.Attach(id, sub, opts)
		return nil
	}
	c := &FeedCursor{id: id, opts: opts}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attachLocked(id, sub, opts, true)
	if h.feedTail == nil {
		h.feedTail = &feedBlock{}
	}
	c.block, c.i = h.feedTail, h.feedTail.n.Load()
	h.followers[id] = follower{c, due}
	return c
}

// publishFeedLocked appends a distant broadcast to the feed and makes
// sure the followers will be asked to take it within the feed's delay for
// its audience; h.mu must be held.
func (h *Hub) publishFeedLocked(far *Notification, near []ConnID) {
	b := h.feedTail
	if b == nil {
		return // no follower ever attached
	}
	i := b.n.Load()
	if i == feedBlockSize {
		next := &feedBlock{}
		b.next.Store(next)
		h.feedTail, b, i = next, next, 0
	}
	b.entries[i] = feedEntry{n: far, near: slices.Clone(near)}
	b.n.Store(i + 1)
	if !h.feedArmed && !h.closed.Load() {
		h.feedArmed = true
		d := h.cfg.FeedDelay(far.Audience)
		if t := h.feedTimer.Load(); t != nil {
			t.Reset(d)
		} else {
			h.feedTimer.Store(time.AfterFunc(d, h.feedDue))
		}
	}
}

// feedDue asks every follower to take what the feed holds for it.
func (h *Hub) feedDue() {
	h.mu.Lock()
	h.feedArmed = false
	due := make([]func(), 0, len(h.followers))
	for _, f := range h.followers {
		due = append(due, f.due)
	}
	h.mu.Unlock()
	for _, f := range due {
		f()
	}
}
