package orchestrate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns"
)

// A command without approval: the item starts before it runs (source
// agent, the clock's time, inProgress), its output streams as deltas, and
// it completes with the exit code, the output and the status the exit code
// gives.
func TestCommandItemLifeCycle(t *testing.T) {
	for _, tc := range []struct {
		script string
		code   int32
		status api.ToolStatus
	}{
		{"echo hi", 0, api.StatusCompleted},
		{"echo hi; exit 3", 3, api.StatusFailed},
	} {
		s := newService(t, Config{})
		ws := workspace(t)
		tu := newTurn(t, s, ws, turnOpts{})
		out := tu.fn("call_1", "shell_command", map[string]any{"command": tc.script})
		require.Contains(t, out.Text, "hi", tc.script)

		evs := tu.sink.snapshot()
		require.Len(t, evs, 2, "one item, started then completed")
		start, done := evs[0], evs[1]
		require.False(t, start.completed)
		require.Equal(t, "call_1", start.command.ID)
		require.Equal(t, api.StatusInProgress, start.command.Status)
		require.Equal(t, api.CommandSourceAgent, start.command.Source)
		require.Equal(t, ws, start.command.Cwd)
		require.Contains(t, start.command.Command, tc.script)
		require.Nil(t, start.command.ExitCode)
		require.GreaterOrEqual(t, *start.startedMs, int64(epochMs), "timestamps come from the injected clock")
		require.Less(t, *start.startedMs, int64(epochMs+60_000))

		require.True(t, done.completed)
		require.Equal(t, tc.status, done.command.Status, tc.script)
		require.Equal(t, tc.code, *done.command.ExitCode)
		require.Equal(t, "hi\n", *done.command.AggregatedOutput)
		require.NotNil(t, done.command.DurationMs)
		require.Equal(t, *start.startedMs, *done.startedMs)
		require.Greater(t, *done.doneMs, *done.startedMs)
		require.Equal(t, "hi\n", tu.deltas("call_1"), "output streams as item/commandExecution/outputDelta")
		require.Empty(t, tu.client.sent(), "never: nothing is asked")
	}
}

// The approval flow of a shell command under untrusted: the flag goes up,
// the item starts, the request goes out; the decision (or its absence)
// decides whether the command runs, the item's final status and what the
// model reads, and when the flag comes down.
func TestCommandApproval(t *testing.T) {
	interrupted := func(ctx context.Context, _ turns.ClientRequest) (json.RawMessage, error) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		<-cctx.Done()
		return nil, context.Canceled
	}
	for _, tc := range []struct {
		name       string
		answer     answerFunc
		ctxDone    bool
		ran        bool
		status     api.ToolStatus
		modelReads string
		// flagUpAtEnd: the waitingOnApproval flag is still raised when the
		// item completes (declines keep it until then).
		flagUpAtEnd bool
		interrupts  int
	}{
		{name: "approved", answer: decision(`"accept"`), ran: true, status: api.StatusCompleted},
		{name: "declined", answer: decision(`"decline"`), status: api.StatusDeclined, modelReads: "exec command rejected by user", flagUpAtEnd: true},
		{name: "cancelled", answer: decision(`"cancel"`), status: api.StatusDeclined, modelReads: "exec command rejected by user", flagUpAtEnd: true, interrupts: 1},
		{name: "no client", answer: nil, status: api.StatusDeclined, modelReads: noClientText("exec command"), flagUpAtEnd: true},
		{name: "client error", answer: func(context.Context, turns.ClientRequest) (json.RawMessage, error) { return nil, errClient },
			status: api.StatusFailed, modelReads: "exec command rejected: the approval request failed: " + errClient.Error(), flagUpAtEnd: true},
		{name: "undecodable", answer: decision(`"maybe"`), status: api.StatusFailed, modelReads: "the approval request failed: undecodable approval decision", flagUpAtEnd: true},
		{name: "interrupted", answer: interrupted, ctxDone: true, status: api.StatusDeclined, flagUpAtEnd: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, Config{})
			ws := workspace(t)
			tu := newTurn(t, s, ws, turnOpts{approval: "untrusted", answer: tc.answer})
			ctx := context.Background()
			if tc.ctxDone {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				// The turn is interrupted while the request waits.
				tu.client.answer = func(c context.Context, r turns.ClientRequest) (json.RawMessage, error) {
					cancel()
					return interrupted(c, r)
				}
			}
			args, _ := json.Marshal(map[string]any{"command": "touch made.txt"})
			out := tu.call(ctx, "call_t", "shell_command", registryFn(string(args)))

			reqs := tu.client.sent()
			require.Len(t, reqs, 1)
			require.Equal(t, "item/commandExecution/requestApproval", reqs[0].Method)
			require.Equal(t, api.FlagWaitingOnApproval, reqs[0].Flag)
			p := reqs[0].Params.(*api.CommandExecutionRequestApprovalParams)
			require.Equal(t, "call_t", p.ItemID)
			require.Equal(t, "thread-1", p.ThreadID)
			require.Equal(t, "turn-1", p.TurnID)
			require.Equal(t, ws, *p.Cwd)
			require.Contains(t, *p.Command, "touch made.txt")
			require.NotEmpty(t, p.AvailableDecisions)

			evs := tu.sink.snapshot()
			require.Len(t, evs, 2)
			require.False(t, evs[0].completed)
			require.Equal(t, 1, evs[0].raised, "the item starts after the flag went up")
			require.Equal(t, *evs[0].startedMs, p.StartedAtMs, "the request carries the item's start")
			done := evs[1]
			require.True(t, done.completed)
			require.Equal(t, tc.status, done.command.Status)
			if tc.flagUpAtEnd {
				require.Equal(t, 1, done.raised, "a refused call completes its item before the flag comes down")
			} else {
				require.Equal(t, 0, done.raised, "an approved call clears the flag before it runs")
			}
			require.Equal(t, 0, tu.client.raisedNow(), "the flag is down once the call returned")
			if tc.ran {
				require.FileExists(t, filepath.Join(ws, "made.txt"))
				require.Equal(t, int32(0), *done.command.ExitCode)
			} else {
				require.NoFileExists(t, filepath.Join(ws, "made.txt"))
				require.Nil(t, done.command.ExitCode)
			}
			if tc.modelReads != "" {
				require.Contains(t, out.Text, tc.modelReads)
			}
			require.Equal(t, tc.interrupts, tu.interrupts())
		})
	}
}

// A forbidden command (never + a command that needs approval under a
// restricted sandbox's rules) answers the model and gets no item.
func TestCommandForbiddenHasNoItem(t *testing.T) {
	s := newService(t, Config{})
	ws := workspace(t)
	tu := newTurn(t, s, ws, turnOpts{approval: "never", sandbox: api.SandboxPolicyReadOnly})
	out := tu.fn("call_x", "shell_command", map[string]any{"command": "touch x", "sandbox_permissions": "require_escalated"})
	require.NotEmpty(t, out.Text)
	require.Empty(t, tu.sink.snapshot(), "no item for a command that never ran")
	require.Empty(t, tu.client.sent())
	_, err := os.Stat(filepath.Join(ws, "x"))
	require.True(t, os.IsNotExist(err))
}
