package frontdoor

import (
	"net"
	"syscall"
)

// peerUID returns the user id of the process at the other end of c; ok is
// false where the system does not tell it. A connection whose credentials
// cannot be read gets the uid -1, which no user has.
func peerUID(c *net.UnixConn) (uid int, ok bool) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, true
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return -1, true
	}
	return int(cred.Uid), true
}
