package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A Landlock launcher's commands are otherwise children of the daemon in
// its PID namespace: they could read the daemon's environment in
// /proc/<ppid>/environ and kill it. isolateThread therefore gives the
// launcher thread, before Landlock applies, what bubblewrap gives each
// command:
//
//   - a mount namespace of its own (mount namespaces, like the others, are
//     per thread), slave to the host's so host mounts still appear, in
//     which the hidden paths are masked, the read-only paths are bound
//     read-only over everything, /dev holds only the usual character
//     devices (no disks to read the masked files through), and /proc
//     shows only the new PID namespace;
//   - a PID namespace for its children, whose init is the helper
//     (`<exe> __appserver-sandbox --init`, started in a new one that the
//     thread then joins for its children): it mounts that /proc, reaps
//     orphans and ignores every signal. Commands of one launcher (one rule
//     set) share the namespace, so they see each other, but not the daemon:
//     their parent pid reads 0.
//
// Both need CAP_SYS_ADMIN; without it the Landlock backend refuses to run
// commands rather than leave the daemon exposed.
func isolateThread(exe string, v view) (*initProc, error) {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return nil, fmt.Errorf("unshare(mount): %w (the landlock backend needs CAP_SYS_ADMIN to hide the daemon from commands; use bubblewrap otherwise)", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return nil, fmt.Errorf("mount --make-rslave /: %w", err)
	}
	// The read-only paths are opened before a mask can cover them.
	shown := make([]int, 0, len(v.readOnly))
	defer func() {
		for _, fd := range shown {
			_ = unix.Close(fd)
		}
	}()
	for _, r := range v.readOnly {
		fd, err := unix.Open(r.path, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return nil, fmt.Errorf("show %s read-only: %w", r.path, err)
		}
		shown = append(shown, fd)
	}
	if err := minimalDev(); err != nil {
		return nil, fmt.Errorf("/dev: %w", err)
	}
	var open []hiddenPath // masks that read-only paths are bound into
	for _, h := range v.hidden {
		holds := h.dir && holdsAny(h.path, v.readOnly)
		if err := mask(h, holds); err != nil {
			return nil, fmt.Errorf("hide %s: %w", h.path, err)
		}
		if holds {
			open = append(open, h)
		}
	}
	for i, r := range v.readOnly {
		if err := bindReadOnly(shown[i], r); err != nil {
			return nil, fmt.Errorf("show %s read-only: %w", r.path, err)
		}
	}
	for _, h := range open {
		if err := remountReadOnly(h.path); err != nil {
			return nil, fmt.Errorf("hide %s: %w", h.path, err)
		}
	}
	p, err := startInit(exe)
	if err != nil {
		return nil, err
	}
	// Join init's PID namespace for the thread's children. Unsharing one
	// instead would make the first process forked here its init, and Go
	// may fork a short-lived probe child first (CLONE_PIDFD support).
	fd, err := unix.PidfdOpen(p.cmd.Process.Pid, 0)
	if err == nil {
		err = unix.Setns(fd, unix.CLONE_NEWPID)
		_ = unix.Close(fd)
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("setns(pid): %w", err)
	}
	return p, nil
}

// maskFlags are the flags of every mount that masks or shows a path.
const maskFlags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC

// mask covers a hidden path: an empty read-only tmpfs over a directory, a
// read-only bind of /dev/null over a file. A directory that read-only
// paths will be bound into (holds) gets a tmpfs that stays writable
// until remountReadOnly, and that can be traversed but not listed.
func mask(h hiddenPath, holds bool) error {
	if h.dir && holds {
		return unix.Mount("tmpfs", h.path, "tmpfs", maskFlags, "mode=0711")
	}
	if h.dir {
		return unix.Mount("tmpfs", h.path, "tmpfs", maskFlags|unix.MS_RDONLY, "mode=000")
	}
	if err := unix.Mount("/dev/null", h.path, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return remountReadOnly(h.path)
}

// remountReadOnly makes the mount at path read-only.
func remountReadOnly(path string) error {
	return unix.Mount("", path, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|maskFlags, "")
}

// holdsAny reports whether one of paths lies below dir.
func holdsAny(dir string, paths []hiddenPath) bool {
	for _, p := range paths {
		if strings.HasPrefix(p.path, dir+"/") {
			return true
		}
	}
	return false
}

// bindReadOnly binds the file or directory open as fd (an O_PATH
// descriptor of r) read-only at r.path, first making the mount point
// where a mask hides it (directories traversable only).
func bindReadOnly(fd int, r hiddenPath) error {
	if _, err := os.Lstat(r.path); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(r.path), 0o711); err != nil {
			return err
		}
		if r.dir {
			err = os.Mkdir(r.path, 0o711)
		} else {
			var f *os.File
			if f, err = os.OpenFile(r.path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o400); err == nil {
				err = f.Close()
			}
		}
		if err != nil {
			return err
		}
	}
	if err := unix.Mount(fmt.Sprintf("/proc/thread-self/fd/%d", fd), r.path, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return remountReadOnly(r.path)
}

// devNodes are the devices of the minimal /dev, as bubblewrap's --dev.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// minimalDev mounts a tmpfs on /dev holding devNodes, the host's /dev/pts
// and /dev/shm bound in, and the usual symlinks. The host nodes are
// reached through descriptors opened before the tmpfs covers them.
func minimalDev() error {
	srcs := map[string]int{}
	defer func() {
		for _, fd := range srcs {
			_ = unix.Close(fd)
		}
	}()
	for _, n := range append(devNodes, "pts", "shm") {
		fd, err := unix.Open("/dev/"+n, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return err
		}
		srcs[n] = fd
	}
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755"); err != nil {
		return err
	}
	for n, fd := range srcs {
		dst := "/dev/" + n
		var err error
		if n == "pts" || n == "shm" {
			err = os.Mkdir(dst, 0o755)
		} else {
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o666); err == nil {
				err = f.Close()
			}
		}
		if err != nil {
			return err
		}
		src := fmt.Sprintf("/proc/thread-self/fd/%d", fd)
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", dst, err)
		}
	}
	for name, target := range map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, filepath.Join("/dev", name)); err != nil {
			return err
		}
	}
	return nil
}

// initReady is what the init helper writes to its ready pipe once /proc is
// mounted; anything else is its error.
const initReady = "ok"

// initProc is the init of a launcher's PID namespace. It lives while the
// daemon holds the write end of its standard input: a Landlock launcher
// may not signal it (init is outside its domain), so stop closes the pipe
// instead, and init exits on EOF.
type initProc struct {
	cmd  *exec.Cmd
	hold *os.File
}

// startInit starts the init of the launcher's PID namespace and waits
// until it has mounted /proc.
func startInit(exe string) (*initProc, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	in, hold, err := os.Pipe()
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	defer in.Close()
	cmd := exec.Command(exe, HelperCommand, flagInit)
	// Nothing of the daemon's environment: commands can read init's.
	cmd.Env = []string{"GORACE=atexit_sleep_ms=0"}
	cmd.Stdin = in
	cmd.ExtraFiles = []*os.File{w}
	// Pdeathsig: init (and with it every process of the namespace) dies
	// with the launcher thread, whatever happens to the daemon.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: syscall.CLONE_NEWPID}
	err = cmd.Start()
	_ = w.Close()
	if err != nil {
		_ = hold.Close()
		return nil, fmt.Errorf("start init: %w", err)
	}
	p := &initProc{cmd: cmd, hold: hold}
	msg, _ := io.ReadAll(io.LimitReader(r, 4096))
	if string(msg) != initReady {
		p.stop()
		return nil, fmt.Errorf("init: %s", strings.TrimSpace(string(msg)))
	}
	return p, nil
}

// stop ends init, which takes down whatever is left in its PID namespace
// (orphans of finished commands), and reaps it.
func (p *initProc) stop() {
	_ = p.hold.Close()
	_ = p.cmd.Wait()
}

// runInit is the init helper: mount /proc for the new PID namespace,
// report on descriptor 3, then reap children until standard input ends.
// Every signal is caught, so none sent from inside the namespace can end
// it (SIGKILL and SIGSTOP from inside are dropped by the kernel for a
// namespace's init).
func runInit() int {
	ready := os.NewFile(3, "ready")
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		fmt.Fprintf(ready, "mount /proc: %v", err)
		return 1
	}
	_, _ = io.WriteString(ready, initReady)
	_ = ready.Close()
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			continue
		}
		for {
			pid, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
	return 0
}

// dropCapabilities empties the calling thread's capability sets, bounding
// set included, so that the root-owned commands it starts hold no
// capability even after execve: no raw devices, no file handles around
// the masks, no ptrace of init (bubblewrap gets --cap-drop ALL alike).
func dropCapabilities() error {
	for c := 0; c < 64; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the last capability the kernel knows
			}
			return fmt.Errorf("PR_CAPBSET_DROP(%d): %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}
