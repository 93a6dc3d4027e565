package sandbox

import (
	"errors"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A launcher is one OS thread of the daemon that carries restrictions a
// command must start with: a network namespace, a Landlock domain, a
// seccomp filter and no_new_privs are all per-thread attributes in Linux,
// and a process forked from a thread inherits that thread's. The launcher's
// goroutine is locked to its thread for good, so no other goroutine ever
// runs there, and the Go runtime starts new threads from its template
// thread rather than cloning a locked one, so the restrictions reach
// nothing but the children the launcher forks.
//
// Applying the restrictions once per thread instead of once per command
// (re-executing a helper that restricts itself and then execs) saves a
// whole process start per command.
//
// A Landlock launcher's children live in a PID namespace whose init has
// Pdeathsig, which fires when the parent *thread* exits and takes the whole
// namespace down (the bubblewrap launcher's children have Pdeathsig
// themselves); a launcher therefore only exits (retire) once every child it
// started has exited, which it learns from pidfds.
type launcher struct {
	reqs   chan launchReq
	retire chan struct{} // closed by stop
	exited chan struct{} // closed when the thread is gone
	once   sync.Once

	mu      sync.Mutex
	lastUse time.Time
}

type launchReq struct {
	start func() (pid int, err error)
	done  chan error
}

// errLauncherGone is returned when a launcher's thread has exited; the
// caller builds the command again.
var errLauncherGone = errors.New("sandbox: launcher thread exited")

// launcherPoll is how often a retired launcher checks for live children.
const launcherPoll = time.Second

// launcherSetup restricts a launcher's thread. It returns what to run when
// the thread ends (nil for nothing); on error the thread may be
// half-restricted, and it ends.
type launcherSetup func() (cleanup func(), err error)

// newLauncher starts a launcher whose thread runs setup first; a setup
// error ends the thread and is returned.
func newLauncher(setup launcherSetup) (*launcher, error) {
	l := &launcher{reqs: make(chan launchReq), retire: make(chan struct{}), exited: make(chan struct{}), lastUse: time.Now()}
	ready := make(chan error, 1)
	go l.loop(setup, ready, nil)
	if err := <-ready; err != nil {
		return nil, err
	}
	return l, nil
}

func (l *launcher) loop(setup launcherSetup, ready chan<- error, locked chan<- struct{}) {
	// Never unlocked: when this goroutine returns, the runtime ends the
	// thread instead of reusing it.
	runtime.LockOSThread()
	if locked != nil {
		close(locked)
	}
	if unix.Gettid() == unix.Getpid() {
		// The main thread: its namespaces are what /proc/self shows, and
		// the runtime never ends it. Hold it while another goroutine
		// locks a thread of its own (it cannot get this one), then let go.
		next := make(chan struct{})
		go l.loop(setup, ready, next)
		<-next
		runtime.UnlockOSThread()
		return
	}
	defer close(l.exited)
	cleanup, err := setup()
	if err != nil {
		ready <- err
		return
	}
	if cleanup != nil {
		defer cleanup()
	}
	ready <- nil
	var kids []int // pidfds of children not yet seen to exit
	defer func() {
		for _, fd := range kids {
			_ = unix.Close(fd)
		}
	}()
	var tick <-chan time.Time
	retire := l.retire
	for {
		select {
		case r := <-l.reqs:
			pid, err := r.start()
			if err == nil {
				kids = track(kids, pid)
			}
			r.done <- err
		case <-retire:
			t := time.NewTicker(launcherPoll)
			defer t.Stop()
			tick, retire = t.C, nil
			if kids = live(kids); len(kids) == 0 {
				return
			}
		case <-tick:
			if kids = live(kids); len(kids) == 0 {
				return
			}
		}
	}
}

// track adds a pidfd for pid to kids, first dropping children that have
// exited. Without pidfds (kernels before 5.3) the launcher cannot tell and
// keeps a -1, which keeps it alive.
func track(kids []int, pid int) []int {
	kids = live(kids)
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		fd = -1
	}
	return append(kids, fd)
}

// live closes the pidfds of children that have exited and returns the rest.
func live(kids []int) []int {
	out := kids[:0]
	for _, fd := range kids {
		if fd >= 0 {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if n, err := unix.Poll(pfd, 0); err == nil && n == 1 {
				_ = unix.Close(fd)
				continue
			}
		}
		out = append(out, fd)
	}
	return out
}

// start runs start on the launcher's thread. start returns the pid of the
// child it started.
func (l *launcher) start(start func() (int, error)) error {
	l.mu.Lock()
	l.lastUse = time.Now()
	l.mu.Unlock()
	r := launchReq{start: start, done: make(chan error, 1)}
	select {
	case l.reqs <- r:
		return <-r.done
	case <-l.exited:
		// Retired and finished: a caller that raced with retirement
		// builds its command again on a fresh launcher.
		return errLauncherGone
	}
}

// stop retires the launcher: it serves no new pool lookups and its thread
// exits once all of its children have.
func (l *launcher) stop() { l.once.Do(func() { close(l.retire) }) }

func (l *launcher) idleSince() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastUse
}
