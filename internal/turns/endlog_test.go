package turns_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/eventlog"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// endBatches is a store that keeps every batch it wrote.
type endBatches struct {
	store.Store

	mu      sync.Mutex
	batches []*store.Batch
}

func (b *endBatches) Write(ctx context.Context, batch *store.Batch) error {
	err := b.Store.Write(ctx, batch)
	if err == nil {
		b.mu.Lock()
		b.batches = append(b.batches, batch)
		b.mu.Unlock()
	}
	return err
}

// endOf returns the batch that stored turn turnID's end with status.
func (b *endBatches) endOf(turnID string, status api.TurnStatus) *store.Batch {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, batch := range b.batches {
		for _, p := range batch.UpdateTurns {
			if p.ID == turnID && p.Status == string(status) {
				return batch
			}
		}
	}
	return nil
}

// hubClient is a hub subscriber that passes on what it gets.
type hubClient struct{ notes chan *hub.Notification }

func (c hubClient) Notify(n *hub.Notification)       { c.notes <- n }
func (c hubClient) Request(*hub.Request, int64) bool { return false }
func (c hubClient) Settled(*hub.Request)             {}

// A turn's end and its logged notifications (its usage, turn/completed)
// are stored in one commit: a daemon killed right after storing the end
// leaves a log that tells a resuming client, or a webhook consumer, how
// the turn ended. The log here never flushes on its own, so only the end's
// commit can have stored them.
func TestTurnEndCommitCarriesItsNotifications(t *testing.T) {
	sqlite, _, client := storeAndModel(t, `{"steps":[{"text":"done"}]}`)
	st := &endBatches{Store: sqlite}
	log, err := eventlog.New(eventlog.Config{Store: st, FlushDelay: time.Hour})
	require.NoError(t, err)
	require.NoError(t, log.Start(t.Context()))
	t.Cleanup(log.Stop)
	h := hub.New(hub.Config{Journal: log})
	t.Cleanup(h.Close)
	c := hubClient{notes: make(chan *hub.Notification, 256)}
	conn := h.NewConnID()
	h.Attach(conn, c, hub.AttachOptions{})
	m, err := turns.New(turns.Config{
		Store: st, Sink: h, Models: oneProvider{client},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)

	ctx := context.Background()
	caller := turns.Caller{Conn: conn}
	th, after, err := m.StartThread(ctx, caller, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	res, after, err := m.StartTurn(ctx, caller, api.TurnStartParams{ThreadID: th.Thread.ID,
		Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hi"}}})
	require.NoError(t, err)
	after()

	seqs := map[string]int64{}
	for done := false; !done; {
		select {
		case n := <-c.notes:
			if n.ThreadID == th.Thread.ID && n.Seq > 0 {
				seqs[n.Method] = n.Seq
			}
			done = n.Method == "turn/completed"
		case <-time.After(10 * time.Second):
			t.Fatal("no turn/completed")
		}
	}
	end := st.endOf(res.Turn.ID, api.TurnCompleted)
	require.NotNil(t, end, "the turn's end is stored")
	carried := map[string]int64{}
	for _, ev := range end.AppendEvents {
		require.Equal(t, th.Thread.ID, ev.ThreadID)
		carried[ev.Method] = ev.Seq
	}
	for _, method := range []string{"thread/tokenUsage/updated", "turn/completed"} {
		require.Contains(t, carried, method, "the end's commit carries its %s", method)
		require.Equal(t, seqs[method], carried[method], "%s is stored with the number the client got", method)
	}
	require.Contains(t, carried, "turn/started", "the turn's earlier events still queued ride along")
}
