package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/appserver/appserver/internal/policy"
)

// Launcher pool limits: distinct rule sets (policy × existing writable
// roots) each hold one thread; idle ones and the least recently used beyond
// the cap are retired.
const (
	maxLaunchers       = 32
	launcherIdleExpiry = 10 * time.Minute
)

// launchers are a Sandbox's launcher threads: one in the empty network
// namespace (netnsShared) and one per Landlock rule set.
type launchers struct {
	mu      sync.Mutex
	netns   *launcher // nil unless netnsShared
	netnsFD int
	plain   *launcher // restricts nothing; started on first use
	pool    map[string]*launcher
}

func (ls *launchers) probeNetns(exe string) netnsMode {
	m, l, fd := probeNetns(exe)
	ls.mu.Lock()
	ls.netns, ls.netnsFD = l, fd
	ls.mu.Unlock()
	return m
}

// get returns the launcher for key, starting one (running setup on its
// thread) when there is none.
func (ls *launchers) get(key string, setup launcherSetup) (*launcher, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l := ls.pool[key]; l != nil {
		return l, nil
	}
	if ls.pool == nil {
		ls.pool = map[string]*launcher{}
	}
	now := time.Now()
	var lruKey string
	var lru time.Time
	for k, l := range ls.pool {
		used := l.idleSince()
		if now.Sub(used) > launcherIdleExpiry {
			l.stop()
			delete(ls.pool, k)
			continue
		}
		if lruKey == "" || used.Before(lru) {
			lruKey, lru = k, used
		}
	}
	if len(ls.pool) >= maxLaunchers {
		ls.pool[lruKey].stop()
		delete(ls.pool, lruKey)
	}
	l, err := newLauncher(setup)
	if err != nil {
		return nil, err
	}
	ls.pool[key] = l
	return l, nil
}

// drop forgets l under key (it exited).
func (ls *launchers) drop(key string, l *launcher) {
	ls.mu.Lock()
	if ls.pool[key] == l {
		delete(ls.pool, key)
	}
	ls.mu.Unlock()
}

func (ls *launchers) close() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for k, l := range ls.pool {
		l.stop()
		delete(ls.pool, k)
	}
	if ls.netns != nil {
		ls.netns.stop()
	}
	if ls.plain != nil {
		ls.plain.stop()
		ls.plain = nil
	}
}

// retireOwner retires the Landlock launchers kept for pool key owner.
func (ls *launchers) retireOwner(owner string) {
	prefix := ownerKey(owner)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for k, l := range ls.pool {
		if strings.HasPrefix(k, prefix) {
			l.stop()
			delete(ls.pool, k)
		}
	}
}

// plainStart returns the launch function of a thread that restricts
// nothing: a process that must outlive the goroutine starting it (a pooled
// sandbox's bubblewrap, whose parent-death signal follows the thread that
// forked it) starts there.
func (ls *launchers) plainStart() (func(func() (int, error)) error, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.plain == nil {
		l, err := newLauncher(func() (func(), error) { return nil, nil })
		if err != nil {
			return nil, err
		}
		ls.plain = l
	}
	return ls.plain.start, nil
}

// onPool returns a launch function that starts the command on the pool's
// launcher for key, replacing a launcher that exited meanwhile.
func (ls *launchers) onPool(key string, setup launcherSetup) func(func() (int, error)) error {
	return func(start func() (int, error)) error {
		for {
			l, err := ls.get(key, setup)
			if err != nil {
				return fmt.Errorf("sandbox: %w", err)
			}
			err = l.start(start)
			if !errors.Is(err, errLauncherGone) {
				return err
			}
			ls.drop(key, l)
		}
	}
}

// restricted builds a command for a read-only or workspace-write policy.
// path is argv[0] resolved on the command's PATH; env carries the network
// marker already; owner is the request's pool key, prelude its Prelude.
func (s *Sandbox) restricted(ctx context.Context, p policy.SandboxPolicy, pcwd, cwd, path string, argv, env []string, owner string, prelude int) (*Cmd, error) {
	if s.backend == BackendBwrap {
		return s.bwrapCmd(ctx, p, pcwd, cwd, path, argv, env, owner, prelude)
	}
	v := s.currentView()
	rs := resolveRuleset(p, pcwd, envValue(env, "TMPDIR"), s.abi)
	rs.owner = owner
	rs.joinNetns = rs.netOff && s.netns == netnsShared
	rs.viewGen = v.gen
	netnsFD := s.threads.netnsFD
	c := exec.CommandContext(ctx, path)
	c.Args = append([]string(nil), argv...)
	c.Env = env
	// No Pdeathsig: a child in a PID namespace sees its parent as pid 0
	// and Go's fork would take that for a dead parent and kill the
	// child. The launcher's init has Pdeathsig instead, and its death
	// kills every process of the namespace.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if rs.netOff && s.netns == netnsUser {
		s.netns.apply(c.SysProcAttr)
	}
	exe := s.exe
	return newCmd(c, s.threads.onPool(rs.key(), func() (func(), error) {
		return rs.setupThread(netnsFD, exe, v)
	})), nil
}

// bwrapCmd runs the command under bubblewrap, which execs it directly:
// the file-system view and PID namespace are bwrap's, the seccomp network
// filter is handed to bwrap (--seccomp), and without network the command
// starts from the launcher thread that lives in the empty network
// namespace (or, where there is none, bwrap unshares one itself). With a
// pool key, an idle pooled sandbox for the same view runs it instead
// (box_linux.go); without one, a pooled sandbox is started in the
// background for the next command.
func (s *Sandbox) bwrapCmd(ctx context.Context, p policy.SandboxPolicy, pcwd, cwd, path string, argv, env []string, owner string, prelude int) (*Cmd, error) {
	rest, loader := splitLoaderEnv(env)
	spec := bwrapSpec{policy: p, policyCwd: pcwd, cwd: cwd, tmpdir: envValue(env, "TMPDIR"), mountProc: s.bwrapProc, view: s.currentView(), setenv: loader, argv: argv}
	onNetns := false
	if p.NetworkDisabled() {
		onNetns = s.netns == netnsShared
		spec.unshareNet = !onNetns
	}
	// A pooled sandbox's launcher needs the PID namespace's /proc to see
	// its processes die.
	if owner != "" && s.pool.size > 0 && s.bwrapProc {
		key := poolKey(owner, spec, onNetns)
		if b := s.pool.take(key); b != nil {
			return newPooledCmd(ctx, s.pool, b, path, argv, env, prelude), nil
		}
		boxSpec := spec
		s.pool.warm(key, owner, func(p *pool) (*box, error) {
			launch := s.threads.netns.start
			if !onNetns {
				var err error
				if launch, err = s.threads.plainStart(); err != nil {
					return nil, err
				}
			}
			return s.startBox(p, boxSpec, launch)
		})
	}
	var extra []*os.File
	if p.NetworkDisabled() {
		prog, err := seccompPipe()
		if err != nil {
			return nil, err
		}
		extra = append(extra, prog)
		spec.seccompFD = 3 // ExtraFiles[0]
	}
	c := exec.CommandContext(ctx, s.bwrap)
	c.Args = append([]string{s.bwrap}, spec.args()...)
	c.Env = rest
	c.ExtraFiles = extra
	c.SysProcAttr = helperProcAttr()
	var cmd *Cmd
	if onNetns {
		cmd = newCmd(c, s.threads.netns.start)
	} else {
		cmd = Plain(c)
	}
	cmd.closeAfterStart = extra
	return cmd, nil
}

// fileIdentity names the file at path (the link itself unless follow)
// beyond its path: device, inode and, where the file system records it,
// birth time, since a directory removed and made again often gets the
// inode number back. "" when it cannot be read.
func fileIdentity(path string, follow bool) string {
	flags := unix.AT_STATX_SYNC_AS_STAT
	if !follow {
		flags |= unix.AT_SYMLINK_NOFOLLOW
	}
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, flags, unix.STATX_INO|unix.STATX_BTIME, &st); err != nil {
		return ""
	}
	id := fmt.Sprintf("%d:%d", unix.Mkdev(st.Dev_major, st.Dev_minor), st.Ino)
	if st.Mask&unix.STATX_BTIME != 0 {
		id += fmt.Sprintf(":%d.%09d", st.Btime.Sec, st.Btime.Nsec)
	}
	return id
}
