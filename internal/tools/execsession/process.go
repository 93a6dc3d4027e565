//go:build unix

package execsession

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/appserver/appserver/internal/sandbox"
)

// CommandFunc builds the process for argv, e.g. wrapped in a sandbox helper
// that re-executes the daemon. The returned command must not be started.
// The Manager sets Dir, the environment, stdio and the process-group
// attributes: Dir and Env are kept when the hook set them (the forced
// unified-exec variables are applied to Env either way), SysProcAttr is
// extended, stdio is replaced.
type CommandFunc func(argv []string) (*sandbox.Cmd, error)

// DefaultCommand runs argv directly.
func DefaultCommand(argv []string) (*sandbox.Cmd, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("missing command line for unified exec request")
	}
	return sandbox.Plain(exec.Command(argv[0], argv[1:]...)), nil
}

// ForcedEnv are the variables set for every session process (docs/tools.md
// §2.4), overriding inherited values.
var ForcedEnv = []string{
	"NO_COLOR=1",
	"TERM=dumb",
	"LANG=C.UTF-8",
	"LC_CTYPE=C.UTF-8",
	"LC_ALL=C.UTF-8",
	"COLORTERM=",
	"PAGER=cat",
	"GIT_PAGER=cat",
	"GH_PAGER=cat",
	"CODEX_CI=1",
}

// mergeEnv returns base with the overrides applied (later keys win, order of
// first appearance kept).
func mergeEnv(base []string, overrides ...string) []string {
	out := make([]string, 0, len(base)+len(overrides))
	index := map[string]int{}
	for _, kv := range append(append([]string(nil), base...), overrides...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := index[k]; ok {
			out[i] = kv
			continue
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// ptySize is the terminal size of tty sessions (the reference uses 24x80).
var ptySize = &pty.Winsize{Rows: 24, Cols: 80}

// process is one spawned session process. The leader is reaped only by the
// waiter goroutine, under killMu, right after the rest of its tree was
// killed, so no signal ever targets a reaped (and possibly reused) pid or
// group id. Like the reference, a session's background children do not
// outlive its leader.
type process struct {
	cmd  *sandbox.Cmd
	pid  int
	pgid int
	// sid is the terminal session of tty processes (they call setsid), 0 for
	// pipe sessions.
	sid int
	tty bool
	// out is what the reader goroutine reads: the PTY master, or the read
	// end of the stdout+stderr pipe.
	out *os.File
	// holdTarget names what the session's processes hold open as their
	// output, as /proc/<pid>/fd links show it: the PTY slave path or
	// "pipe:[<inode>]".
	holdTarget string

	killMu sync.Mutex
	reaped bool // guarded by killMu

	exited   chan struct{} // closed once the leader was reaped
	exitCode int           // set before exited is closed

	closeOnce sync.Once
}

// spawn starts argv in cwd with env. For tty the process gets a new terminal
// session on a fresh PTY (it is its own process group); otherwise stdin is
// /dev/null, stdout and stderr share one pipe (so arrival order is kept) and
// the process leads a new process group. The terminal or pipe is made
// before the command is built, so that a built command is always started
// (a command of a pooled sandbox holds that sandbox from its build on).
func spawn(build CommandFunc, argv []string, cwd string, env []string, tty bool) (*process, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("missing command line for unified exec request")
	}
	if build == nil {
		build = DefaultCommand
	}
	var out, child *os.File // what the daemon reads, what the command writes
	if tty {
		ptmx, slave, err := pty.Open()
		if err != nil {
			return nil, err
		}
		if err := pty.Setsize(ptmx, ptySize); err != nil {
			_ = ptmx.Close()
			_ = slave.Close()
			return nil, err
		}
		out, child = ptmx, slave
	} else {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		out, child = r, w
	}
	cmd, err := build(argv)
	if err == nil && cmd == nil {
		err = errors.New("command hook returned no command")
	}
	if err != nil {
		_ = out.Close()
		_ = child.Close()
		return nil, err
	}
	if cmd.Dir == "" {
		cmd.Dir = cwd
	}
	if cmd.Env == nil {
		cmd.Env = env
	}
	cmd.Env = mergeEnv(cmd.Env, ForcedEnv...)
	attrs := &syscall.SysProcAttr{}
	if cmd.SysProcAttr != nil {
		c := *cmd.SysProcAttr
		attrs = &c
	}
	p := &process{cmd: cmd, tty: tty, exited: make(chan struct{})}
	if tty {
		attrs.Setsid, attrs.Setctty, attrs.Setpgid = true, true, false
		attrs.Ctty = 0
		cmd.Stdin, cmd.Stdout, cmd.Stderr = child, child, child
		cmd.SysProcAttr = attrs
		err = cmd.Start()
		p.holdTarget = child.Name()
		_ = child.Close() // the child holds its own copies
		if err != nil {
			_ = out.Close()
			return nil, err
		}
		p.pid = cmd.Process.Pid
		p.pgid, p.sid = p.pid, p.pid
		// creack/pty returns a blocking master, whose Read Close cannot
		// interrupt; a pollable one lets Close end the reader even when an
		// escaped process still holds the terminal.
		if p.out, err = pollable(out, "/dev/ptmx"); err != nil {
			p.out = out
		}
		return p, nil
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, child, child
	if !attrs.Setsid {
		attrs.Setpgid, attrs.Pgid = true, 0
	}
	cmd.SysProcAttr = attrs
	err = cmd.Start()
	_ = child.Close() // the child holds its own copy
	if err != nil {
		_ = out.Close()
		return nil, err
	}
	p.out = out
	p.pid = cmd.Process.Pid
	p.pgid = p.pid
	// Stat, not Fd: Fd would put the pipe in blocking mode, and Close could
	// no longer interrupt the reader.
	if fi, err := out.Stat(); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			p.holdTarget = fmt.Sprintf("pipe:[%d]", st.Ino)
		}
	}
	if attrs.Setsid {
		p.sid = p.pid
	}
	return p, nil
}

// readLoop copies the process output to emit until EOF or the output is
// closed. A PTY master reports EIO once every slave is closed: that is EOF.
func (p *process) readLoop(emit func([]byte)) {
	buf := make([]byte, 8192)
	for {
		n, err := p.out.Read(buf)
		if n > 0 {
			emit(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// waitLoop waits for the leader to exit, reaps it under killMu and records
// its exit code: the code, or 128+signal when a signal killed it.
func (p *process) waitLoop() {
	err := reapLeader(p)
	p.exitCode = exitCodeOf(p.cmd, err)
	close(p.exited)
}

func exitCodeOf(cmd *sandbox.Cmd, err error) int {
	ws, ok := cmd.WaitStatus()
	if !ok {
		if err != nil {
			return -1
		}
		return 0
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// hasExited reports whether the leader was reaped.
func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// signalGroup sends sig to the process group while the leader is not
// reaped (a reaped leader's group id may be reused).
func (p *process) signalGroup(sig syscall.Signal) error {
	p.killMu.Lock()
	defer p.killMu.Unlock()
	if p.reaped {
		return nil
	}
	return syscall.Kill(-p.pgid, sig)
}

// kill SIGKILLs the whole process tree while the leader is not reaped: the
// process group, the terminal session of tty processes and every descendant
// of the leader (which may have moved to other groups, e.g. jobs of an
// interactive shell, or to a new session). Once the leader is reaped it does
// nothing: its tree was swept when it exited, and its ids may be reused.
func (p *process) kill() {
	p.killMu.Lock()
	defer p.killMu.Unlock()
	if !p.reaped {
		p.sweepLocked(p.pid)
	}
}

// sweepLocked kills the group, the terminal session (tty) and, with a
// non-zero root, root's descendants, repeating a few times to catch
// processes forked meanwhile. killMu is held and the leader is not reaped,
// so pgid and sid still name this tree.
func (p *process) sweepLocked(root int) {
	for round := 0; round < 5; round++ {
		// Look before shooting: once the leader dies its children are
		// reparented and can no longer be found as its descendants.
		var victims []int
		if root > 0 || p.sid > 0 {
			victims = treeMembers(root, p.pgid, p.sid)
		}
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		if len(victims) == 0 {
			return
		}
		for _, pid := range victims {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		// SIGKILL is asynchronous: give the victims a moment to die before
		// looking for processes forked during the sweep.
		time.Sleep(time.Millisecond)
		root = 0
	}
}

// killHolders kills processes outside the tree that still hold the
// session's terminal or output pipe: daemons that escaped into a new session
// (e.g. `setsid -f`) and keep the session's output open.
func (p *process) killHolders() {
	if p.holdTarget == "" {
		return
	}
	for round := 0; round < 3; round++ {
		pids := holders(p.holdTarget)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(time.Millisecond)
	}
}

// pollable returns a non-blocking, poller-backed copy of f (closing f).
func pollable(f *os.File, name string) (*os.File, error) {
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	_ = f.Close()
	syscall.CloseOnExec(fd)
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// closeOutput closes the output side so the reader goroutine ends.
func (p *process) closeOutput() {
	p.closeOnce.Do(func() { _ = p.out.Close() })
}

// write sends input to the PTY. A process that never reads must not block
// the call forever.
func (p *process) write(b []byte) error {
	if !p.tty {
		return ErrStdinClosed
	}
	_ = p.out.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := p.out.Write(b)
	return err
}

// ioErrorText renders an I/O error the way the reference (Rust) does, e.g.
// "No such file or directory (os error 2)", so the model sees familiar text.
func ioErrorText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		msg := errno.Error()
		if msg != "" {
			msg = strings.ToUpper(msg[:1]) + msg[1:]
		}
		return fmt.Sprintf("%s (os error %d)", msg, int(errno))
	}
	var ee *exec.Error
	if errors.As(err, &ee) && errors.Is(ee.Err, exec.ErrNotFound) {
		return "No such file or directory (os error 2)"
	}
	return err.Error()
}
