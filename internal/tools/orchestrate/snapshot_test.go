package orchestrate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/tools/execsession"
	"github.com/appserver/appserver/internal/tools/shell"
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
