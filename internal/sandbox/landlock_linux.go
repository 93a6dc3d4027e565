package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/appserver/appserver/internal/policy"
)

// devWritable are the device files a restricted command may still open for
// writing: the reference allows /dev/null; the others are what bubblewrap's
// minimal /dev offers and what terminals and shells expect. Devices opened
// before the restriction (stdin/stdout pipes, a PTY) are not affected.
var devWritable = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx"}

// fileID names a file by path and by identity, so a rule set built for one
// directory is never reused for another one created at the same path.
type fileID struct {
	path     string
	dev, ino uint64
}

// ruleset is what a Landlock launcher thread enforces for one command: the
// policy resolved against the file system as it is now. Its key names the
// launcher that carries it.
type ruleset struct {
	abi       int
	dirs      []fileID // writable directories
	files     []fileID // writable files
	netOff    bool
	joinNetns bool   // setns into the sandbox's empty network namespace
	viewGen   int    // the generation of the hidden paths the launcher masks
	owner     string // the request's pool key: launchers are not shared across keys
}

// landlockABI is the kernel's Landlock ABI version, 0 when unavailable.
func landlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// resolveRuleset computes the rule set of p for policy cwd pcwd and the
// command's $TMPDIR. Writable roots that do not exist are left out: they
// cannot be written into anyway.
func resolveRuleset(p policy.SandboxPolicy, pcwd, tmpdir string, abi int) ruleset {
	rs := ruleset{abi: abi, netOff: p.NetworkDisabled()}
	for _, r := range writableRoots(p, pcwd, tmpdir) {
		var st unix.Stat_t
		if err := unix.Stat(r.Root, &st); err != nil {
			continue
		}
		id := fileID{path: r.Root, dev: st.Dev, ino: st.Ino}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			rs.dirs = append(rs.dirs, id)
		} else {
			rs.files = append(rs.files, id)
		}
	}
	return rs
}

// ownerKey starts the key of every launcher kept for pool key owner.
func ownerKey(owner string) string { return "owner=" + strconv.Quote(owner) + " " }

func (rs ruleset) key() string {
	var b strings.Builder
	b.WriteString(ownerKey(rs.owner))
	fmt.Fprintf(&b, "abi=%d net-off=%t netns=%t view=%d", rs.abi, rs.netOff, rs.joinNetns, rs.viewGen)
	for _, list := range [][]fileID{rs.dirs, rs.files} {
		b.WriteString(" |")
		for _, f := range list {
			b.WriteString(" " + strconv.Quote(f.path) + ":" + strconv.FormatUint(f.dev, 10) + ":" + strconv.FormatUint(f.ino, 10))
		}
	}
	return b.String()
}

// Access rights, as the kernel's ABI versions introduced them.
const (
	fsReadOnly = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	fsFileRW   = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

// handledFS is every file-system right the kernel's ABI knows, except
// resolving Unix sockets, which the reference does not restrict.
func handledFS(abi int) uint64 {
	h := uint64(ll.AccessFSMakeSym<<1 - 1) // ABI 1: execute ... make_sym
	if abi >= 2 {
		h |= ll.AccessFSRefer
	}
	if abi >= 3 {
		h |= ll.AccessFSTruncate
	}
	if abi >= 5 {
		h |= ll.AccessFSIoctlDev
	}
	return h
}

// setupThread prepares the calling thread, which must be locked to its
// goroutine for good, to start the commands of rs: the network namespace,
// the mount and PID namespaces hiding the daemon (isolateThread, with v's
// masks), no capabilities, then restrictThread. The cleanup it returns
// stops the PID namespace's init. On error the thread may be partly
// restricted and must exit.
func (rs ruleset) setupThread(netnsFD int, exe string, v view) (func(), error) {
	if rs.joinNetns {
		if err := unix.Setns(netnsFD, unix.CLONE_NEWNET); err != nil {
			return nil, fmt.Errorf("setns(network): %w", err)
		}
	}
	if rs.abi < 1 {
		// Fail closed: without Landlock nothing would restrict writes.
		return nil, fmt.Errorf("landlock is not available on this kernel; cannot restrict the file system")
	}
	pid1, err := isolateThread(exe, v)
	if err != nil {
		return nil, err
	}
	if err := dropCapabilities(); err != nil {
		pid1.stop()
		return nil, err
	}
	if err := rs.restrictThread(); err != nil {
		pid1.stop()
		return nil, err
	}
	return pid1.stop, nil
}

// restrictThread applies rs to the calling thread: Landlock (file system,
// TCP when the network is off, and from ABI 6 signals and abstract Unix
// sockets scoped to the domain), no_new_privs and the seccomp network
// filter.
func (rs ruleset) restrictThread() error {
	if rs.abi < 1 {
		// Fail closed: without Landlock nothing would restrict writes.
		return fmt.Errorf("landlock is not available on this kernel; cannot restrict the file system")
	}
	handled := handledFS(rs.abi)
	attr := ll.RulesetAttr{HandledAccessFS: handled}
	if rs.netOff && rs.abi >= 4 {
		// No port rules: every TCP bind and connect is refused.
		attr.HandledAccessNet = ll.AccessNetBindTCP | ll.AccessNetConnectTCP
	}
	if rs.abi >= 6 {
		// Commands cannot signal, or reach through abstract sockets,
		// anything outside their domain: init, other launchers' commands.
		attr.Scoped = ll.ScopeSignal | ll.ScopeAbstractUnixSocket
	}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("landlock_create_ruleset: %w", err)
	}
	defer unix.Close(fd)
	add := func(f fileID, access uint64, check bool) error {
		pfd, err := unix.Open(f.path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			if !check && os.IsNotExist(err) {
				return nil
			}
			return fmt.Errorf("landlock: open %s: %w", f.path, err)
		}
		defer unix.Close(pfd)
		if check {
			var st unix.Stat_t
			if err := unix.Fstat(pfd, &st); err != nil {
				return fmt.Errorf("landlock: stat %s: %w", f.path, err)
			}
			if st.Dev != f.dev || st.Ino != f.ino {
				return fmt.Errorf("landlock: %s was replaced while the sandbox was built; run the command again", f.path)
			}
		}
		pb := ll.PathBeneathAttr{AllowedAccess: access & handled, ParentFd: pfd}
		if err := ll.LandlockAddPathBeneathRule(fd, &pb, 0); err != nil {
			return fmt.Errorf("landlock: rule for %s: %w", f.path, err)
		}
		return nil
	}
	if err := add(fileID{path: "/"}, fsReadOnly, false); err != nil {
		return err
	}
	for _, d := range devWritable {
		if err := add(fileID{path: d}, fsFileRW, false); err != nil {
			return err
		}
	}
	if err := add(fileID{path: "/dev/pts"}, handled, false); err != nil {
		return err
	}
	for _, d := range rs.dirs {
		if err := add(d, handled, true); err != nil {
			return err
		}
	}
	for _, f := range rs.files {
		if err := add(f, fsFileRW, true); err != nil {
			return err
		}
	}
	// Per thread, as everything here; inherited by the children.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, 0); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	if rs.netOff {
		if err := installNetworkFilter(0); err != nil {
			return fmt.Errorf("seccomp: %w", err)
		}
	}
	return nil
}
