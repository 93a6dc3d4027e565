package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The launcher of a pooled sandbox: the daemon binary re-executed by
// bubblewrap (`__appserver-sandbox --box`) as pid 1 of the sandbox's PID
// namespace (--as-pid-1), inside its mounts, without capabilities and,
// with the network off, under the seccomp filter and in the empty network
// namespace. It starts one command at a time, as the daemon asks over
// descriptor 3 (boxwire_linux.go), in a new session of its own.
//
// When the command's leader exits, the launcher kills every other process
// of the namespace (kill(-1) from pid 1 reaches all of them) and waits
// until none lives (it reads the namespace's /proc), as the end of a
// bubblewrap sandbox per command does, and reports the exit status;
// the leader stays a zombie, so its pid and process-group id cannot be
// reused while the daemon still sweeps them, until the daemon releases it.
// It then reaps everything and reports the sandbox clean for the next
// command. Between commands it may hold the next command's shell, started
// ahead (box_linux.go, aheadShell): the next command either takes it as
// its leader or finds it killed, with all it started, before it starts.
//
// Commands cannot stop or kill it: the kernel drops SIGKILL and SIGSTOP
// sent to a PID namespace's init from inside, and every other signal is
// caught. It is not dumpable, so commands, which hold no capabilities,
// can neither ptrace it nor open its /proc files (its socket included).
// When the daemon closes the socket (or dies), it kills everything and
// exits, and the kernel tears the namespace down with it.

// boxSweepTimeout bounds how long the launcher waits for the processes it
// killed to die before it gives up on the sandbox (exits, so the daemon
// builds another one).
const boxSweepTimeout = 5 * time.Second

type boxLauncher struct {
	fd     int
	leader int  // pid of the running command's leader; 0 when none
	exited bool // the leader exited and was reported
	ahead  int  // pid of the shell started ahead of the next command; 0 when none
}

// runBox is the launcher's main loop; it returns the helper's exit code.
func runBox() int {
	// kill(-1) reaches every process the caller may signal: only as the
	// init of its own PID namespace is that the sandbox's and no more.
	if os.Getpid() != 1 {
		fmt.Fprintf(os.Stderr, "%s%s runs only as the init of a sandbox's PID namespace\n", helperPrefix, flagBox)
		return 2
	}
	// No descriptor inherited from bubblewrap (the socket, the seccomp
	// program's) reaches a command. They are marked close-on-exec rather
	// than closed: the Go runtime's own descriptors, opened during
	// package initialisation, are among them.
	if err := unix.CloseRange(boxFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		for fd := boxFD; fd < 1024; fd++ {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "%sprctl(PR_SET_DUMPABLE): %v\n", helperPrefix, err)
		return 1
	}
	// One wake-up per batch of exits is enough: the loop below looks at
	// every child. Every other signal is caught (and dropped), so no
	// command can end the launcher with one.
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	sink := make(chan os.Signal, 16)
	signal.Notify(sink)
	go func() {
		for range sink {
		}
	}()

	l := &boxLauncher{fd: boxFD}
	self, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%spidfd_open: %v\n", helperPrefix, err)
		return 1
	}
	err = sendRaw(l.fd, msgReady, nil, []int{self})
	_ = unix.Close(self)
	if err != nil {
		return 1
	}
	msgs := make(chan boxMsg)
	gone := make(chan error, 1)
	go func() {
		for {
			m, err := recvRaw(l.fd)
			if err != nil {
				gone <- err
				return
			}
			msgs <- m
		}
	}()
	for {
		select {
		case m := <-msgs:
			if err := l.handle(m); err != nil {
				fmt.Fprintf(os.Stderr, "%s%v\n", helperPrefix, err)
				_ = unix.Kill(-1, unix.SIGKILL)
				return 1
			}
		case <-chld:
			if err := l.childExited(); err != nil {
				return 1
			}
		case <-gone:
			// The daemon closed the sandbox (or is gone).
			_ = unix.Kill(-1, unix.SIGKILL)
			return 0
		}
	}
}

var errProtocol = errors.New("unexpected message from the daemon")

func (l *boxLauncher) handle(m boxMsg) error {
	defer m.closeFDs()
	switch m.typ {
	case msgStart, msgAhead:
		fds := 3
		if m.typ == msgAhead {
			fds = 4
		}
		if l.leader != 0 || len(m.fds) != fds {
			return errProtocol
		}
		req, err := decodeStart(m.body)
		if err != nil {
			return err
		}
		// A command that does not take the shell ahead finds nothing of
		// it in the sandbox, and there is one such shell at most.
		if err := l.dropAhead(); err != nil {
			return err
		}
		if m.typ == msgAhead {
			l.startAhead(req, m.fds)
			return nil
		}
		return l.start(req, m.fds)
	case msgRun:
		if l.leader != 0 || len(m.fds) != 0 {
			return errProtocol
		}
		return l.run()
	case msgRelease:
		if l.leader == 0 || !l.exited {
			return errProtocol
		}
		var ws unix.WaitStatus
		if _, err := unix.Wait4(l.leader, &ws, 0, nil); err != nil {
			return fmt.Errorf("reap the command: %w", err)
		}
		l.leader, l.exited, l.ahead = 0, false, 0
		if err := sweep(); err != nil {
			return err
		}
		return sendRaw(l.fd, msgClean, nil, nil)
	}
	return errProtocol
}

// start starts req with fds as its standard input, output and error and
// reports its pidfd (or why it could not start).
func (l *boxLauncher) start(req startReq, fds []int) error {
	p, err := spawn(req, fds)
	if err != nil {
		return sendRaw(l.fd, msgFailed, failureOf(err).encode(), nil)
	}
	l.leader = p.Pid
	_ = p.Release()
	return l.reportStarted()
}

// reportStarted reports the leader's pidfd: the daemon learns the pid as
// it sees it from it; the zombie keeps the pidfd valid until the release.
func (l *boxLauncher) reportStarted() error {
	pidfd, err := unix.PidfdOpen(l.leader, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	err = sendRaw(l.fd, msgStarted, encodeUint(uint64(l.leader)), []int{pidfd})
	_ = unix.Close(pidfd)
	return err
}

// startAhead starts the shell of req ahead of its command, with fds as
// its standard input, output and error and its descriptor 3. A shell that
// cannot start is no error: the next command is started as usual.
func (l *boxLauncher) startAhead(req startReq, fds []int) {
	if p, err := spawn(req, fds); err == nil {
		l.ahead = p.Pid
		_ = p.Release()
	}
}

// spawn starts req in a session of its own with fds as its first
// descriptors, which it closes.
func spawn(req startReq, fds []int) (*os.Process, error) {
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "stdio")
	}
	attr := &os.ProcAttr{Dir: req.dir, Env: req.env, Files: files,
		Sys: &syscall.SysProcAttr{Setsid: true, Setctty: req.setctty, Ctty: 0}}
	p, err := os.StartProcess(req.path, req.argv, attr)
	for i, f := range files {
		_ = f.Close()
		fds[i] = -1
	}
	return p, err
}

// run makes the shell ahead the running command and reports its pidfd,
// or reports failed when there is none alive.
func (l *boxLauncher) run() error {
	if l.ahead != 0 {
		pid, _, err := waitidNoReap(l.ahead, true)
		if err != nil {
			return err
		}
		if pid == 0 {
			l.leader, l.ahead = l.ahead, 0
			return l.reportStarted()
		}
		// It exited on its own (a snapshot that exits): gone with
		// whatever it started.
		if err := l.dropAhead(); err != nil {
			return err
		}
	}
	return sendRaw(l.fd, msgFailed, startFailure{text: "sandbox: no shell started ahead"}.encode(), nil)
}

// dropAhead kills the shell ahead, if any, and every process of the
// sandbox with it (no command runs meanwhile), and reaps them all.
func (l *boxLauncher) dropAhead() error {
	if l.ahead == 0 {
		return nil
	}
	l.ahead = 0
	return sweep()
}

// childExited reports the leader's exit (killing the rest of the
// namespace first) and reaps other children that died.
func (l *boxLauncher) childExited() error {
	if l.leader != 0 && !l.exited {
		pid, ws, err := waitidNoReap(l.leader, true)
		if err != nil {
			return err
		}
		if pid != 0 {
			l.exited = true
			if err := killOthers(l.leader); err != nil {
				return err
			}
			if err := sendRaw(l.fd, msgExited, encodeUint(uint64(ws)), nil); err != nil {
				return err
			}
		}
	}
	// Orphans reparented to pid 1 that died. The leader's zombie, once
	// there, may hide others from the peek: they are reaped at release.
	for {
		pid, _, err := waitidNoReap(0, true)
		if err != nil || pid == 0 || pid == l.leader || pid == l.ahead {
			// The shell ahead stays a zombie until the next command
			// asks for it: its pid cannot be reused meanwhile.
			return nil
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
}

// killOthers kills every process of the namespace but the launcher and
// the leader's zombie, and returns once none of them lives (zombies of
// the launcher's are reaped), as the end of a PID namespace does.
func killOthers(leader int) error {
	deadline := time.Now().Add(boxSweepTimeout)
	for {
		_ = unix.Kill(-1, unix.SIGKILL)
		live := false
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return err
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == 1 || pid == leader {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue // gone meanwhile
			}
			st := string(b)
			f := strings.Fields(st[strings.LastIndexByte(st, ')')+1:])
			if len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
				var ws unix.WaitStatus
				_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
				continue
			}
			live = true
		}
		if !live {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("processes of the last command did not die")
		}
		time.Sleep(time.Millisecond)
	}
}

// sweep kills every other process of the namespace and reaps them all.
func sweep() error {
	deadline := time.Now().Add(boxSweepTimeout)
	for {
		_ = unix.Kill(-1, unix.SIGKILL)
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if errors.Is(err, unix.ECHILD) {
				return nil
			}
			if err == unix.EINTR || pid > 0 {
				continue
			}
			break
		}
		if time.Now().After(deadline) {
			return errors.New("processes of the last command did not die")
		}
		time.Sleep(time.Millisecond)
	}
}

// waitidNoReap waits for the child pid (any child for 0) to exit, leaving
// it a zombie (waitid with WNOWAIT). With nohang it returns pid 0 when
// none has exited yet. It returns the exited child's pid and wait status.
func waitidNoReap(pid int, nohang bool) (int, syscall.WaitStatus, error) {
	idtype := unix.P_PID
	if pid == 0 {
		idtype = unix.P_ALL
	}
	opts := unix.WEXITED | unix.WNOWAIT
	if nohang {
		opts |= unix.WNOHANG
	}
	// siginfo_t of SIGCHLD: si_signo, si_errno, si_code, padding, then
	// si_pid, si_uid, si_status (the same layout on amd64 and arm64).
	var info [128]byte
	for {
		_, _, errno := unix.Syscall6(unix.SYS_WAITID, uintptr(idtype), uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), uintptr(opts), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, 0, errno
		}
		break
	}
	code := *(*int32)(unsafe.Pointer(&info[8]))
	got := int(*(*int32)(unsafe.Pointer(&info[16])))
	status := uint32(*(*int32)(unsafe.Pointer(&info[24])))
	var ws syscall.WaitStatus
	switch code {
	case 1: // CLD_EXITED
		ws = syscall.WaitStatus(status << 8)
	case 2: // CLD_KILLED
		ws = syscall.WaitStatus(status)
	case 3: // CLD_DUMPED
		ws = syscall.WaitStatus(status | 0x80)
	}
	return got, ws, nil
}

// sendRaw sends a message on a blocking socket descriptor.
func sendRaw(fd int, typ byte, body []byte, fds []int) error {
	b, err := frame(typ, body)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	for {
		n, err := unix.SendmsgN(fd, b, oob, nil, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		// The descriptors went with the first byte; the rest follows.
		b, oob = b[n:], nil
		if len(b) == 0 {
			return nil
		}
	}
}

// recvRaw receives a message from a blocking socket descriptor; io.EOF
// when the peer closed it.
func recvRaw(fd int) (boxMsg, error) {
	var hdr [msgHeaderLen]byte
	oob := make([]byte, unix.CmsgSpace(maxMsgFDs*4))
	var n, oobn int
	for {
		var err error
		n, oobn, _, _, err = unix.Recvmsg(fd, hdr[:], oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return boxMsg{}, err
		}
		break
	}
	fds, err := parseRights(oob[:oobn])
	m := boxMsg{fds: fds}
	if err != nil {
		m.closeFDs()
		return boxMsg{}, err
	}
	if n == 0 {
		m.closeFDs()
		return boxMsg{}, errBoxEOF
	}
	if err := readFull(fd, hdr[n:]); err != nil {
		m.closeFDs()
		return boxMsg{}, err
	}
	typ, size, err := parseHeader(hdr[:])
	if err == nil {
		m.typ, m.body = typ, make([]byte, size)
		err = readFull(fd, m.body)
	}
	if err != nil {
		m.closeFDs()
		return boxMsg{}, err
	}
	return m, nil
}

// errBoxEOF is the end of the launcher's socket.
var errBoxEOF = errors.New("sandbox: the other end closed the socket")
