package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// netnsMode is how a command without network gets an empty network
// namespace, decided once per Sandbox by probeNetns.
type netnsMode int

const (
	// netnsNone: namespaces are not permitted here; seccomp and Landlock
	// TCP rules alone cut the network.
	netnsNone netnsMode = iota
	// netnsShared: one empty network namespace per Sandbox, created by a
	// launcher thread (unshare(CLONE_NEWNET) affects only the calling
	// thread) and joined by the threads that start commands without
	// network. Creating a namespace per command costs about half a
	// millisecond and leaves a long teardown tail in the kernel; starting
	// from a thread already inside one costs nothing. Needs CAP_SYS_ADMIN.
	netnsShared
	// netnsUser: CLONE_NEWUSER|CLONE_NEWNET per command, mapping our own
	// uid and gid, for unprivileged daemons on hosts that allow user
	// namespaces.
	netnsUser
)

// apply adds the clone flags (and id maps) of m to attr.
func (m netnsMode) apply(attr *syscall.SysProcAttr) {
	if m == netnsUser {
		attr.Cloneflags |= syscall.CLONE_NEWNET | syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
}

// probeNetns picks the cheapest namespace mode the kernel accepts. For
// netnsShared it returns the launcher thread living in the new namespace
// and a descriptor of that namespace for other launchers to join.
func probeNetns(exe string) (netnsMode, *launcher, int) {
	if l, fd, err := newNetnsLauncher(); err == nil {
		return netnsShared, l, fd
	}
	cmd := exec.Command(exe, HelperCommand, flagProbe)
	// GORACE: race-enabled builds (tests) otherwise sleep 1 s at exit.
	cmd.Env = []string{"GORACE=atexit_sleep_ms=0"}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	netnsUser.apply(cmd.SysProcAttr)
	if cmd.Run() == nil {
		return netnsUser, nil, -1
	}
	return netnsNone, nil, -1
}

// newNetnsLauncher starts a launcher thread in a new, empty network
// namespace and returns it with a descriptor of the namespace.
func newNetnsLauncher() (*launcher, int, error) {
	fd := -1
	l, err := newLauncher(func() (func(), error) {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return nil, fmt.Errorf("unshare(network): %w", err)
		}
		var err error
		fd, err = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		return nil, err
	})
	if err != nil {
		return nil, -1, err
	}
	return l, fd, nil
}

// helperProcAttr is the process setup of bwrap:
// its own process group (so a timeout can kill everything it started) and
// SIGKILL when the daemon thread that started it dies.
func helperProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
