package webhook_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/eventlog"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/pgnotify"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/memory"
	"github.com/appserver/appserver/internal/store/pgtest"
	"github.com/appserver/appserver/internal/store/postgres"
	"github.com/appserver/appserver/internal/turns"
	"github.com/appserver/appserver/internal/webhook"
)

// node is one daemon's event log and hub.
type node struct {
	st  store.Store
	log *eventlog.Log
	hub *hub.Hub
}

func newNode(t *testing.T, st store.Store) *node {
	t.Helper()
	l, err := eventlog.New(eventlog.Config{Store: st})
	require.NoError(t, err)
	require.NoError(t, l.Start(t.Context()))
	t.Cleanup(l.Stop)
	h := hub.New(hub.Config{Journal: l, Approval: hub.Timeouts{NoClient: time.Millisecond}})
	t.Cleanup(h.Close)
	return &node{st: st, log: l, hub: h}
}

// sender starts a Sender of hooks on n; its metrics go to the registry
// returned.
func (n *node) sender(t *testing.T, holder string, hooks ...config.Webhook) (*webhook.Sender, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := webhook.New(webhook.Config{
		Hooks: hooks, Log: n.log, Hub: n.hub, Store: n.st, Holder: holder, Registerer: reg,
		FirstBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, SaveEvery: 5 * time.Millisecond,
		LeaseTTL: 600 * time.Millisecond, Timeout: 5 * time.Second,
	})
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(s.Stop)
	for _, h := range hooks {
		holding(t, n.st, h)
	}
	return s, reg
}

// holding waits until an entry's consumer holds its lease (from then on
// the new threads' events are its).
func holding(t *testing.T, st store.Store, h config.Webhook) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := st.EventCursor(t.Context(), "webhook:"+webhook.ID(h))
		return err == nil
	}, 10*time.Second, time.Millisecond, "the webhook's consumer holds its lease")
}

// turnEnded publishes a turn's end as the turns layer does.
func (n *node) turnEnded(thread string, status api.TurnStatus) {
	n.hub.Publish(turns.Event{ThreadID: thread, Method: api.MethodTurnCompleted, Params: api.TurnCompletedNotification{
		ThreadID: thread, Turn: api.Turn{ID: uuid.NewString(), Status: status, ItemsView: api.ItemsNotLoaded},
	}})
}

// delta publishes an event that makes no notice.
func (n *node) delta(thread string) {
	n.hub.Publish(turns.Event{ThreadID: thread, Method: "item/agentMessage/delta", Params: api.AgentMessageDeltaNotification{ThreadID: thread, TurnID: "u", ItemID: "i", Delta: "x"}})
}

func hookTo(r *receiver) config.Webhook {
	return config.Webhook{URL: r.url(), Secret: testSecret, AllowPrivate: true, RetryFor: time.Minute}
}

// counter sums a counter's series whose labels include labels.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
				}
				if !found {
					continue metric
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func types(ns []notice) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Type
	}
	return out
}

// A turn's end, an approval request and an archiving reach the receiver
// as signed notices in the thread's order, with stable ids (the thread and
// the event's number) and the event as data; events that make no notice
// are passed over; an entry with events gets only those, one with thread
// only that thread's.
func TestDeliversSignedNotices(t *testing.T) {
	n := newNode(t, memory.New(memory.Config{}))
	all, failures, oneThread := newReceiver(t), newReceiver(t), newReceiver(t)
	th, other := uuid.NewString(), uuid.NewString()
	onlyFailures := hookTo(failures)
	onlyFailures.Events = []string{config.WebhookTurnFailed}
	onlyOther := hookTo(oneThread)
	onlyOther.Thread = other
	_, reg := n.sender(t, "a", hookTo(all), onlyFailures, onlyOther)

	n.delta(th)
	n.turnEnded(th, api.TurnCompleted)
	_, _, _, err := n.hub.Request(t.Context(), turns.ServerRequest{ThreadID: th, Method: "item/commandExecution/requestApproval",
		Params: api.CommandExecutionRequestApprovalParams{ThreadID: th, TurnID: "u", ItemID: "i"}})
	require.ErrorIs(t, err, turns.ErrNoClient)
	n.turnEnded(th, api.TurnFailed)
	n.turnEnded(th, api.TurnInterrupted)
	n.hub.BroadcastThread(th, nil, api.MethodThreadArchived, api.ThreadArchivedNotification{ThreadID: th})
	n.turnEnded(other, api.TurnFailed)

	got := all.waitFor(6)
	var mine []notice
	for _, g := range got {
		if g.Thread == th {
			mine = append(mine, g)
		}
	}
	require.Equal(t, []string{"turn.completed", "approval.requested", "turn.failed", "turn.interrupted", "thread.archived"}, types(mine))
	for i, g := range mine {
		require.Equal(t, fmt.Sprintf("evt_%s_%d", th, g.Seq), g.ID, "the id is the event's")
		if i > 0 {
			require.Greater(t, g.Seq, mine[i-1].Seq, "in the thread's order")
		}
	}
	require.EqualValues(t, 2, mine[0].Seq, "the delta (seq 1) made no notice")
	require.Equal(t, "completed", mine[0].Data["turn"].(map[string]any)["status"])
	require.Equal(t, "item/commandExecution/requestApproval", mine[1].Data["method"])

	fails := failures.waitFor(2)
	require.Equal(t, []string{"turn.failed", "turn.failed"}, types(fails))
	only := oneThread.waitFor(1)
	require.Equal(t, other, only[0].Thread)
	time.Sleep(100 * time.Millisecond) // nothing more comes
	require.Len(t, failures.list(), 2)
	require.Len(t, oneThread.list(), 1)
	require.Len(t, all.list(), 6)
	require.Eventually(t, func() bool { return counter(t, reg, "appserver_webhook_deliveries_total") == 9 },
		10*time.Second, 5*time.Millisecond)
}

// A receiver that answers 500, and one that is down, gets the notice
// again (the same id) after a backoff, the thread's later notices waiting
// for it; once accepted, no id comes twice.
func TestRetriesUntilAccepted(t *testing.T) {
	n := newNode(t, memory.New(memory.Config{}))
	r := newReceiver(t)
	a, b := uuid.NewString(), uuid.NewString()
	_, reg := n.sender(t, "a", hookTo(r))

	r.failNext(3)
	for range 3 {
		n.turnEnded(a, api.TurnCompleted)
		n.turnEnded(b, api.TurnFailed)
	}
	got := r.waitFor(6)
	require.EqualValues(t, 3, counter(t, reg, "appserver_webhook_failures_total", "reason", "status"))
	require.Eventually(t, func() bool { return counter(t, reg, "appserver_webhook_deliveries_total") == 6 },
		10*time.Second, 5*time.Millisecond, "every answer read before the receiver goes down")

	// Down: connections are refused until it is back at the same address.
	r.down()
	n.turnEnded(a, api.TurnInterrupted)
	require.Eventually(t, func() bool {
		return counter(t, reg, "appserver_webhook_failures_total", "reason", "network") >= 2
	}, 20*time.Second, 5*time.Millisecond, "attempts fail while the receiver is down")
	r.listen(t, r.addr)
	got = r.waitFor(7)

	seen := map[string]bool{}
	retried := 0
	for _, g := range got {
		require.False(t, seen[g.ID], "%s accepted twice", g.ID)
		seen[g.ID] = true
		if k := r.requests(g.ID); k > 1 {
			retried += k - 1
		}
	}
	require.Equal(t, 3, retried, "the 3 notices answered 500 came again with the same id, and only they")
	for _, th := range []string{a, b} {
		var seqs []int64
		for _, g := range got {
			if g.Thread == th {
				seqs = append(seqs, g.Seq)
			}
		}
		for i := 1; i < len(seqs); i++ {
			require.Greater(t, seqs[i], seqs[i-1], "thread %s in order", th)
		}
	}
	require.Equal(t, "turn.interrupted", got[6].Type)
	require.Eventually(t, func() bool { return counter(t, reg, "appserver_webhook_deliveries_total") == 7 },
		10*time.Second, 5*time.Millisecond)
}

// A notice still failing after retry_for is dropped (counted), and the
// thread's next notice goes.
func TestDropsAfterRetryFor(t *testing.T) {
	n := newNode(t, memory.New(memory.Config{}))
	r := newReceiver(t)
	th := uuid.NewString()
	h := hookTo(r)
	h.RetryFor = 150 * time.Millisecond
	_, reg := n.sender(t, "a", h)
	r.failNext(1 << 30)
	n.turnEnded(th, api.TurnCompleted)
	require.Eventually(t, func() bool { return counter(t, reg, "appserver_webhook_dropped_total") == 1 },
		20*time.Second, 5*time.Millisecond)
	r.failNext(0)
	n.turnEnded(th, api.TurnFailed)
	got := r.waitFor(1)
	require.Equal(t, "turn.failed", got[0].Type)
	require.GreaterOrEqual(t, r.requests(webhook.EventID(th, 1)), 2)
}

// A receiver on a loopback address is refused unless allow_private: its
// connection is never made, at each attempt.
func TestPrivateAddressRefused(t *testing.T) {
	n := newNode(t, memory.New(memory.Config{}))
	r := newReceiver(t)
	h := hookTo(r)
	h.AllowPrivate = false
	// A name that resolves to the loopback address is refused too: the
	// check is on the address dialled.
	h.URL = strings.Replace(r.url(), "127.0.0.1", "localhost", 1)
	_, reg := n.sender(t, "a", h)
	n.turnEnded(uuid.NewString(), api.TurnCompleted)
	require.Eventually(t, func() bool {
		return counter(t, reg, "appserver_webhook_failures_total", "reason", "refused") >= 2
	}, 20*time.Second, 5*time.Millisecond, "attempts refused, and retried")
	require.Empty(t, r.list())
	r.mu.Lock()
	require.Empty(t, r.attempts, "no request reached the receiver")
	r.mu.Unlock()
}

func TestRefusedAddresses(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "fe80::1",
		"fc00::1", "0.0.0.0", "::", "100.64.0.1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "224.0.0.1", "0.1.2.3"} {
		require.True(t, webhook.RefusedAddress(netip.MustParseAddr(a)), a)
	}
	for _, a := range []string{"93.184.216.34", "2606:2800:220:1::1", "8.8.8.8", "100.128.0.1"} {
		require.False(t, webhook.RefusedAddress(netip.MustParseAddr(a)), a)
	}
}

// A sender stopped (its cursor saved) and started again, as after a
// restart, sends the notices of the events emitted meanwhile, and none it
// had sent.
func TestResumesAfterRestart(t *testing.T) {
	st := memory.New(memory.Config{})
	n := newNode(t, st)
	r := newReceiver(t)
	th := uuid.NewString()
	s, reg := n.sender(t, "a", hookTo(r))
	n.turnEnded(th, api.TurnCompleted)
	n.turnEnded(th, api.TurnCompleted)
	r.waitFor(2)
	// Both answers read (a notice whose answer the stop cuts off is sent
	// again: at least once).
	require.Eventually(t, func() bool { return counter(t, reg, "appserver_webhook_deliveries_total") == 2 },
		10*time.Second, 5*time.Millisecond)
	s.Stop()
	n.turnEnded(th, api.TurnFailed)
	n.turnEnded(th, api.TurnInterrupted)
	n.hub.Close()
	n.log.Stop() // the old daemon's last events written

	n2 := newNode(t, st) // a new daemon's log and hub on the same store
	n2.sender(t, "a", hookTo(r))
	n2.turnEnded(th, api.TurnCompleted)
	got := r.waitFor(5)
	require.Equal(t, []string{"turn.completed", "turn.completed", "turn.failed", "turn.interrupted", "turn.completed"}, types(got))
	for i, g := range got[:4] {
		require.EqualValues(t, i+1, g.Seq)
	}
	// The new daemon numbers past the old one's reserved block.
	require.EqualValues(t, eventlog.DefaultSeqBlock+1, got[4].Seq)
	time.Sleep(100 * time.Millisecond)
	require.Len(t, r.list(), 5, "nothing sent twice")
}

// Two daemons on one Postgres, each with the same [[webhooks]] entry:
// exactly one delivers, the turns' ends of both daemons' threads, each
// once; when it stops, the other takes over from the cursor.
func TestOneDaemonDelivers(t *testing.T) {
	url := pgtest.URL(t)
	pgNode := func() *node {
		p, err := postgres.Open(t.Context(), postgres.Config{URL: url, MaxConns: 4, Migrate: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		g := store.NewGroupCommitter(p, store.GroupCommitConfig{})
		t.Cleanup(func() { _ = g.Close() })
		n := newNode(t, g)
		notes, err := pgnotify.New(pgnotify.Config{Pool: p.Pool()})
		require.NoError(t, err)
		require.NoError(t, eventlog.NewListener(eventlog.ListenerConfig{Log: n.log, Hub: n.hub, Notifier: notes, Channel: postgres.EventsChannel}))
		require.NoError(t, notes.Start(t.Context()))
		t.Cleanup(notes.Stop)
		return n
	}
	na, nb := pgNode(), pgNode()
	r := newReceiver(t)
	sa, regA := na.sender(t, "a", hookTo(r))
	_, regB := nb.sender(t, "b", hookTo(r))
	x, y := uuid.NewString(), uuid.NewString()
	for range 3 {
		na.turnEnded(x, api.TurnCompleted)
		nb.turnEnded(y, api.TurnCompleted)
	}
	got := r.waitFor(6)
	require.Eventually(t, func() bool { return counter(t, regA, "appserver_webhook_deliveries_total") == 6 },
		10*time.Second, 5*time.Millisecond, "the lease holder delivers")
	time.Sleep(200 * time.Millisecond)
	require.Len(t, r.list(), 6)
	require.Zero(t, counter(t, regB, "appserver_webhook_deliveries_total"), "the other does not")
	ids := map[string]bool{}
	for _, g := range got {
		require.False(t, ids[g.ID])
		ids[g.ID] = true
	}

	sa.Stop()
	na.turnEnded(x, api.TurnFailed)
	got = r.waitFor(7)
	require.Equal(t, "turn.failed", got[6].Type)
	require.Equal(t, webhook.EventID(x, 4), got[6].ID)
	require.Eventually(t, func() bool { return counter(t, regB, "appserver_webhook_deliveries_total") == 1 },
		10*time.Second, 5*time.Millisecond, "the other took over")
}
