//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
)

// daemonSecretEnv is set, in the environment the test binary starts with,
// only when TestCommandsCannotSeeOrSignalTheDaemon re-executes itself to
// play the daemon: the secret is then in /proc/<pid>/environ, as a
// provider key is in the real daemon's.
const daemonSecretEnv = "APPSERVER_SANDBOX_TEST_DAEMON_SECRET"

const daemonSecret = "sk-daemon-secret-4711"

// restrictedPolicies are the sandbox modes under which commands get an OS
// sandbox: read-only, workspace-write without and with network.
func restrictedPolicies() map[string]policy.SandboxPolicy {
	return map[string]policy.SandboxPolicy{
		"read-only":           {Kind: policy.ReadOnly},
		"workspace-write":     workspacePolicy(false),
		"workspace-write-net": workspacePolicy(true),
	}
}

// forEachBackendAndPolicy runs f for every available backend with every
// restricted policy.
func forEachBackendAndPolicy(t *testing.T, f func(t *testing.T, b Backend, p policy.SandboxPolicy)) {
	for b := range backends(t) {
		t.Run(string(b), func(t *testing.T) {
			for name, p := range restrictedPolicies() {
				t.Run(name, func(t *testing.T) { f(t, b, p) })
			}
		})
	}
}

// TestCommandsCannotSeeOrSignalTheDaemon runs, in a child test process
// whose environment holds a secret, sandboxed commands that try to read
// that process's environment through /proc (by $PPID, by pid and by every
// thread id, launcher threads included) and to SIGKILL it. The child
// fails if any secret shows or any signal is accepted; it would die if
// the kill went through.
func TestCommandsCannotSeeOrSignalTheDaemon(t *testing.T) {
	if os.Getenv(daemonSecretEnv) == "" {
		cmd := exec.Command(selfExe(t), "-test.run=^TestCommandsCannotSeeOrSignalTheDaemon$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), daemonSecretEnv+"="+daemonSecret, "GORACE=atexit_sleep_ms=0")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "the daemon stand-in failed or was killed:\n%s", out)
		require.Contains(t, string(out), "--- PASS: TestCommandsCannotSeeOrSignalTheDaemon")
		return
	}
	environ, err := os.ReadFile("/proc/self/environ")
	require.NoError(t, err)
	require.Contains(t, string(environ), daemonSecret, "the secret must be in the environment the test reads back")
	pid := os.Getpid()
	forEachBackend(t, func(t *testing.T, sb *Sandbox, b Backend) {
		defer sb.Close()
		for name, p := range restrictedPolicies() {
			t.Run(name, func(t *testing.T) {
				ws := t.TempDir()
				// Start the launcher first so its thread is among the
				// targets.
				require.Zero(t, run(t, sb, Request{Policy: p, Cwd: ws, Argv: []string{"true"}}).exit)
				// The daemon's pid and thread ids as the daemon sees
				// them; $PPID is whatever the command sees as its parent.
				ids := []string{fmt.Sprint(pid)}
				tasks, err := os.ReadDir("/proc/self/task")
				require.NoError(t, err)
				for _, e := range tasks {
					ids = append(ids, e.Name())
				}
				script := fmt.Sprintf(`echo "ppid=$PPID"
for id in $PPID %[1]s; do
  cat /proc/$id/environ /proc/%[2]d/task/$id/environ 2>/dev/null | tr '\0' '\n' | grep -F %[3]s
done
for id in %[1]s; do
  if kill -0 $id 2>/dev/null; then echo "signal accepted by $id"; fi
done
for id in %[1]s; do kill -KILL $id 2>/dev/null; done
echo done`, strings.Join(ids, " "), pid, daemonSecret)
				r := run(t, sb, Request{Policy: p, Cwd: ws, Argv: sh(script)})
				require.Zero(t, r.exit, r.out)
				require.NotContains(t, r.out, daemonSecret)
				require.NotContains(t, r.out, "signal accepted")
				require.NotContains(t, r.out, fmt.Sprintf("ppid=%d", pid))
				require.Contains(t, r.out, "done")
				if b == BackendLandlock && sb.abi >= 6 {
					// Scoped signals: not even the namespace's init,
					// which is outside the command's Landlock domain.
					r = run(t, sb, Request{Policy: p, Cwd: ws, Argv: sh("kill -0 1")})
					require.NotZero(t, r.exit, r.out)
					require.Contains(t, r.out, "Operation not permitted")
				}
			})
		}
	})
}

// TestDaemonStateHiddenFromCommands gives the sandbox the daemon's data
// directory (a database, a rules file), config file and token file, all
// inside the workspace so workspace-write would otherwise make them
// writable, and checks that no restricted command reads, changes, adds,
// removes or moves any of them, while the rest of the workspace stays
// writable.
func TestDaemonStateHiddenFromCommands(t *testing.T) {
	forEachBackendAndPolicy(t, func(t *testing.T, b Backend, p policy.SandboxPolicy) {
		ws := t.TempDir()
		data := filepath.Join(ws, "data")
		require.NoError(t, os.MkdirAll(filepath.Join(data, "rules"), 0o700))
		files := map[string]string{
			filepath.Join(data, "appserver.db"):           "principal-b-private-message",
			filepath.Join(data, "rules", "default.rules"): "# rules\n",
			filepath.Join(ws, "config.toml"):              "provider-key-in-config",
			filepath.Join(ws, "ws.token"):                 "capability-token-secret",
		}
		for f, content := range files {
			require.NoError(t, os.WriteFile(f, []byte(content), 0o600))
		}
		// A symlink to the data directory is what the
		// configuration names: the real directory is hidden.
		link := filepath.Join(t.TempDir(), "data-link")
		require.NoError(t, os.Symlink(data, link))
		sb := newSandbox(t, b, Options{Hidden: []string{link, filepath.Join(ws, "config.toml"), filepath.Join(ws, "ws.token"), filepath.Join(ws, "missing")}})
		script := `cat data/appserver.db data/rules/default.rules config.toml ws.token
echo 'prefix_rule(pattern=["touch"], decision="allow")' >> data/rules/default.rules
echo 'prefix_rule(pattern=["touch"], decision="allow")' > data/rules/evil.rules
echo x >> config.toml; echo x > ws.token; printf "" > data/appserver.db
rm -rf data/rules; mv data moved; rm -f config.toml ws.token
echo "block devices: $(find /dev -type b 2>/dev/null | wc -l)"
grep CapEff /proc/self/status
echo ok > elsewhere.txt && echo "wrote elsewhere"
true`
		r := run(t, sb, Request{Policy: p, Cwd: ws, Argv: sh(script)})
		require.Zero(t, r.exit, r.out)
		for f, content := range files {
			require.NotContains(t, r.out, strings.TrimSpace(content))
			got, err := os.ReadFile(f)
			require.NoError(t, err, "%s must survive", f)
			require.Equal(t, content, string(got), "%s must be unchanged", f)
		}
		require.NoFileExists(t, filepath.Join(data, "rules", "evil.rules"))
		require.NoDirExists(t, filepath.Join(ws, "moved"))
		require.Contains(t, r.out, "block devices: 0\nCapEff:\t0000000000000000\n")
		if p.Kind == policy.WorkspaceWrite {
			require.Contains(t, r.out, "wrote elsewhere")
		}
	})
}

// TestLandlockInitEndsWithItsLauncher checks that the PID namespace's init
// of a Landlock launcher goes when the launcher retires, taking along a
// process a command left behind.
func TestLandlockInitEndsWithItsLauncher(t *testing.T) {
	sb, err := New(Options{Backend: BackendLandlock})
	require.NoError(t, err)
	// An unusual duration names the orphan for pgrep.
	r := run(t, sb, Request{Policy: workspacePolicy(false), Cwd: t.TempDir(), Argv: sh("sleep 4711.25 >/dev/null 2>&1 &")})
	require.Zero(t, r.exit, r.out)
	require.NoError(t, exec.Command("pgrep", "-fx", "sleep 4711.25").Run(), "the orphan must be running")
	sb.threads.mu.Lock()
	var l *launcher
	for _, l = range sb.threads.pool {
	}
	sb.threads.mu.Unlock()
	require.NotNil(t, l)
	sb.Close()
	select {
	case <-l.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("launcher did not exit")
	}
	require.Eventually(t, func() bool { return exec.Command("pgrep", "-fx", "sleep 4711.25").Run() != nil }, 5*time.Second, 50*time.Millisecond,
		"an orphan outlived its launcher's PID namespace")
}

func TestHiddenPathOptions(t *testing.T) {
	wd, err := os.Getwd()
	require.NoError(t, err)
	sb, err := New(Options{Hidden: []string{"", "data", "/etc/appserver.toml"}})
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(wd, "data"), "/etc/appserver.toml"}, sb.opts.Hidden)
	_, err = New(Options{Hidden: []string{"/"}})
	require.Error(t, err, "hiding / would hide everything")
}

// TestReadOnlyPathsOverMasks shows a directory inside the hidden data
// directory read-only (as the daemon shows its login-shell snapshots):
// restricted commands read what it holds, a file added after their
// launcher was set up included, but cannot append to, replace, remove,
// re-link or add anything in it, nor see the rest of the data directory,
// although the workspace around it is a writable root.
func TestReadOnlyPathsOverMasks(t *testing.T) {
	forEachBackendAndPolicy(t, func(t *testing.T, b Backend, p policy.SandboxPolicy) {
		ws := t.TempDir()
		data := filepath.Join(ws, "data")
		shown := filepath.Join(data, "shell")
		require.NoError(t, os.MkdirAll(shown, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(data, "appserver.db"), []byte("private-db"), 0o600))
		snap := filepath.Join(shown, "snap.sh")
		require.NoError(t, os.WriteFile(snap, []byte("export FROM_SNAPSHOT=1\n"), 0o600))
		sb := newSandbox(t, b, Options{Hidden: []string{data}, ReadOnly: []string{shown}})

		r := run(t, sb, Request{Policy: p, Cwd: ws, Argv: sh(`. data/shell/snap.sh; echo "sourced=$FROM_SNAPSHOT"; cat data/appserver.db; echo "data holds: $(ls data)"`)})
		require.Contains(t, r.out, "sourced=1")
		require.NotContains(t, r.out, "private-db")
		require.Contains(t, r.out, "data holds: shell\n")

		// Added after the first command: a Landlock launcher set
		// up then still shows it.
		later := filepath.Join(shown, "later.sh")
		require.NoError(t, os.WriteFile(later, []byte("export LATER=2\n"), 0o600))
		script := `. data/shell/later.sh; echo "later=$LATER"
echo 'touch ` + filepath.Join(ws, "pwned") + `' >> data/shell/snap.sh
printf 'touch pwned\n' > data/shell/new.sh
printf 'touch pwned\n' > evil.sh && mv -f evil.sh data/shell/snap.sh
ln -sf /etc/passwd data/shell/later.sh
rm -f data/shell/snap.sh; mv data/shell data/moved; rmdir data/shell
true`
		r = run(t, sb, Request{Policy: p, Cwd: ws, Argv: sh(script)})
		require.Zero(t, r.exit, r.out)
		require.Contains(t, r.out, "later=2")
		got, err := os.ReadFile(snap)
		require.NoError(t, err)
		require.Equal(t, "export FROM_SNAPSHOT=1\n", string(got))
		fi, err := os.Lstat(later)
		require.NoError(t, err)
		require.True(t, fi.Mode().IsRegular(), "later.sh was re-linked")
		require.NoFileExists(t, filepath.Join(shown, "new.sh"))
		require.NoFileExists(t, filepath.Join(ws, "pwned"))
		require.NoDirExists(t, filepath.Join(data, "moved"))
	})
}

// TestHideAfterStart hides a Unix socket created after the sandbox ran
// commands (a listener the daemon opens later): a command with network
// access connects to it before Hide, and cannot after.
func TestHideAfterStart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, sb *Sandbox, _ Backend) {
		ws := t.TempDir()
		r := run(t, sb, Request{Policy: workspacePolicy(true), Cwd: ws, Argv: sh("true")})
		require.Zero(t, r.exit, r.out)
		sock := filepath.Join(t.TempDir(), "appserver.sock")
		ln, err := net.Listen("unix", sock)
		require.NoError(t, err)
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
			}
		}()
		for _, p := range []policy.SandboxPolicy{workspacePolicy(true), {Kind: policy.ReadOnly, NetworkAccess: true}} {
			r = run(t, sb, Request{Policy: p, Cwd: ws, Argv: []string{selfExe(t)}, Env: dialEnv("unix:" + sock)})
			require.Contains(t, r.out, "connected", "the socket is reachable before Hide")
		}
		require.NoError(t, sb.Hide(sock))
		require.NoError(t, sb.Hide(sock), "hiding twice is harmless")
		for _, p := range []policy.SandboxPolicy{workspacePolicy(true), {Kind: policy.ReadOnly, NetworkAccess: true}} {
			r = run(t, sb, Request{Policy: p, Cwd: ws, Argv: []string{selfExe(t)}, Env: dialEnv("unix:" + sock)})
			require.NotZero(t, r.exit, r.out)
			require.NotContains(t, r.out, "connected")
		}
		require.Error(t, sb.Hide("relative"))
		require.Error(t, sb.Hide(filepath.Join(ws, "missing")))
	})
}

// TestNetworkRefused checks Options.NetworkRefused: sandboxed commands
// with network access are refused with the reason, those without run, and
// so do unsandboxed ones.
func TestNetworkRefused(t *testing.T) {
	sb, err := New(Options{NetworkRefused: "the daemon listens without authentication (set ws_auth)"})
	require.NoError(t, err)
	defer sb.Close()
	ws := t.TempDir()
	for _, p := range []policy.SandboxPolicy{workspacePolicy(true), {Kind: policy.ReadOnly, NetworkAccess: true}} {
		_, err := sb.CommandFor(context.Background(), Request{Policy: p, Cwd: ws, Argv: sh("true")})
		require.ErrorIs(t, err, ErrNetworkRefused)
		require.ErrorContains(t, err, "set ws_auth")
	}
	for _, p := range []policy.SandboxPolicy{workspacePolicy(false), {Kind: policy.ReadOnly}, {Kind: policy.DangerFullAccess}} {
		r := run(t, sb, Request{Policy: p, Cwd: ws, Argv: sh("true")})
		require.Zero(t, r.exit, r.out)
	}
}
