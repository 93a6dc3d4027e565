package turns_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/turns"
)

// A subscribed thread left idle drops its model history; its next turn
// reads it back from the store, so the model gets the same conversation,
// and an upstream item id the provider repeats still gets a fresh id.
func TestIdleThreadTrimsHistory(t *testing.T) {
	m, notes, fake, id := trimmingThread(t, 10*time.Millisecond, `{"steps":[
		{"match":{"user_text":"first question"},"text":"first answer","message_id":"msg_same"},
		{"match":{"user_text":"second question"},"text":"second answer","message_id":"msg_same"}]}`)

	say(t, m, notes, id, "first question")
	require.Eventually(t, func() bool { return !turns.HistoryInMemory(m, id) }, 10*time.Second, 5*time.Millisecond,
		"an idle thread drops its history")
	require.Equal(t, []string{id}, m.Loaded(), "the subscribed thread stays loaded")

	say(t, m, notes, id, "second question")
	require.Equal(t, api.TurnCompleted, notes.lastEnded(t).Status)
	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	require.Contains(t, string(reqs[1].Body), "first answer", "the history is read back for the next request")

	read, err := m.ReadThread(context.Background(), api.ThreadReadParams{ThreadID: id, IncludeTurns: ptr(true)})
	require.NoError(t, err)
	var ids []string
	for _, turn := range read.Thread.Turns {
		for _, it := range turn.Items {
			if it.Body.ItemType() == api.ItemAgentMessage {
				ids = append(ids, it.Body.ItemID())
			}
		}
	}
	require.Len(t, ids, 2)
	require.Equal(t, "msg_same", ids[0])
	require.NotEqual(t, ids[0], ids[1], "a repeated upstream id is made unique against the store")
}

// A turn's end hands its request slices to the thread for the next turn,
// empty; trimming the idle thread's history drops them too.
func TestTurnsHandTheirRequestSlicesOn(t *testing.T) {
	// Trimmed well after the checks between the turns, even on a slow
	// machine.
	m, notes, _, id := trimmingThread(t, 3*time.Second, `{"steps":[
		{"match":{"user_text":"first question"},"text":"first answer"},
		{"match":{"user_text":"second question"},"text":"second answer"}]}`)

	say(t, m, notes, id, "first question")
	n, c := turns.RequestBuffers(m, id)
	require.Zero(t, n)
	require.GreaterOrEqual(t, c, 1, "the first turn's request slices went to the thread")
	say(t, m, notes, id, "second question")
	n, c = turns.RequestBuffers(m, id)
	require.Zero(t, n)
	require.GreaterOrEqual(t, c, 3, "the second turn's request (question, answer, question) in them")
	require.Eventually(t, func() bool { _, c := turns.RequestBuffers(m, id); return c == 0 && !turns.HistoryInMemory(m, id) },
		10*time.Second, 5*time.Millisecond, "trimmed with the history")
}

// trimmingThread starts a thread on a manager whose idle threads drop
// their history after trimAfter, with the fake model running script.
func trimmingThread(t *testing.T, trimAfter time.Duration, script string) (*turns.Manager, *noteLog, *fakemodel.Server, string) {
	t.Helper()
	st, fake, client := storeAndModel(t, script)
	notes := &noteLog{ch: make(chan string, 1024)}
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(notes), Models: oneProvider{client}, TrimAfter: trimAfter,
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	return m, notes, fake, startThread(t, m)
}
