package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// externalAgentLayout lays out the projects of externalagent_capture.js
// under dir, with the same files.
func externalAgentLayout(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		"repo/CLAUDE.md":          "# Rules for Claude\n\nClaude Code reads CLAUDE.md; claude-code and claude_code too.\nNot claudeX, not myclaude, not CLAUDE_MD.\n",
		"plain/.claude/CLAUDE.md": "Use claude.\n",
		"done/CLAUDE.md":          "x\n",
		"done/AGENTS.md":          "kept\n",
		"blank/CLAUDE.md":         "claude rules\n",
		"blank/AGENTS.md":         "  \n",
		"empty/CLAUDE.md":         "\n",
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "repo", ".git"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "repo", "sub"), 0o755))
	for name, text := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
}

// externalAgentLine is a line of externalagent.jsonl: a request and its
// answer, a notification of the import before it ("note"), or a file
// afterwards ("file").
type externalAgentLine struct {
	goldenCall
	Note   string          `json:"note"`
	Params json.RawMessage `json:"params"`
	File   string          `json:"file"`
	Text   *string         `json:"text"`
}

// externalAgentConfig/detect and externalAgentConfig/import answer as the
// reference does for CLAUDE.md files (testdata/golden/reference/
// externalagent.jsonl, see externalagent_capture.js): the same items
// detected (a repository found from a subdirectory or a file, .claude/
// searched, an AGENTS.md with text left alone), the same refusals, the
// same notifications of each import (one progress per item, then the
// whole outcome), and the same AGENTS.md files written.
func TestExternalAgentImportMatchesReference(t *testing.T) {
	data, err := os.ReadFile("testdata/golden/reference/externalagent.jsonl")
	require.NoError(t, err)
	dir := t.TempDir()
	externalAgentLayout(t, dir)
	d := apptest.Start(t, "--data-dir", t.TempDir())
	r := rpcOf(t, d, false)
	toDir := func(s string) string { return strings.ReplaceAll(s, "DIR/", dir+"/") }
	fromDir := func(b []byte) string { return strings.ReplaceAll(string(b), dir+"/", "DIR/") }
	var notes []externalAgentLine
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var l externalAgentLine
		require.NoError(t, json.Unmarshal([]byte(line), &l), line)
		switch {
		case l.Note != "":
			notes = append(notes, l)
			continue
		case l.File != "":
			b, err := os.ReadFile(filepath.Join(dir, l.File))
			if l.Text == nil {
				require.ErrorIs(t, err, os.ErrNotExist, l.File)
			} else {
				require.NoError(t, err, l.File)
				require.Equal(t, *l.Text, string(b), l.File)
			}
			continue
		}
		c := l.goldenCall
		sent := c
		sent.Req[1] = json.RawMessage(toDir(string(c.Req[1])))
		r.Seen = nil
		got := sendGolden(r, sent)
		if got.Error == nil {
			got.Result = json.RawMessage(fromDir(got.Result))
		}
		if c.method() == "externalAgentConfig/import" && c.Err == nil {
			var res struct {
				ImportID string `json:"importId"`
			}
			require.NoError(t, json.Unmarshal(got.Result, &res))
			require.NoError(t, uuid.Validate(res.ImportID), "%s", c)
			got.Result = json.RawMessage(`{"importId":"ID"}`)
			var seen []externalAgentLine
			if len(notes) > 0 {
				completed := r.Until("externalAgentConfig/import/completed")
				for _, f := range append(r.Seen, completed) {
					if strings.HasPrefix(f.Method, "externalAgentConfig/") {
						p := strings.ReplaceAll(fromDir(f.Params), res.ImportID, "ID")
						seen = append(seen, externalAgentLine{Note: f.Method, Params: json.RawMessage(p)})
					}
				}
			}
			require.Len(t, seen, len(notes), "%s", c)
			for i := range notes {
				require.Equal(t, notes[i].Note, seen[i].Note, "%s", c)
				require.JSONEq(t, string(notes[i].Params), string(seen[i].Params), "%s: %s", c, notes[i].Note)
			}
		}
		notes = nil
		requireAnswerMatches(t, c, got)
	}
}

// A principal's detect and import stay in its workspace roots: another
// principal's project is not detected, and an item naming it imports
// nothing and writes nothing there; its own project imports.
func TestExternalAgentImportStaysInRoots(t *testing.T) {
	p := apptest.StartPrincipals(t, `{"steps":[]}`)
	externalAgentLayout(t, p.BobRoot)
	externalAgentLayout(t, p.CIRoot)
	ci := apptest.RPC(t, p.D.Addr, apptest.CIToken, nil)

	res := ci.Call("externalAgentConfig/detect", map[string]any{"cwds": []string{
		filepath.Join(p.BobRoot, "repo"), filepath.Join(p.CIRoot, "repo")}})
	var det struct {
		Items []struct {
			Cwd string `json:"cwd"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal(res, &det))
	require.Len(t, det.Items, 1)
	require.Equal(t, filepath.Join(p.CIRoot, "repo"), det.Items[0].Cwd)

	ci.Seen = nil
	ci.Call("externalAgentConfig/import", map[string]any{"migrationItems": []any{
		map[string]any{"itemType": "AGENTS_MD", "description": "x", "cwd": filepath.Join(p.BobRoot, "repo")},
		map[string]any{"itemType": "AGENTS_MD", "description": "x", "cwd": filepath.Join(p.CIRoot, "repo")},
	}})
	done := ci.Until("externalAgentConfig/import/completed")
	require.Contains(t, string(done.Params), filepath.Join(p.CIRoot, "repo", "AGENTS.md"))
	require.NotContains(t, string(done.Params), p.BobRoot)
	_, err := os.Stat(filepath.Join(p.BobRoot, "repo", "AGENTS.md"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing written outside ci's roots")
	b, err := os.ReadFile(filepath.Join(p.CIRoot, "repo", "AGENTS.md"))
	require.NoError(t, err)
	require.Contains(t, string(b), "# Rules for Codex")
}
