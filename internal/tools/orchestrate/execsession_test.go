package orchestrate

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/testenv"
)

// An exec_command session's item starts when the process is spawned
// (source unifiedExecStartup, its processId) and completes when it exits,
// with the exit code and the transcript.
func TestExecSessionItemLifeCycle(t *testing.T) {
	s := newService(t, Config{})
	ws := workspace(t)
	tu := newTurn(t, s, ws, turnOpts{})
	out := tu.fn("call_e", "exec_command", map[string]any{"cmd": "echo hi; exit 3", "yield_time_ms": 5000})
	require.Contains(t, out.Text, "hi")
	done := tu.sink.waitCompleted(t, "call_e")
	evs := tu.sink.snapshot()
	require.Len(t, evs, 2)
	start := evs[0]
	require.False(t, start.completed)
	require.Equal(t, api.CommandSourceUnifiedExecStartup, start.command.Source)
	require.NotNil(t, start.command.ProcessID)
	require.Equal(t, api.StatusInProgress, start.command.Status)
	require.GreaterOrEqual(t, *start.startedMs, int64(epochMs), "the session's start comes from the injected clock")
	require.Less(t, *start.startedMs, int64(epochMs+60_000))

	require.Equal(t, api.StatusFailed, done.command.Status)
	require.True(t, done.final, "nothing follows the item of a session that ends during its call: it may ride the round's commit")
	require.Equal(t, int32(3), *done.command.ExitCode)
	require.Contains(t, *done.command.AggregatedOutput, "hi")
	require.Equal(t, *start.command.ProcessID, *done.command.ProcessID)
	require.Equal(t, *start.startedMs, *done.startedMs)
	require.Contains(t, tu.deltas("call_e"), "hi")
	require.Zero(t, s.LiveSessions())
}

// A session that outlives its call keeps its item open; unloading the
// thread kills and reaps the process and completes the item.
func TestExecSessionReapedOnThreadUnload(t *testing.T) {
	s := newService(t, Config{})
	ws := workspace(t)
	tu := newTurn(t, s, ws, turnOpts{})
	out := tu.fn("call_l", "exec_command", map[string]any{"cmd": "echo pid=$$; exec sleep 60", "yield_time_ms": 2000})
	_, rest, ok := strings.Cut(out.Text, "pid=")
	require.True(t, ok, out.Text)
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, 0))
	require.Equal(t, 1, s.LiveSessions())
	evs := tu.sink.snapshot()
	require.Len(t, evs, 1, "started, not completed: the process still runs")

	s.ThreadUnloaded("thread-1")
	require.True(t, errors.Is(syscall.Kill(pid, 0), syscall.ESRCH), "the session process is gone after the unload")
	require.Zero(t, s.LiveSessions())
	done := tu.sink.waitCompleted(t, "call_l")
	require.Equal(t, api.StatusFailed, done.command.Status)
}

// exec_command with an approval: the item starts at the request (source
// agent), and on accept completes as the session's (unifiedExecStartup,
// processId); refused, it completes without a process.
func TestExecSessionApproval(t *testing.T) {
	for _, tc := range []struct {
		name       string
		answer     answerFunc
		ran        bool
		status     api.ToolStatus
		modelReads string
	}{
		{name: "approved", answer: decision(`"accept"`), ran: true, status: api.StatusCompleted},
		{name: "declined", answer: decision(`"decline"`), status: api.StatusDeclined, modelReads: "exec command rejected by user"},
		{name: "no client", status: api.StatusDeclined, modelReads: noClientText("exec command")},
		{name: "client error", answer: func(contextT, requestT) (rawT, error) { return nil, errClient },
			status: api.StatusFailed, modelReads: "exec command rejected: the approval request failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, Config{})
			ws := workspace(t)
			tu := newTurn(t, s, ws, turnOpts{approval: "untrusted", answer: tc.answer})
			out := tu.fn("call_a", "exec_command", map[string]any{"cmd": "touch made.txt", "yield_time_ms": 5000})
			reqs := tu.client.sent()
			require.Len(t, reqs, 1)
			p := reqs[0].Params.(*api.CommandExecutionRequestApprovalParams)
			require.Equal(t, "call_a", p.ItemID)
			done := tu.sink.waitCompleted(t, "call_a")
			evs := tu.sink.snapshot()
			require.Len(t, evs, 2, "one start, at the request")
			require.Equal(t, api.CommandSourceAgent, evs[0].command.Source)
			require.Equal(t, 1, evs[0].raised)
			require.Equal(t, p.StartedAtMs, *evs[0].startedMs)
			require.Equal(t, tc.status, done.command.Status)
			if tc.ran {
				require.FileExists(t, filepath.Join(ws, "made.txt"))
				require.Equal(t, api.CommandSourceUnifiedExecStartup, done.command.Source)
				require.NotNil(t, done.command.ProcessID)
				require.Equal(t, int32(0), *done.command.ExitCode)
			} else {
				require.NoFileExists(t, filepath.Join(ws, "made.txt"))
				require.Nil(t, done.command.ProcessID)
				require.Contains(t, out.Text, tc.modelReads)
				require.Equal(t, 1, done.raised, "the flag comes down after the item completed")
			}
			require.Equal(t, 0, tu.client.raisedNow())
			require.Zero(t, s.LiveSessions())
		})
	}
}

// An approved exec_command whose process cannot start completes the item
// the request started, as failed.
func TestExecSessionThatNeverStarts(t *testing.T) {
	s := newService(t, Config{})
	ws := workspace(t)
	tu := newTurn(t, s, ws, turnOpts{approval: "untrusted", answer: decision(`"accept"`)})
	tu.fn("call_n", "exec_command", map[string]any{"cmd": "touch x", "workdir": filepath.Join(ws, "missing"), "yield_time_ms": 1000})
	done := tu.sink.waitCompleted(t, "call_n")
	require.Equal(t, api.StatusFailed, done.command.Status)
	require.Nil(t, done.command.ProcessID)
	require.Len(t, tu.sink.snapshot(), 2)
}

// An exec-policy amendment accepted for one command lets that prefix run
// without asking in every thread from now on, and after a restart: it is
// appended to the rules file. Both the shell tools and exec_command apply
// it.
func TestExecPolicyAmendment(t *testing.T) {
	for _, tool := range []string{"shell_command", "exec_command"} {
		t.Run(tool, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{RulesDir: filepath.Join(dir, "rules"), RulesFile: filepath.Join(dir, "rules", "default.rules")}
			s := newService(t, cfg)
			ws := workspace(t)
			amend := decision(`{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["touch"]}}`)
			tu := newTurn(t, s, ws, turnOpts{approval: "untrusted", answer: amend})
			runTouch(t, tu, tool, "call_1", "one.txt")
			require.Len(t, tu.client.sent(), 1)
			require.FileExists(t, filepath.Join(ws, "one.txt"))
			rules, err := os.ReadFile(cfg.RulesFile)
			require.NoError(t, err)
			require.Contains(t, string(rules), `"touch"`)
			require.Contains(t, string(rules), "allow")

			// Another thread: no request.
			other := newTurn(t, s, ws, turnOpts{approval: "untrusted", threadID: "thread-2"})
			runTouch(t, other, tool, "call_2", "two.txt")
			require.Empty(t, other.client.sent())
			require.FileExists(t, filepath.Join(ws, "two.txt"))

			// A restart: the rules file is loaded again.
			s2 := newService(t, cfg)
			again := newTurn(t, s2, ws, turnOpts{approval: "untrusted"})
			runTouch(t, again, tool, "call_3", "three.txt")
			require.Empty(t, again.client.sent())
			require.FileExists(t, filepath.Join(ws, "three.txt"))
		})
	}
}

// acceptForSession remembers the command for the thread only: the same
// command runs again without asking there, another thread is asked, and
// no rule is written.
func TestAcceptForSessionStaysInTheThread(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{RulesDir: filepath.Join(dir, "rules"), RulesFile: filepath.Join(dir, "rules", "default.rules")}
	s := newService(t, cfg)
	ws := workspace(t)
	tu := newTurn(t, s, ws, turnOpts{approval: "untrusted", answer: decision(`"acceptForSession"`)})
	runTouch(t, tu, "shell_command", "call_1", "one.txt")
	runTouch(t, tu, "shell_command", "call_2", "one.txt")
	require.Len(t, tu.client.sent(), 1, "the second run is approved for the session")
	other := newTurn(t, s, ws, turnOpts{approval: "untrusted", threadID: "thread-2", answer: decision(`"accept"`)})
	runTouch(t, other, "shell_command", "call_3", "one.txt")
	require.Len(t, other.client.sent(), 1)
	require.NoFileExists(t, cfg.RulesFile)
}

// runTouch runs `touch name` with tool and waits for its item.
func runTouch(t *testing.T, tu *turn, tool, callID, name string) {
	t.Helper()
	args := map[string]any{"command": "touch " + name}
	if tool == "exec_command" {
		args = map[string]any{"cmd": "touch " + name, "yield_time_ms": 5000}
	}
	out := tu.fn(callID, tool, args)
	done := tu.sink.waitCompleted(t, callID)
	require.Equal(t, api.StatusCompleted, done.command.Status, out.Text)
}

// exec_command runs in the thread's pooled sandbox once it is up;
// unloading the thread closes that sandbox.
func TestPooledSandboxClosedOnThreadUnload(t *testing.T) {
	s := newService(t, Config{SandboxBackend: "bwrap"})
	ws := workspace(t)
	tu := newTurn(t, s, ws, turnOpts{sandbox: api.SandboxPolicyWorkspaceWrite})
	exe, err := os.Executable()
	require.NoError(t, err)
	launcher := exe + " " + sandbox.HelperCommand + " --box"
	i := 0
	require.Eventually(t, func() bool {
		i++
		out := tu.fn("call_p"+strconv.Itoa(i), "exec_command", map[string]any{"cmd": `cat /proc/1/cmdline | tr '\0' ' '`, "yield_time_ms": 5000})
		return strings.Contains(out.Text, launcher)
	}, time.Minute, 10*time.Millisecond, "no pooled sandbox ran the thread's commands")
	require.Len(t, testenv.Processes(launcher), 1)
	s.ThreadUnloaded("thread-1")
	require.Eventually(t, func() bool { return len(testenv.Processes(launcher)) == 0 }, 10*time.Second, 10*time.Millisecond,
		"the thread's pooled sandbox outlived its unload")
}
