//go:build linux

package shell

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/testenv"
)

// TestExecInPooledSandbox runs the shell tools' commands with a pool key:
// once the thread's pooled sandbox is up they run there, and a timeout
// still kills the command's whole tree, escaped children included, and
// reads as a timeout.
func TestExecInPooledSandbox(t *testing.T) {
	sb, err := sandbox.New(sandbox.Options{Backend: sandbox.BackendBwrap})
	require.NoError(t, err)
	defer sb.Close()
	if b, err := sb.Backend(); err != nil || b != sandbox.BackendBwrap {
		t.Skipf("bubblewrap not available: %v", err)
	}
	req := ExecRequest{Cwd: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")}, Policy: wsPolicy(), Sandbox: sb, Pool: "thread-a"}
	// pid 1 is the pooled sandbox's launcher, bubblewrap in a sandbox of
	// the command's own.
	req.Argv = []string{"cat", "/proc/1/cmdline"}
	require.Eventually(t, func() bool {
		res, err := Exec(context.Background(), req)
		require.NoError(t, err)
		return strings.Contains(string(res.Aggregated), sandbox.HelperCommand)
	}, time.Minute, 10*time.Millisecond, "no pooled sandbox started")

	req.Argv = []string{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}
	res, err := Exec(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, 3, res.ExitCode)
	require.Equal(t, "out\nerr\n", string(res.Aggregated))

	req.Argv = []string{"/bin/sh", "-c", "setsid sleep 4770.5 & sleep 4771.5 & echo started; wait"}
	req.Timeout = 300 * time.Millisecond
	start := time.Now()
	res, err = Exec(context.Background(), req)
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	require.Equal(t, TimeoutExitCode, res.ExitCode)
	require.Less(t, time.Since(start), 10*time.Second)
	require.Equal(t, "started\n", string(res.Aggregated))
	for _, name := range []string{"sleep 4770.5", "sleep 4771.5"} {
		require.Empty(t, testenv.Processes(name), "%s outlived the timed-out command", name)
	}
}
