package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

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
// marker already.
func (s *Sandbox) restricted(ctx context.Context, p policy.SandboxPolicy, pcwd, cwd, path string, argv, env []string) (*Cmd, error) {
	if s.backend == BackendBwrap {
		return s.bwrapCmd(ctx, p, pcwd, cwd, argv, env)
	}
	rs := resolveRuleset(p, pcwd, envValue(env, "TMPDIR"), s.abi)
	rs.joinNetns = rs.netOff && s.netns == netnsShared
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
	exe, hidden := s.exe, s.hidden
	return newCmd(c, s.threads.onPool(rs.key(), func() (func(), error) {
		return rs.setupThread(netnsFD, exe, hidden)
	})), nil
}

// bwrapCmd runs the command under bubblewrap, which execs it directly:
// the file-system view and PID namespace are bwrap's, the seccomp network
// filter is handed to bwrap (--seccomp), and without network the command
// starts from the launcher thread that lives in the empty network
// namespace (or, where there is none, bwrap unshares one itself).
func (s *Sandbox) bwrapCmd(ctx context.Context, p policy.SandboxPolicy, pcwd, cwd string, argv, env []string) (*Cmd, error) {
	rest, loader := splitLoaderEnv(env)
	spec := bwrapSpec{policy: p, policyCwd: pcwd, cwd: cwd, tmpdir: envValue(env, "TMPDIR"), mountProc: s.bwrapProc, hidden: s.hidden, setenv: loader, argv: argv}
	var extra []*os.File
	onNetns := false
	if p.NetworkDisabled() {
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
		extra = append(extra, r)
		spec.seccompFD = 3 // ExtraFiles[0]
		onNetns = s.netns == netnsShared
		spec.unshareNet = !onNetns
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
