package shell

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/sandbox"
)

// snapshotHome is a HOME whose bash profile counts its runs in
// <home>/runs and sets a variable, a function and PATH.
func snapshotHome(t *testing.T) (home string, env []string) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	home = t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, "bin"), 0o755))
	profile := `echo run >> "$HOME/runs"
export FROM_PROFILE='it'"'"'s set'
export PATH="$HOME/bin:$PATH"
greet() { echo "hello $1"; }
`
	require.NoError(t, os.WriteFile(filepath.Join(home, ".bash_profile"), []byte(profile), 0o644))
	return home, []string{"HOME=" + home, "PATH=/usr/bin:/bin", "KEEP=base"}
}

// newSnapshots returns snapshots in a new directory, closed by the test.
func newSnapshots(t *testing.T, cfg SnapshotsConfig) *Snapshots {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(t.TempDir(), "snapshots")
	}
	s, err := NewSnapshots(cfg)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func runArgv(t *testing.T, argv []string, env []string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return string(out)
}

func profileRuns(t *testing.T, home string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, "runs"))
	require.NoError(t, err)
	return strings.Count(string(b), "run")
}

// Commands asking for a login shell see what the profile sets (variables,
// PATH, functions) while the profile runs once; a changed profile is
// taken again.
func TestSnapshotRunsProfileOnce(t *testing.T) {
	home, env := snapshotHome(t)
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	s := newSnapshots(t, SnapshotsConfig{Shell: bash, Env: func() []string { return env }}).Get("p1", SnapshotDirect)
	script := `echo "$FROM_PROFILE|$KEEP|${PATH%%:*}"; greet you; shopt -q login_shell && echo login; true`
	want := runArgv(t, []string{bash, "-lc", script}, env)
	require.Equal(t, "it's set|base|"+home+"/bin\nhello you\nlogin\n", want)
	before := profileRuns(t, home)

	for range 3 {
		argv := s.Wrap(context.Background(), []string{bash, "-lc", script})
		require.Equal(t, "-c", argv[1])
		require.Equal(t, "it's set|base|"+home+"/bin\nhello you\n", runArgv(t, argv, env), "the profile's state, without login_shell")
	}
	require.Equal(t, before+1, profileRuns(t, home), "the profile ran once for three commands")

	// A changed profile is taken again.
	later := time.Now().Add(time.Second)
	require.NoError(t, os.WriteFile(filepath.Join(home, ".bash_profile"), []byte(`echo run >> "$HOME/runs"; export FROM_PROFILE=changed`+"\n"), 0o644))
	require.NoError(t, os.Chtimes(filepath.Join(home, ".bash_profile"), later, later))
	argv := s.Wrap(context.Background(), []string{bash, "-lc", `echo "$FROM_PROFILE"`})
	require.Equal(t, "changed\n", runArgv(t, argv, env))
	require.Equal(t, before+2, profileRuns(t, home))

	// Other invocations are left alone.
	plain := []string{bash, "-c", "true"}
	require.Equal(t, plain, s.Wrap(context.Background(), plain))
	var none *Snapshot
	login := []string{bash, "-lc", "true"}
	require.Equal(t, login, none.Wrap(context.Background(), login))
}

// BenchmarkLoginShell compares a login shell's `echo hi` with the same
// command run from the snapshot, on this machine's real profile.
func BenchmarkLoginShell(b *testing.B) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		b.Skip("no bash")
	}
	// The user's real home (TestMain isolates HOME): its profile is what
	// the snapshot saves.
	u, err := user.Current()
	if err != nil {
		b.Skip(err)
	}
	env := []string{"HOME=" + u.HomeDir, "PATH=" + os.Getenv("PATH")}
	set, err := NewSnapshots(SnapshotsConfig{Shell: bash, Dir: b.TempDir(), Env: func() []string { return env }})
	if err != nil {
		b.Fatal(err)
	}
	defer set.Close()
	s := set.Get("", SnapshotDirect)
	s.Wrap(context.Background(), []string{bash, "-lc", ""}) // taken once, before timing
	for _, bc := range []struct {
		name string
		wrap func([]string) []string
	}{
		{"login", func(a []string) []string { return a }},
		{"snapshot", func(a []string) []string { return s.Wrap(context.Background(), a) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				argv := bc.wrap([]string{bash, "-lc", "echo hi"})
				cmd := exec.Command(argv[0], argv[1:]...)
				cmd.Env = env
				if out, err := cmd.Output(); err != nil || string(out) != "hi\n" {
					b.Fatalf("%q %v", out, err)
				}
			}
		})
	}
}

// The login shell's options reach the command, whether the shell that
// sources the snapshot starts with the same ones (it then sets none) or
// with others.
func TestSnapshotRestoresShellOptions(t *testing.T) {
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	script := `shopt -p extglob nullglob dotglob; shopt -q login_shell && echo login; type islogin >/dev/null 2>&1 && islogin; true`
	for _, tc := range []struct{ name, profile, want string }{
		{"unchanged", "", "shopt -u extglob\nshopt -u nullglob\nshopt -u dotglob\n"},
		{"set by the profile", "shopt -s extglob nullglob\n", "shopt -s extglob\nshopt -s nullglob\nshopt -u dotglob\n"},
		// Neither a function named [ nor one that mentions login_shell
		// changes what the snapshot sets.
		{"functions of the profile's", "shopt -s nullglob\n[() { return 0; }\nislogin() { shopt -q login_shell && echo login || echo plain; }\n",
			"shopt -u extglob\nshopt -s nullglob\nshopt -u dotglob\nplain\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, env := snapshotHome(t)
			require.NoError(t, os.WriteFile(filepath.Join(home, ".bash_profile"), []byte(tc.profile), 0o644))
			s := newSnapshots(t, SnapshotsConfig{Shell: bash, Env: func() []string { return env }}).Get("p", SnapshotDirect)
			argv := s.Wrap(context.Background(), []string{bash, "-lc", script})
			require.Equal(t, "-c", argv[1])
			require.Equal(t, tc.want, runArgv(t, argv, env))
			snap, err := os.ReadFile(snapshotPath(t, argv))
			require.NoError(t, err)
			require.NotContains(t, string(snap), "shopt -u login_shell")
			require.NotContains(t, string(snap), "shopt -s login_shell")

			// A shell that starts with other options is set to the login
			// shell's.
			other := []string{bash, "-O", "dotglob", "-O", "nullglob", "-c", argv[2]}
			require.Equal(t, tc.want, runArgv(t, other, env))
		})
	}
}

// snapshotPath is the file a wrapped argv sources.
func snapshotPath(t *testing.T, argv []string) string {
	t.Helper()
	require.Len(t, argv, 3)
	first, _, _ := strings.Cut(argv[2], "\n")
	path, ok := strings.CutPrefix(first, ". '")
	require.True(t, ok, "not a wrapped argv: %q", argv)
	return strings.TrimSuffix(path, "'")
}

// logRecords collects the messages of a logger.
type logRecords struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }
func (l *logRecords) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

// A snapshot file changed behind the daemon's back (appended to,
// replaced, swapped for a symlink, its mode widened) is never sourced: the
// check before each use notices, logs it and takes the snapshot again.
func TestSnapshotTamperingIsRetaken(t *testing.T) {
	home, env := snapshotHome(t)
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	logs := &logRecords{}
	set := newSnapshots(t, SnapshotsConfig{Shell: bash, Env: func() []string { return env }, Logger: slog.New(logs)})
	s := set.Get("p1", SnapshotUserShell)
	pwned := filepath.Join(home, "pwned")
	evil := "touch " + shQuote(pwned) + "\n"
	tamper := map[string]func(path string){
		"append": func(path string) {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString(evil)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		},
		"replace": func(path string) {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			tmp := path + ".new"
			require.NoError(t, os.WriteFile(tmp, append(b, evil...), 0o600))
			require.NoError(t, os.Rename(tmp, path))
		},
		"symlink": func(path string) {
			other := filepath.Join(t.TempDir(), "evil.sh")
			require.NoError(t, os.WriteFile(other, []byte(evil), 0o600))
			require.NoError(t, os.Remove(path))
			require.NoError(t, os.Symlink(other, path))
		},
		"mode": func(path string) { require.NoError(t, os.Chmod(path, 0o666)) },
	}
	n := 0
	for name, f := range tamper {
		path := snapshotPath(t, s.Wrap(context.Background(), []string{bash, "-lc", "true"}))
		f(path)
		argv := s.Wrap(context.Background(), []string{bash, "-lc", `echo "$FROM_PROFILE"`})
		require.Equal(t, "it's set\n", runArgv(t, argv, env), name)
		require.NoFileExists(t, pwned, name)
		require.NotEqual(t, path, snapshotPath(t, argv), "%s: taken again, under a new name", name)
		n++
		require.Equal(t, n, logs.count("shell snapshot changed on disk; taking it again"), name)
	}
}

// Snapshots are per owner and kind: no two owners, and no two kinds of
// one owner, share a file; a sandboxed snapshot serves only sandboxed
// commands and the others only unsandboxed ones; the least recently used
// goes (its file with it) beyond MaxSnapshots.
func TestSnapshotsPerOwnerAndKind(t *testing.T) {
	_, env := snapshotHome(t)
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	set := newSnapshots(t, SnapshotsConfig{Shell: bash, Env: func() []string { return env }, MaxSnapshots: 4})
	var paths []string
	for _, owner := range []string{"appserver-http/p1", "appserver-http/p2"} {
		for _, kind := range []SnapshotKind{SnapshotDirect, SnapshotUserShell} {
			s := set.Get(owner, kind)
			require.Same(t, s, set.Get(owner, kind))
			paths = append(paths, snapshotPath(t, s.Wrap(context.Background(), []string{bash, "-lc", "true"})))
		}
	}
	require.Len(t, paths, 4)
	for i, p := range paths {
		require.NotContains(t, paths[i+1:], p)
	}
	// A fifth: the least recently used goes, with its file.
	set.Get("appserver-http/p3", SnapshotDirect)
	require.NoFileExists(t, paths[0])
	for _, p := range paths[1:] {
		require.FileExists(t, p)
	}

	ws := policy.SandboxPolicy{Kind: policy.WorkspaceWrite}
	full := policy.SandboxPolicy{Kind: policy.DangerFullAccess}
	require.Equal(t, SnapshotSandboxed, set.For("p1", ws).Kind())
	require.Equal(t, SnapshotDirect, set.For("p1", full).Kind())
	require.True(t, set.Get("p1", SnapshotSandboxed).Serves(ws))
	require.False(t, set.Get("p1", SnapshotSandboxed).Serves(full))
	require.False(t, set.Get("p1", SnapshotUserShell).Serves(ws))
	require.True(t, set.Get("p1", SnapshotUserShell).Serves(full))
}

// TestSandboxedCommandCannotPoisonSnapshots is the attack of a sandboxed
// command on the snapshots: the snapshot directory lies in the daemon's
// hidden data directory inside the command's writable workspace, shown
// read-only. A workspace-write command of owner P1, run from its
// snapshot, finds the file it sourced and tries to append to it, replace
// it, swap it for a symlink and add files next to it. Then neither P2's
// sandboxed login shell, nor P1's own next one, nor a user-shell command
// runs the injected line, and the sandboxed snapshot was taken under a
// read-only sandbox (the profile's write failed).
func TestSandboxedCommandCannotPoisonSnapshots(t *testing.T) {
	home, env := snapshotHome(t)
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(home, ".bash_profile"),
		[]byte(`echo run >> "$HOME/runs"`+"\nexport FROM_PROFILE=profile-value\n"), 0o644))
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	data := filepath.Join(ws, "data")
	dir := filepath.Join(data, "shell-snapshots")
	set := newSnapshots(t, SnapshotsConfig{Shell: bash, Dir: dir, Env: func() []string { return env }})
	sb, err := sandbox.New(sandbox.Options{Hidden: []string{data}, ReadOnly: []string{dir}})
	require.NoError(t, err)
	defer sb.Close()
	set.cfg.Sandbox = sb
	p := policy.SandboxPolicy{Kind: policy.WorkspaceWrite, ExcludeSlashTmp: true, ExcludeTmpdirEnvVar: true}
	pwned := filepath.Join(ws, "pwned")
	run := func(snap *Snapshot, pol policy.SandboxPolicy, script string) string {
		t.Helper()
		res, err := Exec(context.Background(), ExecRequest{
			Argv: []string{bash, "-lc", script}, Snapshot: snap, Cwd: ws, Env: env, Policy: pol, Sandbox: sb,
		})
		require.NoError(t, err)
		return string(res.Aggregated)
	}

	attack := `snap=${BASH_EXECUTION_STRING#. \'}; snap=${snap%%\'*}
echo "sourced $snap"
evil='touch ` + pwned + `'
echo "$evil" >> "$snap"
printf '%s\n' "$evil" > "$snap.new" && mv -f "$snap.new" "$snap"
printf '%s\n' "$evil" > ./evil.sh && ln -sf "$PWD/evil.sh" "$snap"
rm -f "$snap"; printf '%s\n' "$evil" > "$snap"
for i in 0 1 2 3; do printf '%s\n' "$evil" > "$(dirname "$snap")/snapshot-$i.sh"; done
chmod 666 "$snap"
echo "FROM_PROFILE=$FROM_PROFILE"`
	out := run(set.Get("appserver-http/p1", SnapshotSandboxed), p, attack)
	require.Contains(t, out, "sourced "+dir+"/snapshot-", "the attack found the file it sourced")
	require.Contains(t, out, "FROM_PROFILE=profile-value")
	require.NoFileExists(t, filepath.Join(home, "runs"), "the sandboxed snapshot's profile could not write")

	for name, c := range map[string]struct {
		snap *Snapshot
		pol  policy.SandboxPolicy
	}{
		"p2 sandboxed":  {set.Get("appserver-http/p2", SnapshotSandboxed), p},
		"p1 sandboxed":  {set.Get("appserver-http/p1", SnapshotSandboxed), p},
		"p1 user shell": {set.Get("appserver-http/p1", SnapshotUserShell), policy.SandboxPolicy{Kind: policy.DangerFullAccess}},
		"p2 direct":     {set.Get("appserver-http/p2", SnapshotDirect), policy.SandboxPolicy{Kind: policy.DangerFullAccess}},
	} {
		out := run(c.snap, c.pol, `echo "FROM_PROFILE=$FROM_PROFILE"`)
		require.Equal(t, "FROM_PROFILE=profile-value\n", out, name)
		require.NoFileExists(t, pwned, "%s ran the injected line", name)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		require.NotContains(t, string(b), "touch", e.Name())
	}
}

// BenchmarkSnapshotWrap is what using a snapshot costs a command once it
// is taken: the startup files' stamp and the check of the file against
// what the daemon wrote, on this machine's real profile.
func BenchmarkSnapshotWrap(b *testing.B) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		b.Skip("no bash")
	}
	u, err := user.Current()
	if err != nil {
		b.Skip(err)
	}
	env := []string{"HOME=" + u.HomeDir, "PATH=" + os.Getenv("PATH")}
	set, err := NewSnapshots(SnapshotsConfig{Shell: bash, Dir: b.TempDir(), Env: func() []string { return env }})
	if err != nil {
		b.Fatal(err)
	}
	defer set.Close()
	s := set.Get("", SnapshotDirect)
	argv := []string{bash, "-lc", "echo hi"}
	if got := s.Wrap(context.Background(), argv); got[1] != "-c" {
		b.Fatalf("no snapshot: %q", got)
	}
	for b.Loop() {
		s.Wrap(context.Background(), argv)
	}
}
