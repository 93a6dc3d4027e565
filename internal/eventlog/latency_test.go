package eventlog_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/eventlog"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/pgtest"
	"github.com/appserver/appserver/internal/store/postgres"
)

// BenchmarkCrossNodeLatency measures how long a thread notification sent
// on daemon A takes to reach a subscriber on daemon B, both on one
// Postgres: A's event queue rides (or flushes after FlushDelay) a group
// commit that notifies, B's listener fetches the events and hands them to
// its hub. Each op sends one notification and waits for it on B, with
// background threads on A sending too (threads=N), so commits carry
// several threads' events. Reports p50-ms and p99-ms.
func BenchmarkCrossNodeLatency(b *testing.B) {
	for _, busy := range []int{0, 8} {
		b.Run("busy-threads="+strconv.Itoa(busy), func(b *testing.B) { benchCrossNode(b, busy) })
	}
}

func benchCrossNode(b *testing.B, busy int) {
	url := pgtest.URL(b)
	node := func() (*hub.Hub, func()) {
		p, err := postgres.Open(b.Context(), postgres.Config{URL: url, MaxConns: 8, Migrate: true})
		require.NoError(b, err)
		q := store.NewEventQueue(eventlog.DefaultMaxPending)
		g := store.NewGroupCommitter(p, store.GroupCommitConfig{Events: q})
		l, err := eventlog.New(eventlog.Config{Store: g, Queue: q, StoreDeltas: true})
		require.NoError(b, err)
		require.NoError(b, l.Start(b.Context()))
		h := hub.New(hub.Config{Journal: l})
		stopListening := listen(b, l, h, p)
		return h, func() { stopListening(); l.Stop(); _ = g.Close() }
	}
	ha, stopA := node()
	defer stopA()
	hb, stopB := node()
	defer stopB()
	thread := uuid.NewString()
	onB := subscribe(hb, thread)
	// Warm up until B's listener delivers.
	publish(ha, thread, delta(0))
	select {
	case <-onB.notes:
	case <-time.After(10 * time.Second):
		b.Fatal("no cross-node delivery")
	}
	stop := make(chan struct{})
	done := make(chan struct{}, busy)
	for range busy {
		go func() {
			defer func() { done <- struct{}{} }()
			other := uuid.NewString()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				publish(ha, other, delta(i))
			}
		}()
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		publish(ha, thread, delta(i))
		select {
		case <-onB.notes:
		case <-time.After(10 * time.Second):
			b.Fatal("no cross-node delivery")
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	close(stop)
	for range busy {
		<-done
	}
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / 1e6 }
	b.ReportMetric(ms(0.5), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
}
