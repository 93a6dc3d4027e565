package shell

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/testenv"
)

func fullAccess() policy.SandboxPolicy { return policy.SandboxPolicy{Kind: policy.DangerFullAccess} }

// With WaitForOutput a background child that finishes within the drain
// time is heard; without it the group is reaped as the command exits.
func TestExecWaitForOutputHearsBackgroundChildren(t *testing.T) {
	argv := []string{"/bin/sh", "-c", "(sleep 0.3; echo late) & echo early"}
	env := []string{"PATH=" + os.Getenv("PATH")}
	res, err := Exec(context.Background(), ExecRequest{Argv: argv, Cwd: t.TempDir(), Env: env, Policy: fullAccess(), WaitForOutput: true})
	require.NoError(t, err)
	require.Equal(t, "early\nlate\n", string(res.Aggregated))
	require.False(t, res.DrainTimedOut)

	res, err = Exec(context.Background(), ExecRequest{Argv: argv, Cwd: t.TempDir(), Env: env, Policy: fullAccess()})
	require.NoError(t, err)
	require.Equal(t, "early\n", string(res.Aggregated))
	require.False(t, res.DrainTimedOut)
}

// A descendant that left the group and keeps the output open ends the
// drain at its timeout, which the result reports.
func TestExecDrainTimeoutReported(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	res, err := Exec(context.Background(), ExecRequest{
		Argv: []string{"/bin/sh", "-c", `setsid sh -c 'echo $$ > "$0"; exec sleep 30' "$1" & echo early`, "sh", pidFile},
		Cwd:  dir, Env: []string{"PATH=" + os.Getenv("PATH")}, Policy: fullAccess(),
		WaitForOutput: true, DrainTimeout: 300 * time.Millisecond,
	})
	require.NoError(t, err)
	require.True(t, res.DrainTimedOut)
	require.Equal(t, "early\n", string(res.Aggregated))
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
}

// Terminate after the command exited, while its background children are
// still heard, kills them: the drain ends without waiting for its timeout.
func TestExecTerminateWhileDraining(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	procs := make(chan *Process, 1)
	done := make(chan ExecResult, 1)
	go func() {
		res, _ := Exec(context.Background(), ExecRequest{
			Argv: []string{"/bin/sh", "-c", "(sleep 30; echo late) & echo early"}, Cwd: t.TempDir(),
			Env: []string{"PATH=" + os.Getenv("PATH")}, Policy: fullAccess(), WaitForOutput: true, DrainTimeout: time.Minute,
			OnStart: func(p *Process) { procs <- p },
			OnOutput: func(d OutputDelta) {
				mu.Lock()
				defer mu.Unlock()
				out.Write(d.Data)
			},
		})
		done <- res
	}()
	p := <-procs
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		// Exited: a zombie until the output is drained, its process
		// group's id its own until then.
		return out.String() == "early\n" && !testenv.Alive(p.Pid())
	}, 10*time.Second, 10*time.Millisecond, "the command printed and exited")
	p.Terminate()
	res := <-done
	require.False(t, res.DrainTimedOut)
	require.Equal(t, 0, res.ExitCode, "the command itself had exited normally")
	require.Equal(t, "early\n", string(res.Aggregated))
}

// Streamed output is not kept for the result, whatever the cap; the cap
// flags are still set.
func TestExecStreamOnlyKeepsNoOutput(t *testing.T) {
	var n [2]int
	noCap := -1
	for _, limit := range []int{10, noCap} {
		n = [2]int{}
		res, err := Exec(context.Background(), ExecRequest{
			Argv: []string{"/bin/sh", "-c", "seq 1000; echo e >&2"}, Cwd: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")},
			Policy: fullAccess(), SeparateStreams: true, MaxOutputBytes: &limit, StreamOnly: true, MaxDeltas: -1,
			OnOutput: func(d OutputDelta) { n[d.Stream] += len(d.Data) },
		})
		require.NoError(t, err)
		require.Empty(t, res.Stdout)
		require.Empty(t, res.Stderr)
		require.Empty(t, res.Aggregated)
		require.Equal(t, limit == 10, res.StdoutCapped, "limit %d", limit)
		require.False(t, res.StderrCapped)
		require.Equal(t, [2]int{len(seqOutput(1000)), 2}, n)
	}
}

// Closing a terminal's stdin ends the pending line, then sends end of
// file: the reader gets the line, then EOF.
func TestProcessCloseStdinOnTTY(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	res, err := Exec(context.Background(), ExecRequest{
		Argv: []string{"/bin/sh", "-c", `read x; echo "[$x] $?"; read y; echo "[$y] $?"`}, Cwd: t.TempDir(),
		Env: []string{"PATH=" + os.Getenv("PATH")}, Policy: fullAccess(), TTY: true, Timeout: 20 * time.Second,
		OnStart: func(p *Process) {
			require.NoError(t, p.Write([]byte("hi")))
			require.NoError(t, p.CloseStdin())
		},
		OnOutput: func(d OutputDelta) {
			mu.Lock()
			defer mu.Unlock()
			out.Write(d.Data)
		},
	})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	require.Contains(t, out.String(), "[hi] 0\r\n[] 1\r\n")
}

// A timeout that has passed before the command started still starts it,
// then kills it at once: the result is the timeout's, not a spawn error.
func TestExecZeroTimeoutStartsAndTimesOut(t *testing.T) {
	zero := int64(0)
	res, err := CommandExec(context.Background(), CommandExecParams{Command: []string{"true"}, TimeoutMS: &zero},
		CommandExecOptions{BaseEnv: []string{"PATH=" + os.Getenv("PATH")}, DefaultCwd: t.TempDir(), DefaultPolicy: fullAccess()})
	require.NoError(t, err)
	require.Equal(t, TimeoutExitCode, res.ExitCode)
}
