package clientfs_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/stretchr/testify/require"
)

// filesScript is testdata/golden/reference/fs_script.json or
// fuzzy_script.json (see files_capture.js there): a tree to make under an
// empty root, and the steps the capture took.
type filesScript struct {
	Tree  [][]string        `json:"tree"`
	Steps []json.RawMessage `json:"steps"`
}

// filesLine is one line of a capture: a request with its answer, or a
// notification.
type filesLine struct {
	Req  *[2]json.RawMessage `json:"req,omitempty"`
	Res  json.RawMessage     `json:"res,omitempty"`
	Err  json.RawMessage     `json:"err,omitempty"`
	Note json.RawMessage     `json:"note,omitempty"`
}

func loadFilesScript(t *testing.T, name string) filesScript {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", "reference", name))
	require.NoError(t, err)
	var s filesScript
	require.NoError(t, json.Unmarshal(b, &s))
	return s
}

// makeTree makes a script's tree under root.
func makeTree(t *testing.T, root string, tree [][]string) {
	t.Helper()
	for _, e := range tree {
		p := filepath.Join(root, e[1])
		dir := filepath.Dir(p)
		if e[0] == "dir" {
			dir = p
		}
		require.NoError(t, os.MkdirAll(dir, 0o755))
		switch e[0] {
		case "file":
			mode := os.FileMode(0o644)
			if len(e) > 3 {
				m, err := strconv.ParseUint(e[3], 8, 32)
				require.NoError(t, err)
				mode = os.FileMode(m)
			}
			require.NoError(t, os.WriteFile(p, []byte(e[2]), mode))
			require.NoError(t, os.Chmod(p, mode))
		case "symlink":
			require.NoError(t, os.Symlink(e[2], p))
		case "fifo":
			require.NoError(t, syscall.Mkfifo(p, 0o644))
		}
	}
}

// runFilesScript runs a script's steps against r (the tree made under
// root) and returns the lines the capture would have printed: requests
// with their answers in order, and the fs/changed and fuzzyFileSearch/*
// notifications, in the order they came.
func runFilesScript(t *testing.T, r *apptest.Client, root string, s filesScript) (calls, notes []filesLine) {
	t.Helper()
	show := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return json.RawMessage(strings.ReplaceAll(string(b), root, "$ROOT"))
	}
	keep := func(fs []apptest.Frame) {
		for _, f := range fs {
			if f.Method == "fs/changed" || strings.HasPrefix(f.Method, "fuzzyFileSearch/") {
				notes = append(notes, filesLine{Note: show(map[string]any{"method": f.Method, "params": f.Params})})
			}
		}
	}
	for _, raw := range s.Steps {
		var step []json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &step))
		var kind, a string
		require.NoError(t, json.Unmarshal(step[0], &kind))
		if kind != "sleep" {
			require.NoError(t, json.Unmarshal(step[1], &a))
		}
		switch kind {
		case "sleep":
			var ms int
			require.NoError(t, json.Unmarshal(step[1], &ms))
			// What arrives meanwhile is read with the next answer.
			time.Sleep(time.Duration(ms) * time.Millisecond)
		case "write":
			var data string
			require.NoError(t, json.Unmarshal(step[2], &data))
			require.NoError(t, os.WriteFile(filepath.Join(root, a), []byte(data), 0o644))
		case "rm":
			require.NoError(t, os.RemoveAll(filepath.Join(root, a)))
		case "call":
			params := json.RawMessage(strings.ReplaceAll(string(step[2]), "$ROOT", root))
			f := r.CallRaw(a, params)
			line := filesLine{Req: &[2]json.RawMessage{step[1], step[2]}, Res: json.RawMessage("null"), Err: json.RawMessage("null")}
			if f.Error != nil {
				line.Err = show(map[string]any{"code": f.Error.Code, "message": f.Error.Message})
			} else {
				line.Res = show(json.RawMessage(f.Result))
			}
			calls = append(calls, line)
		}
		keep(r.Seen)
		r.Seen = nil
	}
	r.Call("thread/loaded/list", map[string]any{})
	keep(r.Seen)
	r.Seen = nil
	return calls, notes
}

func readGolden(t *testing.T, name string) (calls, notes []filesLine) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", "reference", name))
	require.NoError(t, err)
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var fl filesLine
		require.NoError(t, json.Unmarshal([]byte(l), &fl))
		if fl.Note != nil {
			notes = append(notes, fl)
		} else {
			calls = append(calls, fl)
		}
	}
	return calls, notes
}

// normalFiles makes an answer comparable: modification times (which the
// two runs cannot share) become 1, and directory listings are sorted by
// name (the reference lists them in the order the directory holds
// them).
func normalFiles(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	if m, ok := v.(map[string]any); ok {
		if ms, ok := m["modifiedAtMs"].(float64); ok && ms > 0 {
			m["modifiedAtMs"] = 1
		}
		if es, ok := m["entries"].([]any); ok {
			slices.SortFunc(es, func(a, b any) int {
				return strings.Compare(a.(map[string]any)["fileName"].(string), b.(map[string]any)["fileName"].(string))
			})
		}
	}
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// replayFiles runs a script on a fresh daemon and tree and checks that
// each request gets the capture's error, or its result as normal makes
// it comparable; it returns the notifications of the run and of the
// capture.
func replayFiles(t *testing.T, script, capture string, normal func(json.RawMessage) string) (notes, wantNotes []filesLine) {
	t.Helper()
	s := loadFilesScript(t, script)
	root := apptest.RealTempDir(t)
	makeTree(t, root, s.Tree)
	d := apptest.Start(t, "--data-dir", t.TempDir())
	calls, notes := runFilesScript(t, d.RPC(t), root, s)
	wantCalls, wantNotes := readGolden(t, capture)
	require.Len(t, calls, len(wantCalls))
	for i, want := range wantCalls {
		req := string(want.Req[0]) + " " + string(want.Req[1])
		require.JSONEq(t, string(want.Err), string(calls[i].Err), req)
		require.JSONEq(t, normal(want.Res), normal(calls[i].Res), req)
	}
	return notes, wantNotes
}

// Every fs/* request of testdata/golden/reference/fs_calls.jsonl (see
// files_capture.js) gets the reference's answer: the same result or the
// same error code and message; the watches report the same changes. What
// differs by design: directory listings are sorted, and the order of the
// fs/changed of different watches, which the reference does not keep
// either.
func TestFilesMatchReference(t *testing.T) {
	notes, wantNotes := replayFiles(t, "fs_script.json", "fs_calls.jsonl", func(raw json.RawMessage) string { return normalFiles(t, raw) })
	sortNotes := func(ls []filesLine) []string {
		var out []string
		for _, l := range ls {
			out = append(out, canonicalJSON(t, l.Note))
		}
		slices.Sort(out)
		return out
	}
	require.Equal(t, sortNotes(wantNotes), sortNotes(notes))
}

// Every fuzzy file search of testdata/golden/reference/fuzzy_calls.jsonl
// gets the reference's files in the reference's order, with its scores
// and match indices; each session sends the same sessionUpdated in the
// same order, and as many sessionCompleted (the reference sends the two
// kinds from different tasks, so their relative order varies between
// its own runs).
func TestFuzzyFileSearchMatchesReference(t *testing.T) {
	notes, wantNotes := replayFiles(t, "fuzzy_script.json", "fuzzy_calls.jsonl", func(raw json.RawMessage) string { return string(raw) })
	require.Equal(t, sessionNotes(t, wantNotes), sessionNotes(t, notes))
}

// canonicalJSON is raw with its object keys in one order.
func canonicalJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// sessionNotes groups session notifications by session: its
// sessionUpdated in order, then the count of its sessionCompleted.
func sessionNotes(t *testing.T, ls []filesLine) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	completed := map[string]int{}
	for _, l := range ls {
		var n struct {
			Method string `json:"method"`
			Params struct {
				SessionID string `json:"sessionId"`
			} `json:"params"`
		}
		require.NoError(t, json.Unmarshal(l.Note, &n))
		if n.Method == "fuzzyFileSearch/sessionCompleted" {
			completed[n.Params.SessionID]++
			continue
		}
		out[n.Params.SessionID] = append(out[n.Params.SessionID], canonicalJSON(t, l.Note))
	}
	for id, n := range completed {
		out[id] = append(out[id], fmt.Sprintf("%d completed", n))
	}
	return out
}
