package frontdoor

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// SocketMode is the permission of the control socket: only the daemon's
// own user may connect (connecting needs write permission).
const SocketMode fs.FileMode = 0o600

// maxSocketPath is the longest path a unix socket address holds (the
// 108-byte sun_path of Linux, less its terminating NUL).
const maxSocketPath = 107

// ListenUnix listens on the unix socket at path, the daemon's control
// socket: it creates the missing parent directories private to the user
// (0700), replaces a stale socket left by a process that died (one that
// refuses connections), refuses a path in use by a live daemon or holding
// something other than a socket, and makes the socket 0600. Connections
// from a process of another user are closed at once (where the system
// tells the peer's credentials), which also covers a connection made
// before the mode was set. Closing the listener removes the socket.
func ListenUnix(path string, log *slog.Logger) (net.Listener, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("control socket path %q is not absolute", path)
	}
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("control socket path %q is %d bytes long; a unix socket path holds at most %d", path, len(path), maxSocketPath)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("control socket directory: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on control socket %s: %w", path, err)
	}
	if err := os.Chmod(path, SocketMode); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	return &ownerListener{UnixListener: ln, uid: os.Getuid(), log: log}, nil
}

// removeStale removes the socket at path when no process listens on it.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("control socket path %s exists and is not a socket", path)
	}
	c, err := net.Dial("unix", path)
	if err == nil {
		_ = c.Close()
		return fmt.Errorf("control socket %s is in use by another process", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale control socket %s: %w", path, err)
	}
	return nil
}

// ownerListener accepts the connections of the daemon's user (and root)
// only.
type ownerListener struct {
	*net.UnixListener
	uid int
	log *slog.Logger
}

func (l *ownerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.UnixListener.AcceptUnix()
		if err != nil {
			return nil, err
		}
		uid, ok := peerUID(c)
		if !ok || uid == l.uid || uid == 0 {
			return c, nil
		}
		l.log.Warn("control socket: refused a connection of another user", "uid", uid)
		_ = c.Close()
	}
}
