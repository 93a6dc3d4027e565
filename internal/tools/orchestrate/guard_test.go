package orchestrate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/fsguard"
)

// A patch's roots are the turn's, whatever directory the model runs it in:
// `cd <outside> && apply_patch` and a shell call's workdir do not make the
// outside writable, so such a patch is refused and writes nothing.
func TestPatchRootsComeFromTheTurn(t *testing.T) {
	ws, outside := workspace(t), workspace(t)
	wsOnly := &api.SandboxPolicy{Type: api.SandboxPolicyWorkspaceWrite, ExcludeSlashTmp: true, ExcludeTmpdirEnvVar: true}
	for name, args := range map[string]map[string]any{
		"cd":      {"command": []string{"bash", "-lc", "cd " + outside + " && apply_patch <<'EOF'\n" + addHello + "\nEOF"}},
		"workdir": {"command": []string{"apply_patch", addHello}, "workdir": outside},
	} {
		t.Run(name, func(t *testing.T) {
			s := newService(t, Config{Models: modelShell("m", "default")})
			tu := newTurn(t, s, ws, turnOpts{approval: "never", policy: wsOnly, model: "m"})
			out := tu.fn("call_p", "shell", args)
			require.False(t, out.Succeeded(), out.Text)
			require.Contains(t, out.Text, "is outside the workspace roots ("+ws+")")
			require.NoFileExists(t, filepath.Join(outside, "hello.txt"))
		})
	}
}

// The file tools the service builds go through its guard: the daemon's
// masked paths are refused to every thread, a sandboxed thread reads its
// roots only, and the tools still work inside them.
func TestFileToolsGoThroughTheGuard(t *testing.T) {
	ws, data, outside := workspace(t), workspace(t), workspace(t)
	require.NoError(t, os.WriteFile(filepath.Join(data, "appserver.db"), []byte("s3cret"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "notes.txt"), []byte("s3cret"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "a.txt"), []byte("s3cret\n"), 0o600))
	g, err := fsguard.New(fsguard.Config{Masked: []string{data}})
	require.NoError(t, err)
	s := newService(t, Config{Guard: g})
	wsOnly := &api.SandboxPolicy{Type: api.SandboxPolicyWorkspaceWrite, ExcludeSlashTmp: true, ExcludeTmpdirEnvVar: true}
	for _, o := range []turnOpts{{policy: wsOnly}, {sandbox: api.SandboxPolicyReadOnly}, {sandbox: api.SandboxPolicyDangerFullAccess}} {
		tu := newTurn(t, s, ws, o)
		db := filepath.Join(data, "appserver.db")
		for _, call := range []struct {
			name string
			args map[string]any
		}{
			{"read_file", map[string]any{"file_path": db}},
			{"list_dir", map[string]any{"dir_path": data}},
			{"grep_files", map[string]any{"pattern": "s3cret", "path": data}},
			{"view_image", map[string]any{"path": db}},
		} {
			out := tu.fn("call_"+call.name, call.name, call.args)
			require.False(t, out.Succeeded(), "%s: %s", call.name, out.Text)
			require.Contains(t, out.Text, "is a protected path of the daemon", call.name)
		}
		out := tu.fn("call_out", "read_file", map[string]any{"file_path": filepath.Join(outside, "notes.txt")})
		require.Equal(t, o.sandbox == api.SandboxPolicyDangerFullAccess, out.Succeeded(), out.Text)
		out = tu.fn("call_in", "grep_files", map[string]any{"pattern": "s3cret"})
		require.True(t, out.Succeeded(), out.Text)
		require.Equal(t, filepath.Join(ws, "a.txt"), strings.TrimSpace(out.Text))
	}
}
