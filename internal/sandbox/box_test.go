//go:build linux

package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/testenv"
)

// pooledSandbox returns a bubblewrap sandbox with pooled sandboxes (and
// options o), skipping where bubblewrap cannot run.
func pooledSandbox(t *testing.T, o Options) *Sandbox {
	t.Helper()
	sb := newSandbox(t, backendBwrapPooled, o)
	if b, err := sb.Backend(); err != nil || b != BackendBwrap {
		t.Skipf("bubblewrap not available: %v", err)
	}
	return sb
}

// boxDaemonEnv makes the test binary, re-executed by
// TestPooledSandboxEndsWithTheDaemon, play a daemon with a pooled sandbox;
// its value is the workspace of the command it runs.
const boxDaemonEnv = "APPSERVER_SANDBOX_TEST_BOX_DAEMON"

// TestPooledSandboxEndsWithTheDaemon kills (SIGKILL) a daemon stand-in
// whose pooled sandbox runs a command: bubblewrap, the launcher and the
// command must all go.
func TestPooledSandboxEndsWithTheDaemon(t *testing.T) {
	if dir := os.Getenv(boxDaemonEnv); dir != "" {
		// The workspace is the parent's: a directory of this process's
		// own would outlive it, as SIGKILL leaves no cleanup.
		sb := pooledSandbox(t, Options{})
		r := Request{Policy: workspacePolicy(false), Cwd: dir, Argv: sh("sleep 4731.5"), Env: []string{"PATH=" + os.Getenv("PATH")}, Pool: "daemon"}
		cmd := build(t, context.Background(), sb, r)
		require.NoError(t, cmd.Start())
		b := cmd.pooled.box
		fmt.Printf("pids %d %d %d\n", b.bwrap.Process.Pid, b.launcherPid, cmd.Process.Pid)
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until killed
		return
	}
	cmd := exec.Command(selfExe(t), "-test.run=^TestPooledSandboxEndsWithTheDaemon$", "-test.count=1")
	cmd.Env = append(os.Environ(), boxDaemonEnv+"="+t.TempDir(), "GORACE=atexit_sleep_ms=0")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if f, ok := strings.CutPrefix(sc.Text(), "pids "); ok {
			for _, s := range strings.Fields(f) {
				pid, err := strconv.Atoi(s)
				require.NoError(t, err)
				pids = append(pids, pid)
			}
			break
		}
	}
	require.Len(t, pids, 3, "the stand-in did not report its pooled sandbox")
	t.Logf("bwrap %d, launcher %d, command %d", pids[0], pids[1], pids[2])
	for _, pid := range pids {
		require.True(t, testenv.Alive(pid))
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Eventually(t, func() bool {
		return !testenv.Alive(pids[0]) && !testenv.Alive(pids[1]) && !testenv.Alive(pids[2])
	}, 10*time.Second, 20*time.Millisecond, "bubblewrap %v, launcher %v or command %v outlived the daemon", testenv.Alive(pids[0]), testenv.Alive(pids[1]), testenv.Alive(pids[2]))
	_ = syscall.Kill(pids[0], syscall.SIGKILL) // should it have survived
}

// pooledRequest is a workspace-write command without network for owner,
// in a new workspace.
func pooledRequest(t *testing.T, owner string, argv ...string) Request {
	return Request{Policy: workspacePolicy(false), Cwd: t.TempDir(), Argv: argv, Env: []string{"PATH=" + os.Getenv("PATH")}, Pool: owner}
}

// runCmd runs a built command and returns its output and exit code.
func runCmd(t *testing.T, cmd *Cmd) result {
	t.Helper()
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	ws, ok := cmd.WaitStatus()
	require.True(t, ok, "%v: %s", err, buf.String())
	code := ws.ExitStatus()
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	return result{exit: code, out: buf.String()}
}

// poolSize is how many pooled sandboxes live or start.
func poolSize(sb *Sandbox) int {
	sb.pool.mu.Lock()
	defer sb.pool.mu.Unlock()
	return sb.pool.n
}

// TestPoolReusesOneSandbox runs commands of one owner and view in turn:
// one pooled sandbox runs them all, and none sees anything of the one
// before.
func TestPoolReusesOneSandbox(t *testing.T) {
	sb := pooledSandbox(t, Options{})
	r := pooledRequest(t, "thread-a")
	var first *box
	for i := range 5 {
		// Command i leaves `sleep 4740.i` running and counts the
		// sleeps of the commands before it it can see. The pattern's
		// brackets keep grep from matching its own command line.
		script := fmt.Sprintf(`sleep 4740.%d >/dev/null 2>&1 & echo "seen: $(cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' ' | grep -o 'sleep 4740[.][0-%d]' | wc -l)"`, i, max(i-1, 0))
		if i == 0 {
			script = `sleep 4740.0 >/dev/null 2>&1 & echo "seen: 0"`
		}
		r.Argv = []string{"sh", "-c", script}
		cmd := build(t, context.Background(), sb, r)
		if first == nil {
			first = cmd.pooled.box
		}
		require.Same(t, first, cmd.pooled.box, "command %d", i)
		res := runCmd(t, cmd)
		require.Zero(t, res.exit, res.out)
		// Nothing of the commands before.
		require.Equal(t, "seen: 0\n", res.out, "command %d", i)
	}
	for i := range 5 {
		require.Empty(t, testenv.Processes(fmt.Sprintf("sleep 4740.%d", i)), "command %d's leftovers outlived it", i)
	}
	require.Equal(t, 1, poolSize(sb))
	require.True(t, testenv.Alive(first.launcherPid))
}

// TestPoolInterruptKillsTheTree cancels a pooled command whose tree holds
// a background job, a process in a session of its own and an orphan: all
// die, and the sandbox runs the next command clean.
func TestPoolInterruptKillsTheTree(t *testing.T) {
	sb := pooledSandbox(t, Options{})
	r := pooledRequest(t, "thread-a", "sh", "-c", `sleep 4741.5 & setsid sleep 4742.5 & sh -c 'sleep 4743.5 &'; sleep 4744.5`)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := build(t, ctx, sb, r)
	b := cmd.pooled.box
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return len(testenv.Processes("sleep 4743.5")) == 1 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	err := cmd.Wait()
	var ee *ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, -1, ee.ExitCode())
	require.Equal(t, "signal: killed", ee.Error())
	for _, name := range []string{"sleep 4741.5", "sleep 4742.5", "sleep 4743.5", "sleep 4744.5"} {
		require.Empty(t, testenv.Processes(name), "%s outlived the interrupted command", name)
	}
	// Counted by the shell itself: a pipeline's processes start one after
	// the other, so `ls /proc | grep` could list /proc before grep existed.
	r.Argv = []string{"sh", "-c", `n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo $n`}
	cmd = build(t, context.Background(), sb, r)
	require.Same(t, b, cmd.pooled.box)
	res := runCmd(t, cmd)
	require.Equal(t, "2\n", res.out, "the launcher and sh only")
}

// TestPoolIdleSandboxesAreClosed lets a pooled sandbox idle past its
// timeout: its launcher and bubblewrap go, and the next command gets
// another.
func TestPoolIdleSandboxesAreClosed(t *testing.T) {
	sb := pooledSandbox(t, Options{Pool: PoolOptions{IdleTimeout: 200 * time.Millisecond}})
	r := pooledRequest(t, "thread-a", "true")
	cmd := build(t, context.Background(), sb, r)
	b := cmd.pooled.box
	require.Zero(t, runCmd(t, cmd).exit)
	require.Eventually(t, func() bool { return poolSize(sb) == 0 }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return !testenv.Alive(b.launcherPid) && !testenv.Alive(b.bwrap.Process.Pid) }, 10*time.Second, 10*time.Millisecond)
	cmd = build(t, context.Background(), sb, r)
	require.NotSame(t, b, cmd.pooled.box)
	require.Zero(t, runCmd(t, cmd).exit)
}

// TestPoolBound fills a pool of one: another owner's commands run in
// sandboxes of their own until the first owner's sandbox is retired.
func TestPoolBound(t *testing.T) {
	sb := pooledSandbox(t, Options{Pool: PoolOptions{Size: 1}})
	a := pooledRequest(t, "thread-a", "true")
	cmd := build(t, context.Background(), sb, a)
	require.Zero(t, runCmd(t, cmd).exit)
	b := pooledRequest(t, "thread-b", "true")
	for range 3 {
		cmd, err := sb.CommandFor(context.Background(), b)
		require.NoError(t, err)
		require.Nil(t, cmd.pooled, "a second pooled sandbox in a pool of one")
		require.Zero(t, runCmd(t, cmd).exit)
		require.Equal(t, 1, poolSize(sb))
	}
	sb.Retire("thread-a")
	require.Eventually(t, func() bool { return poolSize(sb) == 0 }, 10*time.Second, 10*time.Millisecond)
	cmd = build(t, context.Background(), sb, b)
	require.Zero(t, runCmd(t, cmd).exit)
	require.Equal(t, 1, poolSize(sb))
	require.Equal(t, -1, newPool(PoolOptions{Size: -1}, nil).size, "a negative size turns pooling off")
}

// TestPoolLauncherCrash kills launchers from outside, once idle and once
// during a command: the command ends as killed, and the next commands
// get a new pooled sandbox.
func TestPoolLauncherCrash(t *testing.T) {
	sb := pooledSandbox(t, Options{})
	r := pooledRequest(t, "thread-a", "true")
	cmd := build(t, context.Background(), sb, r)
	b := cmd.pooled.box
	require.Zero(t, runCmd(t, cmd).exit)
	require.NoError(t, syscall.Kill(b.launcherPid, syscall.SIGKILL))
	require.Eventually(t, func() bool { return poolSize(sb) == 0 }, 10*time.Second, 10*time.Millisecond)

	r.Argv = sh("sleep 4745.5")
	cmd = build(t, context.Background(), sb, r)
	b2 := cmd.pooled.box
	require.NotSame(t, b, b2)
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return len(testenv.Processes("sleep 4745.5")) == 1 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, syscall.Kill(b2.launcherPid, syscall.SIGKILL))
	err := cmd.Wait()
	var ee *ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, "signal: killed", ee.Error())
	require.Empty(t, testenv.Processes("sleep 4745.5"))

	r.Argv = []string{"true"}
	cmd = build(t, context.Background(), sb, r)
	require.NotSame(t, b2, cmd.pooled.box)
	require.Zero(t, runCmd(t, cmd).exit)
}

// TestPoolNewSandboxForAnotherView changes what a command's sandbox must
// look like, for one owner: another pooled sandbox runs it, and the old
// one is never used for the new view.
func TestPoolNewSandboxForAnotherView(t *testing.T) {
	sb := pooledSandbox(t, Options{})
	r := pooledRequest(t, "thread-a", "true")
	boxOf := func(r Request) *box {
		cmd := build(t, context.Background(), sb, r)
		require.Zero(t, runCmd(t, cmd).exit)
		return cmd.pooled.box
	}
	seen := []*box{boxOf(r)}
	requireNew := func(r Request, why string) {
		b := boxOf(r)
		for _, s := range seen {
			require.NotSame(t, s, b, why)
		}
		seen = append(seen, b)
	}
	net := r
	net.Policy = workspacePolicy(true)
	requireNew(net, "network on")
	ro := r
	ro.Policy = policy.SandboxPolicy{Kind: policy.ReadOnly}
	requireNew(ro, "read-only")
	extra := r
	extra.Policy.WritableRoots = []string{t.TempDir()}
	requireNew(extra, "another writable root")
	other := r
	other.Pool = "thread-b"
	requireNew(other, "another owner")
	hidden := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(hidden, []byte("x"), 0o600))
	require.NoError(t, sb.Hide(hidden))
	requireNew(r, "a path hidden since")
	// The workspace replaced by another directory at the same path.
	require.NoError(t, os.RemoveAll(r.Cwd))
	require.NoError(t, os.Mkdir(r.Cwd, 0o755))
	r.Argv = sh("echo here > file && cat file")
	cmd := build(t, context.Background(), sb, r)
	for _, s := range seen {
		require.NotSame(t, s, cmd.pooled.box, "recreated workspace")
	}
	res := runCmd(t, cmd)
	require.Equal(t, "here\n", res.out)
}

// TestPoolCommandsCannotHurtTheLauncher signals the launcher (pid 1 of the
// sandbox) with everything, tries to read its environment and
// descriptors and to trace it: it survives and runs the next command.
func TestPoolCommandsCannotHurtTheLauncher(t *testing.T) {
	sb := pooledSandbox(t, Options{})
	for _, p := range []policy.SandboxPolicy{workspacePolicy(false), workspacePolicy(true)} {
		r := pooledRequest(t, "thread-a", "sh", "-c", `for s in KILL STOP TERM INT HUP SEGV BUS USR1 QUIT ABRT; do kill -$s 1; done
cat /proc/1/environ && echo "read environ"
readlink /proc/1/fd/3 && echo "read fd link"
cat /proc/1/fd/3 </dev/null && echo "opened the socket"
readlink /proc/1/exe && echo "read exe"
cat /proc/1/mem && echo "read memory"
echo done`)
		r.Policy = p
		cmd := build(t, context.Background(), sb, r)
		b := cmd.pooled.box
		res := runCmd(t, cmd)
		require.Zero(t, res.exit, res.out)
		require.Contains(t, res.out, "done")
		for _, what := range []string{"read environ", "read fd link", "opened the socket", "read exe", "read memory"} {
			require.NotContains(t, res.out, what)
		}
		require.True(t, testenv.Alive(b.launcherPid))
		r.Argv = sh("grep State /proc/1/status")
		cmd = build(t, context.Background(), sb, r)
		require.Same(t, b, cmd.pooled.box)
		res = runCmd(t, cmd)
		require.Zero(t, res.exit, res.out)
		require.NotContains(t, res.out, "stopped")
	}
}

// TestPoolOwnersAreIsolated runs a command of owner A and, meanwhile, one
// of owner B that looks for it, signals everything it can and writes into
// A's workspace: B sees and reaches nothing of A.
func TestPoolOwnersAreIsolated(t *testing.T) {
	sb := pooledSandbox(t, Options{})
	a := pooledRequest(t, "thread-a", "sh", "-c", "sleep 4746.5")
	cmdA := build(t, context.Background(), sb, a)
	require.NoError(t, cmdA.Start())
	defer func() { _ = cmdA.Process.Kill(); _ = cmdA.Wait() }()
	require.Eventually(t, func() bool { return len(testenv.Processes("sleep 4746.5")) == 1 }, 10*time.Second, 10*time.Millisecond)
	hostPid := testenv.Processes("sleep 4746.5")[0]
	for _, p := range []policy.SandboxPolicy{workspacePolicy(false), workspacePolicy(true)} {
		b := pooledRequest(t, "thread-b", "sh", "-c", fmt.Sprintf(`set -- /proc/[0-9]*/cmdline; cat "$@" | tr '\0' ' ' | grep -c "474$((6)).5" || true
kill -KILL %[1]d && echo "signalled by pid"
kill -KILL -1
echo pwned > %[2]s/pwned && echo "wrote"
echo done`, hostPid, a.Cwd))
		b.Policy = p
		cmdB := build(t, context.Background(), sb, b)
		require.NotSame(t, cmdA.pooled.box, cmdB.pooled.box)
		res := runCmd(t, cmdB)
		require.Contains(t, res.out, "0\n", "B sees A's command")
		require.NotContains(t, res.out, "signalled by pid")
		require.NotContains(t, res.out, "wrote")
		require.NoFileExists(t, filepath.Join(a.Cwd, "pwned"))
		require.True(t, testenv.Alive(hostPid), "B killed A's command")
	}
}

// TestPooledCommandIO gives a pooled command a reader for standard input
// and a writer for standard output and error, as exec.Cmd takes them.
func TestPooledCommandIO(t *testing.T) {
	sb := pooledSandbox(t, Options{})
	r := pooledRequest(t, "thread-a", "sh", "-c", "tr a-z A-Z; echo err >&2; exit 3")
	cmd := build(t, context.Background(), sb, r)
	var out bytes.Buffer
	cmd.Stdin = strings.NewReader("hello\n")
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 3, ee.ExitCode())
	require.Equal(t, "exit status 3", ee.Error())
	require.Equal(t, "HELLO\nerr\n", out.String())
	ws, ok := cmd.WaitStatus()
	require.True(t, ok)
	require.Equal(t, 3, ws.ExitStatus())
	require.Error(t, cmd.Wait(), "a second Wait")

	// Output captures standard error into the error of a failed run.
	r.Argv = sh("echo out; exit 0")
	cmd = build(t, context.Background(), sb, r)
	got, err := cmd.Output()
	require.NoError(t, err)
	require.Equal(t, "out\n", string(got))
	cmd = build(t, context.Background(), sb, r)
	_, err = cmd.StdoutPipe()
	require.ErrorIs(t, err, errPooledPipe)
	require.NoError(t, cmd.Run())
}

// TestPooledCommandOnATerminal runs a pooled command on a pseudo-terminal
// as its controlling terminal: it is its session's, and ^C interrupts it.
func TestPooledCommandOnATerminal(t *testing.T) {
	sb := pooledSandbox(t, Options{})
	r := pooledRequest(t, "thread-a", "sh", "-c", `test -t 0 && cat </dev/tty </dev/null && echo "controlling terminal"; echo ready; exec cat`)
	cmd := build(t, context.Background(), sb, r)
	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	defer ptmx.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	require.NoError(t, cmd.Start())
	_ = tty.Close()
	out := bufio.NewReader(ptmx)
	line, err := out.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "controlling terminal\r\n", line)
	line, err = out.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\r\n", line)
	_, err = ptmx.Write([]byte{3}) // ^C, to sh or to cat
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, out) // until the terminal's last holder is gone
	err = cmd.Wait()
	var ee *ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, "signal: interrupt", ee.Error())
}

// TestPooledStartFailure starts a pooled command in a directory that does
// not exist: Start fails as exec's would, and the sandbox runs the next
// command.
func TestPooledStartFailure(t *testing.T) {
	sb := pooledSandbox(t, Options{})
	r := pooledRequest(t, "thread-a", "true")
	cmd := build(t, context.Background(), sb, r)
	b := cmd.pooled.box
	missing := filepath.Join(r.Cwd, "missing")
	cmd.Dir = missing
	err := cmd.Start()
	var pe *os.PathError
	require.ErrorAs(t, err, &pe)
	// As os/exec reports a missing directory.
	require.Equal(t, "fork/exec", pe.Op)
	require.Equal(t, cmd.Path, pe.Path)
	require.True(t, errors.Is(err, os.ErrNotExist))
	cmd = build(t, context.Background(), sb, r)
	require.Same(t, b, cmd.pooled.box)
	require.Zero(t, runCmd(t, cmd).exit)
}

// TestPooledCommandNeverStarted drops a built pooled command: its sandbox
// returns to the pool.
func TestPooledCommandNeverStarted(t *testing.T) {
	sb := pooledSandbox(t, Options{})
	r := pooledRequest(t, "thread-a", "true")
	b := build(t, context.Background(), sb, r).pooled.box
	require.Eventually(t, func() bool {
		runtime.GC()
		cmd, err := sb.CommandFor(context.Background(), r)
		require.NoError(t, err)
		defer func() { _ = cmd.Run() }()
		return cmd.pooled != nil && cmd.pooled.box == b
	}, 10*time.Second, 10*time.Millisecond)
}

// TestPoolCloseLeavesNothing closes a sandbox whose pooled sandboxes are
// idle, busy and starting: no launcher, bubblewrap or command is left.
func TestPoolCloseLeavesNothing(t *testing.T) {
	sb := pooledSandbox(t, Options{})
	idle := build(t, context.Background(), sb, pooledRequest(t, "thread-a", "true"))
	require.Zero(t, runCmd(t, idle).exit)
	busy := build(t, context.Background(), sb, pooledRequest(t, "thread-b", "sh", "-c", "sleep 4747.5"))
	require.NoError(t, busy.Start())
	// A third owner's first command starts a pooled sandbox.
	first, err := sb.CommandFor(context.Background(), pooledRequest(t, "thread-c", "true"))
	require.NoError(t, err)
	require.NoError(t, first.Run())
	boxes := []*box{idle.pooled.box, busy.pooled.box}
	sb.Close()
	err = busy.Wait()
	var ee *ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 0, poolSize(sb))
	for _, b := range boxes {
		require.False(t, testenv.Alive(b.launcherPid))
		require.False(t, testenv.Alive(b.bwrap.Process.Pid))
	}
	require.Empty(t, testenv.Processes("sleep 4747.5"))
	require.Eventually(t, func() bool {
		return len(testenv.Processes(selfExe(t)+" "+HelperCommand+" "+flagBox)) == 0
	}, 10*time.Second, 10*time.Millisecond, "a launcher outlived Close")
	// Commands built after Close get no pooled sandbox, nor start one.
	cmd, err := sb.CommandFor(context.Background(), pooledRequest(t, "thread-a", "true"))
	require.NoError(t, err)
	require.Nil(t, cmd.pooled)
	require.Equal(t, 0, poolSize(sb))
}

// TestLandlockOwnersDoNotShareALauncher runs a command of owner A and one
// of owner B under the same policy in the same directory with the
// Landlock backend: B's launcher, and with it its PID namespace, is not
// A's, so B neither sees nor signals A's command.
func TestLandlockOwnersDoNotShareALauncher(t *testing.T) {
	sb := newSandbox(t, BackendLandlock, Options{})
	ws := t.TempDir()
	a := Request{Policy: workspacePolicy(false), Cwd: ws, Argv: sh("sleep 4780.5"), Env: []string{"PATH=" + os.Getenv("PATH")}, Pool: "thread-a"}
	cmdA, err := sb.CommandFor(context.Background(), a)
	require.NoError(t, err)
	require.NoError(t, cmdA.Start())
	defer func() { _ = cmdA.Process.Kill(); _ = cmdA.Wait() }()
	require.Eventually(t, func() bool { return len(testenv.Processes("sleep 4780.5")) == 1 }, 10*time.Second, 10*time.Millisecond)
	b := a
	b.Pool = "thread-b"
	b.Argv = sh(`set -- /proc/[0-9]*/cmdline; cat "$@" | tr '\0' ' ' | grep -c "478$((0)).5" || true; kill -KILL -1 2>/dev/null; true`)
	res := run(t, sb, b)
	require.Equal(t, "0\n", res.out)
	require.True(t, testenv.Alive(testenv.Processes("sleep 4780.5")[0]))
}

// runToFile runs a built command with its output and error on one pipe,
// as the shell tools run theirs, and returns what it wrote and its exit
// code.
func runToFile(t *testing.T, cmd *Cmd) result {
	t.Helper()
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	cmd.Stdout, cmd.Stderr = pw, pw
	err = cmd.Start()
	_ = pw.Close()
	require.NoError(t, err)
	out, err := io.ReadAll(pr)
	require.NoError(t, err)
	_ = cmd.Wait()
	ws, ok := cmd.WaitStatus()
	require.True(t, ok)
	return result{exit: ws.ExitStatus(), out: string(out)}
}

// TestPoolShellStartedAhead: the launcher's side of a shell started ahead
// of the next command (aheadShell). What it started while it waited is
// gone for a command that does not take it; one that ended on its own
// leaves the next command to start as usual in the same sandbox.
func TestPoolShellStartedAhead(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	sb := pooledSandbox(t, Options{})
	r := pooledRequest(t, "thread-a")
	withPrelude := func(prelude, script string) Request {
		q := r
		q.Argv, q.Prelude = []string{bash, "-c", prelude + script}, len(prelude)
		return q
	}

	// The prelude leaves a sleep running: in the shell ahead, it runs
	// until a command comes.
	const sleeper = "sleep 4775.5 >/dev/null 2>&1 &\n"
	first := build(t, context.Background(), sb, withPrelude(sleeper, "echo one"))
	box := first.pooled.box
	require.Equal(t, result{out: "one\n"}, runToFile(t, first))
	require.Eventually(t, func() bool { return len(testenv.Processes("sleep 4775.5")) == 1 }, 10*time.Second, 5*time.Millisecond,
		"no shell started ahead ran the prelude")
	// A command without the prelude does not take that shell, and sees
	// nothing of it.
	next := func(q Request) *Cmd {
		t.Helper()
		cmd, err := sb.CommandFor(context.Background(), q)
		require.NoError(t, err)
		require.NotNil(t, cmd.pooled)
		require.Same(t, box, cmd.pooled.box)
		return cmd
	}
	plain := r
	plain.Argv = []string{bash, "-c", `cat /proc/[0-9]*/cmdline | tr '\0' '\n' | grep -c '^sleep$'`}
	cmd := next(plain)
	require.Equal(t, result{exit: 1, out: "0\n"}, runToFile(t, cmd))
	require.Empty(t, testenv.Processes("sleep 4775.5"), "what the shell ahead started outlived it")

	// The age of the shell that runs a command, in ticks of 10 ms (its
	// start in /proc against the uptime): "old" for a shell started more
	// than 150 ms before, as one started ahead and then left for 200 ms.
	const age = `read -r up _ < /proc/uptime; st=$(</proc/$$/stat); set -- ${st##*) }; ` +
		`if (( ${up/./} - ${20} >= 15 )); then echo old; else echo new; fi`
	require.Equal(t, result{out: "new\n"}, runToFile(t, next(withPrelude("true\n", age))))
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, result{out: "old\n"}, runToFile(t, next(withPrelude("true\n", age))), "run by the shell started ahead")

	// A shell ahead that exits before its command comes (its descriptor
	// 3 is open only there): the command starts as usual.
	const quitter = "[ -e /dev/fd/3 ] && exit 5\n"
	require.Equal(t, result{out: "new\n"}, runToFile(t, next(withPrelude(quitter, age))))
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, result{out: "new\n"}, runToFile(t, next(withPrelude(quitter, age))))
	require.True(t, testenv.Alive(box.launcherPid))
}
