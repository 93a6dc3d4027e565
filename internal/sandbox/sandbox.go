package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/appserver/appserver/internal/policy"
)

// Backend selects how the file-system rules are enforced.
type Backend string

// The backends. Network rules (seccomp, Landlock TCP, network namespace)
// apply with every backend.
const (
	// BackendAuto uses bubblewrap when it is installed and works on this
	// host, and Landlock otherwise. It is the default.
	BackendAuto Backend = "auto"
	// BackendLandlock enforces the file-system rules with Landlock on
	// launcher threads, each in a mount and PID namespace of its own that
	// hides the daemon (it needs CAP_SYS_ADMIN). Protected subpaths (.git,
	// .codex, .agents) under a writable root stay writable: Landlock cannot
	// subtract a subtree from an allowed one (the reference's "legacy" gap).
	BackendLandlock Backend = "landlock"
	// BackendBwrap builds the file-system view with bubblewrap: read-only
	// root, writable roots bound on top, existing protected subpaths bound
	// read-only again, a new PID namespace with its own /proc, and a new
	// network namespace when the network is off.
	BackendBwrap Backend = "bwrap"
)

// ParseBackend parses a backend name ("" means auto).
func ParseBackend(s string) (Backend, error) {
	switch Backend(s) {
	case "", BackendAuto:
		return BackendAuto, nil
	case BackendLandlock, BackendBwrap:
		return Backend(s), nil
	}
	return "", fmt.Errorf("unknown sandbox backend %q (want auto, landlock or bwrap)", s)
}

// HelperCommand is the hidden subcommand (os.Args[1]) that makes the daemon
// binary act as the sandbox helper.
const HelperCommand = "__appserver-sandbox"

// Options configures a Sandbox. The zero value is the default: auto backend,
// network namespaces when permitted, the running executable as helper.
type Options struct {
	// Backend selects Landlock or bubblewrap; "" is BackendAuto.
	Backend Backend
	// BwrapPath is the bubblewrap binary; "" looks "bwrap" up on PATH.
	BwrapPath string
	// NoNetNamespace disables the network namespace of the Landlock backend
	// (seccomp and Landlock TCP rules still cut the network). bubblewrap
	// always unshares the network when it is off.
	NoNetNamespace bool
	// Executable is the helper binary; "" is os.Executable(). It must call
	// MaybeRunHelper (or HelperMain) first thing in main.
	Executable string
	// Hidden lists absolute paths of the daemon's own state (its data
	// directory, config file, token and secret files) that sandboxed
	// commands may neither read nor write, under both backends: a
	// directory is covered by an empty read-only tmpfs, a file by a
	// read-only bind of /dev/null. Empty entries are ignored, relative ones
	// taken from the daemon's directory; paths are resolved (symlinks
	// followed) when the sandbox first probes the host, and those missing
	// then are skipped. Sandbox.Hide adds paths created later.
	Hidden []string
	// ReadOnly lists absolute paths (directories or files) that sandboxed
	// commands may read but never change, whatever the policy's writable
	// roots: each is bound read-only on top of every other rule, so one
	// inside a hidden directory is visible there (and nothing else of
	// that directory is). The daemon shows commands its login-shell
	// snapshots this way. Resolved like Hidden; missing paths are skipped.
	ReadOnly []string
	// NetworkRefused, when not "", refuses every sandboxed command whose
	// policy allows the network: CommandFor fails with an error wrapping
	// ErrNetworkRefused followed by this reason. The daemon sets it while
	// one of its listeners accepts requests without authentication on a
	// TCP address, which such a command could connect to.
	NetworkRefused string
	// Pool bounds the pooled sandboxes of the bubblewrap backend
	// (Request.Pool).
	Pool PoolOptions
	// Logger receives what goes wrong with pooled sandboxes; nil discards.
	Logger *slog.Logger
}

// PoolOptions bounds the pooled sandboxes: long-lived bubblewrap
// sandboxes, each kept for one pool key and one file-system view, that run
// the commands of Requests with that Pool key one at a time instead of
// building a sandbox per command.
type PoolOptions struct {
	// Size is how many pooled sandboxes live at once, starting ones
	// included; 0 is DefaultPoolSize, a negative value turns pooling off.
	// Commands that find no pooled sandbox get one of their own, as
	// without pooling.
	Size int
	// IdleTimeout closes a pooled sandbox left unused this long; 0 is
	// DefaultPoolIdleTimeout.
	IdleTimeout time.Duration
}

// Pool defaults (PoolOptions).
const (
	// DefaultPoolSize is how many pooled sandboxes live at once by default.
	DefaultPoolSize = 16
	// DefaultPoolIdleTimeout is how long an unused pooled sandbox lives by
	// default.
	DefaultPoolIdleTimeout = time.Minute
)

// ErrNetworkRefused is wrapped by the error CommandFor returns for a
// sandboxed command with network access under Options.NetworkRefused.
var ErrNetworkRefused = errors.New("sandboxed commands with network access are refused here")

// Sandbox builds sandboxed commands. It is safe for concurrent use.
type Sandbox struct {
	opts Options

	once      sync.Once
	initErr   error
	exe       string
	backend   Backend // resolved: landlock or bwrap
	bwrap     string
	bwrapProc bool // bwrap may mount a fresh /proc
	abi       int  // Landlock ABI version, 0 when unavailable
	netns     netnsMode
	readOnly  []hiddenPath // Options.ReadOnly, resolved
	threads   launchers    // launcher threads (launcher_linux.go)
	pool      *pool        // pooled sandboxes (box_linux.go)

	mu     sync.Mutex
	hidden []hiddenPath // Options.Hidden resolved, then Hide's; replaced, never changed in place
	// hiddenGen counts the changes of hidden; it is part of the key of a
	// Landlock launcher, whose mount namespace has the list of its start.
	hiddenGen int
}

// hiddenPath is one resolved entry of Options.Hidden or Options.ReadOnly.
type hiddenPath struct {
	path string
	dir  bool
}

// view is what a command's file-system view masks and shows read-only.
type view struct {
	hidden, readOnly []hiddenPath
	gen              int
}

// currentView is the view commands built now get.
func (s *Sandbox) currentView() view {
	s.mu.Lock()
	defer s.mu.Unlock()
	return view{hidden: s.hidden, readOnly: s.readOnly, gen: s.hiddenGen}
}

// Hide adds paths (absolute, existing) to the hidden ones for the
// commands built from now on, under both backends: the daemon's own
// files created after start-up, such as a Unix socket it listens on
// (connecting to a socket file needs no write access, so a read-only
// view would not do). Commands built before keep the view they were
// built with; Landlock launchers set up before serve none of the later
// commands.
func (s *Sandbox) Hide(paths ...string) error {
	s.once.Do(s.init)
	var add []string
	for _, p := range paths {
		if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
			return fmt.Errorf("sandbox: cannot hide %q from commands", p)
		}
		if _, err := os.Lstat(p); err != nil {
			return fmt.Errorf("sandbox: cannot hide %q from commands: %w", p, err)
		}
		add = append(add, p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, h := range s.hidden {
		seen[h.path] = true
	}
	var more []hiddenPath
	for _, h := range resolvePaths(add) {
		if !seen[h.path] {
			more = append(more, h)
		}
	}
	if len(more) == 0 {
		return nil
	}
	s.hidden = append(append([]hiddenPath(nil), s.hidden...), more...)
	s.hiddenGen++
	return nil
}

// New returns a sandbox with the given options. Probing the host (bwrap
// usability, namespace permissions) happens once, on first use.
func New(opts Options) (*Sandbox, error) {
	b, err := ParseBackend(string(opts.Backend))
	if err != nil {
		return nil, err
	}
	opts.Backend = b
	var hidden []string
	for _, h := range opts.Hidden {
		if h == "" {
			continue
		}
		// Relative to the daemon's directory, as the daemon opens it.
		abs, err := filepath.Abs(h)
		if err != nil || abs == "/" {
			return nil, fmt.Errorf("sandbox: cannot hide %q from commands", h)
		}
		hidden = append(hidden, abs)
	}
	opts.Hidden = hidden
	for _, p := range opts.ReadOnly {
		if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
			return nil, fmt.Errorf("sandbox: cannot show %q read-only to commands", p)
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sandbox{opts: opts, pool: newPool(opts.Pool, log)}, nil
}

var (
	defaultOnce sync.Once
	defaultSB   *Sandbox
)

// Default returns the process-wide sandbox with default options.
func Default() *Sandbox {
	defaultOnce.Do(func() { defaultSB, _ = New(Options{}) })
	return defaultSB
}

// Command builds the command argv (run in cwd with environment env) under
// the OS rules of p, using the default sandbox. cwd is also the directory
// writable roots are resolved against; use Sandbox.CommandFor when the
// command's directory differs from the turn's.
func Command(ctx context.Context, p policy.SandboxPolicy, cwd string, argv []string, env []string) (*Cmd, error) {
	return Default().Command(ctx, p, cwd, argv, env)
}

// Command is the package-level Command on this sandbox.
func (s *Sandbox) Command(ctx context.Context, p policy.SandboxPolicy, cwd string, argv []string, env []string) (*Cmd, error) {
	return s.CommandFor(ctx, Request{Policy: p, Cwd: cwd, Argv: argv, Env: env})
}

// Request is one command to build.
type Request struct {
	// Policy is the sandbox policy to enforce.
	Policy policy.SandboxPolicy
	// PolicyCwd is the directory the policy's writable roots are resolved
	// against (the turn's cwd); "" uses Cwd. It must not come from the
	// model: a workdir of "/" would otherwise make "/" writable.
	PolicyCwd string
	// Cwd is the command's working directory (absolute).
	Cwd string
	// Argv is the command; Argv[0] is looked up on Env's PATH.
	Argv []string
	// Env is the command's complete environment ("K=V"). The network marker
	// (CODEX_SANDBOX_NETWORK_DISABLED=1) is added when the policy cuts the
	// network.
	Env []string
	// Pool, when not "", is the caller's isolation unit (the daemon passes
	// the thread): the bubblewrap backend may run the command in a
	// long-lived sandbox kept for this key and the command's file-system
	// view (PoolOptions), and the Landlock backend keeps launcher threads
	// per key. Commands of different keys never share a sandbox, a PID
	// namespace or a launcher. A pooled command's stdio must be nil, files,
	// readers or writers (no Std*Pipe), and its exit error is an
	// *ExitError.
	Pool string
	// Prelude, when above 0, says that Argv is bash's [bash, "-c",
	// script] whose script begins with Prelude bytes that hold no part of
	// the command (the daemon's sourcing of a login-shell snapshot,
	// ending with a newline). A pooled sandbox then starts the shell of
	// the Pool's next command ahead of it, with that prelude run, shortly
	// after this command's end; if the next command comes with the same
	// shell, prelude, environment and directory, its shell is already
	// there and reads the rest of its script (box_linux.go, aheadShell).
	// That shell starts with this command's Env after the command has
	// ended, so set Prelude only for an Env that holds nothing the model
	// or a client chose; an Env with variables that have bash or the
	// loader run code at start-up gets no shell ahead anyway.
	Prelude int
}

// ErrEmptyCommand is returned for an empty argv.
var ErrEmptyCommand = errors.New("command is empty")

// Sandboxed reports whether p needs the OS sandbox at all: read-only and
// workspace-write do; danger-full-access and external-sandbox run directly.
func Sandboxed(p policy.SandboxPolicy) bool {
	return p.Kind == policy.ReadOnly || p.Kind == policy.WorkspaceWrite
}

// CommandFor builds the command for r; start it with Cmd.Start (or Run).
// The command runs in its own process group (Setpgid) and cancelling ctx
// kills that whole group; callers that add SysProcAttr fields must keep
// these. A command that cannot be found on PATH fails here with the same
// error os/exec gives (wrapping exec.ErrNotFound), sandboxed or not.
func (s *Sandbox) CommandFor(ctx context.Context, r Request) (*Cmd, error) {
	if len(r.Argv) == 0 || r.Argv[0] == "" {
		return nil, ErrEmptyCommand
	}
	if !filepath.IsAbs(r.Cwd) {
		return nil, fmt.Errorf("sandbox: cwd %q is not absolute", r.Cwd)
	}
	pcwd := r.PolicyCwd
	if pcwd == "" {
		pcwd = r.Cwd
	}
	if !filepath.IsAbs(pcwd) {
		return nil, fmt.Errorf("sandbox: policy cwd %q is not absolute", pcwd)
	}
	if s.opts.NetworkRefused != "" && Sandboxed(r.Policy) && !r.Policy.NetworkDisabled() {
		return nil, fmt.Errorf("%w: %s", ErrNetworkRefused, s.opts.NetworkRefused)
	}
	env := withNetworkMarker(r.Policy, r.Env)
	path, err := lookPath(r.Argv[0], envValue(env, "PATH"), r.Cwd)
	if err != nil {
		return nil, err
	}

	var cmd *Cmd
	if !Sandboxed(r.Policy) {
		c := exec.CommandContext(ctx, path)
		c.Args = append([]string(nil), r.Argv...)
		c.Env = env
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd = Plain(c)
	} else {
		s.once.Do(s.init)
		if s.initErr != nil {
			return nil, s.initErr
		}
		cmd, err = s.restricted(ctx, r.Policy, pcwd, r.Cwd, path, r.Argv, env, r.Pool, r.Prelude)
		if err != nil {
			return nil, err
		}
	}
	cmd.Dir = r.Cwd
	c := cmd.Cmd
	c.Cancel = func() error { return killGroup(c) }
	return cmd, nil
}

// Backend reports the file-system backend restricted commands use, after
// probing the host.
func (s *Sandbox) Backend() (Backend, error) {
	s.once.Do(s.init)
	return s.backend, s.initErr
}

// NetNamespace reports whether the Landlock backend puts commands without
// network into a new network namespace, after probing the host.
func (s *Sandbox) NetNamespace() bool {
	s.once.Do(s.init)
	return s.netns != netnsNone
}

func (s *Sandbox) init() {
	exe := s.opts.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			s.initErr = fmt.Errorf("sandbox: locate helper executable: %w", err)
			return
		}
	}
	s.exe = exe
	s.hidden = resolvePaths(s.opts.Hidden)
	s.readOnly = resolvePaths(s.opts.ReadOnly)
	s.abi = landlockABI()
	s.backend = BackendLandlock
	if s.opts.Backend != BackendLandlock {
		bw := s.opts.BwrapPath
		if bw == "" {
			bw, _ = exec.LookPath("bwrap")
		}
		if bw != "" {
			if proc, ok := probeBwrap(bw); ok {
				s.backend, s.bwrap, s.bwrapProc = BackendBwrap, bw, proc
			}
		}
		if s.opts.Backend == BackendBwrap && s.backend != BackendBwrap {
			s.initErr = errors.New("sandbox: bubblewrap backend requested but bwrap is missing or cannot create its namespaces here")
			return
		}
	}
	if !s.opts.NoNetNamespace {
		s.netns = s.threads.probeNetns(exe)
	}
}

// resolvePaths resolves the paths that exist, dropping duplicates and "/"
// (a symlink may resolve to it; hiding it would hide everything).
func resolvePaths(paths []string) []hiddenPath {
	var out []hiddenPath
	seen := map[string]bool{}
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil || real == "/" || seen[real] {
			continue
		}
		fi, err := os.Stat(real)
		if err != nil {
			continue
		}
		seen[real] = true
		out = append(out, hiddenPath{path: real, dir: fi.IsDir()})
	}
	return out
}

// Close closes the pooled sandboxes, killing the commands they run, and
// retires the sandbox's launcher threads; each exits once the commands it
// started have exited. Commands built afterwards still work (on new
// threads, without pooling) but should not be: call Close when the owner
// stops.
func (s *Sandbox) Close() {
	s.pool.close()
	s.threads.close()
}

// Retire closes the pooled sandboxes and Landlock launcher threads kept
// for pool key owner (Request.Pool), those running a command once it
// ends: the owner (a thread) is gone.
func (s *Sandbox) Retire(owner string) {
	s.pool.retireOwner(owner)
	s.threads.retireOwner(owner)
}

// withNetworkMarker returns env with CODEX_SANDBOX_NETWORK_DISABLED=1 when
// the policy cuts the network (and without any inherited value otherwise, so
// a command never sees a stale marker).
func withNetworkMarker(p policy.SandboxPolicy, env []string) []string {
	out := make([]string, 0, len(env)+1)
	prefix := policy.EnvSandboxNetworkDisabled + "="
	for _, kv := range env {
		if !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
		}
	}
	if p.NetworkDisabled() {
		out = append(out, prefix+"1")
	}
	return out
}

// envValue returns the last value of key in env (the one exec would use).
func envValue(env []string, key string) string {
	prefix := key + "="
	v := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, prefix) {
			v = kv[len(prefix):]
		}
	}
	return v
}

// loaderVar reports whether a variable is read by ld.so or glibc at start-up
// in a way that could run or load attacker-chosen code: bubblewrap must not
// see these (it runs outside the sandbox); it sets them for the command.
func loaderVar(name string) bool {
	return strings.HasPrefix(name, "LD_") || name == "GLIBC_TUNABLES" || name == "GCONV_PATH"
}

// splitLoaderEnv separates the loader variables from the rest of env.
func splitLoaderEnv(env []string) (rest []string, loader [][2]string) {
	rest = make([]string, 0, len(env))
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if loaderVar(name) {
			loader = append(loader, [2]string{name, value})
			continue
		}
		rest = append(rest, kv)
	}
	return rest, loader
}

func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return cmd.Process.Kill()
	}
	return nil
}
