package fsguard

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The single-step entry points below are what tools and client methods
// call with a caller's Access: each checks path and acts on it in one go,
// race-free (the path is opened below "/" following no symlink, after the
// check of what it names or, through symlinks, resolves to). Paths are
// absolute. A refusal is an *Error; other failures are *fs.PathError
// values naming the path.

// open opens path for op with flags (O_NOFOLLOW and O_CLOEXEC added) and
// returns the descriptor and the real path opened. It first opens the path
// as named, which succeeds only when no component is a symlink, so the
// checks by name are the checks of the real path; when a symlink is met,
// it resolves the path, checks where it leads, and opens that.
func (g *Guard) open(ctx context.Context, a Access, path string, flags int, mode uint32, op Op) (int, string, error) {
	if err := ctx.Err(); err != nil {
		return -1, "", err
	}
	if !filepath.IsAbs(path) {
		return -1, "", &fs.PathError{Op: "open", Path: path, Err: errors.New("not an absolute path")}
	}
	t, err := g.Tree(a)
	if err != nil {
		return -1, "", err
	}
	defer t.Close()
	abs := filepath.Clean(path)
	if err := t.checkName(abs, op); err != nil {
		return -1, "", err
	}
	fd, err := t.openAt(abs, flags, mode)
	if !errors.Is(err, ErrSymlinkAppeared) {
		return fd, abs, pathError("open", abs, err)
	}
	tg, err := t.Resolve("/", abs, op)
	if err != nil {
		return -1, "", err
	}
	fd, err = t.openAt(tg.Real, flags, mode)
	return fd, tg.Real, pathError("open", abs, err)
}

func pathError(op, path string, err error) error {
	if err == nil {
		return nil
	}
	var denied *Error
	if errors.As(err, &denied) {
		return err
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}

// OpenRead opens the regular file at path for reading, when a may read
// it. Directories are refused with EISDIR, other non-regular files with
// ErrNotRegular (opening them is what could block).
func (g *Guard) OpenRead(ctx context.Context, a Access, path string) (*os.File, error) {
	fd, real, err := g.open(ctx, a, path, unix.O_RDONLY|unix.O_NONBLOCK, 0, Read)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, pathError("stat", path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		_ = unix.Close(fd)
		return nil, pathError("read", path, syscall.EISDIR)
	default:
		_ = unix.Close(fd)
		return nil, pathError("open", path, ErrNotRegular)
	}
	// Blocking reads from here on, for package os (O_NONBLOCK was the
	// only status flag set).
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0); err != nil {
		_ = unix.Close(fd)
		return nil, pathError("open", path, err)
	}
	return os.NewFile(uintptr(fd), real), nil
}

// Stat describes what path names, its symlinks followed (within the
// roots), when a may read it.
func (g *Guard) Stat(ctx context.Context, a Access, path string) (fs.FileInfo, error) {
	fd, _, err := g.open(ctx, a, path, unix.O_PATH, 0, Read)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), filepath.Base(path))
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, pathError("stat", path, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		// O_PATH|O_NOFOLLOW opened a final symlink itself: it is
		// resolved and checked like the others.
		t, err := g.Tree(a)
		if err != nil {
			return nil, err
		}
		defer t.Close()
		tg, err := t.Resolve("/", path, Read)
		if err != nil {
			return nil, err
		}
		fd, err := t.openAt(tg.Real, unix.O_PATH, 0)
		if err != nil {
			return nil, pathError("stat", path, err)
		}
		f := os.NewFile(uintptr(fd), filepath.Base(path))
		defer f.Close()
		fi, err = f.Stat()
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			err = ErrSymlinkAppeared
		}
		if err != nil {
			return nil, pathError("stat", path, err)
		}
	}
	return fi, nil
}

// ReadDir lists the directory at path, when a may read it, sorted by
// name. Entries the guard refuses (masked paths, the daemon's /proc
// entries, the host's /proc without HostProc) are left out.
func (g *Guard) ReadDir(ctx context.Context, a Access, path string) ([]fs.DirEntry, error) {
	fd, real, err := g.open(ctx, a, path, unix.O_RDONLY|unix.O_DIRECTORY, 0, Read)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), real)
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, pathError("readdir", path, err)
	}
	g = g.or()
	out := des[:0]
	for _, de := range des {
		if g.deny(&a, filepath.Join(real, de.Name())) == 0 {
			out = append(out, de)
		}
	}
	slices.SortFunc(out, func(x, y fs.DirEntry) int { return strings.Compare(x.Name(), y.Name()) })
	return out, nil
}

// OpenWrite opens the file at path for writing (O_WRONLY with flag, e.g.
// O_CREATE|O_TRUNC or O_APPEND), creating it with perm when flag asks,
// when a may change it. A final symlink is followed only to a file a may
// change; only regular files are opened.
func (g *Guard) OpenWrite(ctx context.Context, a Access, path string, flag int, perm fs.FileMode) (*os.File, error) {
	fd, real, err := g.open(ctx, a, path, unix.O_WRONLY|unix.O_NONBLOCK|flag, uint32(perm.Perm()), Write)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = unix.Close(fd)
		if err == nil {
			err = ErrNotRegular
		}
		return nil, pathError("open", path, err)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		_ = unix.Close(fd)
		return nil, pathError("open", path, err)
	}
	return os.NewFile(uintptr(fd), real), nil
}

// Mkdir makes the directory at path (its parent must exist), when a may
// change it.
func (g *Guard) Mkdir(ctx context.Context, a Access, path string, perm fs.FileMode) error {
	return g.step(ctx, a, path, "mkdir", func(t *Tree, tg Target) error {
		return t.atParent(tg.Real, Write, func(dirfd int, name string) error {
			return unix.Mkdirat(dirfd, name, uint32(perm.Perm()))
		})
	})
}

// Remove removes the file, symlink (itself, not its target) or empty
// directory at path, when a may change it. A root is not removed.
func (g *Guard) Remove(ctx context.Context, a Access, path string) error {
	return g.step(ctx, a, path, "remove", func(t *Tree, tg Target) error {
		err := t.Remove(tg.Entry, false)
		if errors.Is(err, unix.EISDIR) {
			err = t.Remove(tg.Entry, true)
		}
		return err
	})
}

// Rename moves the entry at from to to (replacing a file there), when a
// may change both. A root, or a directory holding a masked path or a
// read-only subpath, is not moved.
func (g *Guard) Rename(ctx context.Context, a Access, from, to string) error {
	return g.step(ctx, a, from, "rename", func(t *Tree, src Target) error {
		if !filepath.IsAbs(to) {
			return &fs.PathError{Op: "rename", Path: to, Err: errors.New("not an absolute path")}
		}
		dst, err := t.Resolve("/", to, Write)
		if err != nil {
			return err
		}
		return t.Rename(src.Entry, dst.Entry)
	})
}

// step checks path for a write and runs do on it in a fresh Tree.
func (g *Guard) step(ctx context.Context, a Access, path, op string, do func(*Tree, Target) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !filepath.IsAbs(path) {
		return &fs.PathError{Op: op, Path: path, Err: errors.New("not an absolute path")}
	}
	t, err := g.Tree(a)
	if err != nil {
		return err
	}
	defer t.Close()
	tg, err := t.Resolve("/", path, Write)
	if err != nil {
		return err
	}
	return pathError(op, path, do(t, tg))
}

// CheckName checks the absolute path for op by name alone: refused when
// it is a masked path or below one, the daemon's /proc (or the host's
// without HostProc), outside a's roots as named or, for a write, in a
// read-only subpath as named. Nothing is looked up on disk, so it is for
// paths learned from the file system itself (a watched directory's
// events), not for opening: the other entry points also check where a
// path's symlinks lead.
func (g *Guard) CheckName(a Access, path string, op Op) error {
	if !filepath.IsAbs(path) {
		return &fs.PathError{Op: "check", Path: path, Err: errors.New("not an absolute path")}
	}
	t := &Tree{g: g.or(), a: a, slash: -1}
	return t.checkName(filepath.Clean(path), op)
}
