package turns_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store/memory"
	"github.com/appserver/appserver/internal/turns"
)

// With MaxRunningTurns turns running, a turn of another thread is refused
// as overloaded, and starts once one of them has ended.
func TestMaxRunningTurnsRefusesPastTheLimit(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[{"text":"never finishes","fail":{"kind":"stall","after_events":2}},{"text":"two"}]}`)
	rec := newRecorder()
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(rec), Ephemeral: memory.New(memory.Config{}), Models: oneProvider{client},
		MaxRunningTurns: 1,
		Defaults:        turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	ctx := context.Background()
	thread := func() string {
		res, after, err := m.StartThread(ctx, turns.Caller{Conn: 1}, api.ThreadStartParams{})
		require.NoError(t, err)
		after()
		return res.Thread.ID
	}
	start := func(id string) (string, error) {
		res, after, err := m.StartTurn(ctx, turns.Caller{Conn: 1}, api.TurnStartParams{ThreadID: id, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hi"}}})
		if after != nil {
			after()
		}
		return res.Turn.ID, err
	}
	a, b := thread(), thread()
	first, err := start(a)
	require.NoError(t, err)
	rec.wait(t, "turn/started")

	_, err = start(b)
	require.Error(t, err)
	require.Equal(t, apperr.Overloaded, apperr.CodeOf(err), "%v", err)
	require.Contains(t, apperr.MessageOf(err), "max_running_turns")

	after, err := m.InterruptTurn(ctx, api.TurnInterruptParams{ThreadID: a, TurnID: first})
	require.NoError(t, err)
	if after != nil {
		after()
	}
	rec.wait(t, "turn/completed")
	require.Eventually(t, func() bool {
		_, err := start(b)
		return err == nil
	}, 10e9, 10e6, "a turn starts once the running one ended")
}
