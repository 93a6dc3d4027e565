package pgnotify

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/store/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		pgtest.Stop()
		os.Exit(code)
	}))
}

// recorder is a subscriber that keeps what it heard.
type recorder struct {
	mu        sync.Mutex
	payloads  []string
	connected int
}

func (r *recorder) handler() Handler {
	return Handler{
		Notify: func(_ context.Context, p string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.payloads = append(r.payloads, p)
		},
		Connected: func(context.Context) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.connected++
		},
	}
}

func (r *recorder) snapshot() ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.payloads...), r.connected
}

func newPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func notify(t *testing.T, pool *pgxpool.Pool, channel, payload string) {
	t.Helper()
	_, err := pool.Exec(t.Context(), `SELECT pg_notify($1, $2)`, channel, payload)
	require.NoError(t, err)
}

// Two subscribers, two channels, one connection: each hears its own
// channel's notifications, in order, and nothing else.
func TestOneConnectionForEveryChannel(t *testing.T) {
	pool := newPool(t, pgtest.URL(t))
	n, err := New(Config{Pool: pool})
	require.NoError(t, err)
	var events, commands recorder
	require.NoError(t, n.Subscribe("appserver_events", events.handler()))
	require.NoError(t, n.Subscribe("appserver_cmd_node-1", commands.handler()))
	require.Error(t, n.Subscribe("appserver_events", commands.handler()), "one subscriber per channel")
	require.NoError(t, n.Start(t.Context()))
	require.NoError(t, n.Start(t.Context()), "a second Start does nothing")
	t.Cleanup(n.Stop)
	require.Error(t, n.Subscribe("late", events.handler()), "subscriptions are made before Start")

	require.Eventually(t, func() bool {
		_, a := events.snapshot()
		_, b := commands.snapshot()
		return a == 1 && b == 1
	}, 10*time.Second, 5*time.Millisecond)
	var conns int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1`, ApplicationName).Scan(&conns))
	require.Equal(t, 1, conns, "one LISTEN connection for both channels")

	const count = 50
	for i := range count {
		notify(t, pool, "appserver_events", "e"+strconv.Itoa(i))
		notify(t, pool, "appserver_cmd_node-1", "c"+strconv.Itoa(i))
		notify(t, pool, "nobody_listens", "x")
	}
	require.Eventually(t, func() bool {
		a, _ := events.snapshot()
		b, _ := commands.snapshot()
		return len(a) == count && len(b) == count
	}, 10*time.Second, 5*time.Millisecond)
	a, _ := events.snapshot()
	b, _ := commands.snapshot()
	for i := range count {
		require.Equal(t, "e"+strconv.Itoa(i), a[i])
		require.Equal(t, "c"+strconv.Itoa(i), b[i])
	}
}

// Listening is closed once LISTEN is in effect: a notification sent right
// after it is heard, before any Connected handler has run.
func TestListeningMeansNothingIsMissed(t *testing.T) {
	pool := newPool(t, pgtest.URL(t))
	n, err := New(Config{Pool: pool})
	require.NoError(t, err)
	heard := make(chan string, 1)
	require.NoError(t, n.Subscribe("appserver_events", Handler{Notify: func(_ context.Context, p string) { heard <- p }}))
	select {
	case <-n.Listening():
		t.Fatal("listening before Start")
	default:
	}
	require.NoError(t, n.Start(t.Context()))
	t.Cleanup(n.Stop)
	select {
	case <-n.Listening():
	case <-time.After(10 * time.Second):
		t.Fatal("never listening")
	}
	notify(t, pool, "appserver_events", "first")
	select {
	case p := <-heard:
		require.Equal(t, "first", p)
	case <-time.After(10 * time.Second):
		t.Fatal("the notification sent once listening was missed")
	}
}

// A lost connection is made again, after a pause, and every subscriber
// is told so before the notifications sent after it.
func TestReconnectsAndSaysSo(t *testing.T) {
	url := pgtest.URL(t)
	direct := newPool(t, url)
	proxy := pgtest.NewProxy(t, url)
	n, err := New(Config{Pool: newPool(t, proxy.URL()), MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	require.NoError(t, err)
	var r recorder
	require.NoError(t, n.Subscribe("appserver_events", r.handler()))
	require.NoError(t, n.Start(t.Context()))
	defer n.Stop()
	require.Eventually(t, func() bool { _, c := r.snapshot(); return c == 1 }, 10*time.Second, 5*time.Millisecond)
	notify(t, direct, "appserver_events", "before")
	require.Eventually(t, func() bool { p, _ := r.snapshot(); return len(p) == 1 }, 10*time.Second, 5*time.Millisecond)

	proxy.Down()
	time.Sleep(100 * time.Millisecond) // a few failed reconnections
	proxy.Up()
	require.Eventually(t, func() bool { _, c := r.snapshot(); return c == 2 }, 10*time.Second, 5*time.Millisecond)
	notify(t, direct, "appserver_events", "after")
	require.Eventually(t, func() bool { p, _ := r.snapshot(); return len(p) == 2 }, 10*time.Second, 5*time.Millisecond)
	p, c := r.snapshot()
	require.Equal(t, []string{"before", "after"}, p)
	require.Equal(t, 2, c)
}

// Stop ends the connection and the handlers, also while a handler is
// slow and the queue full, and may be called again.
func TestStopWhileAHandlerIsBusy(t *testing.T) {
	pool := newPool(t, pgtest.URL(t))
	n, err := New(Config{Pool: pool})
	require.NoError(t, err)
	started := make(chan struct{}, 1)
	require.NoError(t, n.Subscribe("busy", Handler{
		Connected: func(context.Context) { started <- struct{}{} },
		Notify:    func(ctx context.Context, _ string) { <-ctx.Done() },
	}))
	require.NoError(t, n.Start(t.Context()))
	<-started
	for range queueSize + 10 {
		notify(t, pool, "busy", "x")
	}
	time.Sleep(50 * time.Millisecond)
	n.Stop()
	n.Stop()
	var conns int
	require.Eventually(t, func() bool {
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1`, ApplicationName).Scan(&conns))
		return conns == 0
	}, 10*time.Second, 10*time.Millisecond, "the connection is closed")
}
