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
