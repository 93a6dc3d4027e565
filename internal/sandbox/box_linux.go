package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Pooled sandboxes ("boxes"). bubblewrap builds a mount and a PID
// namespace for every command and tears them down when it exits, which is
// most of a short command's cost. A box is one long-lived bubblewrap
// sandbox, built for one pool key (Request.Pool: the caller's isolation
// unit, the daemon's thread) and one file-system view, whose launcher
// (boxlauncher_linux.go) forks the commands it is given. A box runs one
// command at a time and, when the command's leader exits, kills whatever
// the command left, so a command sees and outlives nothing of another,
// as with a sandbox per command; commands of different keys or views
// never share a box.
//
// A box is looked up by its key, made of the pool key, the bubblewrap
// arguments of the view (policy, writable roots, protected subpaths that
// exist now, hidden and read-only paths, network) and the identities of
// the directories it binds: when any of them changes (a thread's sandbox
// policy, a .git created or replaced, a path hidden with Sandbox.Hide, a
// workspace recreated), the next command gets another box. Boxes are
// started in the background on a miss, so a command never waits for one;
// until it is ready, commands run under a bubblewrap of their own.

const (
	// boxReadyTimeout bounds a box's start-up (bubblewrap, then the Go
	// runtime of the launcher).
	boxReadyTimeout = time.Minute
	// boxCleanTimeout bounds how long a released box may take to report
	// itself clean before it is closed.
	boxCleanTimeout = 10 * time.Second
	// boxEndTimeout bounds the wait for a killed launcher's end.
	boxEndTimeout = 10 * time.Second
)

// pool holds a Sandbox's boxes. Lock order: pool.mu, then box.mu.
type pool struct {
	size int
	idle time.Duration
	log  *slog.Logger

	mu       sync.Mutex
	boxes    map[string][]*box // by key
	n        int               // boxes alive or starting
	starting map[string]bool
	pending  map[*box]bool // boxes starting, for close to end
	closed   bool
	reaping  bool          // the reaper goroutine runs
	wake     chan struct{} // 1-buffered: look at the boxes again
	wg       sync.WaitGroup
}

func newPool(o PoolOptions, log *slog.Logger) *pool {
	size, idle := o.Size, o.IdleTimeout
	if size == 0 {
		size = DefaultPoolSize
	}
	if idle <= 0 {
		idle = DefaultPoolIdleTimeout
	}
	return &pool{size: size, idle: idle, log: log, boxes: map[string][]*box{}, starting: map[string]bool{}, pending: map[*box]bool{}, wake: make(chan struct{}, 1)}
}

// box is one pooled sandbox.
type box struct {
	key, owner  string
	bwrap       *exec.Cmd
	conn        *net.UnixConn
	stderr      *cappedBuffer
	launcher    *os.File // a pidfd of the launcher
	launcherPid int      // in the daemon's PID namespace

	// Guarded by pool.mu.
	busy bool // reserved for a command
	// releasing is when the last command's release was sent, zero once
	// the launcher reported clean. The next command may be given the box
	// meanwhile: its start follows the release on the socket.
	releasing time.Time
	idleSince time.Time
	retire    bool // close instead of returning to the pool

	closing atomic.Bool // close was called

	wmu   sync.Mutex // serialises messages to the launcher
	mu    sync.Mutex // guards run and ahead
	run   *boxRun
	ahead *aheadShell   // the next command's shell, started ahead
	gone  chan struct{} // closed when the launcher is gone
}

// aheadShell is a box's next command's shell, started shortly after the
// last command of the box ended (aheadDelay), from what that command
// was: its shell, prelude (Request.Prelude), environment and directory.
// It has run the prelude (sourced the login-shell snapshot) and waits
// for the rest of its script. The next command takes it if it has the
// same four; otherwise the launcher kills it, with anything it started,
// before it starts the command as usual. What it saves the command is the shell's
// start and the snapshot's sourcing (bench/README.md, "A shell started
// ahead of its command"). Its standard input is /dev/null and its output
// and error one pipe, which the daemon copies into the command's own
// output; only commands with that stdio and no terminal take it.
type aheadShell struct {
	key    string   // aheadKey of the commands it can run
	out    *os.File // read end of its standard output and error
	script *os.File // write end of its descriptor 3, where the script goes
}

func (a *aheadShell) close() {
	_ = a.out.Close()
	_ = a.script.Close()
}

// aheadTail follows the prelude in a shell started ahead: it reads the
// rest of the script from descriptor 3 and runs it, after closing
// descriptor 3 for good. (A redirection on eval, `3<&-`, would keep a
// copy of it at descriptor 10 while the script runs, and a script that
// then opens descriptor 10 itself fails to write to it.) bash 5.2 reads
// `$(<file)` without a subshell. eval parses and runs the text command by
// command, as -c does, and numbers its lines on from the line it stands
// on, where the script's own first line would be. What differs from
// `bash -c` (docs/tools.md §4.10): a syntax error reads "eval: line N"
// where -c says "-c: line N", and shows "exec 3<&-;" when it is on the
// script's first line; bash runs the script's last command as a child
// rather than in its own place, so a command killed by a signal is
// reported by bash ("Killed") and its exit status is 128 plus the signal.
const aheadTail = `eval "exec 3<&-;$(</dev/fd/3)"`

// maxArgStrlen is Linux's bound on one argument of execve, 32 pages.
const maxArgStrlen = 32 * 4096

// aheadUnsafeEnv reports whether env holds a variable that makes bash,
// or the loader, run code of the environment's choosing when the shell
// starts: a shell started ahead runs after its command has ended, so
// none may. The shell tools pass the daemon's own environment for the
// commands that use it (tools/orchestrate), which holds none of these
// unless the daemon's user set them.
func aheadUnsafeEnv(env []string) bool {
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "BASH_ENV", name == "ENV", name == "SHELLOPTS", name == "BASHOPTS", name == "PS4",
			name == "BASH_XTRACEFD", name == "PROMPT_COMMAND", name == "GLIBC_TUNABLES", name == "GCONV_PATH",
			strings.HasPrefix(name, "BASH_FUNC_"), strings.HasPrefix(name, "LD_"):
			return true
		}
	}
	return false
}

// takeAhead returns the box's shell started ahead, if any, and forgets it.
func (b *box) takeAhead() *aheadShell {
	b.mu.Lock()
	defer b.mu.Unlock()
	a := b.ahead
	b.ahead = nil
	return a
}

// startAhead has the launcher start req's shell ahead of the box's next
// command (one of key); the caller has reserved the box, whose last
// command was released (startAheadLater).
func (b *box) startAhead(key string, req startReq) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return
	}
	scriptR, scriptW, err := os.Pipe()
	if err != nil {
		_ = outR.Close()
		_ = outW.Close()
		return
	}
	null, err := os.Open(os.DevNull)
	if err == nil {
		err = b.send(msgAhead, req.encode(), []*os.File{null, outW, outW, scriptR})
		_ = null.Close()
	}
	_ = outW.Close()
	_ = scriptR.Close()
	a := &aheadShell{key: key, out: outR, script: scriptW}
	if err != nil {
		a.close()
		b.close()
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.gone:
		// The reader has closed the box's shell ahead already.
		a.close()
		return
	default:
	}
	if b.ahead != nil {
		b.ahead.close()
	}
	b.ahead = a
}

// boxRun is what the launcher reports about the command it runs.
type boxRun struct {
	started chan boxMsg             // started or failed
	exited  chan syscall.WaitStatus // the leader's exit
}

// take reserves an idle box for key, or returns nil.
func (p *pool) take(key string) *box {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.boxes[key] {
		if !b.busy && !b.retire && !b.closing.Load() {
			b.busy = true
			return b
		}
	}
	return nil
}

// warm starts a box for key in the background, unless one is starting
// already or the pool is full. A full pool evicts nothing: boxes leave it
// when they have been idle for the idle timeout, so threads beyond the
// bound run their commands under a sandbox of their own rather than
// taking turns at building boxes.
func (p *pool) warm(key, owner string, build func(*pool) (*box, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.size < 0 || p.starting[key] || p.n >= p.size {
		return
	}
	p.starting[key] = true
	p.n++
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		b, err := build(p)
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.starting, key)
		delete(p.pending, b)
		if err != nil {
			p.n--
			if !p.closed {
				p.log.Warn("pooled sandbox failed to start; commands run in a sandbox of their own", "err", err)
			}
			return
		}
		b.key, b.owner, b.idleSince = key, owner, time.Now()
		p.boxes[key] = append(p.boxes[key], b)
		p.wg.Add(1)
		go b.read(p)
		if p.closed {
			b.close()
		}
		p.reapLocked()
	}()
}

// release returns a box whose command ended (or never started) to the
// pool. The box is closed instead when it is retired.
func (p *pool) release(b *box) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b.busy, b.idleSince = false, time.Now()
	if b.retire || p.closed {
		b.close()
	}
	p.reapLocked()
}

// aheadDelay is how long after a command's end its box starts the next
// command's shell: starting it at once took the CPU the rest of the
// command's turn needed (the model's next request, the turn's commit) on
// a busy machine, and the next command comes after a model's answer, much
// later than this (bench/README.md, "A shell started ahead of its
// command").
const aheadDelay = 20 * time.Millisecond

// startAheadLater has b start req's shell ahead of its next command
// aheadDelay from now, if b is idle then: a command that took b meanwhile
// is started as usual. b is reserved while the message goes out; a
// command of its key that comes in those microseconds finds no idle box
// and runs in a sandbox of its own.
func (p *pool) startAheadLater(b *box, key string, req startReq) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.wg.Add(1)
	time.AfterFunc(aheadDelay, func() {
		defer p.wg.Done()
		p.mu.Lock()
		if p.closed || b.busy || b.retire || b.closing.Load() {
			p.mu.Unlock()
			return
		}
		b.busy = true
		p.mu.Unlock()
		b.startAhead(key, req)
		p.release(b)
	})
}

// releasing marks a box whose launcher is asked to clean up after its
// command; cleaned is the launcher's answer.
func (p *pool) releasing(b *box) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b.releasing = time.Now()
	p.reapLocked()
}

func (p *pool) cleaned(b *box) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b.releasing = time.Time{}
	if !b.busy {
		b.idleSince = time.Now()
	}
	p.reapLocked()
}

// remove forgets a box whose launcher is gone.
func (p *pool) remove(b *box) {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.boxes[b.key]
	for i, x := range list {
		if x == b {
			p.boxes[b.key] = append(list[:i:i], list[i+1:]...)
			if len(p.boxes[b.key]) == 0 {
				delete(p.boxes, b.key)
			}
			p.n--
			break
		}
	}
	p.reapLocked()
}

// retire closes the idle boxes of owner and marks its busy ones to close
// when their command ends.
func (p *pool) retireOwner(owner string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, list := range p.boxes {
		for _, b := range list {
			if b.owner != owner {
				continue
			}
			b.retire = true
			if !b.busy {
				b.close()
			}
		}
	}
}

// starting registers a box whose launcher is starting, so that close
// ends it; it reports false when the pool is closed already.
func (p *pool) startingBox(b *box) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.pending[b] = true
	return true
}

// close closes every box, busy, idle or starting, and waits for their
// goroutines.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	for _, list := range p.boxes {
		for _, b := range list {
			b.close()
		}
	}
	for b := range p.pending {
		b.close()
	}
	p.reapLocked()
	p.mu.Unlock()
	p.wg.Wait()
}

// reapLocked wakes the reaper, starting it when boxes exist.
func (p *pool) reapLocked() {
	if p.reaping {
		select {
		case p.wake <- struct{}{}:
		default:
		}
		return
	}
	if len(p.boxes) == 0 || p.closed {
		return
	}
	p.reaping = true
	p.wg.Add(1)
	go p.reaper()
}

// reaper closes boxes idle for the idle timeout and released boxes that
// do not report clean in time; it runs while the pool holds boxes.
func (p *pool) reaper() {
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.mu.Lock()
		if len(p.boxes) == 0 || p.closed {
			p.reaping = false
			p.mu.Unlock()
			return
		}
		now := time.Now()
		next := now.Add(time.Hour)
		for _, list := range p.boxes {
			for _, b := range list {
				var due time.Time
				switch {
				case !b.releasing.IsZero():
					// A launcher that does not report clean in
					// time is stuck on a process that does not die.
					due = b.releasing.Add(boxCleanTimeout)
				case !b.busy:
					due = b.idleSince.Add(p.idle)
				default:
					continue
				}
				if !now.Before(due) {
					b.close()
				} else if due.Before(next) {
					next = due
				}
			}
		}
		p.mu.Unlock()
		timer.Reset(next.Sub(now))
		select {
		case <-timer.C:
		case <-p.wake:
		}
	}
}

// close ends the box: the launcher is killed, and with it, as the init
// of the box's PID namespace, everything in the box; bubblewrap too. The
// reader goroutine then waits for the launcher's end and removes the box
// from the pool.
func (b *box) close() {
	b.closing.Store(true)
	_ = b.conn.Close()
	b.kill()
}

// kill kills the launcher and bubblewrap.
func (b *box) kill() {
	if rc, err := b.launcher.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0)
		})
	}
	_ = b.bwrap.Process.Kill()
}

// waitLauncher waits (at most boxEndTimeout) until the launcher has
// exited, which it does only after every process of its PID namespace.
func (b *box) waitLauncher() {
	rc, err := b.launcher.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		deadline := time.Now().Add(boxEndTimeout)
		for {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(pfd, int(time.Until(deadline).Milliseconds()))
			if n != 0 || (err != nil && err != unix.EINTR) || time.Now().After(deadline) {
				return
			}
		}
	})
}

// read dispatches the launcher's messages until the socket ends, then
// reaps bubblewrap and removes the box.
func (b *box) read(p *pool) {
	defer p.wg.Done()
	var err error
	for err == nil {
		var m boxMsg
		m, err = b.recv()
		if err != nil {
			break
		}
		switch m.typ {
		case msgStarted, msgFailed, msgExited:
			b.mu.Lock()
			r := b.run
			b.mu.Unlock()
			err = r.deliver(m)
		case msgClean:
			p.cleaned(b)
		default:
			m.closeFDs()
			err = errProtocol
		}
	}
	_ = b.conn.Close()
	b.kill()
	// Gone means gone: the box's processes have all exited.
	b.waitLauncher()
	b.mu.Lock()
	close(b.gone)
	if b.ahead != nil {
		b.ahead.close()
		b.ahead = nil
	}
	b.mu.Unlock()
	_ = b.bwrap.Wait()
	_ = b.launcher.Close()
	if !b.closing.Load() {
		p.log.Warn("pooled sandbox ended; the next command gets another", "err", err, "stderr", strings.TrimSpace(b.stderr.String()))
	}
	p.remove(b)
}

// deliver hands a message about the command to its waiter.
func (r *boxRun) deliver(m boxMsg) error {
	if r == nil {
		m.closeFDs()
		return errProtocol
	}
	switch m.typ {
	case msgExited:
		v, err := decodeUint(m.body)
		if err != nil {
			return err
		}
		select {
		case r.exited <- syscall.WaitStatus(v):
			return nil
		default:
			return errProtocol
		}
	default:
		select {
		case r.started <- m:
			return nil
		default:
			m.closeFDs()
			return errProtocol
		}
	}
}

func (b *box) send(typ byte, body []byte, files []*os.File) error {
	msg, err := frame(typ, body)
	if err != nil {
		return err
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	b.wmu.Lock()
	defer b.wmu.Unlock()
	n, _, err := b.conn.WriteMsgUnix(msg, oob, nil)
	for err == nil && n < len(msg) {
		// The descriptors went with the first bytes.
		var m int
		m, err = b.conn.Write(msg[n:])
		n += m
	}
	runtime.KeepAlive(files)
	return err
}

func (b *box) recv() (boxMsg, error) {
	var hdr [msgHeaderLen]byte
	oob := make([]byte, unix.CmsgSpace(maxMsgFDs*4))
	n, oobn, _, _, err := b.conn.ReadMsgUnix(hdr[:], oob)
	if err != nil {
		return boxMsg{}, err
	}
	fds, perr := parseRights(oob[:oobn])
	m := boxMsg{fds: fds}
	for _, fd := range fds {
		unix.CloseOnExec(fd)
	}
	if perr != nil || n == 0 {
		m.closeFDs()
		if perr == nil {
			perr = io.EOF
		}
		return boxMsg{}, perr
	}
	if _, err := io.ReadFull(b.conn, hdr[n:]); err != nil {
		m.closeFDs()
		return boxMsg{}, err
	}
	typ, size, err := parseHeader(hdr[:])
	if err == nil {
		m.typ, m.body = typ, make([]byte, size)
		_, err = io.ReadFull(b.conn, m.body)
	}
	if err != nil {
		m.closeFDs()
		return boxMsg{}, err
	}
	return m, nil
}

// startBox starts bubblewrap with the launcher for spec and waits until
// the launcher is ready. launch starts bubblewrap on a launcher thread
// (its parent-death signal is tied to the thread that forks it). While it
// starts, closing p ends it.
func (s *Sandbox) startBox(p *pool, spec bwrapSpec, launch func(func() (int, error)) error) (*box, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	ours := os.NewFile(uintptr(pair[0]), "box")
	theirs := os.NewFile(uintptr(pair[1]), "box-launcher")
	fc, err := net.FileConn(ours)
	_ = ours.Close()
	if err != nil {
		_ = theirs.Close()
		return nil, err
	}
	conn := fc.(*net.UnixConn)
	// The launcher's copies are the only ones once it runs: the daemon's
	// are closed as soon as bubblewrap started (or failed to).
	extra := []*os.File{theirs}
	defer func() {
		for _, f := range extra {
			_ = f.Close()
		}
	}()
	if spec.policy.NetworkDisabled() {
		prog, err := seccompPipe()
		if err != nil {
			_ = conn.Close()
			return nil, err
		}
		extra = append(extra, prog)
		spec.seccompFD = boxFD + 1
	}
	// Commands get their directory and environment with each request.
	spec.cwd, spec.setenv = "/", nil
	spec.asPid1 = true
	spec.argv = []string{s.exe, HelperCommand, flagBox}
	b := &box{conn: conn, stderr: &cappedBuffer{max: 4096}, gone: make(chan struct{})}
	c := exec.Command(s.bwrap, spec.args()...)
	// Nothing of the daemon's environment reaches the launcher; commands
	// get theirs with each request.
	c.Env = []string{"GORACE=atexit_sleep_ms=0"}
	c.ExtraFiles = extra
	c.Stderr = b.stderr
	// Wait must not hang on a launcher that outlived bubblewrap.
	c.WaitDelay = time.Second
	c.SysProcAttr = helperProcAttr()
	b.bwrap = c
	err = launch(func() (int, error) {
		if err := c.Start(); err != nil {
			return 0, err
		}
		return c.Process.Pid, nil
	})
	for _, f := range extra {
		_ = f.Close()
	}
	extra = nil
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("start bubblewrap: %w", err)
	}
	fail := func(err error) (*box, error) {
		_ = conn.Close()
		_ = c.Process.Kill()
		_ = c.Wait()
		p.mu.Lock()
		delete(p.pending, b)
		p.mu.Unlock()
		if msg := strings.TrimSpace(b.stderr.String()); msg != "" {
			err = fmt.Errorf("%w (%s)", err, msg)
		}
		return nil, err
	}
	if !p.startingBox(b) {
		return fail(net.ErrClosed)
	}
	_ = conn.SetReadDeadline(time.Now().Add(boxReadyTimeout))
	m, err := b.recv()
	_ = conn.SetReadDeadline(time.Time{})
	if err != nil {
		return fail(fmt.Errorf("launcher did not start: %w", err))
	}
	defer m.closeFDs()
	if m.typ != msgReady || len(m.fds) != 1 {
		return fail(errProtocol)
	}
	if b.launcherPid, err = pidOfPidfd(m.fds[0]); err != nil {
		return fail(err)
	}
	// Under the pool's lock: close may be ending this box meanwhile.
	p.mu.Lock()
	b.launcher = os.NewFile(uintptr(m.fds[0]), "launcher-pidfd")
	p.mu.Unlock()
	m.fds = nil
	return b, nil
}

// seccompPipe returns the read end of a pipe holding the network filter.
func seccompPipe() (*os.File, error) {
	prog, err := networkFilterBytes()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	// A few hundred bytes: the pipe buffer holds them all.
	_, err = w.Write(prog)
	_ = w.Close()
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("sandbox: seccomp program: %w", err)
	}
	return r, nil
}

// cappedBuffer keeps the first max bytes written to it.
type cappedBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *cappedBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.b)
}

// pooledRun is the state of a command run by a box, kept in its Cmd.
type pooledRun struct {
	pool *pool
	box  *box
	ctx  context.Context
	// cleanup returns the box of a command that is never started.
	cleanup runtime.Cleanup

	mu       sync.Mutex
	returned bool // the reservation ended (started, abandoned or failed)

	run     *boxRun
	started bool
	waited  bool
	// prelude is the request's Prelude; next is the shell to start ahead
	// of the box's next command once this one ended, with its key
	// (nextKey ""; none).
	prelude int
	next    startReq
	nextKey string
	status  syscall.WaitStatus
	exited  bool
	// killMu orders a cancellation's kill before the release, after
	// which the pid may be reused.
	killMu   sync.Mutex
	released bool
	stopCtx  func() bool
	// The I/O of stdio that are not files: goroutines copying through
	// pipes, the parent's pipe ends to close once they are done.
	copies  sync.WaitGroup
	copyErr error
	closers []io.Closer
}

// newPooledCmd wraps a command for box b. The embedded exec.Cmd only
// holds the command's fields; it is never started.
func newPooledCmd(ctx context.Context, p *pool, b *box, path string, argv, env []string, prelude int) *Cmd {
	c := exec.CommandContext(ctx, path)
	c.Args = append([]string(nil), argv...)
	c.Env = env
	c.Err = ErrStartDirectly
	r := &pooledRun{pool: p, box: b, ctx: ctx, prelude: prelude}
	cmd := &Cmd{Cmd: c, pooled: r}
	r.cleanup = runtime.AddCleanup(cmd, (*pooledRun).abandon, r)
	return cmd
}

// abandon returns the box of a command that was never started.
func (r *pooledRun) abandon() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.returned {
		r.returned = true
		r.pool.release(r.box)
	}
}

// errBoxGone is returned when a box's launcher ended during the start.
var errBoxGone = errors.New("sandbox: the pooled sandbox ended while starting the command")

func (r *pooledRun) start(c *Cmd) error {
	r.cleanup.Stop()
	if r.started || c.Process != nil {
		return errors.New("exec: already started")
	}
	r.mu.Lock()
	if r.returned {
		r.mu.Unlock()
		return errBoxGone
	}
	r.returned = true
	r.mu.Unlock()
	fail := func(err error) error {
		for _, cl := range r.closers {
			_ = cl.Close()
		}
		r.closers = nil
		r.copies.Wait()
		if !r.box.closing.Load() {
			r.pool.release(r.box)
		}
		return err
	}
	if err := r.ctx.Err(); err != nil {
		return fail(err)
	}
	if len(c.ExtraFiles) > 0 {
		return fail(errors.New("sandbox: a pooled command takes no extra files"))
	}
	req := startReq{path: c.Path, argv: c.Args, env: c.Env, dir: c.Dir}
	if a := c.SysProcAttr; a != nil && a.Setctty {
		if a.Ctty != 0 {
			return fail(errors.New("sandbox: a pooled command's controlling terminal must be its standard input"))
		}
		req.setctty = true
	}
	if req.env == nil {
		req.env = os.Environ()
	}
	key := r.aheadKey(req)
	if key != "" {
		r.nextKey = key
		r.next = startReq{path: req.path, argv: []string{req.argv[0], "-c", req.argv[2][:r.prelude] + aheadTail}, env: req.env, dir: req.dir}
	}
	var m boxMsg
	defer func() { m.closeFDs() }()
	var err error
	if a := r.box.takeAhead(); a != nil {
		rest, ok := "", false
		if key != "" && a.key == key {
			rest, ok = r.aheadRest(c, req)
		}
		if !ok {
			a.close()
		} else if m, err = r.runAhead(c, a, rest); err != nil {
			return fail(err)
		}
	}
	if m.typ != msgStarted {
		// Started as usual, with its stdio handed to the launcher.
		var child []*os.File // the child's ends, ours to close after the start
		defer func() {
			for _, f := range child {
				_ = f.Close()
			}
		}()
		stdio := make([]*os.File, 3)
		if stdio[0], child, err = r.stdio(c.Stdin, true, child); err != nil {
			return fail(err)
		}
		if stdio[1], child, err = r.stdio(c.Stdout, false, child); err != nil {
			return fail(err)
		}
		if c.Stderr != nil && interfaceEqual(c.Stderr, c.Stdout) {
			stdio[2] = stdio[1]
		} else if stdio[2], child, err = r.stdio(c.Stderr, false, child); err != nil {
			return fail(err)
		}
		run := r.newRun()
		if err := r.box.send(msgStart, req.encode(), stdio); err != nil {
			r.box.close()
			return fail(fmt.Errorf("sandbox: pooled sandbox: %w", err))
		}
		select {
		case m = <-run.started:
		case <-r.box.gone:
			return fail(errBoxGone)
		}
	}
	if m.typ == msgFailed {
		f, err := decodeFailure(m.body)
		if err != nil {
			return fail(err)
		}
		return fail(f.err())
	}
	if len(m.fds) != 1 {
		r.box.close()
		return fail(errProtocol)
	}
	pid, err := pidOfPidfd(m.fds[0])
	if err != nil {
		r.box.close()
		return fail(err)
	}
	if c.Process, err = os.FindProcess(pid); err != nil {
		r.box.close()
		return fail(err)
	}
	r.started = true
	if r.ctx.Done() != nil {
		r.stopCtx = context.AfterFunc(r.ctx, func() {
			r.killMu.Lock()
			defer r.killMu.Unlock()
			if r.released {
				return
			}
			if c.Cancel != nil {
				_ = c.Cancel()
			} else {
				_ = c.Process.Kill()
			}
		})
	}
	return nil
}

// newRun makes the box's run the command's, before a message that starts
// it.
func (r *pooledRun) newRun() *boxRun {
	run := &boxRun{started: make(chan boxMsg, 1), exited: make(chan syscall.WaitStatus, 1)}
	r.box.mu.Lock()
	r.box.run = run
	r.box.mu.Unlock()
	r.run = run
	return run
}

// runAhead starts c in the box's shell started ahead, a, handing it rest,
// the script after the prelude, and copying its output into c's. It
// returns the launcher's started message, or a zero message when the
// shell ahead was gone (the command is then started as usual).
func (r *pooledRun) runAhead(c *Cmd, a *aheadShell, rest string) (boxMsg, error) {
	out, err := dupFile(c.Stdout.(*os.File))
	if err != nil {
		a.close() // and the command starts as usual
		return boxMsg{}, nil
	}
	run := r.newRun()
	if err := r.box.send(msgRun, nil, nil); err != nil {
		a.close()
		_ = out.Close()
		r.box.close()
		return boxMsg{}, fmt.Errorf("sandbox: pooled sandbox: %w", err)
	}
	var m boxMsg
	select {
	case m = <-run.started:
	case <-r.box.gone:
		a.close()
		_ = out.Close()
		return boxMsg{}, errBoxGone
	}
	if m.typ != msgStarted {
		m.closeFDs()
		a.close()
		_ = out.Close()
		return boxMsg{}, nil
	}
	r.copies.Add(1)
	go func() {
		defer r.copies.Done()
		// A shell that died meanwhile reads nothing (EPIPE): its exit
		// says the rest.
		_, _ = io.WriteString(a.script, rest)
		_ = a.script.Close()
	}()
	// The copy of the output ends when every process of the command is
	// gone (the launcher kills them all when the leader exits) and it has
	// written what they left, or when the command's output is closed:
	// then closing the shell's pipe fails their next writes, as they
	// would have failed on that output itself. Wait does not wait for
	// it: a caller that stopped reading (its drain timed out) closes its
	// end only after Wait.
	go func() {
		_, _ = io.Copy(out, a.out)
		_ = a.out.Close()
		_ = out.Close()
	}()
	return m, nil
}

// aheadKey returns what a shell started ahead must have been started
// with to run c (req being c's start): c's path, shell, prelude,
// environment and directory; "" when c's script has no prelude
// (Request.Prelude). After c, the box starts the next command's shell
// ahead with these.
func (r *pooledRun) aheadKey(req startReq) string {
	if r.prelude <= 0 || len(req.argv) != 3 || req.argv[1] != "-c" || r.prelude > len(req.argv[2]) ||
		req.argv[2][r.prelude-1] != '\n' || aheadUnsafeEnv(req.env) {
		return ""
	}
	var b strings.Builder
	for _, s := range []string{req.path, req.argv[0], req.argv[2][:r.prelude], req.dir} {
		b.WriteString(strconv.Quote(s))
	}
	for _, e := range req.env {
		b.WriteString(strconv.Quote(e))
	}
	return b.String()
}

// aheadRest returns the rest of c's script after its prelude, for a shell
// started ahead; ok is false when c cannot run in one. The rest must not
// be empty, nor end with a newline, which `$(<…)` would drop, nor with a
// backslash, which would then escape the end; c's standard input must be
// nil (/dev/null) and its standard output and error one file, without a
// terminal.
func (r *pooledRun) aheadRest(c *Cmd, req startReq) (rest string, ok bool) {
	rest = req.argv[2][r.prelude:]
	if rest == "" || strings.HasSuffix(rest, "\n") || strings.HasSuffix(rest, "\\") {
		return "", false
	}
	// Nor one longer than the kernel takes as one argument (MAX_ARG_STRLEN),
	// which `bash -c` fails with E2BIG: the command fails the same way
	// whichever shell it finds.
	if len(req.argv[2]) >= maxArgStrlen {
		return "", false
	}
	out, isFile := c.Stdout.(*os.File)
	if !isFile || c.Stdin != nil || !interfaceEqual(c.Stderr, c.Stdout) || req.setctty {
		return "", false
	}
	// A pipe, as the shell tools give: the shell's output is copied into
	// it, and a reader that closes it early fails the copy, and with it
	// the shell's next writes, as it would have failed them itself.
	if fi, err := out.Stat(); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return "", false
	}
	return rest, true
}

// dupFile returns a copy of f's descriptor as a new file.
func dupFile(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var fd int
	var derr error
	if err := rc.Control(func(raw uintptr) { fd, derr = unix.FcntlInt(raw, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// stdio returns the file for one of the command's standard streams
// (input for standard input): /dev/null for nil, the file itself, or one
// end of a pipe whose other end a goroutine feeds from the reader, or
// copies into the writer, as os/exec does.
func (r *pooledRun) stdio(stream any, input bool, child []*os.File) (*os.File, []*os.File, error) {
	if f, ok := stream.(*os.File); ok {
		return f, child, nil
	}
	if stream == nil {
		flag := os.O_WRONLY
		if input {
			flag = os.O_RDONLY
		}
		f, err := os.OpenFile(os.DevNull, flag, 0)
		if err != nil {
			return nil, child, err
		}
		return f, append(child, f), nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, child, err
	}
	ours, theirs := pr, pw
	if input {
		ours, theirs = pw, pr
	}
	r.closers = append(r.closers, ours)
	r.copies.Add(1)
	go func() {
		defer r.copies.Done()
		var err error
		if input {
			_, err = io.Copy(pw, stream.(io.Reader))
			// The command not reading all of its input is no error.
			if errors.Is(err, syscall.EPIPE) {
				err = nil
			}
		} else {
			_, err = io.Copy(stream.(io.Writer), pr)
		}
		r.setCopyErr(err)
		_ = ours.Close()
	}()
	return theirs, append(child, theirs), nil
}

func (r *pooledRun) setCopyErr(err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.copyErr == nil {
		r.copyErr = err
	}
}

// waitExited blocks until the leader has exited; it stays a zombie until
// wait. A box that ended took its commands along: they count as killed.
func (r *pooledRun) waitExited() {
	if r.exited || !r.started {
		return
	}
	select {
	case r.status = <-r.run.exited:
	case <-r.box.gone:
		select {
		case r.status = <-r.run.exited:
		default:
			r.status = syscall.WaitStatus(syscall.SIGKILL)
		}
	}
	r.exited = true
}

func (r *pooledRun) wait(c *Cmd) error {
	if !r.started {
		return errors.New("exec: not started")
	}
	if r.waited {
		return errors.New("exec: Wait was already called")
	}
	r.waited = true
	r.waitExited()
	if r.stopCtx != nil {
		r.stopCtx()
	}
	r.killMu.Lock()
	r.released = true
	r.killMu.Unlock()
	// The launcher killed every other process of the box: the pipes'
	// writers are gone and the copies end.
	r.copies.Wait()
	// Release before the box is given to the next command, whose start
	// then follows the release on the socket.
	r.pool.releasing(r.box)
	if err := r.box.send(msgRelease, nil, nil); err != nil {
		r.box.close()
	} else if r.nextKey != "" && !r.box.closing.Load() {
		r.pool.startAheadLater(r.box, r.nextKey, r.next)
	}
	r.pool.release(r.box)
	if !r.status.Exited() || r.status.ExitStatus() != 0 {
		return &ExitError{Status: r.status}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.copyErr
}

func (r *pooledRun) waitStatus() (syscall.WaitStatus, bool) {
	return r.status, r.exited
}

// WaitExited blocks until the started command has exited, without
// reaping it: until Wait, its pid and process-group id stay its own, so
// whatever it left in its group can still be killed by those ids.
func (c *Cmd) WaitExited() {
	if c.pooled != nil {
		c.pooled.waitExited()
		return
	}
	if c.Process != nil {
		_, _, _ = waitidNoReap(c.Process.Pid, false)
	}
}

// interfaceEqual reports whether a and b are the same writer, as os/exec
// compares Stdout and Stderr (comparing uncomparable values is no match).
func interfaceEqual(a, b any) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}

// poolKey is the key of the box for spec under the caller's pool key
// owner: the arguments of its view and the identities of what it binds.
func poolKey(owner string, spec bwrapSpec, onNetns bool) string {
	args, ids := spec.mounts()
	var b strings.Builder
	b.WriteString(strconv.Quote(owner))
	fmt.Fprintf(&b, " proc=%t netns=%t net-off=%t", spec.mountProc, onNetns, spec.policy.NetworkDisabled())
	for _, a := range args {
		b.WriteString(" " + strconv.Quote(a))
	}
	b.WriteString(" |")
	for _, id := range ids {
		b.WriteString(" " + id)
	}
	return b.String()
}
