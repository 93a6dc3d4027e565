package server

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/server/rpcws"
)

// A broadcast about a thread a connection does not follow waits like any
// broadcast while few connections hear it, and longer, up to a second, as
// the audience grows.
func TestDistantDelayGrowsWithTheAudience(t *testing.T) {
	for audience, want := range map[int]time.Duration{
		0:      rpcws.DefaultLazyDelay,
		1:      rpcws.DefaultLazyDelay,
		80:     rpcws.DefaultLazyDelay,
		400:    100 * time.Millisecond,
		1000:   250 * time.Millisecond,
		4000:   time.Second,
		10_000: time.Second,
	} {
		require.Equal(t, want, distantDelay(audience), "audience %d", audience)
	}
}

// A thread's notification goes out at once to a thread's few subscribers,
// and waits for the connection's next frame, briefly, when many follow
// the thread; broadcasts always wait, distant ones the longer the larger
// their audience.
func TestNotificationsHeldByAudience(t *testing.T) {
	for _, c := range []struct {
		n    *Notification
		want time.Duration
	}{
		{&Notification{Audience: 1}, 0},
		{&Notification{Audience: 15}, 0},
		{&Notification{Audience: 16}, 32 * time.Microsecond},
		{&Notification{Audience: 1000}, 2 * time.Millisecond},
		{&Notification{Audience: 10_000}, 2 * time.Millisecond},
		{&Notification{Broadcast: true, Audience: 1}, rpcws.DefaultLazyDelay},
		{&Notification{Broadcast: true, Distant: true, Audience: 400}, 100 * time.Millisecond},
	} {
		require.Equal(t, c.want, holdFor(c.n), "audience %d, broadcast %v, distant %v", c.n.Audience, c.n.Broadcast, c.n.Distant)
	}
}

// Every notification queued is counted under its method, whether or not
// its counter was looked up before.
func TestNotificationsAreCountedByMethod(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	for range 3 {
		m.notification("thread/status/changed")
	}
	m.notification("turn/started")
	require.Equal(t, 3.0, testutil.ToFloat64(m.Notifications.WithLabelValues("thread/status/changed")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Notifications.WithLabelValues("turn/started")))
	require.Equal(t, 2, testutil.CollectAndCount(m.Notifications))
}
