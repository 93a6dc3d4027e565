package skills

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
)

// testCtx bounds a test so a broken provider fails instead of hanging.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// writeFile creates path (and its parents) with content.
func writeFile(t testing.TB, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// writeSkill creates <dir>/SKILL.md with the given front matter fields. The
// description is double-quoted, since a plain YAML scalar cannot hold ": ".
func writeSkill(t testing.TB, dir, name, description string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, SkillFileName), fmt.Sprintf("---\nname: %s\ndescription: %q\n---\n\n# %s\n\nInstructions.\n", name, description, name))
}

// fakeClock is an injectable clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func names(entries []Entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Name
	}
	return out
}

func TestLocalScanRules(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "deploy"), "deploy", "Deploy the app.")
	writeSkill(t, filepath.Join(root, "category", "lint"), "lint", "Lint   the\n code.")
	writeSkill(t, filepath.Join(root, ".hidden", "secret"), "secret", "Hidden dirs are skipped.")
	writeSkill(t, filepath.Join(root, "deploy", "nested"), "nested", "Not descended into a skill.")
	writeFile(t, filepath.Join(root, "broken", SkillFileName), "no front matter here\n")
	writeFile(t, filepath.Join(root, "badyaml", SkillFileName), "---\nname: x\n\tdescription: y\n---\n")
	writeSkill(t, filepath.Join(root, "a", "b", "c", "d", "e", "deep6"), "deep6", "At the depth limit.")
	writeSkill(t, filepath.Join(root, "a", "b", "c", "d", "e", "f", "deep7"), "deep7", "Below the depth limit.")
	big := filepath.Join(root, "big", SkillFileName)
	writeFile(t, big, "---\nname: big\ndescription: d\n---\n"+strings.Repeat("x", 2048))
	// Symlinks below a root are not followed: neither a linked skill
	// directory nor a linked SKILL.md.
	outside := t.TempDir()
	writeSkill(t, filepath.Join(outside, "linked"), "linked", "Reached through a symlink.")
	require.NoError(t, os.Symlink(filepath.Join(outside, "linked"), filepath.Join(root, "linked")))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "linkfile"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(outside, "linked", SkillFileName), filepath.Join(root, "linkfile", SkillFileName)))

	p := NewLocalProvider([]string{root}, LocalOptions{MaxSkillFileBytes: 1024})
	l, err := p.List(testCtx(t), Query{})
	require.NoError(t, err)
	assert.Equal(t, []string{"deep6", "deploy", "lint"}, names(l.Entries))

	lint := l.Entries[2]
	assert.Equal(t, "Lint the code.", lint.Description, "descriptions are collapsed to one line")
	assert.Equal(t, api.SkillScopeUser, lint.Scope)
	assert.Equal(t, filepath.Join(root, "category", "lint", SkillFileName), lint.Path)
	assert.True(t, strings.HasPrefix(lint.Package, "skill://local/user-"))
	assert.True(t, strings.HasSuffix(lint.Package, "/category/lint"))
	assert.Equal(t, lint.Package+"/SKILL.md", lint.MainResource)
	_, _, err = ValidateResourceInPackage(lint.Package, lint.MainResource)
	assert.NoError(t, err, "local handles are canonical skill URIs")

	errs := map[string]string{}
	for _, e := range l.Errors {
		errs[e.Path] = e.Message
	}
	assert.Contains(t, errs[filepath.Join(root, "broken", SkillFileName)], "missing YAML frontmatter")
	assert.Contains(t, errs[filepath.Join(root, "badyaml", SkillFileName)], "invalid YAML")
	assert.Contains(t, errs[big], "larger than 1024 bytes")
	assert.Contains(t, errs[filepath.Join(root, "linkfile", SkillFileName)], "symlink")
	assert.Len(t, l.Errors, 4)
	assert.Len(t, l.Warnings, 4, "every load error is also a warning")
}

func TestLocalDirectoryCap(t *testing.T) {
	root := t.TempDir()
	for i := range 5 {
		writeSkill(t, filepath.Join(root, fmt.Sprintf("s%d", i)), fmt.Sprintf("s%d", i), "d")
	}
	p := NewLocalProvider([]string{root}, LocalOptions{MaxDirsPerRoot: 3})
	l, err := p.List(testCtx(t), Query{})
	require.NoError(t, err)
	assert.Equal(t, []string{"s0", "s1"}, names(l.Entries), "the root counts as one directory")
	require.Len(t, l.Warnings, 1)
	assert.Contains(t, l.Warnings[0], "after 3 directories")
}

func TestLocalWorkspaceRootsAndPrecedence(t *testing.T) {
	repo := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(repo, ".git"), 0o755))
	cwd := filepath.Join(repo, "svc", "api")
	require.NoError(t, os.MkdirAll(cwd, 0o755))
	user := t.TempDir()

	writeSkill(t, filepath.Join(user, "deploy"), "deploy", "user deploy")
	writeSkill(t, filepath.Join(user, "only-user"), "only-user", "u")
	writeSkill(t, filepath.Join(repo, ".agents", "skills", "deploy"), "deploy", "repo root deploy")
	writeSkill(t, filepath.Join(repo, ".codex", "skills", "classic"), "classic", "classic root")
	writeSkill(t, filepath.Join(repo, "svc", ".agents", "skills", "deploy"), "deploy", "nearest deploy")
	// Above the git root: not part of the workspace.
	writeSkill(t, filepath.Join(filepath.Dir(repo), ".agents", "skills", "outside"), "outside", "o")
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Join(filepath.Dir(repo), ".agents")) })

	p := NewLocalProvider([]string{user}, LocalOptions{})
	l, err := p.List(testCtx(t), Query{Cwd: cwd})
	require.NoError(t, err)
	assert.Equal(t, []string{"classic", "deploy", "only-user"}, names(l.Entries))
	assert.Equal(t, "nearest deploy", l.Entries[1].Description, "the nearest workspace root wins")
	assert.Equal(t, api.SkillScopeRepo, l.Entries[1].Scope)
	assert.Equal(t, api.SkillScopeUser, l.Entries[2].Scope)

	roots := p.Roots(cwd)
	assert.Equal(t, filepath.Join(cwd, ".agents", "skills"), roots[0])
	assert.Equal(t, user, roots[len(roots)-1])
	assert.NotContains(t, roots, filepath.Join(filepath.Dir(repo), ".agents", "skills"))

	// Without a cwd only the configured roots count.
	l, err = p.List(testCtx(t), Query{})
	require.NoError(t, err)
	assert.Equal(t, []string{"deploy", "only-user"}, names(l.Entries))
	assert.Equal(t, "user deploy", l.Entries[0].Description)
}

func TestLocalRelativeAndHomeRoots(t *testing.T) {
	cwd, home := t.TempDir(), t.TempDir()
	writeSkill(t, filepath.Join(cwd, "team-skills", "rel"), "rel", "relative root")
	writeSkill(t, filepath.Join(home, "my-skills", "mine"), "mine", "home root")
	p := NewLocalProvider([]string{"team-skills", "~/my-skills"}, LocalOptions{HomeDir: home})
	l, err := p.List(testCtx(t), Query{Cwd: cwd})
	require.NoError(t, err)
	assert.Equal(t, []string{"mine", "rel"}, names(l.Entries))
	assert.Equal(t, api.SkillScopeRepo, l.Entries[1].Scope)
}

func TestLocalCacheTTLAndForceReload(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "one"), "one", "d")
	clock := newFakeClock()
	p := NewLocalProvider([]string{root}, LocalOptions{Now: clock.Now, CacheTTL: time.Minute})
	ctx := testCtx(t)
	l, err := p.List(ctx, Query{})
	require.NoError(t, err)
	require.Len(t, l.Entries, 1)

	writeSkill(t, filepath.Join(root, "two"), "two", "d")
	l, _ = p.List(ctx, Query{})
	assert.Len(t, l.Entries, 1, "cached within the TTL")
	l, _ = p.List(ctx, Query{ForceReload: true})
	assert.Len(t, l.Entries, 2, "force reload rescans")

	writeSkill(t, filepath.Join(root, "three"), "three", "d")
	clock.Advance(2 * time.Minute)
	l, _ = p.List(ctx, Query{})
	assert.Len(t, l.Entries, 3, "rescanned after the TTL")

	writeSkill(t, filepath.Join(root, "four"), "four", "d")
	p.Invalidate()
	l, _ = p.List(ctx, Query{})
	assert.Len(t, l.Entries, 4, "rescanned after Invalidate")
}

func TestLocalLookupRevalidates(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "deploy")
	writeSkill(t, dir, "deploy", "d")
	p := NewLocalProvider([]string{root}, LocalOptions{CacheTTL: time.Hour})
	ctx := testCtx(t)
	l, err := p.List(ctx, Query{})
	require.NoError(t, err)
	pkg := l.Entries[0].Package

	e, err := p.Lookup(ctx, Query{}, pkg)
	require.NoError(t, err)
	assert.Equal(t, "deploy", e.Name)

	// Edited: re-parsed on lookup, even though the scan is cached.
	writeFile(t, filepath.Join(dir, SkillFileName), "---\nname: deploy2\ndescription: changed text\n---\n")
	e, err = p.Lookup(ctx, Query{}, pkg)
	require.NoError(t, err)
	assert.Equal(t, "deploy2", e.Name)

	// Broken: no longer available.
	writeFile(t, filepath.Join(dir, SkillFileName), "not a skill any more, and longer\n")
	_, err = p.Lookup(ctx, Query{}, pkg)
	assert.ErrorIs(t, err, ErrPackageUnavailable)

	// Removed.
	writeSkill(t, dir, "deploy", "d")
	require.NoError(t, os.RemoveAll(dir))
	_, err = p.Lookup(ctx, Query{}, pkg)
	assert.ErrorIs(t, err, ErrPackageUnavailable)

	_, err = p.Lookup(ctx, Query{}, "skill://local/user-0000000000/nope")
	assert.ErrorIs(t, err, ErrPackageUnavailable)
}

func TestLocalReadConfinedToSkillDirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "deploy")
	writeSkill(t, dir, "deploy", "d")
	writeFile(t, filepath.Join(dir, "references", "guide.md"), "guide ✅")
	writeFile(t, filepath.Join(dir, "with space.md"), "spaced")
	writeFile(t, filepath.Join(dir, ".env"), "SECRET=1")
	writeFile(t, filepath.Join(dir, "large.md"), strings.Repeat("x", 300))
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret.md"), "outside")
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(dir, "link.md")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "linkdir")))
	writeSkill(t, filepath.Join(root, "other"), "other", "d")

	p := NewLocalProvider([]string{root}, LocalOptions{MaxResourceBytes: 256})
	ctx := testCtx(t)
	l, err := p.List(ctx, Query{})
	require.NoError(t, err)
	pkg := l.Entries[0].Package
	require.Equal(t, "deploy", l.Entries[0].Name)

	res, err := p.Read(ctx, Query{}, pkg, pkg+"/SKILL.md")
	require.NoError(t, err)
	assert.Contains(t, res.Text, "name: deploy")
	assert.Equal(t, pkg+"/SKILL.md", res.ID)
	res, err = p.Read(ctx, Query{}, pkg, pkg+"/references/guide.md")
	require.NoError(t, err)
	assert.Equal(t, "guide ✅", res.Text)
	res, err = p.Read(ctx, Query{}, pkg, pkg+"/"+EscapeSegment("with space.md"))
	require.NoError(t, err)
	assert.Equal(t, "spaced", res.Text)

	for _, tc := range []struct{ res, want string }{
		{pkg + "/missing.md", "not found"},
		{pkg + "/references", "not a regular file"},
		{pkg + "/.env", "hidden files"},
		{pkg + "/link.md", "symlink"},
		{pkg + "/linkdir/secret.md", "symlink"},
		{pkg + "/large.md", "read limit"},
		{pkg + "/../other/SKILL.md", "dot segments"},
		{pkg + "/%2e%2e/other/SKILL.md", "encoded dots"},
		{l.Entries[1].Package + "/SKILL.md", "not inside the requested package"},
		{"/etc/passwd", "absolute filesystem paths"},
	} {
		_, err := p.Read(ctx, Query{}, pkg, tc.res)
		require.Error(t, err, tc.res)
		assert.Contains(t, err.Error(), tc.want, tc.res)
	}
}
