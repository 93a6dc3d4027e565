package turns_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
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
