package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

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
	// then are skipped.
	Hidden []string
}

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
	hidden    []hiddenPath // Options.Hidden, resolved
	threads   launchers    // launcher threads (launcher_linux.go)
}

// hiddenPath is one resolved entry of Options.Hidden.
type hiddenPath struct {
	path string
	dir  bool
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
	return &Sandbox{opts: opts}, nil
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
		cmd, err = s.restricted(ctx, r.Policy, pcwd, r.Cwd, path, r.Argv, env)
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
	s.hidden = resolveHidden(s.opts.Hidden)
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

// resolveHidden resolves the hidden paths that exist, dropping duplicates
// and "/" (a symlink may resolve to it; hiding it would hide everything).
func resolveHidden(paths []string) []hiddenPath {
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

// Close retires the sandbox's launcher threads; each exits once the
// commands it started have exited. Commands built afterwards still work
// (on new threads) but should not be: call Close when the owner stops.
func (s *Sandbox) Close() {
	s.threads.close()
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
