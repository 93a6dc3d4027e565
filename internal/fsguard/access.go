package fsguard

import (
	"path/filepath"
	"slices"

	"github.com/appserver/appserver/internal/policy"
)

// Access is what one caller may reach: the roots it may read below, the
// roots it may change below (each with the subpaths that stay read-only),
// and whether it may read the host's /proc. Write roots are readable too.
// Whatever Access says, the daemon's masked paths and its own /proc
// entries stay refused.
type Access struct {
	// Read are absolute directories (or files) the caller may read below;
	// "/" is everything.
	Read []string
	// Write are the roots the caller may change below, minus their
	// read-only subpaths.
	Write []policy.WritableRoot
	// SandboxSubpaths also keeps read-only, below each write root, the
	// subpaths the command sandbox keeps read-only there
	// (policy.NewWritableRoot: .git and the gitdir it names, .agents,
	// .codex), as they are on disk when a write is checked; the root
	// equal to Cwd also keeps a .codex that does not exist yet.
	SandboxSubpaths bool
	// Cwd is the caller's working directory, for SandboxSubpaths.
	Cwd string
	// HostProc lets the caller read the host's /proc, except the daemon's
	// own entries. Sandboxed commands see a /proc of their own, so only
	// threads whose commands run unsandboxed get it.
	HostProc bool
}

// Dirs is the Access of a caller that may read and change everything
// below dirs (absolute), with no read-only subpath.
func Dirs(dirs ...string) Access {
	var a Access
	for _, d := range dirs {
		a.Read = append(a.Read, d)
		a.Write = append(a.Write, policy.WritableRoot{Root: d})
	}
	return a
}

// ForThread is the Access of a thread's own tools under sandbox policy p,
// working directory cwd and the roots granted for the session (patch
// approvals with grantRoot). It follows what the thread's sandboxed
// commands may write, and reads no wider:
//
//   - danger-full-access and external-sandbox: everything, /proc included
//     (their commands run unsandboxed); no read-only subpaths.
//   - workspace-write: the policy's writable roots for cwd (its
//     writable_roots, cwd, /tmp and $TMPDIR unless excluded), with the
//     sandbox's read-only subpaths (.git, .codex, .agents), for reading
//     and writing.
//   - read-only: cwd, with the same read-only subpaths; writes there need
//     the user's approval, which the caller asks for before writing.
//
// Granted roots are added, with their read-only subpaths. Sandboxed
// threads do not read the host's /proc. Nothing is looked up on disk but
// whether /tmp is a directory: the read-only subpaths are found when a
// write is checked.
func ForThread(p policy.SandboxPolicy, cwd string, granted []string) Access {
	if p.HasFullDiskWriteAccess() {
		return Access{Read: []string{"/"}, Write: []policy.WritableRoot{{Root: "/"}}, HostProc: true}
	}
	a := Access{SandboxSubpaths: true, Cwd: cwd}
	dirs := p.WritableRootDirs(cwd)
	if p.Kind != policy.WorkspaceWrite && filepath.IsAbs(cwd) {
		dirs = []string{filepath.Clean(cwd)}
	}
	for _, g := range granted {
		if filepath.IsAbs(g) {
			dirs = append(dirs, filepath.Clean(g))
		}
	}
	for _, d := range dirs {
		if !slices.Contains(a.Read, d) {
			a.Read = append(a.Read, d)
			a.Write = append(a.Write, policy.WritableRoot{Root: d})
		}
	}
	return a
}

// roots returns the roots of op, clean and absolute: for reads the read
// and the write roots, for writes the write roots.
func (a *Access) roots(op Op) []string {
	var out []string
	add := func(r string) {
		if filepath.IsAbs(r) {
			r = filepath.Clean(r)
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	if op == Read {
		for _, r := range a.Read {
			add(r)
		}
	}
	for _, w := range a.Write {
		add(w.Root)
	}
	return out
}
