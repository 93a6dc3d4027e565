package skills

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
)

func TestSkillsListPerCwd(t *testing.T) {
	user := t.TempDir()
	writeSkill(t, filepath.Join(user, "deploy"), "deploy", "Deploy the app.")
	writeFile(t, filepath.Join(user, "broken", SkillFileName), "---\nname: broken\n---\n")
	writeFile(t, filepath.Join(user, "short", SkillFileName), "---\nname: short\ndescription: Has a short description.\nmetadata:\n  short-description: Short.\n---\n")
	repo := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(repo, ".git"), 0o755))
	writeSkill(t, filepath.Join(repo, ".agents", "skills", "repo-skill"), "repo-skill", "Only in this repo.")

	cat, err := New(Config{Roots: []string{user}}, Options{Local: LocalOptions{CacheTTL: time.Hour}})
	require.NoError(t, err)
	other := t.TempDir()
	res, err := cat.SkillsList(testCtx(t), api.SkillsListParams{Cwds: []string{repo, other}}, "/unused", nil)
	require.NoError(t, err)
	require.Len(t, res.Data, 2)

	assert.Equal(t, repo, res.Data[0].Cwd)
	var gotNames []string
	for _, s := range res.Data[0].Skills {
		gotNames = append(gotNames, s.Name)
	}
	assert.Equal(t, []string{"deploy", "repo-skill", "short"}, gotNames)
	short := "Short."
	assert.Equal(t, api.SkillMetadata{
		Name: "short", Description: "Has a short description.", ShortDescription: &short,
		Path: filepath.Join(user, "short", SkillFileName), Scope: api.SkillScopeUser, Enabled: true,
	}, res.Data[0].Skills[2])
	assert.Equal(t, api.SkillScopeRepo, res.Data[0].Skills[1].Scope)
	assert.Equal(t, api.List[api.SkillErrorInfo]{{Path: filepath.Join(user, "broken", SkillFileName), Message: "missing field `description`"}}, res.Data[0].Errors)
	assert.Len(t, res.Data[1].Skills, 2, "the other directory has no workspace skills")

	// The wire shape the server sends.
	raw, err := json.Marshal(res.Data[1].Skills[0])
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"deploy","description":"Deploy the app.","path":"`+filepath.Join(user, "deploy", SkillFileName)+`","scope":"user","enabled":true,"pluginId":null}`, string(raw))

	// forceReload rescans despite the cache.
	writeSkill(t, filepath.Join(user, "added"), "added", "New.")
	res, err = cat.SkillsList(testCtx(t), api.SkillsListParams{}, other, nil)
	require.NoError(t, err)
	assert.Len(t, res.Data[0].Skills, 2)
	force := true
	res, err = cat.SkillsList(testCtx(t), api.SkillsListParams{ForceReload: &force}, other, nil)
	require.NoError(t, err)
	assert.Len(t, res.Data[0].Skills, 3)
	assert.Equal(t, other, res.Data[0].Cwd, "the default cwd is used when none is given")

	_, err = cat.SkillsList(testCtx(t), api.SkillsListParams{Cwds: []string{"relative/dir"}}, "", nil)
	assert.Error(t, err)
}

func TestSkillsListWithoutLocalRoots(t *testing.T) {
	cat, err := New(Config{}, Options{})
	require.NoError(t, err)
	res, err := cat.SkillsList(testCtx(t), api.SkillsListParams{}, "/work", nil)
	require.NoError(t, err)
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	assert.JSONEq(t, `{"data":[{"cwd":"/work","skills":[],"errors":[]}]}`, string(raw))
}

// TestWatcherPoll pins what counts as a change, polling by hand.
func TestWatcherPoll(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "one"), "one", "d")
	repo := t.TempDir()
	cat, err := New(Config{Roots: []string{root}}, Options{})
	require.NoError(t, err)
	w := cat.NewWatcher(WatcherConfig{Cwds: []string{repo}})
	w.last = w.fingerprints()
	assert.False(t, w.poll(), "nothing changed")

	writeSkill(t, filepath.Join(root, "two"), "two", "d")
	assert.True(t, w.poll(), "a skill added to a configured root")
	assert.False(t, w.poll(), "reported once")

	writeSkill(t, filepath.Join(repo, ".agents", "skills", "ws"), "ws", "d")
	assert.True(t, w.poll(), "a skill added to a workspace root")

	writeFile(t, filepath.Join(root, "one", SkillFileName), "---\nname: one\ndescription: edited and longer\n---\n")
	assert.True(t, w.poll(), "a SKILL.md edited in place")

	writeFile(t, filepath.Join(root, ".hidden", "x", SkillFileName), "ignored")
	assert.False(t, w.poll(), "hidden directories do not count")

	require.NoError(t, os.RemoveAll(filepath.Join(root, "two")))
	assert.True(t, w.poll(), "a skill removed")

	// A directory listed for the first time brings new roots into view;
	// that is not a change.
	other := t.TempDir()
	writeSkill(t, filepath.Join(other, ".codex", "skills", "c"), "c", "d")
	_, err = cat.Local().List(testCtx(t), Query{Cwd: other})
	require.NoError(t, err)
	assert.False(t, w.poll())

	// Its roots stay watched after the cache is invalidated.
	cat.Local().Invalidate()
	writeSkill(t, filepath.Join(other, ".codex", "skills", "d"), "d", "d")
	assert.True(t, w.poll(), "a skill added to a listed directory's workspace")
}

// TestWatcherReportsChanges checks the goroutine: poll, invalidate the
// cache, call back; Start/Stop rules.
func TestWatcherReportsChanges(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "one"), "one", "d")
	cat, err := New(Config{Roots: []string{root}}, Options{Local: LocalOptions{CacheTTL: time.Hour}})
	require.NoError(t, err)
	ctx := testCtx(t)
	l, err := cat.Local().List(ctx, Query{})
	require.NoError(t, err)
	require.Len(t, l.Entries, 1)

	changed := make(chan struct{}, 16)
	w := cat.NewWatcher(WatcherConfig{Interval: 5 * time.Millisecond, OnChange: func() { changed <- struct{}{} }})
	w.Stop() // before Start: a no-op
	require.NoError(t, w.Start(ctx))
	t.Cleanup(w.Stop)
	require.NoError(t, w.Start(ctx), "a second Start does nothing")

	writeSkill(t, filepath.Join(root, "two"), "two", "d")
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no change reported")
	}
	l, err = cat.Local().List(ctx, Query{})
	require.NoError(t, err)
	assert.Len(t, l.Entries, 2, "the change invalidated the cache")
	w.Stop()
	w.Stop() // idempotent
}

func TestWatcherWithoutLocalProvider(t *testing.T) {
	cat, err := New(Config{}, Options{})
	require.NoError(t, err)
	w := cat.NewWatcher(WatcherConfig{})
	require.NoError(t, w.Start(testCtx(t)))
	w.Stop()
}

func TestConfigDecodesFromTOML(t *testing.T) {
	var file struct {
		Skills Config `toml:"skills"`
	}
	_, err := toml.Decode(`
[skills]
roots = ["/srv/skills", "~/skills"]

[skills.remote.codex_apps]
url = "https://apps.example/mcp"
bearer_token_env = "APPS_TOKEN"
`, &file)
	require.NoError(t, err)
	assert.Equal(t, Config{
		Roots:  []string{"/srv/skills", "~/skills"},
		Remote: map[string]RemoteConfig{"codex_apps": {URL: "https://apps.example/mcp", BearerTokenEnv: "APPS_TOKEN"}},
	}, file.Skills)
}

func TestSkillsListExtraRoots(t *testing.T) {
	extra := t.TempDir()
	writeSkill(t, filepath.Join(extra, "demo"), "demo", "From an extra root.")
	cat, err := New(Config{}, Options{Local: LocalOptions{CacheTTL: time.Hour}})
	require.NoError(t, err)
	cwd := t.TempDir()
	res, err := cat.SkillsList(testCtx(t), api.SkillsListParams{}, cwd, nil)
	require.NoError(t, err)
	assert.Empty(t, res.Data[0].Skills)

	// The cached listing of cwd is not the one with the extra root.
	res, err = cat.SkillsList(testCtx(t), api.SkillsListParams{}, cwd, []string{extra, filepath.Join(extra, "missing")})
	require.NoError(t, err)
	require.Len(t, res.Data[0].Skills, 1)
	assert.Equal(t, api.SkillMetadata{
		Name: "demo", Description: "From an extra root.",
		Path: filepath.Join(extra, "demo", SkillFileName), Scope: api.SkillScopeUser, Enabled: true,
	}, res.Data[0].Skills[0])
	assert.Empty(t, res.Data[0].Errors, "a missing extra root is no error")

	res, err = cat.SkillsList(testCtx(t), api.SkillsListParams{}, cwd, nil)
	require.NoError(t, err)
	assert.Empty(t, res.Data[0].Skills, "without them again, the extra roots are gone")
}
