package orchestrate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/tools/execsession"
	"github.com/appserver/appserver/internal/tools/shell"
	"github.com/appserver/appserver/internal/turns"
)

// Commands asking for a login shell (shell_command's default, exec_command's
// default) see what the user's profile sets, while the profile runs once
// for all of them: they run from the shell snapshot.
func TestLoginShellsRunFromSnapshot(t *testing.T) {
	sh := shell.DetectUserShell().Path
	if filepath.Base(sh) != "bash" {
		t.Skip("the user's shell is not bash")
	}
	t.Setenv("SHELL", sh) // exec_command's shell
	require.Equal(t, sh, execsession.UserShell())
	home := t.TempDir()
	t.Setenv("HOME", home)
	runs := filepath.Join(home, "runs")
	require.NoError(t, os.WriteFile(filepath.Join(home, ".bash_profile"),
		[]byte(`echo run >> "$HOME/runs"`+"\nexport FROM_PROFILE=profile-value\n"), 0o644))
	s := newService(t, Config{})
	tu := newTurn(t, s, workspace(t), turnOpts{})
	for _, call := range []string{"c1", "c2"} {
		out := tu.fn(call, "exec_command", map[string]any{"cmd": `echo "[$FROM_PROFILE]"`, "yield_time_ms": 5000})
		require.Contains(t, out.Text, "[profile-value]")
	}
	out := tu.fn("c3", "shell_command", map[string]any{"command": `echo "[$FROM_PROFILE]"`})
	require.Contains(t, out.Text, "[profile-value]")
	b, err := os.ReadFile(runs)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(b), "run"), "the profile ran once for three commands")
}

// Each principal (thread originator) has its own snapshots, a sandboxed
// command another one than an unsandboxed command, and a user's shell
// command one of its own: the file a login shell sources differs for each.
func TestSnapshotsPerOriginatorAndKind(t *testing.T) {
	sh := shell.DetectUserShell().Path
	if filepath.Base(sh) != "bash" {
		t.Skip("the user's shell is not bash")
	}
	t.Setenv("HOME", t.TempDir())
	s := newService(t, Config{})
	sourced := func(out string) string {
		t.Helper()
		for _, line := range strings.Split(out, "\n") {
			if p, ok := strings.CutPrefix(line, "sourced="); ok {
				return p
			}
		}
		t.Fatalf("no snapshot sourced: %s", out)
		return ""
	}
	script := `s=${BASH_EXECUTION_STRING%%$'\n'*}; echo "sourced=$s"`
	ws := workspace(t)
	paths := map[string]string{}
	for name, o := range map[string]turnOpts{
		"p1":           {originator: "appserver-http/p1"},
		"p2":           {originator: "appserver-http/p2"},
		"p1 sandboxed": {originator: "appserver-http/p1", sandbox: api.SandboxPolicyWorkspaceWrite},
	} {
		tu := newTurn(t, s, ws, o)
		paths[name] = sourced(tu.fn("c-"+name, "shell_command", map[string]any{"command": script}).Text)
		// The same principal and kind: the same snapshot.
		require.Equal(t, paths[name], sourced(tu.fn("c2-"+name, "shell_command", map[string]any{"command": script}).Text))
	}
	tu := newTurn(t, s, ws, turnOpts{originator: "appserver-http/p1"})
	res, err := s.RunUserShell(context.Background(), tu.tc, turns.UserShellRequest{ItemID: "u1", Command: script, Timeout: 10 * time.Second})
	require.NoError(t, err)
	paths["p1 user shell"] = sourced(res.ModelText)
	seen := map[string]string{}
	for name, p := range paths {
		require.NotContains(t, seen, p, "%s and %s share a snapshot", name, seen[p])
		seen[p] = name
	}
}

// A sandboxed exec_command that comes after another of the same thread
// runs in the shell its pooled sandbox started ahead of it, which has
// sourced the snapshot already (internal/sandbox, aheadShell): the shell
// is older than the pause before the command.
func TestExecCommandInShellStartedAhead(t *testing.T) {
	sh := shell.DetectUserShell().Path
	if filepath.Base(sh) != "bash" {
		t.Skip("the user's shell is not bash")
	}
	t.Setenv("SHELL", sh)
	home := t.TempDir()
	t.Setenv("HOME", home)
	require.NoError(t, os.WriteFile(filepath.Join(home, ".bash_profile"), []byte("export FROM_PROFILE=profile-value\n"), 0o644))
	s := newService(t, Config{SandboxBackend: "bwrap"})
	tu := newTurn(t, s, workspace(t), turnOpts{sandbox: api.SandboxPolicyWorkspaceWrite})
	// The shell's age in ticks of 10 ms (its start in /proc against the
	// uptime), and what the profile set.
	const script = `read -r up _ < /proc/uptime; st=$(</proc/$$/stat); set -- ${st##*) }; echo "age=$(( ${up/./} - ${20} )) [$FROM_PROFILE]"`
	age := func(out string) int {
		t.Helper()
		i := strings.Index(out, "age=")
		require.GreaterOrEqual(t, i, 0, out)
		var n int
		var rest string
		_, err := fmt.Sscanf(out[i:], "age=%d %s", &n, &rest)
		require.NoError(t, err, out)
		require.Equal(t, "[profile-value]", rest)
		return n
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	launcher := exe + " " + sandbox.HelperCommand + " --box"
	i := 0
	call := func(cmd string) string {
		i++
		return tu.fn("call_a"+strconv.Itoa(i), "exec_command", map[string]any{"cmd": cmd, "yield_time_ms": 5000}).Text
	}
	require.Eventually(t, func() bool {
		return strings.Contains(call(`cat /proc/1/cmdline | tr '\0' ' '`), launcher)
	}, time.Minute, 10*time.Millisecond, "no pooled sandbox ran the thread's commands")
	call("true")
	time.Sleep(time.Second)
	require.GreaterOrEqual(t, age(call(script)), 50, "the command ran in a shell started before the pause")
}
