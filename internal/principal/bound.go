package principal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
)

// Settings are what a request leaves a thread with, as Bound checks them:
// its working directory, its policies and any other directory it names.
type Settings struct {
	// Cwd is the thread's absolute working directory; "" when nothing
	// chose one (a new thread), which Bound fills with the principal's
	// first root.
	Cwd string
	// Sandbox is the thread's sandbox policy. SandboxAsked is set when
	// the request chose it, SandboxParam names the parameter it came
	// through ("sandbox", "sandboxPolicy", "permissions", ...).
	Sandbox      api.SandboxPolicy
	SandboxAsked bool
	SandboxParam string
	// Approval is the thread's approval policy; ApprovalAsked is set when
	// the request chose it.
	Approval      api.AskForApproval
	ApprovalAsked bool
	// Paths are other directories the request names that a thread could
	// work in (runtimeWorkspaceRoots, skill directories): each must lie
	// inside the roots like the cwd.
	Paths []Path
}

// Path is a directory a request names, with the parameter it came in.
type Path struct {
	Param string
	Path  string
}

// Bound checks s against the principal's ceiling and workspace roots and
// completes it: the cwd, the writable roots and Paths come back resolved
// (symlinks followed, so the thread works in the directory that was
// checked), a missing cwd becomes the principal's first root (created
// when it is the default one), and policies the request did not choose
// are lowered to the ceiling. What the request chose beyond the ceiling or
// outside the roots is refused with an apperr.Forbidden error naming the
// parameter and the limit. The operator's settings come back unchanged.
func (p Principal) Bound(s *Settings) error {
	if p.IsOperator() {
		return nil
	}
	if s.Cwd == "" {
		root, err := p.defaultRoot()
		if err != nil {
			return err
		}
		s.Cwd = root
	} else {
		cwd, err := p.inside("cwd", s.Cwd)
		if err != nil {
			return err
		}
		s.Cwd = cwd
	}
	for i, path := range s.Paths {
		res, err := p.inside(path.Param, path.Path)
		if err != nil {
			return err
		}
		s.Paths[i].Path = res
	}
	if s.Sandbox.Type == api.SandboxPolicyWorkspaceWrite && len(s.Sandbox.WritableRoots) > 0 {
		param := s.SandboxParam
		if param == "" {
			param = "sandbox"
		}
		kept := make([]string, 0, len(s.Sandbox.WritableRoots))
		for i, root := range s.Sandbox.WritableRoots {
			res, err := p.inside(fmt.Sprintf("%s.writableRoots[%d]", param, i), root)
			if err != nil {
				if s.SandboxAsked {
					return err
				}
				continue // a root the thread had, now out of bounds: dropped
			}
			kept = append(kept, res)
		}
		s.Sandbox.WritableRoots = kept
	}
	return p.rules.ceiling.boundPolicy(s)
}

// CheckPath resolves a directory a request names outside of a thread's
// settings (param names it in the error) and checks it lies inside the
// principal's roots; the operator's comes back as given.
func (p Principal) CheckPath(param, path string) (string, error) {
	if p.IsOperator() {
		return path, nil
	}
	return p.inside(param, path)
}

// DefaultRoot is the directory a principal's thread works in when the
// request names none, created when it is the default one; "" for the
// operator.
func (p Principal) DefaultRoot() (string, error) {
	if p.IsOperator() {
		return "", nil
	}
	return p.defaultRoot()
}

func (p Principal) defaultRoot() (string, error) {
	root := p.rules.roots[p.name][0]
	if p.rules.defaults[p.name] {
		// The parent may be shared by every principal: only the
		// principal's own directory is its root.
		if err := os.MkdirAll(filepath.Dir(root), 0o700); err != nil {
			return "", apperr.Wrap(apperr.Unavailable, err, "cannot create the principals' workspace directory")
		}
		if err := os.Mkdir(root, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", apperr.Wrap(apperr.Unavailable, err, "cannot create the workspace of %s", p)
		}
	}
	return resolve(root), nil
}

// inside resolves path and checks it lies inside one of the principal's
// roots and reaches none of the daemon's own files.
func (p Principal) inside(param, path string) (string, error) {
	roots := p.rules.roots[p.name]
	if !filepath.IsAbs(path) {
		return "", forbidden("%s %q is not an absolute path inside this principal's workspace roots (%s)", param, path, strings.Join(roots, ", "))
	}
	res := resolve(path)
	shown := fmt.Sprintf("%q", path)
	if res != filepath.Clean(path) {
		shown = fmt.Sprintf("%q (resolved to %q)", path, res)
	}
	in := false
	for _, root := range roots {
		if within(res, resolve(root)) {
			in = true
			break
		}
	}
	if !in {
		return "", forbidden("%s %s is outside this principal's workspace roots (%s)", param, shown, strings.Join(roots, ", "))
	}
	// A root that resolves around the daemon's state (its symlink was
	// re-pointed after start-up) still never reaches it.
	for _, r := range p.rules.reserved {
		rr := resolve(r)
		if within(res, rr) || within(rr, res) {
			return "", forbidden("%s %s reaches the daemon's own files, which no principal may use", param, shown)
		}
	}
	return res, nil
}

// resolve is path with its symlinks followed, as far as it exists: the
// missing rest is joined to the real path of its longest existing prefix.
// path is cleaned first, so ".." is taken lexically, as it is once the
// resolved path is what the thread uses.
func resolve(path string) string {
	p := filepath.Clean(path)
	rest := ""
	for {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(real, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest)
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// within reports whether p is root or lies below it (both clean).
func within(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}
