package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// writeExtraSkill makes the extra root of skills_write.jsonl: one skill,
// demo/SKILL.md.
func writeExtraSkill(t *testing.T, root string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "demo"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "demo", "SKILL.md"),
		[]byte("---\nname: demo\ndescription: A demo skill in an extra root.\n---\nBody.\n"), 0o644))
}

// skills/extraRoots/set and skills/config/write answer as the reference
// does (testdata/golden/reference/skills_write.jsonl, see
// skills_write_capture.js): extra roots show in skills/list, a missing one
// is no error, an empty list clears them; a skill turned off by name stays
// off when its path is turned on; exactly one selector; relative paths and
// missing fields refused at decode; neither method needs experimentalApi.
func TestSkillsWriteMatchesReference(t *testing.T) {
	calls := readGoldenCalls(t, "skills_write.jsonl")
	cwd, extra := apptest.RealTempDir(t), apptest.RealTempDir(t)
	writeExtraSkill(t, extra)
	d := apptest.Start(t, "--data-dir", t.TempDir())
	conns := map[bool]*apptest.Client{true: rpcOf(t, d, true), false: rpcOf(t, d, false)}
	for _, c := range calls {
		params := strings.ReplaceAll(string(c.Req[1]), `"CWD"`, string(apptest.JSON(t, cwd)))
		params = strings.ReplaceAll(params, "EXTRA", extra)
		sent := c
		sent.Req[1] = json.RawMessage(params)
		got := sendGolden(conns[*c.Exp], sent)
		want := c
		if c.Res != nil {
			res := strings.ReplaceAll(string(c.Res), `"CWD"`, string(apptest.JSON(t, cwd)))
			want.Res = json.RawMessage(strings.ReplaceAll(res, "EXTRA", extra))
		}
		requireAnswerMatches(t, want, got)
	}
}

// A principal's extra roots and switches are its own: it may not add a
// root outside its workspace roots, the daemon's data directory (nor may
// the operator) or another principal's roots; what it sets never shows in another
// principal's skills/list, nor in the operator's.
func TestSkillsExtraRootsPerPrincipal(t *testing.T) {
	p := apptest.StartPrincipals(t, `{"steps":[]}`)
	ci := apptest.RPC(t, p.D.Addr, apptest.CIToken, nil)
	bob := apptest.RPC(t, p.D.Addr, apptest.BobToken, nil)
	op := apptest.RPC(t, p.D.Addr, apptest.OperatorToken, nil)
	writeExtraSkill(t, filepath.Join(p.CIRoot, "skills"))
	outside := apptest.RealTempDir(t)
	writeExtraSkill(t, outside)

	set := func(r *apptest.Client, roots ...string) apptest.Frame {
		t.Helper()
		return r.CallRaw("skills/extraRoots/set", map[string]any{"extraRoots": roots})
	}
	for _, root := range []string{outside, p.BobRoot, p.DataDir, filepath.Join(p.CIRoot, "..", filepath.Base(outside))} {
		f := set(ci, root)
		require.NotNil(t, f.Error, root)
		require.Contains(t, f.Error.Message, "extraRoots[0]", root)
		require.Equal(t, -32602, f.Error.Code, root)
	}
	// A symlink inside its roots leading out is refused too.
	link := filepath.Join(p.CIRoot, "out")
	require.NoError(t, os.Symlink(outside, link))
	f := set(ci, link)
	require.NotNil(t, f.Error)
	require.Contains(t, f.Error.Message, "outside this principal's workspace roots")

	f = set(ci, p.CIRoot+"/a\x00b")
	require.NotNil(t, f.Error)
	require.Equal(t, "extraRoots[0] contains a NUL byte", f.Error.Message)
	many := make([]string, 65)
	for i := range many {
		many[i] = p.CIRoot
	}
	f = set(ci, many...)
	require.NotNil(t, f.Error)
	require.Equal(t, "extraRoots has 65 entries; at most 64 are allowed", f.Error.Message)
	f = set(ci, "relative")
	require.NotNil(t, f.Error)
	require.Equal(t, "Invalid request: AbsolutePathBuf deserialized without a base path", f.Error.Message)

	names := func(r *apptest.Client, cwd string) []string {
		t.Helper()
		var res struct {
			Data []struct {
				Skills []struct {
					Name    string `json:"name"`
					Enabled bool   `json:"enabled"`
				} `json:"skills"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(r.Call("skills/list", map[string]any{"cwds": []string{cwd}}), &res))
		var out []string
		for _, s := range res.Data[0].Skills {
			n := s.Name
			if !s.Enabled {
				n += " (off)"
			}
			out = append(out, n)
		}
		return out
	}
	// Even the operator may not search the daemon's data directory.
	f = set(op, filepath.Join(p.DataDir, "skills"))
	require.NotNil(t, f.Error)
	require.Contains(t, f.Error.Message, "may not be searched for skills")

	f = set(ci, filepath.Join(p.CIRoot, "skills"))
	require.Nil(t, f.Error)
	require.Equal(t, []string{"demo"}, names(ci, p.CIRoot))
	require.Empty(t, names(bob, p.BobRoot), "another principal's extra roots")
	require.Empty(t, names(op, p.CIRoot), "the operator's list")

	f = ci.CallRaw("skills/config/write", map[string]any{"name": "demo", "enabled": false})
	require.Nil(t, f.Error)
	require.Equal(t, []string{"demo (off)"}, names(ci, p.CIRoot))
	f = ci.CallRaw("skills/config/write", map[string]any{"path": filepath.Join(outside, "demo", "SKILL.md"), "enabled": false})
	require.NotNil(t, f.Error, "a path outside its roots")
	f = ci.CallRaw("skills/config/write", map[string]any{"name": "a\x00b", "enabled": false})
	require.NotNil(t, f.Error)
	require.Equal(t, "name contains a NUL byte", f.Error.Message)

	require.NoError(t, os.MkdirAll(filepath.Join(p.BobRoot, "skills"), 0o755))
	writeExtraSkill(t, filepath.Join(p.BobRoot, "skills"))
	require.Nil(t, set(bob, filepath.Join(p.BobRoot, "skills")).Error)
	require.Equal(t, []string{"demo"}, names(bob, p.BobRoot), "ci's switch is not bob's")
}

// skills/config/write keeps the switch in the user config as the
// reference does ([[skills.config]] entries: turning a skill off adds
// one, turning it on removes it), and a restarted daemon applies it.
func TestSkillSwitchesPersist(t *testing.T) {
	dataDir, cwd, extra := t.TempDir(), apptest.RealTempDir(t), apptest.RealTempDir(t)
	writeExtraSkill(t, extra)
	skillPath := filepath.Join(extra, "demo", "SKILL.md")
	userConfig := filepath.Join(dataDir, "user-config.toml")
	state := func(r *apptest.Client) bool {
		t.Helper()
		r.Call("skills/extraRoots/set", map[string]any{"extraRoots": []string{extra}})
		var res struct {
			Data []struct {
				Skills []struct {
					Enabled bool `json:"enabled"`
				} `json:"skills"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(r.Call("skills/list", map[string]any{"cwds": []string{cwd}, "forceReload": true}), &res))
		require.Len(t, res.Data[0].Skills, 1)
		return res.Data[0].Skills[0].Enabled
	}
	d := apptest.Start(t, "--data-dir", dataDir)
	r := d.RPC(t)
	require.True(t, state(r))
	r.Call("skills/config/write", map[string]any{"name": "demo", "enabled": false})
	r.Call("skills/config/write", map[string]any{"path": skillPath, "enabled": false})
	file, err := os.ReadFile(userConfig)
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(file), "[[skills.config]]"), "%s", file)
	require.Contains(t, string(file), `name = "demo"`)
	require.Contains(t, string(file), "path = "+string(apptest.JSON(t, skillPath)))
	require.Equal(t, 2, strings.Count(string(file), "enabled = false"))
	require.False(t, state(r))

	d.Stop(t)
	d = apptest.Start(t, "--data-dir", dataDir)
	r = d.RPC(t)
	require.False(t, state(r), "applied after a restart")
	r.Call("skills/config/write", map[string]any{"name": "demo", "enabled": true})
	require.False(t, state(r), "still off by path")
	r.Call("skills/config/write", map[string]any{"path": skillPath, "enabled": true})
	require.True(t, state(r))
	file, err = os.ReadFile(userConfig)
	require.NoError(t, err)
	require.NotContains(t, string(file), "skills")
}
