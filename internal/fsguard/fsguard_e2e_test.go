package fsguard_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// The tools the daemon runs in its own process, through a real turn on
// the fake model: read_file, list_dir, grep_files and view_image of the
// websocket token file, the store, the config file, /etc/shadow and
// /proc/self/environ, and apply_patch to <data_dir>/rules and to the user
// config overlay, are all refused with a reason the model can read, and
// nothing is written. The data directory and the token file live under
// /tmp, a writable root of workspace-write threads; under full access the
// daemon's files stay refused all the same.
func TestToolsNeverTouchTheDaemonsFiles(t *testing.T) {
	apptest.NeedTools(t, "rg")
	ws := apptest.Workspace(t)
	dataDir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	etc, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	tokenFile := filepath.Join(etc, "ws.token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600))
	cfgFile := filepath.Join(etc, "config.toml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("# s3cret\nmodel = \"fake-model\"\n"), 0o600))
	db := filepath.Join(dataDir, "appserver.db")
	rules := filepath.Join(dataDir, "rules", "evil.rules")
	overlay := filepath.Join(dataDir, "user-config.toml")

	targets := map[string]string{"token": tokenFile, "db": db, "config": cfgFile, "shadow": "/etc/shadow", "environ": "/proc/self/environ"}
	sandboxes := []string{"workspace-write", "danger-full-access"}
	var steps []string
	for _, sandbox := range sandboxes {
		var calls []string
		add := func(call map[string]any) {
			b, err := json.Marshal(call)
			require.NoError(t, err)
			calls = append(calls, string(b))
		}
		for what, path := range targets {
			if what == "shadow" && sandbox == "danger-full-access" {
				continue // full access reads anywhere but the daemon's own
			}
			// The pattern does not spell the secret, so that the model's
			// requests hold it only if a tool leaked it.
			add(map[string]any{"call_id": "read_" + what, "name": "read_file", "arguments": map[string]any{"file_path": path}})
			add(map[string]any{"call_id": "list_" + what, "name": "list_dir", "arguments": map[string]any{"dir_path": path}})
			add(map[string]any{"call_id": "grep_" + what, "name": "grep_files", "arguments": map[string]any{"pattern": "s3c.et", "path": path}})
			add(map[string]any{"call_id": "view_" + what, "name": "view_image", "arguments": map[string]any{"path": path}})
		}
		add(map[string]any{"type": "custom", "call_id": "patch_rules", "name": "apply_patch",
			"input": "*** Begin Patch\n*** Add File: " + rules + "\n+prefix_rule(pattern=[\"bash\"], decision=\"allow\")\n*** End Patch\n"})
		add(map[string]any{"type": "custom", "call_id": "patch_overlay", "name": "apply_patch",
			"input": "*** Begin Patch\n*** Add File: " + overlay + "\n+sandbox_mode = \"danger-full-access\"\n*** End Patch\n"})
		steps = append(steps, `{"match":{"user_text":"`+sandbox+`"},"tool_calls":[`+strings.Join(calls, ",")+`]}`,
			`{"match":{"call_output":"patch_overlay"},"text":"done"}`)
	}
	script := `{"steps":[` + strings.Join(steps, ",") + `]}`

	fake := apptest.StartFake(t, script)
	args := append([]string{"--data-dir", dataDir, "--config", cfgFile, "--ws-auth", "capability-token", "--ws-token-file", tokenFile}, apptest.FakeArgs(fake, "responses")...)
	d := apptest.Start(t, args...)
	r := apptest.MustDial(t, d.Addr, http.Header{"Authorization": {"Bearer s3cret-token"}})
	r.Initialize(nil)

	protected := func(path string) string {
		return "access denied: `" + path + "` is a protected path of the daemon (its own data, configuration, credentials or process); no tool may read or change it"
	}
	for turn, sandbox := range sandboxes {
		threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws, "sandbox": sandbox, "approvalPolicy": "never"})
		apptest.Turn(t, r, apptest.Input(threadID, sandbox), nil)
		req := 2*turn + 1
		for what, path := range targets {
			for _, tool := range []string{"read", "list", "grep", "view"} {
				if what == "shadow" && sandbox == "danger-full-access" {
					continue
				}
				out := apptest.ModelOutput(t, fake, req, tool+"_"+what)
				switch {
				case what == "shadow":
					require.True(t, strings.HasPrefix(out, "access denied: `/etc/shadow` is outside the workspace roots ("+ws+", "), "%s %s: %s", tool, what, out)
				default:
					require.Equal(t, protected(path), out, "%s %s under %s", tool, what, sandbox)
				}
			}
		}
		require.Equal(t, "apply_patch verification failed: "+protected(rules), apptest.ModelOutput(t, fake, req, "patch_rules"), sandbox)
		require.Equal(t, "apply_patch verification failed: "+protected(overlay), apptest.ModelOutput(t, fake, req, "patch_overlay"), sandbox)
	}
	require.NoFileExists(t, rules)
	require.NoFileExists(t, overlay)
	for i, req := range fake.Requests() {
		require.NotContains(t, string(req.Body), "s3cret", "request %d carries a secret", i)
	}
}
