package shell

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/sandbox"
)

// snapshotTimeout bounds the one login-shell run that takes a snapshot; a
// profile slower than that is run for every command, as before.
const snapshotTimeout = 10 * time.Second

// maxSnapshotOutput bounds what a snapshot run may print; a profile that
// prints more gets no snapshot.
const maxSnapshotOutput = 8 << 20

// DefaultMaxSnapshots is SnapshotsConfig.MaxSnapshots when unset.
const DefaultMaxSnapshots = 64

// snapshotMode is the permission of snapshot files, snapshotDirMode that
// of their directory: only the daemon's user reads them, nobody but the
// daemon writes them.
const (
	snapshotMode    os.FileMode = 0o600
	snapshotDirMode os.FileMode = 0o700
)

// SnapshotKind says which commands a snapshot serves. Each kind is taken
// apart, so that no command sources a snapshot taken under rules looser
// or stricter than its own.
type SnapshotKind int

const (
	// SnapshotSandboxed serves the commands the OS sandbox confines. It
	// is taken under a read-only sandbox without network: a profile that
	// such a command could have changed (a home directory inside a
	// writable root) runs no more freely to take the snapshot than it
	// would in the command.
	SnapshotSandboxed SnapshotKind = iota
	// SnapshotDirect serves model commands run without the sandbox
	// (danger-full-access, approved escalations). It is taken directly.
	SnapshotDirect
	// SnapshotUserShell serves the commands a user types
	// (thread/shellCommand), run without the sandbox. It is taken
	// directly, and never shared with the model's commands.
	SnapshotUserShell
)

func (k SnapshotKind) String() string {
	switch k {
	case SnapshotSandboxed:
		return "sandboxed"
	case SnapshotDirect:
		return "direct"
	default:
		return "user-shell"
	}
}

// SnapshotsConfig configures Snapshots. Shell and Dir are required.
type SnapshotsConfig struct {
	// Shell is the user's login shell; only bash and zsh get snapshots.
	Shell string
	// Dir holds the snapshot files. Only the daemon may write it:
	// NewSnapshots creates it (0700) or checks that it is a directory of
	// the daemon's user that no one else may write, and the sandbox must
	// show it to commands read-only (sandbox.Options.ReadOnly) whatever
	// their writable roots. Snapshot files left there by an earlier run
	// are removed.
	Dir string
	// Env returns the environment commands get; a snapshot records what
	// the profile changes in it. Nil is os.Environ.
	Env func() []string
	// Sandbox takes the SnapshotSandboxed snapshots; nil is
	// sandbox.Default().
	Sandbox *sandbox.Sandbox
	// MaxSnapshots bounds the snapshots kept (owners times kinds), the
	// least recently used going first; 0 is DefaultMaxSnapshots.
	MaxSnapshots int
	// Logger hears about snapshots that could not be taken or were
	// changed on disk; nil discards.
	Logger *slog.Logger
}

// Snapshots are the login-shell snapshots of a daemon: one per owner (the
// originator of a thread: an HTTP or MCP principal, or a client's name)
// and kind. A snapshot is the user's login-shell environment (the
// variables its profile sets, its aliases, functions and options), taken
// once by running the login shell and written as a script into Dir; a
// command that asks for login semantics then runs in a plain `-c` shell
// that sources the script, so the profile's cost is paid once instead of
// per command. A snapshot is taken again when a startup file of the shell
// changes, and before every use its file is checked against what the
// daemon wrote (see Snapshot.Wrap). Safe for concurrent use; a nil
// *Snapshots wraps nothing.
type Snapshots struct {
	cfg SnapshotsConfig
	log *slog.Logger

	mu    sync.Mutex
	byKey map[snapshotKey]*Snapshot
	tick  uint64 // use counter for the least recently used
}

type snapshotKey struct {
	owner string
	kind  SnapshotKind
}

// NewSnapshots returns the snapshots of cfg, creating or checking Dir and
// removing snapshot files an earlier run left there.
func NewSnapshots(cfg SnapshotsConfig) (*Snapshots, error) {
	if cfg.Shell == "" || cfg.Dir == "" || !filepath.IsAbs(cfg.Dir) {
		return nil, fmt.Errorf("shell snapshots: a shell and an absolute directory are required")
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ
	}
	if cfg.Sandbox == nil {
		cfg.Sandbox = sandbox.Default()
	}
	if cfg.MaxSnapshots <= 0 {
		cfg.MaxSnapshots = DefaultMaxSnapshots
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, snapshotDirMode); err != nil {
		return nil, fmt.Errorf("shell snapshots: %w", err)
	}
	if err := checkSnapshotDir(cfg.Dir); err != nil {
		return nil, fmt.Errorf("shell snapshots: %w", err)
	}
	stale, _ := filepath.Glob(filepath.Join(cfg.Dir, "snapshot-*.sh"))
	for _, f := range stale {
		_ = os.Remove(f)
	}
	return &Snapshots{cfg: cfg, log: cfg.Logger, byKey: map[snapshotKey]*Snapshot{}}, nil
}

// checkSnapshotDir checks that dir is a directory (not a symlink) of the
// daemon's user that no one else may write.
func checkSnapshotDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if err := ownedByUs(fi); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by others (mode %v)", dir, fi.Mode().Perm())
	}
	return nil
}

// ownedByUs reports an error unless fi belongs to the daemon's user.
func ownedByUs(fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("owner unknown")
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("owned by uid %d, not %d", st.Uid, os.Geteuid())
	}
	return nil
}

// Get returns owner's snapshot of kind (nil on a nil receiver).
func (s *Snapshots) Get(owner string, kind SnapshotKind) *Snapshot {
	if s == nil {
		return nil
	}
	sn, evicted := s.get(snapshotKey{owner, kind})
	if evicted != nil {
		evicted.discard()
	}
	return sn
}

// get returns the snapshot of key, making it (and evicting the least
// recently used one) when there is none.
func (s *Snapshots) get(key snapshotKey) (sn, evicted *Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick++
	if sn := s.byKey[key]; sn != nil {
		sn.used = s.tick
		return sn, nil
	}
	if len(s.byKey) >= s.cfg.MaxSnapshots {
		for _, o := range s.byKey {
			if evicted == nil || o.used < evicted.used {
				evicted = o
			}
		}
		delete(s.byKey, evicted.key)
	}
	sn = &Snapshot{set: s, key: key, used: s.tick}
	s.byKey[key] = sn
	return sn, evicted
}

// For returns owner's snapshot for a model command run under p: the
// sandboxed one when p is enforced by the OS sandbox, else the direct one.
func (s *Snapshots) For(owner string, p policy.SandboxPolicy) *Snapshot {
	if sandbox.Sandboxed(p) {
		return s.Get(owner, SnapshotSandboxed)
	}
	return s.Get(owner, SnapshotDirect)
}

// Close removes the snapshot files. Snapshots taken afterwards are
// written again.
func (s *Snapshots) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	all := make([]*Snapshot, 0, len(s.byKey))
	for k, sn := range s.byKey {
		all = append(all, sn)
		delete(s.byKey, k)
	}
	s.mu.Unlock()
	for _, sn := range all {
		sn.discard()
	}
}

// Snapshot is one owner's login-shell snapshot of one kind. A nil
// *Snapshot wraps nothing.
type Snapshot struct {
	set  *Snapshots
	key  snapshotKey
	used uint64 // guarded by set.mu

	mu     sync.Mutex // held while a snapshot is taken: callers wait for it
	path   string     // the current snapshot file; "" when none could be taken
	digest [sha256.Size]byte
	stamp  string // the startup files' state it was taken from
	tried  bool
	gone   bool // discarded: never written again
}

// Kind is the kind of commands the snapshot serves.
func (s *Snapshot) Kind() SnapshotKind { return s.key.kind }

// Serves reports whether a command run under p may source s: a sandboxed
// snapshot serves only sandboxed commands, the others only unsandboxed
// ones.
func (s *Snapshot) Serves(p policy.SandboxPolicy) bool {
	return s != nil && (s.key.kind == SnapshotSandboxed) == sandbox.Sandboxed(p)
}

// Wrap returns the argv to run for argv: a login invocation of the
// snapshot's shell ([shell, "-lc", script]) becomes [shell, "-c", script
// after sourcing the snapshot]; anything else, or when no snapshot could
// be taken, is returned as it is. Before every use the file is checked
// against what the daemon wrote (a regular file of the daemon's user,
// mode 0600, the same SHA-256); one that differs is logged and taken
// again.
func (s *Snapshot) Wrap(ctx context.Context, argv []string) []string {
	if s == nil || len(argv) != 3 || argv[1] != "-lc" || argv[0] != s.set.cfg.Shell {
		return argv
	}
	path := s.current(ctx)
	if path == "" {
		return argv
	}
	// The script follows on its own line, so that it parses exactly as it
	// would alone.
	return []string{argv[0], "-c", ". " + shQuote(path) + "\n" + argv[2]}
}

// Prelude returns how many bytes of a script Wrap put before the
// command's own when it turned argv into wrapped (the snapshot's
// sourcing, ending with a newline), for sandbox.Request.Prelude; 0 when
// it did not wrap argv, or when the shell is not bash, since a shell
// started ahead reads the rest of its script with bash's `$(<file)`.
func (s *Snapshot) Prelude(argv, wrapped []string) int {
	if s == nil || len(argv) != 3 || len(wrapped) != 3 || argv[1] != "-lc" || wrapped[1] != "-c" ||
		filepath.Base(wrapped[0]) != "bash" || !strings.HasSuffix(wrapped[2], argv[2]) {
		return 0
	}
	return len(wrapped[2]) - len(argv[2])
}

// current returns the snapshot's path, taking it first when there is
// none yet, a startup file changed since, or the file is not what the
// daemon wrote.
func (s *Snapshot) current(ctx context.Context) string {
	env := s.set.cfg.Env()
	stamp := startupStamp(filepath.Base(s.set.cfg.Shell), envValue(env, "HOME"))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return ""
	}
	if s.tried && stamp == s.stamp {
		if s.path == "" {
			return ""
		}
		err := s.verifyLocked()
		if err == nil {
			return s.path
		}
		s.set.log.Warn("shell snapshot changed on disk; taking it again",
			"path", s.path, "owner", s.key.owner, "kind", s.key.kind.String(), "err", err)
	}
	s.tried, s.stamp = true, stamp
	old := s.path
	s.path = ""
	if path, digest, err := s.take(ctx, env); err != nil {
		s.set.log.Warn("no shell snapshot: login shells run their profile for every command",
			"owner", s.key.owner, "kind", s.key.kind.String(), "err", err)
	} else {
		s.path, s.digest = path, digest
	}
	// A command started with the old one has already sourced it.
	if old != "" {
		_ = os.Remove(old)
	}
	return s.path
}

// verifyLocked checks the snapshot file against what the daemon wrote.
func (s *Snapshot) verifyLocked() error {
	if err := checkSnapshotDir(s.set.cfg.Dir); err != nil {
		return err
	}
	f, err := os.OpenFile(s.path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if err := ownedByUs(fi); err != nil {
		return err
	}
	if fi.Mode().Perm() != snapshotMode {
		return fmt.Errorf("mode %v, not %v", fi.Mode().Perm(), snapshotMode)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, maxSnapshotOutput+1)); err != nil {
		return err
	}
	if !bytes.Equal(h.Sum(nil), s.digest[:]) {
		return errors.New("content differs from what was written")
	}
	return nil
}

// discard removes the snapshot's file for good (evicted, or Close).
func (s *Snapshot) discard() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone = true
	if s.path != "" {
		_ = os.Remove(s.path)
		s.path = ""
	}
}

// take runs the login shell once (under a read-only sandbox for a
// sandboxed snapshot) and writes the snapshot to a new file.
func (s *Snapshot) take(ctx context.Context, base []string) (string, [sha256.Size]byte, error) {
	var none [sha256.Size]byte
	sh := s.set.cfg.Shell
	var dump string
	switch filepath.Base(sh) {
	case "bash":
		// The shell options follow a line of their own, \001 and the
		// enabled ones as $BASHOPTS lists them.
		dump = `alias -p; declare -f; builtin printf '\001%s\n' "$BASHOPTS"; builtin shopt -p`
	case "zsh":
		dump = `alias -L; typeset -f`
	default:
		return "", none, fmt.Errorf("no snapshot for %s", sh)
	}
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	// What the profile prints comes before the marker; after it, the
	// shell's own state, a NUL, then the environment (NUL-separated,
	// exact).
	marker := "appserver-snapshot-" + randomHex()
	script := `printf '\n%s\n' "$1"; { ` + dump + `; } 2>/dev/null; printf '\0'; env -0`
	argv := []string{sh, "-lc", script, "snapshot", marker}
	var cmd *sandbox.Cmd
	if s.key.kind == SnapshotSandboxed {
		var err error
		cmd, err = s.set.cfg.Sandbox.CommandFor(ctx, sandbox.Request{
			Policy: policy.SandboxPolicy{Kind: policy.ReadOnly}, Cwd: "/", Argv: argv, Env: base,
		})
		if err != nil {
			return "", none, err
		}
	} else {
		c := exec.CommandContext(ctx, sh, argv[1:]...)
		c.Env, c.Dir = base, "/"
		cmd = sandbox.Plain(c)
	}
	out := &cappedBuffer{max: maxSnapshotOutput}
	cmd.Stdout = out
	if err := cmd.Run(); err != nil {
		return "", none, fmt.Errorf("login shell: %w", err)
	}
	raw := out.Bytes()
	if i := bytes.LastIndex(raw, []byte("\n"+marker+"\n")); i >= 0 {
		raw = raw[i+len(marker)+2:]
	} else {
		return "", none, errors.New("login shell: no snapshot in its output")
	}
	state, after, ok := bytes.Cut(raw, []byte{0})
	if !ok {
		return "", none, errors.New("login shell: no environment in its output")
	}
	var b strings.Builder
	b.WriteString("# Login-shell snapshot: what the profile set, sourced by non-login shells.\n")
	b.WriteString(profileExports(base, after))
	writeState(&b, string(state))
	b.WriteString("\n:\n") // the source ends with success
	content := []byte(b.String())
	path := filepath.Join(s.set.cfg.Dir, "snapshot-"+randomHex()+".sh")
	// O_EXCL and O_NOFOLLOW: never through something planted at the name.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, snapshotMode)
	if err != nil {
		return "", none, err
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		os.Remove(path)
		return "", none, err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return "", none, err
	}
	return path, sha256.Sum256(content), nil
}

// writeState writes a login shell's state as the snapshot sources it.
// login_shell cannot be set, and the command's shell is not one: its
// `shopt` line is left out. bash's options (after a line of \001 and the
// enabled ones) are set only when the sourcing shell's differ: a plain
// `bash -c` usually starts with the login shell's, and setting its 57
// options one by one was 0.45 ms of every command on the 2-core machine
// (BenchmarkLoginShell, this package: 2.75 against 2.47 ms for the
// command from the snapshot). The test is a case, a reserved word, so
// that no function of the profile's (one named `[`, say) decides it.
func writeState(b *strings.Builder, state string) {
	head, opts := state, ""
	var enabled string
	if i := strings.LastIndexByte(state, '\001'); i >= 0 {
		head, opts = state[:i], state[i+1:]
		enabled, opts, _ = strings.Cut(opts, "\n")
	}
	writeLines := func(lines string) {
		for _, line := range strings.SplitAfter(lines, "\n") {
			if !(strings.HasPrefix(line, "shopt ") && strings.Contains(line, "login_shell")) {
				b.WriteString(line)
			}
		}
	}
	writeLines(head) // all of it when there is no marker
	if opts == "" {
		return
	}
	var want []string
	for _, name := range strings.Split(enabled, ":") {
		if name != "login_shell" {
			want = append(want, name)
		}
	}
	// $BASHOPTS lists the enabled options in one order whatever set them.
	b.WriteString("\ncase $BASHOPTS in " + shQuote(strings.Join(want, ":")) + ") ;; *)\n")
	writeLines(opts)
	b.WriteString("\n;; esac\n")
}

// cappedBuffer collects up to max bytes and fails the write beyond.
type cappedBuffer struct {
	bytes.Buffer
	max int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if c.Len()+len(p) > c.max {
		return 0, errors.New("output too large")
	}
	return c.Buffer.Write(p)
}

// randomHex is 16 random hexadecimal digits.
func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// profileExports are export lines for the variables the profile set or
// changed (after, NUL-separated, against base); the shell's own
// bookkeeping is left to the command's shell, and the sandbox's network
// marker to the sandbox.
func profileExports(base []string, after []byte) string {
	was := map[string]string{}
	for _, kv := range base {
		if k, v, ok := strings.Cut(kv, "="); ok {
			was[k] = v
		}
	}
	var b strings.Builder
	for _, kv := range strings.Split(string(after), "\x00") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !identifier.MatchString(k) {
			continue
		}
		switch k {
		case "PWD", "OLDPWD", "SHLVL", "_", policy.EnvSandboxNetworkDisabled:
			continue
		}
		if old, ok := was[k]; ok && old == v {
			continue
		}
		b.WriteString("export " + k + "=" + shQuote(v) + "\n")
	}
	return b.String()
}

// startupStamp describes the startup files a login shell of kind reads:
// a snapshot taken from other contents is stale.
func startupStamp(kind, home string) string {
	var files []string
	switch kind {
	case "bash":
		files = []string{"/etc/profile", "/etc/bash.bashrc", "/etc/profile.d"}
		for _, f := range []string{".bash_profile", ".bash_login", ".profile", ".bashrc"} {
			files = append(files, filepath.Join(home, f))
		}
	case "zsh":
		files = []string{"/etc/zsh/zshenv", "/etc/zsh/zprofile", "/etc/zsh/zshrc", "/etc/zsh/zlogin", "/etc/zshenv", "/etc/zprofile"}
		for _, f := range []string{".zshenv", ".zprofile", ".zshrc", ".zlogin"} {
			files = append(files, filepath.Join(home, f))
		}
	}
	var b strings.Builder
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			b.WriteString(f + ":" + strconv.FormatInt(fi.ModTime().UnixNano(), 10) + ":" + strconv.FormatInt(fi.Size(), 10) + ";")
		}
	}
	return b.String()
}

// shQuote quotes s for a POSIX shell.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// envValue is the value of key in env ("" when unset).
func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}
