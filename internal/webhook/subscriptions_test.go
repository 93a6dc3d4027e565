package webhook_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/memory"
	"github.com/appserver/appserver/internal/webhook"
)

// storedSender starts a Sender of the store's subscriptions only; owners
// maps a thread to the principal that created it.
func (n *node) storedSender(t *testing.T, holder string, owners map[string]string) *webhook.Sender {
	t.Helper()
	s, err := webhook.New(webhook.Config{
		Log: n.log, Hub: n.hub, Store: n.st, Holder: holder, Registerer: prometheus.NewRegistry(),
		FirstBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, SaveEvery: 5 * time.Millisecond,
		LeaseTTL: 600 * time.Millisecond, Timeout: 5 * time.Second, SyncEvery: 20 * time.Millisecond,
		OwnerOf: func(_ context.Context, thread string) (string, error) {
			o, ok := owners[thread]
			if !ok {
				return "", apperr.New(apperr.NotFound, "no thread %s", thread)
			}
			return o, nil
		},
	})
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(s.Stop)
	return s
}

// subscribe stores a subscription to r and waits until its consumer holds
// its lease.
func subscribe(t *testing.T, st store.Store, s *webhook.Sender, r *receiver, owner, thread string) store.Webhook {
	t.Helper()
	w := store.Webhook{ID: "wh_" + uuid.NewString(), Owner: owner, URL: r.url(), Secret: testSecret, Thread: thread,
		AllowPrivate: true, CreatedAt: time.Now()}
	require.NoError(t, st.PutWebhook(t.Context(), w))
	require.Eventually(t, func() bool {
		_, err := st.EventCursor(t.Context(), "webhook:"+w.ID)
		return err == nil
	}, 10*time.Second, time.Millisecond, "the subscription's consumer holds its lease")
	return w
}

// A stored subscription is picked up by the Sender without a call (as by
// every daemon of the database), delivers signed notices, and stops once
// deleted, its event consumer's lease and cursor deleted with it. A principal's subscription gets only its own threads' events,
// with no thread and with another principal's thread named alike; the
// operator's gets every thread's.
func TestStoredSubscriptions(t *testing.T) {
	n := newNode(t, memory.New(memory.Config{}))
	alicesThread, bobsThread, opsThread := uuid.NewString(), uuid.NewString(), uuid.NewString()
	s := n.storedSender(t, "a", map[string]string{alicesThread: "alice", bobsThread: "bob", opsThread: ""})
	aliceAll, aliceOnBob, op := newReceiver(t), newReceiver(t), newReceiver(t)
	subscribe(t, n.st, s, aliceAll, "alice", "")
	subscribe(t, n.st, s, aliceOnBob, "alice", bobsThread)
	opSub := subscribe(t, n.st, s, op, "", "")

	n.turnEnded(bobsThread, api.TurnCompleted)
	n.turnEnded(opsThread, api.TurnCompleted)
	n.turnEnded(alicesThread, api.TurnFailed)

	got := aliceAll.waitFor(1)
	require.Equal(t, alicesThread, got[0].Thread)
	require.Equal(t, "turn.failed", got[0].Type)
	require.Len(t, op.waitFor(3), 3, "the operator's subscription takes every thread's")
	time.Sleep(100 * time.Millisecond) // nothing more comes
	require.Len(t, aliceAll.list(), 1, "never bob's or the operator's thread")
	require.Empty(t, aliceOnBob.list(), "naming bob's thread gives alice nothing of it")

	// Deleted: its consumer stops, and so do its notices.
	require.NoError(t, n.st.DeleteWebhook(t.Context(), opSub.ID))
	require.Eventually(t, func() bool { return !s.Running(opSub.ID) }, 10*time.Second, time.Millisecond)
	n.turnEnded(opsThread, api.TurnCompleted)
	n.turnEnded(alicesThread, api.TurnCompleted)
	require.Len(t, aliceAll.waitFor(2), 2)
	time.Sleep(100 * time.Millisecond)
	require.Len(t, op.list(), 3, "a deleted subscription delivers nothing more")
	require.Eventually(t, func() bool {
		_, err := n.st.EventCursor(t.Context(), "webhook:"+opSub.ID)
		return apperr.Is(err, apperr.NotFound)
	}, 10*time.Second, time.Millisecond, "its event consumer's lease and cursor are deleted with it")
}

// Every attempt goes to the webhook's delivery log: a 500 with its next
// retry, then the 200 of the same event id.
func TestDeliveryLog(t *testing.T) {
	n := newNode(t, memory.New(memory.Config{}))
	th := uuid.NewString()
	s := n.storedSender(t, "a", map[string]string{th: ""})
	r := newReceiver(t)
	w := subscribe(t, n.st, s, r, "", "")
	r.failNext(1)
	n.turnEnded(th, api.TurnCompleted)
	got := r.waitFor(1)

	var log []store.WebhookDelivery
	require.Eventually(t, func() bool {
		var err error
		log, err = n.st.ListWebhookDeliveries(t.Context(), w.ID, 0, 10)
		require.NoError(t, err)
		return len(log) == 2
	}, 10*time.Second, time.Millisecond)
	ok, failed := log[0], log[1] // newest first
	require.Equal(t, 500, failed.Status)
	require.Equal(t, "the receiver answered 500", failed.Error)
	require.NotNil(t, failed.NextRetry)
	require.False(t, failed.NextRetry.Before(failed.At))
	require.Equal(t, 204, ok.Status, "the receiver's answer")
	require.Empty(t, ok.Error)
	require.Nil(t, ok.NextRetry)
	require.Equal(t, got[0].ID, failed.EventID)
	require.Equal(t, got[0].ID, ok.EventID, "the retry is the same event")
	require.Equal(t, "turn.completed", ok.EventType)
}

// A [[webhooks]] entry's attempts are logged under its id.
func TestDeliveryLogOfEntries(t *testing.T) {
	n := newNode(t, memory.New(memory.Config{}))
	r := newReceiver(t)
	h := hookTo(r)
	n.sender(t, "a", h)
	n.turnEnded(uuid.NewString(), api.TurnCompleted)
	r.waitFor(1)
	require.Eventually(t, func() bool {
		log, err := n.st.ListWebhookDeliveries(t.Context(), webhook.ID(h), 0, 10)
		require.NoError(t, err)
		return len(log) == 1 && log[0].Status == 204
	}, 10*time.Second, time.Millisecond)
}
