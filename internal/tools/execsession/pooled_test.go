//go:build linux

package execsession

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/testenv"
)

// TestSessionsInPooledSandboxes runs sessions of one thread in a pooled
// bubblewrap sandbox: input on a terminal, ^C to a pipe session, a
// command's escaped child killed when it exits, and Close reaping a
// running one.
func TestSessionsInPooledSandboxes(t *testing.T) {
	sb, err := sandbox.New(sandbox.Options{Backend: sandbox.BackendBwrap})
	require.NoError(t, err)
	defer sb.Close()
	if b, err := sb.Backend(); err != nil || b != sandbox.BackendBwrap {
		t.Skipf("bubblewrap not available: %v", err)
	}
	ws := t.TempDir()
	pol := policy.SandboxPolicy{Kind: policy.WorkspaceWrite, ExcludeSlashTmp: true, ExcludeTmpdirEnvVar: true}
	var pooled atomic.Bool
	build := func(argv []string) (*sandbox.Cmd, error) {
		cmd, err := sb.CommandFor(context.Background(), sandbox.Request{Policy: pol, Cwd: ws, Argv: argv, Env: []string{"PATH=" + os.Getenv("PATH")}, Pool: "thread-a"})
		if err == nil {
			pooled.Store(cmd.Pooled())
		}
		return cmd, err
	}
	m := NewManager(ManagerConfig{Command: build})
	require.Eventually(t, func() bool {
		res := execOK(t, m, ExecRequest{Argv: []string{"true"}, Cwd: ws, YieldTime: 5 * time.Second})
		return exited(t, res) == 0 && pooled.Load()
	}, time.Minute, 10*time.Millisecond, "no pooled sandbox started")

	id := running(t, execOK(t, m, ExecRequest{Argv: []string{"cat"}, Cwd: ws, TTY: true, YieldTime: 300 * time.Millisecond}))
	require.True(t, pooled.Load())
	pollUntil(t, m, id, "abc\n", "abc\r\nabc\r\n")
	_, r := pollUntil(t, m, id, "\u0004", "\x00never")
	require.Equal(t, 0, exited(t, r))

	id = running(t, execOK(t, m, ExecRequest{Argv: []string{"sleep", "30"}, Cwd: ws, YieldTime: 50 * time.Millisecond}))
	require.True(t, pooled.Load())
	r = writeOK(t, m, WriteRequest{SessionID: id, Chars: "\u0003", YieldTime: 5 * time.Second})
	require.Equal(t, 130, exited(t, r))

	res := execOK(t, m, ExecRequest{Argv: sh("setsid sleep 4760.5 >/dev/null 2>&1 & echo started"), Cwd: ws, YieldTime: 5 * time.Second})
	require.True(t, pooled.Load())
	require.Equal(t, 0, exited(t, res))
	require.Equal(t, "started\n", res.Output)
	require.Empty(t, testenv.Processes("sleep 4760.5"), "a session's escaped child outlived it")

	running(t, execOK(t, m, ExecRequest{Argv: []string{"sleep", "4761.5"}, Cwd: ws, YieldTime: 50 * time.Millisecond}))
	require.True(t, pooled.Load())
	require.Len(t, testenv.Processes("sleep 4761.5"), 1)
	require.NoError(t, m.Close())
	require.Empty(t, testenv.Processes("sleep 4761.5"), "Close left a session running")
}
