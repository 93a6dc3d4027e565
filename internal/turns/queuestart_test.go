package turns_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// onEnd is a notifier that runs f on a goroutine at each turn/completed
// and holds the notification for hold, during which the turn is still
// announcing its end.
type onEnd struct {
	*noteLog
	f    func()
	hold time.Duration
}

func (o *onEnd) Broadcast(method string, params any) { o.noteLog.Broadcast(method, params) }

func (o *onEnd) Send(to []turns.ConnID, method string, params any) {
	if method == "turn/completed" {
		go o.f()
		time.Sleep(o.hold)
	}
	o.noteLog.Send(to, method, params)
}

// A queued entry started by a client that heard turn/completed starts
// once that turn has let go of the thread, instead of being refused
// because the turn is still announcing its end.
func TestQueueStartAfterTurnCompleted(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[{"text":"slow","delay_ms":10000},{"text":"queued done"}]}`)
	started := make(chan error, 1)
	var m *turns.Manager
	var threadID string
	notes := &onEnd{noteLog: &noteLog{ch: make(chan string, 1024)}, hold: 100 * time.Millisecond}
	notes.f = func() {
		_, after, err := m.QueueStart(context.Background(), turns.Caller{Conn: 1}, api.ThreadQueueStartParams{ThreadID: threadID})
		if err == nil {
			after()
		}
		started <- err
	}
	m = toolFreeManager(t, st, sinkFor(notes), client)
	ctx, caller := context.Background(), turns.Caller{Conn: 1}
	th, after, err := m.StartThread(ctx, caller, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	threadID = th.Thread.ID
	res, after, err := m.StartTurn(ctx, caller, api.TurnStartParams{ThreadID: threadID,
		Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hello"}}})
	require.NoError(t, err)
	after()
	_, after, err = m.QueueAdd(ctx, api.ThreadQueueAddParams{ThreadID: threadID, ClientUserMessageID: "c1",
		Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "queued"}}})
	require.NoError(t, err)
	after()

	// An interrupted turn leaves the queue waiting for a start.
	after, err = m.InterruptTurn(ctx, api.TurnInterruptParams{ThreadID: threadID, TurnID: res.Turn.ID})
	require.NoError(t, err)
	after()
	select {
	case err := <-started:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the queued entry's start did not answer")
	}
	notes.wait(t, "turn/completed") // the interrupted turn's
	notes.wait(t, "turn/completed") // the queued entry's
	<-started                       // the queued turn's own end starts nothing
}

// queueReads counts the reads of threads' queues.
type queueReads struct {
	store.Store
	n atomic.Int32
}

func (q *queueReads) ListQueued(ctx context.Context, threadID string) ([]store.QueuedSubmission, error) {
	q.n.Add(1)
	return q.Store.ListQueued(ctx, threadID)
}

// On a daemon alone on its store, a queue found empty at a turn's end is
// not read again at the next end; an entry added later still starts.
func TestEmptyQueueIsNotReadAtEachEnd(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[{"text":"1"},{"text":"2"},{"text":"queued"}]}`)
	notes := &noteLog{ch: make(chan string, 1024)}
	reads := &queueReads{Store: st}
	m := toolFreeManager(t, reads, sinkFor(notes), client)
	ctx, caller := context.Background(), turns.Caller{Conn: 1}
	th, after, err := m.StartThread(ctx, caller, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	id := th.Thread.ID
	for range 2 {
		_, after, err := m.StartTurn(ctx, caller, api.TurnStartParams{ThreadID: id,
			Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hello"}}})
		require.NoError(t, err)
		after()
		notes.wait(t, "turn/completed")
		// The end's look at the queue runs after turn/completed.
		require.Eventually(t, func() bool { return reads.n.Load() == 1 }, 5*time.Second, time.Millisecond)
	}
	_, after, err = m.QueueAdd(ctx, api.ThreadQueueAddParams{ThreadID: id, ClientUserMessageID: "c1",
		Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "queued"}}})
	require.NoError(t, err)
	after()
	notes.wait(t, "turn/completed") // the entry's turn
	// The add's look, then the entry's end's: the queue is empty again.
	require.Eventually(t, func() bool { return reads.n.Load() == 3 }, 5*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, int32(3), reads.n.Load())
}
