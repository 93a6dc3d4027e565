package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The real TUI's everyday requests end to end, against what codex-cli
// 0.169.0 does with the same params and the same fake model.

// referenceFrames reads a capture under testdata/golden/reference: one
// {"dir": "send"|"recv", "frame": …} per line.
func referenceFrames(t *testing.T, name string) []struct {
	Dir   string          `json:"dir"`
	Frame json.RawMessage `json:"frame"`
} {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "golden", "reference", name))
	require.NoError(t, err)
	defer f.Close()
	var out []struct {
		Dir   string          `json:"dir"`
		Frame json.RawMessage `json:"frame"`
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		var l struct {
			Dir   string          `json:"dir"`
			Frame json.RawMessage `json:"frame"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		out = append(out, l)
	}
	require.NoError(t, sc.Err())
	return out
}

// sentParams returns the params of the n-th request of method the client
// sent in a reference capture.
func sentParams(t *testing.T, name, method string, n int) map[string]any {
	t.Helper()
	for _, l := range referenceFrames(t, name) {
		var f struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		require.NoError(t, json.Unmarshal(l.Frame, &f))
		if l.Dir == "send" && f.Method == method {
			if n == 0 {
				return f.Params
			}
			n--
		}
	}
	t.Fatalf("%s: no %s request", name, method)
	return nil
}

// The TUI's hidden title thread (title_thread.jsonl: its thread/start
// config turns every tool off, its turn asks for a JSON answer) gets a
// model request with no tools and the JSON-schema output format, as the
// reference sends it (title_thread_model.json).
func TestTitleThreadOffersNoTools(t *testing.T) {
	const capture = "title_thread.jsonl"
	var want struct {
		Tools []json.RawMessage `json:"tools"`
		Text  json.RawMessage   `json:"text"`
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "golden", "reference", "title_thread_model.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &want))
	require.Empty(t, want.Tools)

	fake := startFake(t, `{"steps":[{"text":"{\"title\":\"Say hi\"}"}]}`)
	d := startDaemon(t, append([]string{"--data-dir", t.TempDir()}, fakeArgs(fake, "responses")...)...)
	r := newRPC(t, d)
	start := sentParams(t, capture, "thread/start", 0)
	start["cwd"] = t.TempDir()
	threadID := startThread(t, r, start)
	turn := sentParams(t, capture, "turn/start", 0)
	turn["threadId"] = threadID
	r.call("turn/start", turn)
	done := r.until("turn/completed")
	var tr turnResult
	require.NoError(t, json.Unmarshal(done.Params, &tr))
	require.Equal(t, "completed", tr.Turn.Status)

	reqs := fake.Requests()
	require.Len(t, reqs, 1)
	var got struct {
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
		Text json.RawMessage `json:"text"`
	}
	require.NoError(t, reqs[0].Decode(&got))
	require.Empty(t, got.Tools, "tools offered to the title thread")
	require.JSONEq(t, string(want.Text), string(got.Text))
}

// default_permissions in a thread's config picks a built-in permission
// profile's sandbox when the request names no sandbox mode.
func TestThreadConfigDefaultPermissions(t *testing.T) {
	d := startDaemon(t, "--data-dir", t.TempDir(), "-c", `sandbox_mode="read-only"`)
	r := newRPC(t, d)
	var res struct {
		Sandbox struct {
			Type string `json:"type"`
		} `json:"sandbox"`
	}
	raw := r.call("thread/start", map[string]any{"cwd": t.TempDir(), "config": map[string]any{"default_permissions": ":workspace"}})
	require.NoError(t, json.Unmarshal(raw, &res))
	require.Equal(t, "workspaceWrite", res.Sandbox.Type)
	f := r.callRaw("thread/start", map[string]any{"cwd": t.TempDir(), "config": map[string]any{"default_permissions": ":nope"}})
	require.NotNil(t, f.Error)
	require.Contains(t, f.Error.Message, "unknown permission profile")
}
