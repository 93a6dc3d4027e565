package shell

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
)

// Errors of the Process controls.
var (
	// ErrStdinNotStreamed is returned by Write and CloseStdin when the
	// process was started without a stdin stream.
	ErrStdinNotStreamed = errors.New("stdin streaming is not enabled for this process")
	// ErrStdinClosed is returned by Write after CloseStdin.
	ErrStdinClosed = errors.New("stdin is already closed")
	// ErrNotTTY is returned by Resize for a process without a terminal.
	ErrNotTTY = errors.New("process is not running under a tty")
	// ErrProcessExited is returned by the controls once the process ended.
	ErrProcessExited = errors.New("process has already exited")
)

// stdinWriteTimeout bounds a write to a process that does not read.
const stdinWriteTimeout = 10 * time.Second

// Process controls a running Exec (ExecRequest.OnStart): its stdin, its
// terminal size and its termination. It is safe for concurrent use.
type Process struct {
	pid       int
	tty       bool
	in        *os.File // PTY master (tty) or the stdin pipe's write end; nil otherwise
	terminate func()

	mu          sync.Mutex
	stdinClosed bool
	done        bool
}

// Pid is the process id of the command (the process group leader).
func (p *Process) Pid() int { return p.pid }

// TTY reports whether the process runs under a pseudo-terminal.
func (p *Process) TTY() bool { return p.tty }

// Write sends b to the process's stdin (the terminal, for tty).
func (p *Process) Write(b []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.done:
		return ErrProcessExited
	case p.in == nil:
		return ErrStdinNotStreamed
	case p.stdinClosed:
		return ErrStdinClosed
	}
	if len(b) == 0 {
		return nil
	}
	_ = p.in.SetWriteDeadline(time.Now().Add(stdinWriteTimeout))
	_, err := p.in.Write(b)
	return err
}

// CloseStdin closes stdin. Under a tty, whose terminal stays open, it ends
// the pending line and sends the end-of-file character (^D), as a
// terminal's writer does when it closes: a reader in canonical mode gets
// the line, then end of file.
func (p *Process) CloseStdin() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.done:
		return ErrProcessExited
	case p.in == nil:
		return ErrStdinNotStreamed
	case p.stdinClosed:
		return nil
	}
	p.stdinClosed = true
	if p.tty {
		_ = p.in.SetWriteDeadline(time.Now().Add(stdinWriteTimeout))
		_, err := p.in.Write([]byte{'\n', 0x04})
		return err
	}
	return p.in.Close()
}

// Resize sets the terminal size of a tty process.
func (p *Process) Resize(rows, cols uint16) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.done:
		return ErrProcessExited
	case !p.tty:
		return ErrNotTTY
	}
	return pty.Setsize(p.in, &pty.Winsize{Rows: rows, Cols: cols})
}

// Terminate kills the process group; Exec then returns with the exit
// code of the killed command (128+SIGKILL). It is a no-op once the
// process ended.
func (p *Process) Terminate() {
	p.terminate()
}

// finish marks the process ended and releases its stdin.
func (p *Process) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
	if p.in != nil && (p.tty || !p.stdinClosed) {
		_ = p.in.Close()
	}
}

// pollableFile returns a non-blocking, poller-backed copy of f (closing
// f), so deadlines and Close interrupt its reads and writes.
func pollableFile(f *os.File) (*os.File, error) {
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	name := f.Name()
	_ = f.Close()
	syscall.CloseOnExec(fd)
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}
