package shell

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
	s := NewSnapshot(bash, t.TempDir(), func() []string { return env })
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
	s := NewSnapshot(bash, b.TempDir(), func() []string { return env })
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
