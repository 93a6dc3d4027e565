//go:build linux

package shell

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
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

// TestShellStartedAhead: after a command whose login shell sources the
// snapshot, the thread's pooled sandbox starts the next command's shell
// at once; the next command with the same shell, environment and
// directory runs in it. The shell's age when the command runs shows which
// shell ran it. Whichever ran it, the command sees the same snapshot,
// stdio and descriptors, and its errors read the same.
func TestShellStartedAhead(t *testing.T) {
	_, env := snapshotHome(t)
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	sb, err := sandbox.New(sandbox.Options{Backend: sandbox.BackendBwrap})
	require.NoError(t, err)
	defer sb.Close()
	if b, err := sb.Backend(); err != nil || b != sandbox.BackendBwrap {
		t.Skipf("bubblewrap not available: %v", err)
	}
	snaps := newSnapshots(t, SnapshotsConfig{Shell: bash, Env: func() []string { return env }})
	req := ExecRequest{Cwd: t.TempDir(), Env: env, Policy: wsPolicy(), Sandbox: sb, Pool: "thread-a",
		Snapshot: snaps.Get("p1", SnapshotSandboxed), StartAhead: true}
	run := func(r ExecRequest, script string) string {
		t.Helper()
		r.Argv = []string{bash, "-lc", script}
		res, err := Exec(context.Background(), r)
		require.NoError(t, err)
		return fmt.Sprintf("%d:%s", res.ExitCode, res.Aggregated)
	}
	// Until the pooled sandbox is up, commands run in one of their own.
	require.Eventually(t, func() bool {
		return strings.Contains(run(req, "cat /proc/1/cmdline"), sandbox.HelperCommand)
	}, time.Minute, 10*time.Millisecond, "no pooled sandbox started")

	// "waited" when the shell started half a second or more before it
	// ran this (its start time in /proc against the uptime, in ticks of
	// 10 ms); the test pauses 1.1 s before commands that should find a
	// shell started ahead.
	const age = `read -r up _ < /proc/uptime; st=$(</proc/$$/stat); set -- ${st##*) }; ` +
		`if (( ${up/./} - ${20} >= 50 )); then echo waited; else echo fresh; fi`
	// The profile's state, the command's descriptors, its standard input,
	// the line numbers of errors, and descriptor 10 free for the script.
	const script = `echo "$FROM_PROFILE"; greet you; ls /proc/self/fd | tr '\n' ' '; readlink /proc/self/fd/0; ` +
		`nosuchcommand; exec 10>lock && echo fd10 >&10 && (ls /proc/self/fd | tr '\n' ' ') && cat lock; ` + age + `; exit 7`
	want := func(shell string) string {
		return "7:it's set\nhello you\n0 1 2 3 /dev/null\n" + bash + ": line 2: nosuchcommand: command not found\n0 1 10 2 3 fd10\n" + shell + "\n"
	}
	pause := func() { time.Sleep(1100 * time.Millisecond) }
	run(req, "true")
	require.Equal(t, want("fresh"), run(req, script), "run by a shell of its own")
	pause()
	require.Equal(t, want("waited"), run(req, script), "run by the shell started ahead")
	pause()
	require.Equal(t, want("waited"), run(req, script), "and again")

	// Not with variables that have bash or the loader run code of their
	// choosing at its start, as that shell starts after the command ended.
	pause()
	other := req
	other.Env = append(slices.Clone(env), "BASH_ENV=/dev/null")
	run(other, "true")
	pause()
	require.Equal(t, "0:fresh\n", run(other, age))

	// Another environment, or directory, and the command gets a shell of
	// its own; so does one with input or a terminal.
	pause()
	other = req
	other.Env = append(slices.Clone(env), "EXTRA=1")
	require.Equal(t, "0:fresh 1\n", run(other, age+` | tr '\n' ' '; echo "$EXTRA"`))
	pause()
	other = req
	other.Cwd = t.TempDir()
	require.Equal(t, "0:fresh\n", run(other, age))
	pause()
	other = req
	other.Stdin = strings.NewReader("input\n")
	require.Equal(t, "0:fresh\ninput\n", run(other, age+"; cat"))
	pause()
	other = req
	other.TTY = true
	require.Equal(t, "0:fresh\r\ntty\r\n", run(other, age+"; [ -t 0 ] && echo tty"))

	// A script ending with a newline, which `$(<…)` would drop, runs in
	// a shell of its own; the next command finds a shell ahead again.
	pause()
	require.Equal(t, "0:fresh\n", run(req, age+"\n"))
	pause()
	require.Equal(t, "0:waited\n", run(req, age))

	// The shell ahead goes with the pool.
	require.Eventually(t, func() bool { return aheadShells(t) == 1 }, 10*time.Second, 10*time.Millisecond, "no shell started ahead")
	sb.Close()
	require.Eventually(t, func() bool { return aheadShells(t) == 0 }, 10*time.Second, 10*time.Millisecond,
		"a shell started ahead outlived its sandbox")
}

// aheadShells counts the live shells started ahead on this machine.
func aheadShells(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(b), `eval "exec 3<&-;$(</dev/fd/3)"`) {
			continue
		}
		if pid, err := strconv.Atoi(e.Name()); err == nil && testenv.Alive(pid) {
			n++
		}
	}
	return n
}
