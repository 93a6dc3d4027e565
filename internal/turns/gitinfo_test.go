package turns

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
)

func TestGitInfoOf(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	write := func(path, data string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
	}
	str := func(s string) *string { return &s }
	config := "[core]\n\tbare = false\n[remote \"upstream\"]\n\turl = https://example.com/up.git\n[remote \"origin\"]\n\turl = git@example.com:me/demo.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n"

	// A repository whose branch is in packed-refs, seen from a
	// subdirectory.
	repo := t.TempDir()
	write(filepath.Join(repo, ".git", "HEAD"), "ref: refs/heads/feature/x\n")
	write(filepath.Join(repo, ".git", "packed-refs"), "# pack-refs with: peeled\n"+sha+" refs/heads/feature/x\n")
	write(filepath.Join(repo, ".git", "config"), config)
	sub := filepath.Join(repo, "src", "pkg")
	require.NoError(t, os.MkdirAll(sub, 0o755))
	want := &api.GitInfo{Sha: str(sha), Branch: str("feature/x"), OriginURL: str("git@example.com:me/demo.git")}
	require.Equal(t, want, gitInfoOf(sub, nil))
	// A principal whose root is below the repository sees none of it.
	require.Nil(t, gitInfoOf(sub, []string{filepath.Join(repo, "src")}))
	require.Equal(t, want, gitInfoOf(sub, []string{repo}))
	// A cwd outside every root of the principal: nothing.
	require.Nil(t, gitInfoOf(sub, []string{t.TempDir()}))

	// A linked worktree: .git is a file naming its Git directory, whose
	// commondir holds the config; HEAD is detached.
	wt := t.TempDir()
	wtGit := filepath.Join(repo, ".git", "worktrees", "wt")
	write(filepath.Join(wt, ".git"), "gitdir: "+wtGit+"\n")
	write(filepath.Join(wtGit, "HEAD"), sha+"\n")
	write(filepath.Join(wtGit, "commondir"), "../..\n")
	require.Equal(t, &api.GitInfo{Sha: str(sha), OriginURL: str("git@example.com:me/demo.git")}, gitInfoOf(wt, nil))

	// A new repository: a branch with no commit yet, no remote.
	fresh := t.TempDir()
	write(filepath.Join(fresh, ".git", "HEAD"), "ref: refs/heads/main\n")
	require.Equal(t, &api.GitInfo{Branch: str("main")}, gitInfoOf(fresh, nil))

	// A HEAD naming a ref outside refs/ is not followed.
	odd := t.TempDir()
	write(filepath.Join(odd, ".git", "HEAD"), "ref: ../../etc/passwd\n")
	require.Nil(t, gitInfoOf(odd, nil))
}
