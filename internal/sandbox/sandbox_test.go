//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
)

// backendBwrapPooled names, in tests only, the bubblewrap backend with
// pooled sandboxes: run and build give its restricted commands a pool key
// and wait until a pooled sandbox runs them, so that every test going
// through forEachBackend covers the pooled sandboxes too.
const backendBwrapPooled Backend = "bwrap-pooled"

// pooledSandboxes are the sandboxes whose restricted commands run pooled.
var pooledSandboxes sync.Map // *Sandbox → struct{}

// backends returns one sandbox per backend usable on this host; bwrap is
// skipped where it is not installed or cannot create namespaces. Each is
// closed when the test ends.
func backends(t testing.TB) map[Backend]*Sandbox {
	t.Helper()
	out := map[Backend]*Sandbox{}
	for _, b := range []Backend{BackendLandlock, BackendBwrap, backendBwrapPooled} {
		sb := newSandbox(t, b, Options{})
		if b == BackendLandlock {
			out[b] = sb
			continue
		}
		if got, err := sb.Backend(); err == nil && got == BackendBwrap {
			out[b] = sb
		} else {
			t.Logf("bubblewrap backend not available here: %v", err)
		}
	}
	return out
}

// newSandbox returns a sandbox of backend b (backendBwrapPooled included)
// with options o, closed when the test ends.
func newSandbox(t testing.TB, b Backend, o Options) *Sandbox {
	t.Helper()
	o.Backend = b
	if b == backendBwrapPooled {
		o.Backend = BackendBwrap
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	sb, err := New(o)
	require.NoError(t, err)
	if b == backendBwrapPooled {
		pooledSandboxes.Store(sb, struct{}{})
	}
	t.Cleanup(sb.Close)
	return sb
}

// forEachBackend runs f once per available backend.
func forEachBackend(t *testing.T, f func(t *testing.T, sb *Sandbox, b Backend)) {
	for b, sb := range backends(t) {
		t.Run(string(b), func(t *testing.T) { f(t, sb, b) })
	}
}

// testWriter writes a sandbox's log to the test's.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

type result struct {
	exit int
	out  string
}

// build builds the command for r with sb. For a pooled sandbox it first
// waits until a pooled sandbox for r's view is ready, and checks that the
// command runs there.
func build(t *testing.T, ctx context.Context, sb *Sandbox, r Request) *Cmd {
	t.Helper()
	if _, pooled := pooledSandboxes.Load(sb); !pooled || !Sandboxed(r.Policy) {
		cmd, err := sb.CommandFor(ctx, r)
		require.NoError(t, err)
		return cmd
	}
	if r.Pool == "" {
		r.Pool = t.Name()
	}
	waitPooled(t, sb, r)
	cmd, err := sb.CommandFor(ctx, r)
	require.NoError(t, err)
	require.NotNil(t, cmd.pooled, "the command must run in a pooled sandbox")
	return cmd
}

// waitPooled runs /bin/true as r until a pooled sandbox runs it.
func waitPooled(t *testing.T, sb *Sandbox, r Request) {
	t.Helper()
	r.Argv = []string{"/bin/true"}
	require.Eventually(t, func() bool {
		cmd, err := sb.CommandFor(context.Background(), r)
		require.NoError(t, err)
		pooled := cmd.pooled != nil
		require.NoError(t, cmd.Run())
		return pooled
	}, time.Minute, 10*time.Millisecond, "no pooled sandbox started")
}

// run builds the command with sb and runs it to completion.
func run(t *testing.T, sb *Sandbox, r Request) result {
	t.Helper()
	if r.Env == nil {
		r.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := build(t, ctx, sb, r)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	code := 0
	if err != nil {
		ws, ok := cmd.WaitStatus()
		require.True(t, ok, "%v; output: %s", err, buf.String())
		code = ws.ExitStatus()
		if ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	return result{exit: code, out: buf.String()}
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

// workspacePolicy is workspace-write with only the workspace writable: the
// test directories live under /tmp, which would otherwise be a root.
func workspacePolicy(network bool) policy.SandboxPolicy {
	return policy.SandboxPolicy{Kind: policy.WorkspaceWrite, NetworkAccess: network, ExcludeSlashTmp: true, ExcludeTmpdirEnvVar: true}
}

func requireDenied(t *testing.T, r result) {
	t.Helper()
	require.NotZero(t, r.exit, "output: %s", r.out)
	require.True(t, policy.LooksLikeSandboxDenial(r.exit, r.out), "not recognised as a denial: exit %d, output %q", r.exit, r.out)
}

func TestWorkspaceWriteInsideSucceeds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, sb *Sandbox, _ Backend) {
		ws := t.TempDir()
		r := run(t, sb, Request{Policy: workspacePolicy(false), Cwd: ws, Argv: sh("echo hi > inside.txt && mkdir sub && mv inside.txt sub/moved.txt")})
		require.Zero(t, r.exit, r.out)
		got, err := os.ReadFile(filepath.Join(ws, "sub", "moved.txt"))
		require.NoError(t, err)
		require.Equal(t, "hi\n", string(got))
	})
}

func TestWorkspaceWriteOutsideFails(t *testing.T) {
	forEachBackend(t, func(t *testing.T, sb *Sandbox, _ Backend) {
		ws, outside := t.TempDir(), t.TempDir()
		target := filepath.Join(outside, "escape.txt")
		r := run(t, sb, Request{Policy: workspacePolicy(false), Cwd: ws, Argv: sh("echo hi > " + target)})
		requireDenied(t, r)
		require.NoFileExists(t, target)
	})
}

func TestWorkspaceWriteRootsFollowPolicyCwdNotCommandCwd(t *testing.T) {
	// The model picks the command's workdir; the writable root stays the
	// turn's cwd, so running "in" another directory does not open it.
	forEachBackend(t, func(t *testing.T, sb *Sandbox, _ Backend) {
		ws, other := t.TempDir(), t.TempDir()
		r := run(t, sb, Request{Policy: workspacePolicy(false), PolicyCwd: ws, Cwd: other, Argv: sh("echo hi > here.txt")})
		requireDenied(t, r)
		require.NoFileExists(t, filepath.Join(other, "here.txt"))
	})
}

func TestWorkspaceWriteExtraRoot(t *testing.T) {
	forEachBackend(t, func(t *testing.T, sb *Sandbox, _ Backend) {
		ws, extra := t.TempDir(), t.TempDir()
		p := workspacePolicy(false)
		p.WritableRoots = []string{extra}
		r := run(t, sb, Request{Policy: p, Cwd: ws, Argv: sh("echo hi > " + filepath.Join(extra, "ok.txt"))})
		require.Zero(t, r.exit, r.out)
		require.FileExists(t, filepath.Join(extra, "ok.txt"))
	})
}

func TestReadOnlyBlocksAllWrites(t *testing.T) {
	forEachBackend(t, func(t *testing.T, sb *Sandbox, _ Backend) {
		ws, outside := t.TempDir(), t.TempDir()
		ro := policy.SandboxPolicy{Kind: policy.ReadOnly}
		for _, target := range []string{filepath.Join(ws, "a.txt"), filepath.Join(outside, "b.txt"), "/tmp/appserver-sandbox-ro-test"} {
			r := run(t, sb, Request{Policy: ro, Cwd: ws, Argv: sh("echo hi > " + target)})
			requireDenied(t, r)
			require.NoFileExists(t, target)
		}
		r := run(t, sb, Request{Policy: ro, Cwd: ws, Argv: sh("mkdir newdir")})
		requireDenied(t, r)
		// Reading still works, and so does writing to /dev/null.
		require.NoError(t, os.WriteFile(filepath.Join(ws, "r.txt"), []byte("readable"), 0o644))
		r = run(t, sb, Request{Policy: ro, Cwd: ws, Argv: sh("cat r.txt; echo x > /dev/null")})
		require.Zero(t, r.exit, r.out)
		require.Equal(t, "readable", r.out)
	})
}

func TestProtectedGitDirIsReadOnlyUnderBwrap(t *testing.T) {
	forEachBackend(t, func(t *testing.T, sb *Sandbox, b Backend) {
		if b == BackendLandlock {
			t.Skip("Landlock cannot keep a subpath of a writable root read-only")
		}
		ws := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755))
		r := run(t, sb, Request{Policy: workspacePolicy(false), Cwd: ws, Argv: sh("echo evil > .git/hooks/pre-commit")})
		requireDenied(t, r)
		require.NoFileExists(t, filepath.Join(ws, ".git", "hooks", "pre-commit"))
		// The rest of the workspace stays writable.
		r = run(t, sb, Request{Policy: workspacePolicy(false), Cwd: ws, Argv: sh("echo ok > file.txt")})
		require.Zero(t, r.exit, r.out)
		// A .git that a command makes (none was there to protect) is
		// read-only for the next command: a pooled sandbox set up
		// before it existed is not used again.
		fresh := t.TempDir()
		r = run(t, sb, Request{Policy: workspacePolicy(false), Cwd: fresh, Argv: sh("mkdir .git && echo ok > .git/config")})
		require.Zero(t, r.exit, r.out)
		r = run(t, sb, Request{Policy: workspacePolicy(false), Cwd: fresh, Argv: sh("echo evil > .git/config")})
		requireDenied(t, r)
		got, err := os.ReadFile(filepath.Join(fresh, ".git", "config"))
		require.NoError(t, err)
		require.Equal(t, "ok\n", string(got))
	})
}

// listen opens a TCP listener on 127.0.0.1 and counts accepted connections.
func listen(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	ch := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ch <- struct{}{}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String(), ch
}

// dialEnv is the environment of a test-binary child that dials addr.
func dialEnv(addr string) []string {
	return []string{childDialEnv + "=" + addr, "GORACE=atexit_sleep_ms=0"}
}

func selfExe(t *testing.T) string {
	exe, err := os.Executable()
	require.NoError(t, err)
	return exe
}

func TestNetworkConnectFailsWhenOff(t *testing.T) {
	forEachBackend(t, func(t *testing.T, sb *Sandbox, _ Backend) {
		addr, accepted := listen(t)
		ws := t.TempDir()
		for _, p := range []policy.SandboxPolicy{workspacePolicy(false), {Kind: policy.ReadOnly}} {
			r := run(t, sb, Request{Policy: p, Cwd: ws, Argv: []string{selfExe(t)}, Env: dialEnv(addr)})
			requireDenied(t, r)
			require.NotContains(t, r.out, "connected")
		}
		select {
		case <-accepted:
			t.Fatal("the listener accepted a connection from a sandbox without network")
		default:
		}
	})
}

func TestNetworkConnectSucceedsWhenOn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, sb *Sandbox, _ Backend) {
		addr, accepted := listen(t)
		r := run(t, sb, Request{Policy: workspacePolicy(true), Cwd: t.TempDir(), Argv: []string{selfExe(t)}, Env: dialEnv(addr)})
		require.Zero(t, r.exit, r.out)
		require.Contains(t, r.out, "connected")
		<-accepted
	})
}

func TestNetworkOffUsesLandlockWithoutNamespace(t *testing.T) {
	// Where namespaces are refused, seccomp and Landlock TCP rules still
	// cut the network; exercise that path explicitly.
	sb, err := New(Options{Backend: BackendLandlock, NoNetNamespace: true})
	require.NoError(t, err)
	require.False(t, sb.NetNamespace())
	addr, accepted := listen(t)
	r := run(t, sb, Request{Policy: workspacePolicy(false), Cwd: t.TempDir(), Argv: []string{selfExe(t)}, Env: dialEnv(addr)})
	requireDenied(t, r)
	select {
	case <-accepted:
		t.Fatal("connection accepted")
	default:
	}
}

func TestDangerFullAccessIsUnrestricted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, sb *Sandbox, _ Backend) {
		ws, outside := t.TempDir(), t.TempDir()
		full := policy.SandboxPolicy{Kind: policy.DangerFullAccess}
		target := filepath.Join(outside, "free.txt")
		r := run(t, sb, Request{Policy: full, Cwd: ws, Argv: sh("echo hi > " + target + " && echo $CODEX_SANDBOX_NETWORK_DISABLED && grep NoNewPrivs /proc/self/status")})
		require.Zero(t, r.exit, r.out)
		require.FileExists(t, target)
		require.Equal(t, "\nNoNewPrivs:\t0\n", r.out)

		addr, accepted := listen(t)
		r = run(t, sb, Request{Policy: full, Cwd: ws, Argv: []string{selfExe(t)}, Env: dialEnv(addr)})
		require.Zero(t, r.exit, r.out)
		<-accepted

		cmd, err := sb.Command(context.Background(), full, ws, []string{"true"}, []string{"PATH=" + os.Getenv("PATH")})
		require.NoError(t, err)
		require.Equal(t, []string{"true"}, cmd.Args, "full access must not go through the helper")
	})
}

func TestRestrictedCommandEnvironment(t *testing.T) {
	forEachBackend(t, func(t *testing.T, sb *Sandbox, _ Backend) {
		ws := t.TempDir()
		env := []string{"PATH=" + os.Getenv("PATH"), "LD_APPSERVER_TEST=kept", "FOO=bar", policy.EnvSandboxNetworkDisabled + "=stale"}
		r := run(t, sb, Request{Policy: workspacePolicy(false), Cwd: ws, Env: env,
			Argv: sh(`echo "$LD_APPSERVER_TEST $FOO $CODEX_SANDBOX_NETWORK_DISABLED"; env | grep -c APPSERVER_SANDBOX_HIDDEN_; grep NoNewPrivs /proc/self/status`)})
		require.Zero(t, r.exit, r.out)
		require.Equal(t, "kept bar 1\n0\nNoNewPrivs:\t1\n", r.out)

		r = run(t, sb, Request{Policy: workspacePolicy(true), Cwd: ws, Env: env, Argv: sh(`echo "[$CODEX_SANDBOX_NETWORK_DISABLED]"`)})
		require.Zero(t, r.exit, r.out)
		require.Equal(t, "[]\n", r.out)
	})
}

func TestCommandNotFound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, sb *Sandbox, _ Backend) {
		_, err := sb.Command(context.Background(), workspacePolicy(false), t.TempDir(), []string{"appserver-no-such-command"}, []string{"PATH=/usr/bin:/bin"})
		require.ErrorIs(t, err, exec.ErrNotFound)
		require.EqualError(t, err, `exec: "appserver-no-such-command": executable file not found in $PATH`)
		_, err = sb.Command(context.Background(), workspacePolicy(false), t.TempDir(), nil, nil)
		require.ErrorIs(t, err, ErrEmptyCommand)
	})
}

func TestCommandUsesCommandPath(t *testing.T) {
	// argv[0] is looked up on the command's PATH, not the daemon's.
	dir := t.TempDir()
	script := filepath.Join(dir, "only-here")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho found\n"), 0o755))
	forEachBackend(t, func(t *testing.T, sb *Sandbox, _ Backend) {
		r := run(t, sb, Request{Policy: workspacePolicy(false), Cwd: t.TempDir(), Argv: []string{"only-here"}, Env: []string{"PATH=" + dir + ":/usr/bin:/bin"}})
		require.Zero(t, r.exit, r.out)
		require.Equal(t, "found\n", r.out)
	})
}

func TestCancelKillsProcessGroup(t *testing.T) {
	forEachBackend(t, func(t *testing.T, sb *Sandbox, _ Backend) {
		ctx, cancel := context.WithCancel(context.Background())
		cmd := build(t, ctx, sb, Request{Policy: workspacePolicy(false), Cwd: t.TempDir(), Argv: sh("sleep 30 & sleep 30; wait"), Env: []string{"PATH=" + os.Getenv("PATH")}})
		require.NoError(t, cmd.Start())
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		cancel()
		err := cmd.Wait()
		require.Error(t, err)
		require.Less(t, time.Since(start), 5*time.Second)
	})
}

func TestHelperOnlyProbes(t *testing.T) {
	require.NoError(t, exec.Command(selfExe(t), HelperCommand, flagProbe).Run())
	var stderr bytes.Buffer
	cmd := exec.Command(selfExe(t), HelperCommand, "--bogus", "x")
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 2, ee.ExitCode())
	require.Equal(t, "appserver sandbox: unexpected arguments [\"--bogus\" \"x\"]\n", stderr.String())
}

func TestBwrapArgs(t *testing.T) {
	ws := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(ws, ".git"), 0o755))
	extra := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(extra, "elsewhere"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(extra, "elsewhere"), filepath.Join(extra, ".codex")))
	missing := filepath.Join(t.TempDir(), "missing")

	ro := bwrapSpec{policy: policy.SandboxPolicy{Kind: policy.ReadOnly}, policyCwd: ws, cwd: ws, mountProc: true, unshareNet: true,
		seccompFD: 3, setenv: [][2]string{{"LD_PRELOAD", "x.so"}}, argv: []string{"true"}}.args()
	require.Equal(t, []string{"--new-session", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev",
		"--cap-drop", "ALL", "--unshare-pid", "--unshare-net", "--proc", "/proc", "--setenv", "LD_PRELOAD", "x.so", "--seccomp", "3",
		"--chdir", ws, "--", "true"}, ro)

	p := workspacePolicy(true)
	p.WritableRoots = []string{extra, missing}
	v := view{
		hidden:   []hiddenPath{{path: filepath.Join(ws, "data"), dir: true}, {path: "/etc/appserver.toml"}},
		readOnly: []hiddenPath{{path: filepath.Join(ws, "data", "shown"), dir: true}},
	}
	got := bwrapSpec{policy: p, policyCwd: ws, cwd: filepath.Join(ws, "sub"), view: v, argv: []string{"ls", "-l"}}.args()
	require.Equal(t, []string{"--new-session", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev",
		"--bind", extra, extra,
		"--bind", ws, ws,
		"--ro-bind", "/dev/null", filepath.Join(extra, ".codex"),
		"--ro-bind", filepath.Join(ws, ".git"), filepath.Join(ws, ".git"),
		"--tmpfs", filepath.Join(ws, "data"),
		"--ro-bind", "/dev/null", "/etc/appserver.toml",
		// Read-only paths over the masks; the tmpfs made read-only after
		// their mount points were made in it.
		"--ro-bind", filepath.Join(ws, "data", "shown"), filepath.Join(ws, "data", "shown"),
		"--remount-ro", filepath.Join(ws, "data"),
		// Without a fresh /proc, the host's must not show through.
		"--cap-drop", "ALL", "--unshare-pid", "--tmpfs", "/proc",
		"--chdir", filepath.Join(ws, "sub"), "--", "ls", "-l"}, got)

	// $TMPDIR comes from the command's environment.
	tmp := t.TempDir()
	p = workspacePolicy(false)
	p.ExcludeTmpdirEnvVar = false
	got = bwrapSpec{policy: p, policyCwd: ws, cwd: ws, tmpdir: tmp, argv: []string{"true"}}.args()
	require.Contains(t, strings.Join(got, " "), "--bind "+tmp+" "+tmp)
}

func TestBwrapNeverSeesLoaderVariables(t *testing.T) {
	sb, ok := backends(t)[BackendBwrap]
	if !ok {
		t.Skip("bubblewrap not available")
	}
	env := []string{"PATH=/usr/bin:/bin", "LD_PRELOAD=/nonexistent/evil.so", "GLIBC_TUNABLES=x", "FOO=bar"}
	cmd, err := sb.Command(context.Background(), workspacePolicy(false), t.TempDir(), []string{"true"}, env)
	require.NoError(t, err)
	for _, kv := range cmd.Env {
		require.False(t, strings.HasPrefix(kv, "LD_") || strings.HasPrefix(kv, "GLIBC_"), "bwrap's own environment has %s", kv)
	}
	args := strings.Join(cmd.Args, " ")
	require.Contains(t, args, "--setenv LD_PRELOAD /nonexistent/evil.so --setenv GLIBC_TUNABLES x")
	require.NoError(t, cmd.Run())
}

func TestRestrictedCommandRefusesDirectStart(t *testing.T) {
	sb, err := New(Options{Backend: BackendLandlock})
	require.NoError(t, err)
	defer sb.Close()
	cmd, err := sb.Command(context.Background(), workspacePolicy(false), t.TempDir(), []string{"true"}, []string{"PATH=/usr/bin:/bin"})
	require.NoError(t, err)
	require.ErrorIs(t, cmd.Cmd.Start(), ErrStartDirectly)
}

// TestRestrictionsStayOnLauncherThreads checks that running restricted
// commands leaves the daemon itself unrestricted: new threads are not
// cloned from launcher threads, and the process can still write anywhere
// and use the network.
func TestRestrictionsStayOnLauncherThreads(t *testing.T) {
	sb, err := New(Options{Backend: BackendLandlock})
	require.NoError(t, err)
	defer sb.Close()
	for i := 0; i < 5; i++ {
		r := run(t, sb, Request{Policy: workspacePolicy(false), Cwd: t.TempDir(), Argv: sh("grep -E 'NoNewPrivs|Seccomp:' /proc/self/status")})
		require.Zero(t, r.exit, r.out)
		require.Equal(t, "NoNewPrivs:\t1\nSeccomp:\t2\n", r.out)
	}
	// Force the runtime to start new threads while launchers exist.
	const n = 16
	var wg sync.WaitGroup
	status := make([]string, n)
	release := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b, err := os.ReadFile("/proc/thread-self/status")
			if err == nil {
				status[i] = string(b)
			}
			<-release
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	for _, s := range status {
		require.Contains(t, s, "NoNewPrivs:\t0\n")
		require.Contains(t, s, "Seccomp:\t0\n")
	}
	// The main thread (what /proc/self shows) is never a launcher.
	main, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	require.Contains(t, string(main), "NoNewPrivs:\t0\n")
	outside := filepath.Join(t.TempDir(), "daemon-can-write")
	require.NoError(t, os.WriteFile(outside, []byte("x"), 0o644))
	addr, accepted := listen(t)
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_ = c.Close()
	<-accepted
}

func TestLandlockRulesFollowReplacedRoot(t *testing.T) {
	sb, err := New(Options{Backend: BackendLandlock})
	require.NoError(t, err)
	defer sb.Close()
	parent := t.TempDir()
	ws := filepath.Join(parent, "ws")
	require.NoError(t, os.Mkdir(ws, 0o755))
	r := run(t, sb, Request{Policy: workspacePolicy(false), Cwd: ws, Argv: sh("echo one > a.txt")})
	require.Zero(t, r.exit, r.out)
	// The same path, another directory: a launcher built for the old one
	// would deny every write.
	require.NoError(t, os.RemoveAll(ws))
	require.NoError(t, os.Mkdir(ws, 0o755))
	r = run(t, sb, Request{Policy: workspacePolicy(false), Cwd: ws, Argv: sh("echo two > a.txt && cat a.txt")})
	require.Zero(t, r.exit, r.out)
	require.Equal(t, "two\n", r.out)
}

func TestLauncherExitsAfterItsChildren(t *testing.T) {
	sb, err := New(Options{Backend: BackendLandlock})
	require.NoError(t, err)
	ws := t.TempDir()
	cmd, err := sb.Command(context.Background(), workspacePolicy(true), ws, sh("sleep 1.5"), []string{"PATH=/usr/bin:/bin"})
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sb.threads.mu.Lock()
	require.Len(t, sb.threads.pool, 1)
	var l *launcher
	for _, l = range sb.threads.pool {
	}
	sb.threads.mu.Unlock()
	sb.Close()
	// The child is alive: Pdeathsig would kill it if the thread left now.
	select {
	case <-l.exited:
		t.Fatal("launcher exited while its child runs")
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, cmd.Wait(), "the child must finish normally")
	select {
	case <-l.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("retired launcher did not exit after its child")
	}
}

func TestNetworkFilterAssembles(t *testing.T) {
	f, err := networkFilter()
	require.NoError(t, err)
	require.Greater(t, len(f), len(deniedNetSyscalls)+8)
	_, err = assemble([]bpfInsn{{code: 0, jt: "nowhere"}})
	require.Error(t, err)
}

func TestParseBackend(t *testing.T) {
	for in, want := range map[string]Backend{"": BackendAuto, "auto": BackendAuto, "landlock": BackendLandlock, "bwrap": BackendBwrap} {
		got, err := ParseBackend(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := ParseBackend("docker")
	require.Error(t, err)
	_, err = New(Options{Backend: "docker"})
	require.Error(t, err)
}

func TestBwrapRequestedButMissing(t *testing.T) {
	sb, err := New(Options{Backend: BackendBwrap, BwrapPath: "/nonexistent/bwrap"})
	require.NoError(t, err)
	_, err = sb.Backend()
	require.Error(t, err)
	_, err = sb.Command(context.Background(), workspacePolicy(false), t.TempDir(), []string{"true"}, []string{"PATH=/usr/bin:/bin"})
	require.Error(t, err)
	// Full access never needs the sandbox, so it still works.
	_, err = sb.Command(context.Background(), policy.SandboxPolicy{Kind: policy.DangerFullAccess}, t.TempDir(), []string{"true"}, []string{"PATH=/usr/bin:/bin"})
	require.NoError(t, err)
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "plain"), []byte("x"), 0o644))

	got, err := lookPath("tool", "/nonexistent:"+dir, "/")
	require.NoError(t, err)
	require.Equal(t, exe, got)
	got, err = lookPath("./tool", "", dir)
	require.NoError(t, err)
	require.Equal(t, exe, got)
	_, err = lookPath("plain", dir, "/")
	require.ErrorIs(t, err, exec.ErrNotFound)
	_, err = lookPath("./plain", "", dir)
	require.Error(t, err)
	require.False(t, errors.Is(err, exec.ErrNotFound))
}

func TestNetworkNamespace(t *testing.T) {
	own, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	forEachBackend(t, func(t *testing.T, sb *Sandbox, b Backend) {
		if b == BackendLandlock && !sb.NetNamespace() {
			t.Skip("network namespaces are not permitted here")
		}
		ws := t.TempDir()
		r := run(t, sb, Request{Policy: workspacePolicy(false), Cwd: ws, Argv: []string{"readlink", "/proc/self/ns/net"}})
		require.Zero(t, r.exit, r.out)
		require.NotEqual(t, own+"\n", r.out, "network off must mean another namespace")
		r = run(t, sb, Request{Policy: workspacePolicy(true), Cwd: ws, Argv: []string{"readlink", "/proc/self/ns/net"}})
		require.Equal(t, own+"\n", r.out)
		// No descriptor (such as the shared namespace's) leaks into the command.
		r = run(t, sb, Request{Policy: workspacePolicy(false), Cwd: ws, Argv: []string{"ls", "-l", "/proc/self/fd"}})
		require.Zero(t, r.exit, r.out)
		require.NotContains(t, r.out, "net:[")
	})
}

// TestBashDoesNotTakeStdinForANetworkConnection runs `bash -c` under every
// restricted policy with a ~/.bashrc that announces itself: bash reads it
// for a non-interactive shell only when it believes its standard input is
// a remote-shell connection, which a seccomp filter answering getpeername
// with EPERM made it believe for every sandboxed command without network.
func TestBashDoesNotTakeStdinForANetworkConnection(t *testing.T) {
	bash, err := exec.LookPath("bash")
	require.NoError(t, err, "bash is needed by this test")
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, ".bashrc"), []byte("echo bashrc-was-read\n"), 0o644))
	forEachBackendAndPolicy(t, func(t *testing.T, b Backend, p policy.SandboxPolicy) {
		sb := backends(t)[b]
		defer sb.Close()
		r := run(t, sb, Request{Policy: p, Cwd: t.TempDir(), Argv: []string{bash, "-c", "echo hi"}, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home}})
		require.Zero(t, r.exit, r.out)
		require.Equal(t, "hi\n", r.out)
	})
}
