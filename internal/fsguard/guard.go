package fsguard

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Config configures a Guard. The zero value masks nothing; the daemon's
// /proc entries are refused all the same.
type Config struct {
	// Masked are the daemon's own files and directories (its data
	// directory, configuration file, token, secret and key files): no
	// caller may read, list, search or change them or anything below
	// them, and the command sandbox hides the same list (Guard.Masked).
	// Empty entries are ignored; relative ones are taken from the
	// daemon's working directory; "/" is refused.
	Masked []string
	// WalkOnly resolves every path with the O_NOFOLLOW component walk, as
	// kernels without openat2 (before 5.6) do anyway; tests set it to
	// exercise the walk.
	WalkOnly bool
}

// Guard holds the rule of what the daemon's own tools may touch on a
// caller's behalf: the masked paths and the daemon's process, refused to
// everyone, and the checks of a path against a caller's Access. It is
// immutable and safe for concurrent use, and holds one descriptor (of "/")
// for its life. A nil *Guard is a Guard with nothing masked.
type Guard struct {
	masked []string // absolute and clean, as configured
	forms  []string // masked, plus each one with its symlinks resolved
	pid    int
	walk   bool

	// slash is a descriptor of "/", opened once and kept for the guard's
	// life: every path is resolved below it.
	slashOnce sync.Once
	slash     int
	slashErr  error
}

// New returns the guard of cfg. Masked paths are resolved once, here, so
// that a path reaching one through a symlink is refused too; the daemon
// builds its guard after creating its data directory.
func New(cfg Config) (*Guard, error) {
	g := &Guard{pid: os.Getpid(), walk: cfg.WalkOnly}
	for _, m := range cfg.Masked {
		if m == "" {
			continue
		}
		abs, err := filepath.Abs(m)
		if err != nil || abs == "/" {
			return nil, fmt.Errorf("fsguard: cannot mask %q", m)
		}
		if !slices.Contains(g.masked, abs) {
			g.masked = append(g.masked, abs)
		}
	}
	g.forms = slices.Clone(g.masked)
	for _, m := range g.masked {
		real, _, err := resolve(m, nil)
		if err == nil && real != "/" && !slices.Contains(g.forms, real) {
			g.forms = append(g.forms, real)
		}
	}
	return g, nil
}

var zeroGuard = &Guard{}

func (g *Guard) or() *Guard {
	if g == nil {
		return zeroGuard
	}
	return g
}

// Masked returns the masked paths as configured (absolute), for the
// sandbox to hide from commands (sandbox.Options.Hidden).
func (g *Guard) Masked() []string { return slices.Clone(g.or().masked) }

// root returns the guard's descriptor of "/".
func (g *Guard) root() (int, error) {
	g.slashOnce.Do(func() {
		g.slash, g.slashErr = openRetry(func() (int, error) {
			return unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		})
	})
	return g.slash, g.slashErr
}

func (g *Guard) daemonPID() int {
	if g.pid == 0 {
		return os.Getpid()
	}
	return g.pid
}

// deny says why the absolute, clean path p may not be touched at all
// under a (by name, whatever it is on disk), or 0: it is a masked path or
// below one, the daemon's own /proc entries, or anything in /proc for a
// caller without HostProc.
func (g *Guard) deny(a *Access, p string) Reason {
	for _, m := range g.forms {
		if Within(m, p) {
			return DaemonPath
		}
	}
	if p != "/proc" && !strings.HasPrefix(p, "/proc/") {
		return 0
	}
	if g.daemonProc(p) {
		return DaemonPath
	}
	if !a.HostProc {
		return NoHostProc
	}
	return 0
}

// daemonProc reports whether p, in /proc, is the daemon's own: /proc/self,
// /proc/thread-self, or /proc/<n> (and below) where n is the daemon's
// process or one of its threads (each thread has a /proc/<tid> of its own,
// though /proc does not list it).
func (g *Guard) daemonProc(p string) bool {
	rest, ok := strings.CutPrefix(p, "/proc/")
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(rest, "/")
	switch first {
	case "self", "thread-self":
		return true
	}
	n, err := strconv.Atoi(first)
	if err != nil || n <= 0 {
		return false
	}
	if n == g.daemonPID() {
		return true
	}
	var st unix.Stat_t
	return unix.Stat("/proc/self/task/"+first, &st) == nil
}

// maskedBelow returns a masked path at or below p, or "": what removing
// or renaming p would take along.
func (g *Guard) maskedBelow(p string) string {
	for _, m := range g.forms {
		if Within(p, m) {
			return m
		}
	}
	return ""
}

// Within reports whether p is root or below it (both clean and absolute);
// everything is within "/".
func Within(root, p string) bool {
	if root == "/" {
		return true
	}
	return p == root || (len(p) > len(root) && p[len(root)] == '/' && p[:len(root)] == root)
}
