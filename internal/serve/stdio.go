package serve

import (
	"io"
	"io/fs"
	"os"
	"syscall"
)

// stdioInput returns what a stdio session reads. When stdin is a pipe (as
// an editor spawning the daemon makes it), that is a File on the pipe in
// non-blocking mode: the runtime's poller then serves its reads, and
// closing it ends a read in progress, so the session can end (on SIGTERM)
// while the client still holds its end open; a blocking read of fd 0
// cannot be interrupted. Other inputs (a terminal, a file, a socket, a
// reader in tests) are returned as they are: a terminal or a socket may
// share its open file with stdout and stderr, which must stay blocking.
func stdioInput(stdin io.Reader) io.Reader {
	f, ok := stdin.(*os.File)
	if !ok {
		return stdin
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode().Type() != fs.ModeNamedPipe {
		return stdin
	}
	fd := int(f.Fd())
	if err := syscall.SetNonblock(fd, true); err != nil {
		return stdin
	}
	return os.NewFile(uintptr(fd), f.Name())
}
