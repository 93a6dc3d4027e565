package sandbox

import (
	"fmt"
	"os"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// devWritable are the device files a restricted command may still open for
// writing: the reference allows /dev/null; the others are what bubblewrap's
// minimal /dev offers and what terminals and shells expect. Devices opened
// before the restriction (stdin/stdout pipes, a PTY) are not affected.
var devWritable = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx"}

// applyPolicy restricts the current process (every thread) as cfg says:
// Landlock for the file system (fs=landlock) and TCP, then no_new_privs and
// the seccomp network filter. env is the command's environment, for $TMPDIR.
func applyPolicy(cfg helperConfig, env []string) error {
	p := cfg.policy
	if !Sandboxed(p) {
		return nil
	}
	fsRestrict := cfg.fs == fsLandlock
	netOff := p.NetworkDisabled()
	if !fsRestrict && !netOff {
		return nil
	}

	abi, err := llsys.LandlockGetABIVersion()
	if err != nil {
		abi = 0
	}
	var ll landlock.Config
	var rules []landlock.Rule
	if fsRestrict {
		if abi < 1 {
			// Fail closed: best-effort Landlock would silently do nothing.
			return fmt.Errorf("landlock is not available on this kernel (%v); cannot restrict the file system", err)
		}
		ll.HandledAccessFS = landlock.V7.HandledAccessFS
		rules = append(rules,
			landlock.RODirs("/"),
			landlock.RWFiles(devWritable...).WithIoctlDev().IgnoreIfMissing(),
			landlock.RWDirs("/dev/pts").WithIoctlDev().IgnoreIfMissing(),
		)
		var dirs, files []string
		for _, r := range writableRoots(p, cfg.policyCwd, envValue(env, "TMPDIR")) {
			fi, err := os.Stat(r.Root)
			switch {
			case err != nil:
				// A missing root cannot be written into anyway.
			case fi.IsDir():
				dirs = append(dirs, r.Root)
			default:
				files = append(files, r.Root)
			}
		}
		if len(dirs) > 0 {
			rules = append(rules, landlock.RWDirs(dirs...).WithRefer().IgnoreIfMissing())
		}
		if len(files) > 0 {
			rules = append(rules, landlock.RWFiles(files...).IgnoreIfMissing())
		}
	}
	if netOff && abi >= 4 {
		// No port rules: every TCP bind and connect is refused (EACCES).
		ll.HandledAccessNet = landlock.V7.HandledAccessNet
	}
	if ll.HandledAccessFS != 0 || ll.HandledAccessNet != 0 {
		if err := ll.BestEffort().Restrict(rules...); err != nil {
			return fmt.Errorf("landlock: %w", err)
		}
	}
	// Landlock set no_new_privs already when it ran; seccomp needs it too.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if netOff {
		if err := installNetworkFilter(); err != nil {
			return fmt.Errorf("seccomp: %w", err)
		}
	}
	return nil
}
