package applypatch

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// errSymlinkMet is a symlink found where the checked path had none: the
// workspace changed after the check, and the symlink is not followed.
var errSymlinkMet = errors.New("a symlink appeared on the path after it was checked; apply_patch does not follow it")

// rootDirs reaches the files of a workspace through descriptors of its
// roots. Every operation resolves its path below the descriptor of the
// root that contains it, following no symlink and no "..", and then acts
// on the final directory's descriptor with *at calls, so the path that was
// checked is the one used: a directory swapped for a symlink in between
// makes the operation fail instead of redirecting it. Paths given to it
// are real paths (every symlink resolved by confine) inside the roots.
// A rootDirs is used by one goroutine and closed by its owner.
type rootDirs struct {
	ws  workspace
	fds map[string]int // real root → open descriptor
}

func openRoots(ws workspace) *rootDirs {
	return &rootDirs{ws: ws, fds: map[string]int{}}
}

func (r *rootDirs) close() {
	for _, fd := range r.fds {
		_ = unix.Close(fd)
	}
	clear(r.fds)
}

// errNoRoot is a path below no workspace root that can be opened.
var errNoRoot = errors.New("not below an existing workspace root")

// locate returns the descriptor of the deepest existing root containing
// the real path p, and p relative to it ("." for the root itself).
func (r *rootDirs) locate(p string) (int, string, error) {
	roots := slices.Clone(r.ws.real)
	slices.SortFunc(roots, func(a, b string) int { return len(b) - len(a) })
	for _, root := range roots {
		if !within(root, p) {
			continue
		}
		fd, err := r.root(root)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return -1, "", err
		}
		rel, err := filepath.Rel(root, p)
		return fd, rel, err
	}
	return -1, "", errNoRoot
}

// root opens a root, itself walked from "/" without following symlinks
// (its real path has none).
func (r *rootDirs) root(real string) (int, error) {
	if fd, ok := r.fds[real]; ok {
		return fd, nil
	}
	slash, err := openRetry(func() (int, error) {
		return unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return -1, err
	}
	defer unix.Close(slash)
	rel := strings.TrimPrefix(real, "/")
	if rel == "" {
		rel = "."
	}
	fd, err := openBeneath(slash, rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, noFollow(err)
	}
	r.fds[real] = fd
	return fd, nil
}

// openBeneath opens rel (clean and relative, without "..") below dirfd
// without following any symlink, the last component with flags. The
// returned descriptor is the caller's to close.
func openBeneath(dirfd int, rel string, flags int, mode uint32) (int, error) {
	// ENOTDIR is also what O_DIRECTORY makes of a symlink; the walk tells
	// the two apart.
	if fd, ok, err := openat2Beneath(dirfd, rel, flags, mode); ok && err != unix.ENOTDIR {
		return fd, err
	}
	return walkBeneath(dirfd, rel, flags, mode, nil)
}

// walkBeneath is openBeneath one component at a time, each opened with
// O_NOFOLLOW below its parent's descriptor. With mkdir set, it creates
// the missing directories on the way (rel then names a directory) and
// calls mkdir with the path, relative to dirfd, of each one it made.
func walkBeneath(dirfd int, rel string, flags int, mode uint32, mkdir func(rel string)) (int, error) {
	fd := dirfd
	parts := strings.Split(rel, "/")
	for i, c := range parts {
		if c == ".." || (c == "" && len(parts) > 1) {
			if fd != dirfd {
				_ = unix.Close(fd)
			}
			return -1, unix.EXDEV
		}
		f, m := unix.O_RDONLY|unix.O_DIRECTORY, uint32(0)
		if i == len(parts)-1 {
			f, m = flags, mode
		}
		open := func() (int, error) {
			return unix.Openat(fd, c, f|unix.O_NOFOLLOW|unix.O_CLOEXEC, m)
		}
		next, err := openRetry(open)
		if mkdir != nil && err == unix.ENOENT {
			switch err = unix.Mkdirat(fd, c, 0o777); err {
			case nil:
				mkdir(strings.Join(parts[:i+1], "/"))
				fallthrough
			case unix.EEXIST:
				next, err = openRetry(open)
			}
		}
		if err == unix.ENOTDIR && isSymlinkAt(fd, c) {
			err = unix.ELOOP
		}
		if fd != dirfd {
			_ = unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

func isSymlinkAt(dirfd int, name string) bool {
	e, err := lstatAt(dirfd, name)
	return err == nil && e.kind == unix.S_IFLNK
}

// openRetry retries an open interrupted by a signal, as package os does.
func openRetry(open func() (int, error)) (int, error) {
	for {
		fd, err := open()
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// noFollow names the refusal to follow a symlink.
func noFollow(err error) error {
	if errors.Is(err, unix.ELOOP) {
		return errSymlinkMet
	}
	return err
}

// openDir opens the directory at the real path dir.
func (r *rootDirs) openDir(dir string) (int, error) {
	rootfd, rel, err := r.locate(dir)
	if err != nil {
		return -1, err
	}
	fd, err := openBeneath(rootfd, rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	return fd, noFollow(err)
}

// openParent opens the directory holding the real path p and returns it
// with p's last component.
func (r *rootDirs) openParent(p string) (int, string, error) {
	if r.isRoot(p) {
		return -1, "", fmt.Errorf("%s is a workspace root", p)
	}
	fd, err := r.openDir(filepath.Dir(p))
	return fd, filepath.Base(p), err
}

func (r *rootDirs) isRoot(p string) bool { return slices.Contains(r.ws.real, p) }

// mkdirAll opens the directory dir, creating the missing ones on the way
// (each below the descriptor of its parent, just opened without following
// symlinks) and appending them to created, outermost first.
func (r *rootDirs) mkdirAll(dir string, created *[]string) (int, error) {
	fd, err := r.openDir(dir)
	if !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	rootfd, rel, err := r.locate(dir)
	if err != nil {
		return -1, err
	}
	root := strings.TrimSuffix(dir, rel)
	fd, err = walkBeneath(rootfd, rel, unix.O_RDONLY|unix.O_DIRECTORY, 0, func(made string) {
		*created = append(*created, root+made)
	})
	return fd, noFollow(err)
}

// entry is what a directory entry holds, its symlink not followed.
type entry struct {
	kind     uint32 // S_IFREG, S_IFDIR, S_IFLNK, ... ; 0 when absent
	perm     uint32
	uid, gid uint32
	size     int64
}

// lstatAt describes name in dirfd, or returns a zero entry if it is absent.
func lstatAt(dirfd int, name string) (entry, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return entry{}, nil
		}
		return entry{}, err
	}
	return entry{kind: uint32(st.Mode) & unix.S_IFMT, perm: uint32(st.Mode) & 0o777, uid: st.Uid, gid: st.Gid, size: st.Size}, nil
}

// readAt reads the regular file name in dirfd, refusing anything that is
// not a regular file when opened (a FIFO swapped in cannot block it).
func readAt(dirfd int, name string, limit int64) ([]byte, error) {
	fd, err := openRetry(func() (int, error) {
		return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, noFollow(err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("file is too large to patch (%d bytes; the limit is %d)", fi.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("file is too large to patch (more than %d bytes)", limit)
	}
	return b, nil
}

// state is what the real path p holds, for the plan: a missing file, a
// directory, a special file, or a regular file and its content.
func (r *rootDirs) state(p string) (fileState, error) {
	if r.isRoot(p) {
		fd, err := r.openDir(p)
		if errors.Is(err, unix.ENOENT) {
			return fileState{}, nil
		}
		if err != nil {
			return fileState{}, err
		}
		_ = unix.Close(fd)
		return fileState{exists: true, dir: true}, nil
	}
	dirfd, name, err := r.openParent(p)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return fileState{}, nil
	}
	if err != nil {
		return fileState{}, err
	}
	defer unix.Close(dirfd)
	e, err := lstatAt(dirfd, name)
	switch {
	case err != nil:
		return fileState{}, err
	case e.kind == 0:
		return fileState{}, nil
	case e.kind == unix.S_IFDIR:
		return fileState{exists: true, dir: true}, nil
	case e.kind == unix.S_IFLNK:
		return fileState{}, errSymlinkMet
	case e.kind != unix.S_IFREG:
		return fileState{exists: true, special: true}, nil
	case e.size > MaxFileSize:
		return fileState{}, fmt.Errorf("file is too large to patch (%d bytes; the limit is %d)", e.size, MaxFileSize)
	}
	b, err := readAt(dirfd, name, MaxFileSize)
	if err != nil {
		return fileState{}, err
	}
	return fileState{exists: true, content: string(b)}, nil
}

// snapshot reads what the real path p holds, symlink not followed, for
// rollback.
func (r *rootDirs) snapshot(p string) (snapshot, error) {
	s := snapshot{path: p}
	dirfd, name, err := r.openParent(p)
	if errors.Is(err, unix.ENOENT) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	defer unix.Close(dirfd)
	e, err := lstatAt(dirfd, name)
	switch {
	case err != nil:
		return s, err
	case e.kind == 0:
		return s, nil
	case e.kind == unix.S_IFLNK:
		buf := make([]byte, 4096) // PATH_MAX on Linux
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return s, err
		}
		s.exists, s.link = true, string(buf[:n])
		return s, nil
	case e.kind != unix.S_IFREG:
		return s, fmt.Errorf("%s is not a regular file", p)
	}
	if s.content, err = readAt(dirfd, name, MaxFileSize); err != nil {
		return s, err
	}
	s.exists, s.perm, s.uid, s.gid = true, e.perm, e.uid, e.gid
	return s, nil
}

// writeAt replaces the regular file name in dirfd with content. The
// content goes to a new file in dirfd that is then renamed over name: no
// open by name can be redirected, and the file is never seen half
// written. An existing file keeps its permission bits and, where allowed,
// its owner; a symlink at name is refused rather than followed.
func writeAt(dirfd int, name string, content []byte) error {
	e, err := lstatAt(dirfd, name)
	switch {
	case err != nil:
		return err
	case e.kind == unix.S_IFDIR:
		return unix.EISDIR
	case e.kind == unix.S_IFLNK:
		return errSymlinkMet
	case e.kind != 0 && e.kind != unix.S_IFREG:
		return fmt.Errorf("%s is not a regular file", name)
	}
	return replaceAt(dirfd, name, content, e)
}

// replaceAt writes content to a temporary file in dirfd and renames it
// over name; old, when it describes an existing file, gives the new one
// its permissions and owner.
func replaceAt(dirfd int, name string, content []byte, old entry) error {
	var tmp string
	var fd int
	for range 16 {
		var rnd [8]byte
		for i := range rnd {
			rnd[i] = byte(rand.Uint32())
		}
		tmp = ".apply_patch." + hex.EncodeToString(rnd[:]) + ".tmp"
		var err error
		fd, err = openRetry(func() (int, error) {
			return unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666)
		})
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EEXIST) {
			return err
		}
		fd = -1
	}
	if fd < 0 {
		return unix.EEXIST
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err := f.Write(content)
	if err == nil && old.kind != 0 {
		// Best effort: only root may give a file away, and the daemon
		// usually owns what it edits anyway.
		_ = f.Chown(int(old.uid), int(old.gid))
		err = f.Chmod(os.FileMode(old.perm))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dirfd, tmp, dirfd, name)
	}
	if err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
	}
	return err
}

// remove deletes the directory entry at p (a symlink itself, not its
// target); dir says p is an empty directory.
func (r *rootDirs) remove(p string, dir bool) error {
	dirfd, name, err := r.openParent(p)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	flags := 0
	if dir {
		flags = unix.AT_REMOVEDIR
	}
	return unix.Unlinkat(dirfd, name, flags)
}

// restore puts a snapshot back.
func (r *rootDirs) restore(s snapshot) error {
	if !s.exists {
		if err := r.remove(s.path, false); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
		return nil
	}
	dirfd, name, err := r.openParent(s.path)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	if s.link != "" {
		if err := unix.Unlinkat(dirfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
		return unix.Symlinkat(s.link, dirfd, name)
	}
	return replaceAt(dirfd, name, s.content, entry{kind: unix.S_IFREG, perm: s.perm, uid: s.uid, gid: s.gid})
}
