//go:build !linux

package frontdoor

import "net"

// peerUID reports that this system does not tell a unix socket peer's
// credentials: the socket's mode alone keeps other users out.
func peerUID(*net.UnixConn) (uid int, ok bool) { return 0, false }
