package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/appserver/appserver/internal/policy"
)

// bwrapSpec is one bubblewrap invocation.
type bwrapSpec struct {
	policy     policy.SandboxPolicy
	policyCwd  string // writable roots are resolved against it
	cwd        string // the command's directory
	tmpdir     string // the command's $TMPDIR
	mountProc  bool   // mount a fresh /proc for the new PID namespace
	view       view   // hidden and read-only paths
	unshareNet bool   // new network namespace (else the caller's)
	seccompFD  int    // descriptor with the seccomp program; 0: none
	asPid1     bool   // argv is the PID namespace's init (a pooled sandbox's launcher)
	setenv     [][2]string
	argv       []string
}

// args builds the bubblewrap arguments (after argv[0]): the file-system
// view (mounts), then namespaces, capabilities, environment, seccomp and
// the command.
func (b bwrapSpec) args() []string {
	args, _ := b.mounts()
	// bubblewrap run by root keeps most capabilities for the command: a
	// root command could then load modules or open files by handle
	// around the masks above.
	args = append(args, "--cap-drop", "ALL", "--unshare-pid")
	if b.asPid1 {
		args = append(args, "--as-pid-1")
	}
	if b.unshareNet {
		args = append(args, "--unshare-net")
	}
	if b.mountProc {
		args = append(args, "--proc", "/proc")
	} else {
		// The host's /proc would show the daemon (its environment, its
		// pid to signal): where no fresh /proc can be mounted, none.
		args = append(args, "--tmpfs", "/proc")
	}
	for _, kv := range b.setenv {
		args = append(args, "--setenv", kv[0], kv[1])
	}
	if b.seccompFD > 0 {
		args = append(args, "--seccomp", strconv.Itoa(b.seccompFD))
	}
	args = append(args, "--chdir", b.cwd, "--")
	return append(args, b.argv...)
}

// mounts returns the arguments that build the file-system view, in the
// reference's mount order: read-only root, a minimal /dev, writable roots
// bound on top, then protected subpaths bound read-only again so they win,
// then the daemon's hidden paths masked on top of everything. It also
// returns the identities (fileIdentity) of the directories and links they
// bind, which a pooled sandbox's key includes: a path recreated since
// needs another sandbox.
//
// A protected subpath that is a symlink inside a writable root is masked by
// binding /dev/null over the link, so it cannot be re-pointed. A protected
// path that does not exist yet (a missing .codex) is not masked: bubblewrap
// would have to create the mount point in the user's workspace and leave it
// behind, and concurrent commands would race on removing it.
func (b bwrapSpec) mounts() (args, ids []string) {
	args = []string{"--new-session", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev"}
	roots := writableRoots(b.policy, b.policyCwd, b.tmpdir)
	var bound []string
	for _, r := range roots {
		if fi, err := os.Stat(r.Root); err != nil || !fi.IsDir() {
			continue
		}
		args = append(args, "--bind", r.Root, r.Root)
		bound = append(bound, r.Root)
		ids = append(ids, fileIdentity(r.Root, true))
	}
	seen := map[string]bool{}
	for _, r := range roots {
		for _, sub := range r.ReadOnlySubpaths {
			if seen[sub] || !under(sub, bound) {
				continue
			}
			seen[sub] = true
			if link := symlinkIn(sub, bound); link != "" {
				args = append(args, "--ro-bind", "/dev/null", link)
				ids = append(ids, fileIdentity(link, false))
				continue
			}
			if _, err := os.Lstat(sub); err != nil {
				continue
			}
			args = append(args, "--ro-bind", sub, sub)
			ids = append(ids, fileIdentity(sub, true))
		}
	}
	// Last, so a writable root bound inside a hidden directory is covered
	// too. A hidden directory's tmpfs is made read-only only after the
	// read-only paths are bound: bubblewrap creates their mount points in
	// it.
	for _, h := range b.view.hidden {
		if h.dir {
			args = append(args, "--tmpfs", h.path)
		} else {
			args = append(args, "--ro-bind", "/dev/null", h.path)
		}
	}
	for _, r := range b.view.readOnly {
		args = append(args, "--ro-bind", r.path, r.path)
	}
	for _, h := range b.view.hidden {
		if h.dir {
			args = append(args, "--remount-ro", h.path)
		}
	}
	return args, ids
}

// under reports whether p is one of roots or below one of them.
func under(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

// symlinkIn returns the first component of p that is a symlink lying under
// a writable root, or "".
func symlinkIn(p string, roots []string) string {
	cur := "/"
	for _, part := range strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/") {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			return ""
		}
		if fi.Mode()&os.ModeSymlink != 0 && under(cur, roots) {
			return cur
		}
	}
	return ""
}

// probeBwrap checks that bwrap can build its namespaces here (user
// namespaces may be disabled; containers may refuse a fresh /proc). It
// reports whether /proc can be mounted and whether bwrap is usable at all.
func probeBwrap(bwrap string) (mountProc, ok bool) {
	try := func(proc bool) bool {
		args := []string{"--new-session", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--unshare-net"}
		if proc {
			args = append(args, "--proc", "/proc")
		}
		args = append(args, "--", "/bin/sh", "-c", ":")
		cmd := exec.Command(bwrap, args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		return cmd.Run() == nil
	}
	if try(true) {
		return true, true
	}
	if try(false) {
		return false, true
	}
	return false, false
}
