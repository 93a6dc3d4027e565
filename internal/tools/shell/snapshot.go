package shell

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// snapshotTimeout bounds the one login-shell run that takes a snapshot; a
// profile slower than that is run for every command, as before.
const snapshotTimeout = 10 * time.Second

// Snapshot is the user's login-shell environment (the variables its
// profile sets, its aliases, functions and options), taken once by running
// the login shell and written as a script. A command that asks for login
// semantics then runs in a plain `-c` shell that sources the script, so
// the profile's cost is paid once instead of per command. The snapshot is
// taken again when a startup file of the shell changes. It is safe for
// concurrent use; a nil *Snapshot wraps nothing.
type Snapshot struct {
	shell string
	dir   string
	env   func() []string

	mu    sync.Mutex // held while a snapshot is taken: callers wait for it
	path  string     // the current snapshot; "" when none could be taken
	stamp string     // the startup files' state it was taken from
	tried bool
	seq   int
}

// NewSnapshot returns the snapshot of shell (bash or zsh; others are
// never wrapped), written under dir (which commands, sandboxed or not,
// must be able to read) and taken with the environment env returns: the
// one commands get, so that only what the profile changes is recorded.
func NewSnapshot(shell, dir string, env func() []string) *Snapshot {
	return &Snapshot{shell: shell, dir: dir, env: env}
}

// Wrap returns the argv to run for argv: a login invocation of the
// snapshot's shell ([shell, "-lc", script]) becomes [shell, "-c", script
// after sourcing the snapshot]; anything else, or when no snapshot could
// be taken, is returned as it is.
func (s *Snapshot) Wrap(ctx context.Context, argv []string) []string {
	if s == nil || len(argv) != 3 || argv[1] != "-lc" || argv[0] != s.shell {
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

// current returns the snapshot's path, taking it first when there is
// none yet or a startup file changed since.
func (s *Snapshot) current(ctx context.Context) string {
	home := envValue(s.env(), "HOME")
	stamp := startupStamp(filepath.Base(s.shell), home)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tried && stamp == s.stamp {
		return s.path
	}
	s.tried, s.stamp = true, stamp
	old := s.path
	s.seq++
	path := filepath.Join(s.dir, fmt.Sprintf("snapshot-%d.sh", s.seq))
	if err := s.take(ctx, path); err != nil {
		os.Remove(path)
		s.path = ""
	} else {
		s.path = path
	}
	// A command started with the old one has already sourced it.
	if old != "" && old != s.path {
		os.Remove(old)
	}
	return s.path
}

// take runs the login shell once and writes the snapshot to path.
func (s *Snapshot) take(ctx context.Context, path string) error {
	var dump string
	switch filepath.Base(s.shell) {
	case "bash":
		dump = `alias -p; declare -f; shopt -p`
	case "zsh":
		dump = `alias -L; typeset -f`
	default:
		return fmt.Errorf("no snapshot for %s", s.shell)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	envFile := path + ".env"
	defer os.Remove(envFile)
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	base := s.env()
	// $1 receives the environment (NUL-separated, exact), stdout the
	// shell's own state.
	cmd := exec.CommandContext(ctx, s.shell, "-lc", `env -0 > "$1"; { `+dump+`; } 2>/dev/null`, "snapshot", envFile)
	cmd.Env = base
	cmd.Dir = s.dir
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("login shell: %w", err)
	}
	after, err := os.ReadFile(envFile)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# Login-shell snapshot: what the profile set, sourced by non-login shells.\n")
	b.WriteString(profileExports(base, after))
	for _, line := range strings.SplitAfter(out.String(), "\n") {
		// login_shell cannot be set, and the command's shell is not one.
		if !strings.Contains(line, "login_shell") {
			b.WriteString(line)
		}
	}
	b.WriteString("\n:\n") // the source ends with success
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// profileExports are export lines for the variables the profile set or
// changed (after, NUL-separated, against base); the shell's own
// bookkeeping is left to the command's shell.
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
		case "PWD", "OLDPWD", "SHLVL", "_":
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
