package fsguard

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// openat2Off is set once openat2 turns out to be missing (kernels before
// 5.6).
var openat2Off atomic.Bool

// haveOpenat2 reports whether this build can resolve with openat2.
const haveOpenat2 = true

// openat2Beneath opens rel below dirfd in one syscall that refuses every
// symlink and any escape from dirfd. ok is false when openat2 cannot be
// used here and the caller must walk instead; err is then nil.
func openat2Beneath(dirfd int, rel string, flags int, mode uint32) (fd int, ok bool, err error) {
	if openat2Off.Load() {
		return -1, false, nil
	}
	how := unix.OpenHow{
		Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	}
	if flags&unix.O_CREAT != 0 {
		how.Mode = uint64(mode)
	}
	for again := 0; ; again++ {
		fd, err = unix.Openat2(dirfd, rel, &how)
		switch err {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			// The kernel could not rule out a concurrent rename; the
			// walk below has no such case.
			if again < 8 {
				continue
			}
			return -1, false, nil
		case unix.ENOSYS:
			openat2Off.Store(true)
			return -1, false, nil
		case unix.EPERM:
			// Seccomp filters that predate openat2 deny it with EPERM;
			// a real EPERM comes back from the walk as well.
			return -1, false, nil
		}
		return fd, true, err
	}
}
