package hub_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/hub"
)

// follow attaches c as a follower of h's feed; its due calls are counted.
func follow(h *hub.Hub, c *client, opts hub.AttachOptions) (hub.ConnID, *hub.FeedCursor, *atomic.Int32) {
	id := h.NewConnID()
	var due atomic.Int32
	cur := h.AttachFollower(id, c, opts, func() { due.Add(1) })
	return id, cur, &due
}

func status(h *hub.Hub, threadID string) {
	h.BroadcastThread(threadID, nil, "thread/status/changed", api.ThreadStatusChangedNotification{ThreadID: threadID})
}

// drain returns what the cursor holds, in order.
func drain(c *hub.FeedCursor) []*hub.Notification {
	var ns []*hub.Notification
	for n := c.Next(); n != nil; n = c.Next() {
		ns = append(ns, n)
	}
	return ns
}

// A follower takes the broadcasts about threads it does not hear from its
// cursor, marked Distant, with their audience, and none of them through
// Notify; one that hears the thread gets the notification itself through
// Notify, and nothing from the feed; a subscriber that does not follow
// gets its distant copy through Notify as before; a follower that opted
// out of the method finds nothing; a broadcast about no thread goes to
// every follower through Notify.
func TestFeedCarriesDistantBroadcasts(t *testing.T) {
	h := hub.New(hub.Config{FeedDelay: func(int) time.Duration { return time.Hour }})
	defer h.Close()
	nearC, farC, plainC, deafC := newClient(), newClient(), newClient(), newClient()
	nearID, nearCur, _ := follow(h, nearC, hub.AttachOptions{})
	h.Subscribe("th", nearID)
	_, farCur, _ := follow(h, farC, hub.AttachOptions{})
	h.Attach(h.NewConnID(), plainC, hub.AttachOptions{})
	_, deafCur, _ := follow(h, deafC, hub.AttachOptions{OptOut: map[string]struct{}{"thread/status/changed": {}}})

	status(h, "th")
	n := nearC.note(t)
	require.False(t, n.Distant)
	require.Equal(t, 3, n.Audience, "the opted-out follower is not counted")
	require.Empty(t, drain(nearCur))

	p := plainC.note(t)
	require.True(t, p.Distant)

	got := drain(farCur)
	require.Len(t, got, 1)
	require.True(t, got[0].Distant)
	require.True(t, got[0].Broadcast)
	require.Equal(t, 3, got[0].Audience)
	require.Equal(t, string(n.Frame()), string(got[0].Frame()))
	require.Empty(t, farC.notes, "a follower gets no distant broadcast through Notify")

	require.Empty(t, drain(deafCur))
	require.Empty(t, deafC.notes)

	h.Broadcast("account/updated", map[string]any{})
	for _, c := range []*client{nearC, farC, plainC, deafC} {
		require.Equal(t, "account/updated", c.note(t).Method)
	}
	require.Empty(t, drain(farCur))
}

// A cursor yields the broadcasts in the order they were made, across the
// feed's blocks, none made before its follower attached, and follows the
// thread's subscribers as they were at each broadcast: one made while the
// follower heard the thread came through Notify and is not in the feed.
func TestFeedKeepsOrderAndSubscriptions(t *testing.T) {
	h := hub.New(hub.Config{FeedDelay: func(int) time.Duration { return time.Hour }})
	defer h.Close()
	// Clients that take more than their 16 notes' room would block the
	// hub, should the broadcasts go through Notify after all.
	roomy := func() *client {
		c := newClient()
		c.notes = make(chan *hub.Notification, 1000)
		return c
	}
	_, earlier, _ := follow(h, roomy(), hub.AttachOptions{})
	status(h, "before") // in the feed, for the earlier follower only
	require.Len(t, drain(earlier), 1)
	c := roomy()
	id, cur, _ := follow(h, c, hub.AttachOptions{})
	status(h, "before-subscribers")
	var want []string
	for i := range 600 {
		th := []string{"a", "b", "c"}[i%3]
		if i == 300 {
			h.Subscribe("b", id)
		}
		if i == 450 {
			h.Unsubscribe("b", id)
		}
		status(h, th)
		if th != "b" || i < 300 || i >= 450 {
			want = append(want, th)
		}
	}
	var got []string
	for _, n := range drain(cur) {
		got = append(got, n.Params.(api.ThreadStatusChangedNotification).ThreadID)
	}
	require.Equal(t, "before-subscribers", got[0])
	require.Equal(t, want, got[1:])
	require.Len(t, c.notes, 50, "the broadcasts about b while subscribed came through Notify")
	require.Nil(t, cur.Next())
}

// The hub asks its followers to take the feed within the delay the
// broadcast's audience gives, once for broadcasts made together; not
// before a broadcast, and not a follower that detached.
func TestFeedDueWithinItsDelay(t *testing.T) {
	// Long enough that the two broadcasts below fall within it on a
	// loaded machine.
	const delay = 150 * time.Millisecond
	var audiences []int
	h := hub.New(hub.Config{FeedDelay: func(audience int) time.Duration {
		audiences = append(audiences, audience) // under the hub's lock
		return delay
	}})
	defer h.Close()
	_, _, dueA := follow(h, newClient(), hub.AttachOptions{})
	idB, _, dueB := follow(h, newClient(), hub.AttachOptions{})
	// A follower's due may call the hub: it is called without the hub's
	// lock held.
	var unlocked, locked atomic.Int32
	h.AttachFollower(h.NewConnID(), newClient(), hub.AttachOptions{}, func() {
		done := make(chan struct{})
		go func() { h.Watched("th"); close(done) }()
		select {
		case <-done:
			unlocked.Add(1)
		case <-time.After(2 * time.Second):
			locked.Add(1)
		}
	})
	time.Sleep(60 * time.Millisecond)
	require.Zero(t, dueA.Load(), "nothing was broadcast")

	start := time.Now()
	status(h, "th")
	status(h, "th")
	together := time.Since(start) < delay // not so on a machine that stalled
	require.Eventually(t, func() bool { return dueA.Load() >= 1 && dueB.Load() >= 1 }, 5*time.Second, time.Millisecond)
	require.GreaterOrEqual(t, time.Since(start), delay)
	time.Sleep(60 * time.Millisecond)
	if together {
		require.Equal(t, int32(1), dueA.Load(), "one call for both broadcasts")
		require.Equal(t, []int{3}, audiences)
	}
	callsA := dueA.Load()
	require.Eventually(t, func() bool { return unlocked.Load()+locked.Load() >= 1 }, 5*time.Second, time.Millisecond)
	require.Zero(t, locked.Load(), "due was called with the hub's lock held")

	callsB := dueB.Load()
	h.Detach(idB)
	status(h, "th")
	require.Eventually(t, func() bool { return dueA.Load() == callsA+1 }, 5*time.Second, time.Millisecond)
	time.Sleep(10 * time.Millisecond)
	require.Equal(t, callsB, dueB.Load())
}

// A hub without a FeedDelay keeps no feed: a follower is a subscriber
// like any other.
func TestNoFeedWithoutDelay(t *testing.T) {
	h := hub.New(hub.Config{})
	defer h.Close()
	c := newClient()
	_, cur, _ := follow(h, c, hub.AttachOptions{})
	require.Nil(t, cur)
	status(h, "th")
	require.True(t, c.note(t).Distant)
}

// A broadcast about a thread that every follower hears (a crowd on one
// thread) goes into no feed: nothing is published and the hub's timer is
// not armed, so no follower is asked to look.
func TestFeedSkipsWhatNoFollowerMisses(t *testing.T) {
	var armed atomic.Int32
	h := hub.New(hub.Config{FeedDelay: func(int) time.Duration {
		armed.Add(1)
		return time.Hour
	}})
	defer h.Close()
	for range 3 {
		id, _, _ := follow(h, newClient(), hub.AttachOptions{})
		h.Subscribe("th", id)
	}
	status(h, "th")
	require.Zero(t, armed.Load())
	_, cur, _ := follow(h, newClient(), hub.AttachOptions{})
	status(h, "th")
	require.Equal(t, int32(1), armed.Load())
	require.Len(t, drain(cur), 1)
}
