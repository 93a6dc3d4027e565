package applypatch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/policy"
)

// No patch writes, deletes or moves a file of the daemon's own state (its
// exec-policy rules, its user config overlay): named directly, relatively
// with "..", or through a symlink in the workspace, under a workspace-write
// thread whose writable roots hold the data directory (/tmp) and under
// full access alike. Nothing is written, and the model is told why.
func TestPatchesNeverTouchTheDaemonsFiles(t *testing.T) {
	base := t.TempDir()
	ws, data := filepath.Join(base, "ws"), filepath.Join(base, "data")
	writeTree(t, ws, map[string]string{"a.txt": "a\n"})
	writeTree(t, data, map[string]string{"rules/default.rules": "", "user-config.toml": "model = \"x\"\n"})
	require.NoError(t, os.Symlink(data, filepath.Join(ws, "state")))
	g, err := fsguard.New(fsguard.Config{Masked: []string{data}})
	require.NoError(t, err)
	before := readTree(t, base)
	overlay := filepath.Join(data, "user-config.toml")
	for name, a := range map[string]fsguard.Access{
		"workspace-write":    fsguard.ForThread(policy.SandboxPolicy{Kind: policy.WorkspaceWrite, WritableRoots: []string{base}}, ws, nil),
		"danger-full-access": fsguard.ForThread(policy.SandboxPolicy{Kind: policy.DangerFullAccess}, ws, nil),
	} {
		for _, hunk := range []string{
			"*** Add File: " + filepath.Join(data, "rules", "evil.rules") + "\n+prefix_rule(pattern=[\"rm\"], decision=\"allow\")\n",
			"*** Add File: ../data/rules/evil.rules\n+x\n",
			"*** Add File: state/rules/evil.rules\n+x\n",
			"*** Update File: " + overlay + "\n@@\n-model = \"x\"\n+sandbox_mode = \"danger-full-access\"\n",
			"*** Update File: state/user-config.toml\n@@\n-model = \"x\"\n+model = \"y\"\n",
			"*** Delete File: " + overlay + "\n",
			"*** Update File: a.txt\n*** Move to: " + filepath.Join(data, "rules", "x.rules") + "\n@@\n-a\n+b\n",
			"*** Update File: " + overlay + "\n*** Move to: stolen.toml\n@@\n-model = \"x\"\n+model = \"x\"\n",
		} {
			_, err := applyScoped(t, ws, Scope{Guard: g, Access: a}, "*** Begin Patch\n"+hunk+"*** End Patch")
			require.Error(t, err, "%s: %s", name, hunk)
			assert.Equal(t, ErrProtected, KindOf(err), "%s: %s: %v", name, hunk, err)
			assert.Contains(t, err.Error(), "is a protected path of the daemon", hunk)
			assert.True(t, strings.HasPrefix(err.Error(), "apply_patch verification failed: access denied: `"), err.Error())
		}
	}
	assert.Equal(t, before, readTree(t, base), "a file changed")
}

// A sandboxed thread's patch does not write where its sandbox keeps
// files read-only (.git, .codex); under full access it does.
func TestPatchesKeepReadOnlySubpaths(t *testing.T) {
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{".git/config": "[core]\n", "a.txt": "a\n"})
	patch := "*** Begin Patch\n*** Update File: .git/config\n@@\n-[core]\n+[core]\n+\tfsmonitor = evil\n*** End Patch"
	ww := fsguard.ForThread(policy.SandboxPolicy{Kind: policy.WorkspaceWrite}, ws, nil)
	_, err := applyScoped(t, ws, Scope{Access: ww}, patch)
	require.Equal(t, ErrProtected, KindOf(err), "%v", err)
	assert.Equal(t, "apply_patch verification failed: access denied: `"+filepath.Join(ws, ".git", "config")+"` is in `"+filepath.Join(ws, ".git")+"`, which stays read-only in this thread's sandbox", err.Error())
	_, err = applyScoped(t, ws, Scope{Access: ww}, "*** Begin Patch\n*** Add File: .codex/config.toml\n+x\n*** End Patch")
	require.Equal(t, ErrProtected, KindOf(err), "%v", err)
	assert.Equal(t, map[string]string{".git/": "", ".git/config": "[core]\n", "a.txt": "a\n"}, readTree(t, ws))

	_, err = applyScoped(t, ws, Scope{Access: fsguard.ForThread(policy.SandboxPolicy{Kind: policy.DangerFullAccess}, ws, nil)}, patch)
	require.NoError(t, err)
}
