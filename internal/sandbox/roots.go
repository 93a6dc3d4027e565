package sandbox

import (
	"path/filepath"

	"github.com/appserver/appserver/internal/policy"
)

// writableRoots resolves the policy's writable roots for policy cwd pcwd,
// taking $TMPDIR from the command's environment (tmpdir) rather than the
// daemon's, so the bwrap and Landlock backends agree: the Landlock helper
// runs with the command's environment and would see that value too.
func writableRoots(p policy.SandboxPolicy, pcwd, tmpdir string) []policy.WritableRoot {
	if p.Kind != policy.WorkspaceWrite {
		return nil
	}
	q := p
	q.ExcludeTmpdirEnvVar = true
	roots := q.WritableRootsWithCwd(pcwd)
	if !p.ExcludeTmpdirEnvVar && tmpdir != "" && filepath.IsAbs(tmpdir) {
		roots = append(roots, policy.NewWritableRoot(filepath.Clean(tmpdir), false))
	}
	return roots
}
