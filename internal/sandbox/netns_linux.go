package sandbox

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// netnsMode is how a helper without network gets a fresh (empty) network
// namespace, decided once per Sandbox by probeNetns.
type netnsMode int

const (
	// netnsNone: namespaces are not permitted here; seccomp and Landlock
	// TCP rules alone cut the network.
	netnsNone netnsMode = iota
	// netnsShared: the helper joins (setns) one empty network namespace
	// created once per Sandbox and held open by a file descriptor. Creating
	// a namespace per command costs about half a millisecond and leaves a
	// long teardown tail in the kernel; joining one is a single syscall.
	// Needs CAP_SYS_ADMIN.
	netnsShared
	// netnsPlain: CLONE_NEWNET directly (the daemon has CAP_SYS_ADMIN).
	netnsPlain
	// netnsUser: CLONE_NEWUSER|CLONE_NEWNET, mapping our own uid and gid,
	// for unprivileged daemons on hosts that allow user namespaces.
	netnsUser
)

// apply adds the clone flags (and id maps) of m to attr.
func (m netnsMode) apply(attr *syscall.SysProcAttr) {
	switch m {
	case netnsPlain:
		attr.Cloneflags |= syscall.CLONE_NEWNET
	case netnsUser:
		attr.Cloneflags |= syscall.CLONE_NEWNET | syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
}

// probeNetns picks the cheapest namespace mode the kernel accepts: a
// shared namespace (returned as an open file), else a fresh namespace per
// command inside a user namespace, else none.
func probeNetns(exe string) (netnsMode, *os.File) {
	if f, err := holdNetns(exe); err == nil {
		return netnsShared, f
	}
	for _, m := range []netnsMode{netnsUser} {
		cmd := exec.Command(exe, HelperCommand, flagProbe)
		// GORACE: race-enabled builds (tests) otherwise sleep 1 s at exit.
		cmd.Env = []string{"GORACE=atexit_sleep_ms=0"}
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		m.apply(cmd.SysProcAttr)
		if cmd.Run() == nil {
			return m, nil
		}
	}
	return netnsNone, nil
}

// holdNetns creates an empty network namespace and returns a descriptor
// that keeps it alive: a helper is started in a new namespace, waits on its
// stdin while the namespace is opened through /proc, and exits.
func holdNetns(exe string) (*os.File, error) {
	cmd := exec.Command(exe, HelperCommand, flagProbe, flagHold)
	cmd.Env = []string{"GORACE=atexit_sleep_ms=0"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// The helper writes one byte once it runs, so /proc/<pid>/ns/net is
	// the new namespace and not a half-started child's.
	var b [1]byte
	_, rerr := io.ReadFull(out, b[:])
	var f *os.File
	if rerr == nil {
		f, rerr = os.Open(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
	}
	_ = in.Close()
	werr := cmd.Wait()
	if rerr != nil {
		return nil, rerr
	}
	if werr != nil {
		_ = f.Close()
		return nil, werr
	}
	return f, nil
}

// joinNetns moves the calling thread into the namespace open as fd and
// closes fd. The caller must stay on this thread (LockOSThread) until exec:
// namespaces are per thread, and the exec'd image keeps the caller's.
func joinNetns(fd int) error {
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns(network): %w", err)
	}
	return nil
}

// helperProcAttr is the process setup of a helper or bwrap process: its own
// process group (so a timeout can kill everything it started) and SIGKILL
// when the daemon thread that started it dies.
func helperProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
