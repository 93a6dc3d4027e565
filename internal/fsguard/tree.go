package fsguard

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/appserver/appserver/internal/policy"
)

// Op is what a caller means to do with a path.
type Op uint8

// The operations a path is checked for.
const (
	// Read reads, lists, searches or describes.
	Read Op = iota
	// Write creates, changes, removes or renames.
	Write
)

// Tree is one caller's view of the file system under an Access, for a
// series of operations on paths checked once. Resolve checks a path and
// says where it really is; the other methods act on such real paths. Each
// of them checks its path again by name (the masked paths, the roots, the
// read-only subpaths), then opens it below a descriptor of "/" following
// no symlink (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or an
// O_NOFOLLOW walk where the kernel lacks it), and acts on the final
// directory with *at calls. A symlink swapped in after the check makes
// the operation fail with ErrSymlinkAppeared instead of redirecting it. A
// Tree is used by one goroutine and closed by its owner.
type Tree struct {
	g     *Guard
	a     Access
	slash int
	// write is a's write roots with their read-only subpaths, and real
	// a's roots with their symlinks resolved, once needed.
	write []policy.WritableRoot
	real  *realRoots
}

// realRoots are the roots of an Access as they are on disk.
type realRoots struct {
	read  []string
	write []realRoot
}

// realRoot is a write root and its read-only subpaths, both as named and
// resolved.
type realRoot struct {
	root string // resolved
	subs []subpath
}

type subpath struct{ named, real string }

// Tree opens a view of the file system under a. Close it when done.
func (g *Guard) Tree(a Access) (*Tree, error) {
	g = g.or()
	slash, err := g.root()
	if err != nil {
		return nil, err
	}
	return &Tree{g: g, a: a, slash: slash}, nil
}

// Close ends the tree's use; the descriptor of "/" stays with the guard.
func (t *Tree) Close() { t.slash = -1 }

// Roots returns the roots of op, as the Access names them.
func (t *Tree) Roots(op Op) []string { return t.a.roots(op) }

func (t *Tree) deny(p string) Reason { return t.g.deny(&t.a, p) }

// roots resolves the Access's roots, once.
func (t *Tree) roots() *realRoots {
	if t.real != nil {
		return t.real
	}
	r := &realRoots{}
	real := func(p string) string {
		if rp, _, err := resolve(p, nil); err == nil {
			return rp
		}
		return p
	}
	for _, p := range t.a.roots(Read) {
		r.read = append(r.read, real(p))
	}
	for _, w := range t.writeRoots() {
		rr := realRoot{root: real(w.Root)}
		for _, s := range w.ReadOnlySubpaths {
			rr.subs = append(rr.subs, subpath{named: s, real: real(s)})
		}
		r.write = append(r.write, rr)
	}
	t.real = r
	return r
}

// writeRoots returns the Access's write roots, clean and absolute, with
// their read-only subpaths (those the sandbox keeps too, found now, with
// SandboxSubpaths).
func (t *Tree) writeRoots() []policy.WritableRoot {
	if t.write != nil {
		return t.write
	}
	cwd := ""
	if filepath.IsAbs(t.a.Cwd) {
		cwd = filepath.Clean(t.a.Cwd)
	}
	t.write = []policy.WritableRoot{}
	for _, w := range t.a.Write {
		if !filepath.IsAbs(w.Root) {
			continue
		}
		root := filepath.Clean(w.Root)
		var subs []string
		if t.a.SandboxSubpaths {
			subs = policy.NewWritableRoot(root, root == cwd).ReadOnlySubpaths
		}
		for _, s := range w.ReadOnlySubpaths {
			if filepath.IsAbs(s) && !slices.Contains(subs, filepath.Clean(s)) {
				subs = append(subs, filepath.Clean(s))
			}
		}
		t.write = append(t.write, policy.WritableRoot{Root: root, ReadOnlySubpaths: subs})
	}
	return t.write
}

// checkName checks the absolute, clean path p by name for op: not
// refused by the guard, inside a root of op as named, and for writes not
// in a read-only subpath as named.
func (t *Tree) checkName(p string, op Op) error {
	if r := t.deny(p); r != 0 {
		return &Error{Path: p, Reason: r}
	}
	roots := t.a.roots(op)
	if !slices.ContainsFunc(roots, func(r string) bool { return Within(r, p) }) {
		return &Error{Path: p, Reason: OutsideRoots, Roots: roots}
	}
	if op == Write {
		for _, w := range t.writeRoots() {
			for _, s := range w.ReadOnlySubpaths {
				if Within(s, p) {
					return &Error{Path: p, Reason: ReadOnlySubpath, Subpath: s}
				}
			}
		}
	}
	return nil
}

// checkReal checks real, a path with its symlinks resolved that name
// reached, against the roots of op as they are on disk.
func (t *Tree) checkReal(name, real string, op Op) error {
	if r := t.deny(real); r != 0 {
		return &Error{Path: name, Reason: r}
	}
	rr := t.roots()
	if op == Read {
		if !slices.ContainsFunc(rr.read, func(r string) bool { return Within(r, real) }) {
			return &Error{Path: name, Reason: OutsideRoots, Resolved: real, Roots: t.a.roots(op)}
		}
		return nil
	}
	// Writable when some root allows it, as the sandbox has it.
	var sub string
	for _, w := range rr.write {
		if !Within(w.root, real) {
			continue
		}
		blocked := false
		for _, s := range w.subs {
			if Within(s.real, real) || Within(s.named, real) {
				blocked, sub = true, s.named
				break
			}
		}
		if !blocked {
			return nil
		}
	}
	if sub != "" {
		return &Error{Path: name, Reason: ReadOnlySubpath, Subpath: sub}
	}
	return &Error{Path: name, Reason: OutsideRoots, Resolved: real, Roots: t.a.roots(op)}
}

// Target is a path checked by Resolve.
type Target struct {
	// Abs is the path as named, absolute and lexically clean.
	Abs string
	// Real is where it is with every symlink resolved: what a read or a
	// write reaches.
	Real string
	// Entry is the directory entry itself, its final symlink not
	// followed: what a removal removes.
	Entry string
}

// Resolve checks path (absolute, or relative to cwd) for op and returns
// where it is. It is refused (*Error) when it is a masked path or the
// daemon's /proc, or reaches one through symlinks; when it is outside the
// roots of op as named, or its entry or its final target is outside them
// once resolved; and, for writes, when either is in a read-only subpath.
// Other errors are I/O errors of the resolution.
func (t *Tree) Resolve(cwd, path string, op Op) (Target, error) {
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(cwd, abs)
	}
	tg := Target{Abs: filepath.Clean(abs)}
	if err := t.checkName(tg.Abs, op); err != nil {
		return Target{}, err
	}
	real, r, err := resolve(tg.Abs, t.deny)
	if err == nil && r == 0 {
		tg.Real = real
		var parent string
		parent, r, err = resolve(filepath.Dir(tg.Abs), t.deny)
		tg.Entry = filepath.Join(parent, filepath.Base(tg.Abs))
		if tg.Abs == "/" {
			tg.Entry = "/"
		}
	}
	switch {
	case r != 0:
		return Target{}, &Error{Path: tg.Abs, Reason: r}
	case err != nil:
		return Target{}, err
	}
	if err := t.checkReal(tg.Abs, tg.Entry, op); err != nil {
		return Target{}, err
	}
	if err := t.checkReal(tg.Abs, tg.Real, op); err != nil {
		return Target{}, err
	}
	return tg, nil
}

// allow checks a real path before an operation of op on it.
func (t *Tree) allow(p string, op Op) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return fmt.Errorf("fsguard: %q is not an absolute, clean path", p)
	}
	return t.checkReal(p, p, op)
}

// isRoot reports whether the real path p is one of the roots, which are
// never removed, replaced or renamed.
func (t *Tree) isRoot(p string) bool {
	rr := t.roots()
	if slices.Contains(rr.read, p) {
		return true
	}
	return slices.ContainsFunc(rr.write, func(w realRoot) bool { return w.root == p })
}

// mutable checks the real path p before it is removed, replaced or
// renamed: a root is not, nor a directory holding a masked path or a
// read-only subpath (moving it would take them along).
func (t *Tree) mutable(p string) error {
	if err := t.allow(p, Write); err != nil {
		return err
	}
	if t.isRoot(p) {
		return fmt.Errorf("%s is a workspace root", p)
	}
	if t.g.maskedBelow(p) != "" {
		return &Error{Path: p, Reason: DaemonPath}
	}
	for _, w := range t.roots().write {
		for _, s := range w.subs {
			if Within(p, s.real) || Within(p, s.named) {
				return &Error{Path: p, Reason: ReadOnlySubpath, Subpath: s.named}
			}
		}
	}
	return nil
}

func rel(p string) string {
	if p == "/" {
		return "."
	}
	return strings.TrimPrefix(p, "/")
}

// openAt opens the real path p with flags, following no symlink.
func (t *Tree) openAt(p string, flags int, mode uint32) (int, error) {
	fd, err := openBeneath(t.slash, rel(p), flags, mode, t.g.walk)
	if err != nil {
		return -1, noFollow(err)
	}
	// A thread of the daemon may have taken the number of the process
	// checked a moment ago.
	if strings.HasPrefix(p, "/proc/") && t.g.daemonProc(p) {
		_ = unix.Close(fd)
		return -1, &Error{Path: p, Reason: DaemonPath}
	}
	return fd, nil
}

// openParent opens the directory holding the real path p and returns it
// with p's last component.
func (t *Tree) openParent(p string) (int, string, error) {
	if p == "/" {
		return -1, "", errors.New("/ has no parent")
	}
	fd, err := t.openAt(filepath.Dir(p), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	return fd, filepath.Base(p), err
}

// atParent checks the real path p for op (for a change of the entry
// itself when op is Write: see mutable), opens its directory and runs fn
// on it with p's last component.
func (t *Tree) atParent(p string, op Op, fn func(dirfd int, name string) error) error {
	check := t.mutable
	if op == Read {
		check = func(p string) error { return t.allow(p, Read) }
	}
	if err := check(p); err != nil {
		return err
	}
	dirfd, name, err := t.openParent(p)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	return fn(dirfd, name)
}

// Lstat describes the real path p, its final symlink not followed; an
// absent entry is Info{} (KindNone) without error.
func (t *Tree) Lstat(p string) (Info, error) {
	var info Info
	if p == "/" {
		if err := t.allow(p, Read); err != nil {
			return info, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(t.slash, &st); err != nil {
			return info, err
		}
		return infoOf(&st), nil
	}
	err := t.atParent(p, Read, func(dirfd int, name string) (err error) {
		info, err = lstatAt(dirfd, name)
		return err
	})
	return info, err
}

// ReadFile reads the regular file at the real path p, refusing anything
// else (a symlink is not followed) and files larger than limit bytes.
func (t *Tree) ReadFile(p string, limit int64) ([]byte, error) {
	var b []byte
	err := t.atParent(p, Read, func(dirfd int, name string) (err error) {
		b, err = readAt(dirfd, name, limit)
		return err
	})
	return b, err
}

// Readlink returns the target of the symlink at the real path p.
func (t *Tree) Readlink(p string) (string, error) {
	var target string
	err := t.atParent(p, Read, func(dirfd int, name string) error {
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err == nil {
			target = string(buf[:n])
		}
		return err
	})
	return target, err
}

// WriteFile replaces the regular file at the real path p with content, or
// creates it (its directory must exist). The content goes to a new file
// in the same directory renamed over p, so p is never seen half written
// and a hard link at p is not written through; an existing file keeps its
// permission bits and, where allowed, its owner. A directory, a special
// file or a symlink at p is refused.
func (t *Tree) WriteFile(p string, content []byte) error {
	return t.atParent(p, Write, func(dirfd int, name string) error {
		return writeAt(dirfd, name, content)
	})
}

// RestoreFile puts a regular file back at the real path p, with content
// and the permission bits and owner of old (as Lstat described it then),
// replacing whatever entry p is now.
func (t *Tree) RestoreFile(p string, content []byte, old Info) error {
	old.Kind = KindFile
	return t.atParent(p, Write, func(dirfd int, name string) error {
		return replaceAt(dirfd, name, content, old)
	})
}

// Symlink puts a symlink to target at the real path p, replacing whatever
// entry p is now but a directory.
func (t *Tree) Symlink(target, p string) error {
	return t.atParent(p, Write, func(dirfd int, name string) error {
		if err := unix.Unlinkat(dirfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
		return unix.Symlinkat(target, dirfd, name)
	})
}

// Removable checks the real path p before a caller removes it with what
// it holds, entry by entry: what Remove refuses for p itself (a root, a
// directory holding a masked path or a read-only subpath) is refused
// before anything below it is removed.
func (t *Tree) Removable(p string) error { return t.mutable(p) }

// Remove deletes the directory entry at the real path p (a symlink
// itself, not its target); dir says p is an empty directory.
func (t *Tree) Remove(p string, dir bool) error {
	flags := 0
	if dir {
		flags = unix.AT_REMOVEDIR
	}
	return t.atParent(p, Write, func(dirfd int, name string) error {
		return unix.Unlinkat(dirfd, name, flags)
	})
}

// Rename moves the entry at the real path from to the real path to
// (replacing a file there), within one file system.
func (t *Tree) Rename(from, to string) error {
	if err := t.mutable(from); err != nil {
		return err
	}
	if err := t.mutable(to); err != nil {
		return err
	}
	fromfd, fromName, err := t.openParent(from)
	if err != nil {
		return err
	}
	defer unix.Close(fromfd)
	tofd, toName, err := t.openParent(to)
	if err != nil {
		return err
	}
	defer unix.Close(tofd)
	return unix.Renameat(fromfd, fromName, tofd, toName)
}

// MkdirAll makes the directory at the real path dir and the missing ones
// on the way, each below the descriptor of its parent just opened without
// following symlinks, never above the deepest write root holding dir;
// the directories it made are appended to created, outermost first.
func (t *Tree) MkdirAll(dir string, created *[]string) error {
	if err := t.allow(dir, Write); err != nil {
		return err
	}
	fd, err := t.openAt(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err == nil {
		_ = unix.Close(fd)
		return nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return err
	}
	roots := slices.Clone(t.roots().write)
	slices.SortFunc(roots, func(a, b realRoot) int { return len(b.root) - len(a.root) })
	for _, r := range roots {
		if !Within(r.root, dir) {
			continue
		}
		rootfd, err := t.openAt(r.root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return err
		}
		base := strings.TrimSuffix(r.root, "/") + "/"
		fd, err := walkBeneath(rootfd, strings.TrimPrefix(strings.TrimPrefix(dir, r.root), "/"), unix.O_RDONLY|unix.O_DIRECTORY, 0, func(made string) {
			*created = append(*created, base+made)
		})
		_ = unix.Close(rootfd)
		if err != nil {
			return noFollow(err)
		}
		_ = unix.Close(fd)
		return nil
	}
	return unix.ENOENT
}
