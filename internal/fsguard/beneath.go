package fsguard

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrSymlinkAppeared is a symlink met where the checked path had none:
// the file system changed after the check, and the symlink is not
// followed.
var ErrSymlinkAppeared = errors.New("a symlink appeared on the path after it was checked; it is not followed")

// ErrNotRegular is a file that is not a regular file (a FIFO, a device,
// a socket) where one was expected: opening or reading it could block.
var ErrNotRegular = errors.New("not a regular file")

// openBeneath opens rel (clean and relative, without "..") below dirfd
// without following any symlink, the last component with flags. walk
// forces the component walk. The returned descriptor is the caller's to
// close.
func openBeneath(dirfd int, rel string, flags int, mode uint32, walk bool) (int, error) {
	if !walk {
		// ENOTDIR is also what O_DIRECTORY makes of a symlink; the walk
		// tells the two apart.
		if fd, ok, err := openat2Beneath(dirfd, rel, flags, mode); ok && err != unix.ENOTDIR {
			return fd, err
		}
	}
	return walkBeneath(dirfd, rel, flags, mode, nil)
}

// walkBeneath is openBeneath one component at a time, each opened with
// O_NOFOLLOW below its parent's descriptor. With mkdir set, it creates
// the missing directories on the way (rel then names a directory) and
// calls mkdir with the path, relative to dirfd, of each one it made.
func walkBeneath(dirfd int, rel string, flags int, mode uint32, mkdir func(rel string)) (int, error) {
	if rel == "." {
		rel = ""
	}
	fd := dirfd
	if rel == "" {
		// dirfd itself, as a descriptor of its own.
		return openRetry(func() (int, error) {
			return unix.Openat(dirfd, ".", flags|unix.O_CLOEXEC, mode)
		})
	}
	parts := strings.Split(rel, "/")
	for i, c := range parts {
		if c == ".." || c == "" || c == "." {
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
	return err == nil && e.Kind == KindSymlink
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
		return ErrSymlinkAppeared
	}
	return err
}

// Kind is the type of a directory entry.
type Kind uint8

// The kinds of entries.
const (
	// KindNone is an entry that does not exist.
	KindNone Kind = iota
	// KindFile is a regular file.
	KindFile
	// KindDir is a directory.
	KindDir
	// KindSymlink is a symlink (never followed by Lstat).
	KindSymlink
	// KindOther is a FIFO, a socket or a device.
	KindOther
)

// Info is what a directory entry is, its symlink not followed.
type Info struct {
	// Kind is the entry's type; KindNone when it is absent.
	Kind Kind
	// Perm are its permission bits.
	Perm uint32
	// UID and GID own it.
	UID, GID uint32
	// Size is its size in bytes.
	Size int64
}

func infoOf(st *unix.Stat_t) Info {
	kind := KindOther
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		kind = KindFile
	case unix.S_IFDIR:
		kind = KindDir
	case unix.S_IFLNK:
		kind = KindSymlink
	}
	return Info{Kind: kind, Perm: st.Mode & 0o777, UID: st.Uid, GID: st.Gid, Size: st.Size}
}

// lstatAt describes name in dirfd, or returns a zero Info if it is absent.
func lstatAt(dirfd int, name string) (Info, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return Info{}, nil
		}
		return Info{}, err
	}
	return infoOf(&st), nil
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
		return nil, fmt.Errorf("%s is %w", name, ErrNotRegular)
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("file is too large (%d bytes; the limit is %d)", fi.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("file is too large (more than %d bytes)", limit)
	}
	return b, nil
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
	case e.Kind == KindDir:
		return unix.EISDIR
	case e.Kind == KindSymlink:
		return ErrSymlinkAppeared
	case e.Kind == KindOther:
		return fmt.Errorf("%s is %w", name, ErrNotRegular)
	}
	return replaceAt(dirfd, name, content, e)
}

// replaceAt writes content to a temporary file in dirfd and renames it
// over name; old, when it describes an existing file, gives the new one
// its permissions and owner.
func replaceAt(dirfd int, name string, content []byte, old Info) error {
	var tmp string
	fd := -1
	for range 16 {
		var rnd [8]byte
		for i := range rnd {
			rnd[i] = byte(rand.Uint32())
		}
		tmp = "." + strings.TrimPrefix(name, ".") + "." + hex.EncodeToString(rnd[:]) + ".tmp"
		if len(tmp) > 255 {
			tmp = ".fsguard." + hex.EncodeToString(rnd[:]) + ".tmp"
		}
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
	if err == nil && old.Kind != KindNone {
		// Best effort: only root may give a file away, and the daemon
		// usually owns what it edits anyway.
		_ = f.Chown(int(old.UID), int(old.GID))
		err = f.Chmod(os.FileMode(old.Perm))
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
