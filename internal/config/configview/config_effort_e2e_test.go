package configview_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// The TUI's /model saves the model and its reasoning effort with
// config/batchWrite. Each request of
// testdata/golden/reference/config_effort.jsonl (see
// config_effort_capture.js) gets the reference's status under the same
// `-c model` flag: okOverridden for a batch holding the model the flag
// hides, ok for the effort, summary, verbosity and service tier alone. The
// saved effort and summary are the reasoning of threads started or forked
// from then on, and of their model requests; config/read shows them.
func TestConfigEffortMatchesReference(t *testing.T) {
	data, err := os.ReadFile(apptest.ReferencePath("config_effort.jsonl"))
	require.NoError(t, err)
	fake := apptest.StartFake(t, `{"steps":[],"exhausted_text":"ok"}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	r := d.RPC(t)
	cwd := apptest.RealTempDir(t)
	type started struct {
		Thread struct {
			ID              string  `json:"id"`
			ReasoningEffort *string `json:"reasoningEffort"`
		} `json:"thread"`
		ReasoningEffort *string `json:"reasoningEffort"`
	}
	var before started
	require.NoError(t, json.Unmarshal(r.Call("thread/start", map[string]any{"cwd": cwd}), &before))
	require.Nil(t, before.ReasoningEffort, "no effort saved yet")

	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 9)
	for _, line := range lines {
		var golden struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
			Answer struct {
				Result json.RawMessage `json:"result"`
			} `json:"answer"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &golden))
		if _, ok := golden.Params["cwd"]; ok {
			golden.Params["cwd"] = cwd
		}
		got := r.Call(golden.Method, golden.Params)
		switch golden.Method {
		case "config/batchWrite", "config/value/write":
			var w, g struct {
				Status   string `json:"status"`
				Metadata *struct {
					EffectiveValue json.RawMessage `json:"effectiveValue"`
				} `json:"overriddenMetadata"`
			}
			require.NoError(t, json.Unmarshal(golden.Answer.Result, &w))
			require.NoError(t, json.Unmarshal(got, &g))
			require.Equal(t, w.Status, g.Status, "%s", line)
			if w.Metadata != nil {
				require.NotNil(t, g.Metadata, "%s", line)
				require.JSONEq(t, string(w.Metadata.EffectiveValue), string(g.Metadata.EffectiveValue))
			}
		case "thread/start":
			var w, g started
			require.NoError(t, json.Unmarshal(golden.Answer.Result, &w))
			require.NoError(t, json.Unmarshal(got, &g))
			require.Equal(t, *w.ReasoningEffort, *g.ReasoningEffort, "the saved effort")
			require.Equal(t, *w.Thread.ReasoningEffort, *g.Thread.ReasoningEffort)
		case "config/read":
			var w, g struct {
				Config map[string]json.RawMessage `json:"config"`
			}
			require.NoError(t, json.Unmarshal(golden.Answer.Result, &w))
			require.NoError(t, json.Unmarshal(got, &g))
			for _, k := range []string{"model", "model_reasoning_effort", "model_reasoning_summary"} {
				require.JSONEq(t, string(w.Config[k]), string(g.Config[k]), k)
			}
		}
	}

	// A fork of a thread that never chose an effort takes the saved one
	// (the thread is named first: a thread only started cannot be forked).
	r.Call("thread/name/set", map[string]any{"threadId": before.Thread.ID, "name": "before"})
	var forked started
	require.NoError(t, json.Unmarshal(r.Call("thread/fork", map[string]any{"threadId": before.Thread.ID}), &forked))
	require.NotNil(t, forked.ReasoningEffort)
	require.Equal(t, "medium", *forked.ReasoningEffort)

	// The model is asked with the saved effort and summary.
	var fresh started
	require.NoError(t, json.Unmarshal(r.Call("thread/start", map[string]any{"cwd": cwd}), &fresh))
	apptest.Turn(t, r, apptest.Input(fresh.Thread.ID, "hi"), nil)
	reqs := fake.Requests()
	require.NotEmpty(t, reqs)
	var body struct {
		Reasoning struct {
			Effort  string `json:"effort"`
			Summary string `json:"summary"`
		} `json:"reasoning"`
	}
	require.NoError(t, json.Unmarshal(reqs[len(reqs)-1].Body, &body))
	require.Equal(t, "medium", body.Reasoning.Effort)
	require.Equal(t, "concise", body.Reasoning.Summary)
}

// Saving the very value a higher layer sets is no override: each write of
// testdata/golden/reference/config_same_value.jsonl (see
// config_same_value_capture.js) gets the reference's status and effective
// value under the same `-c model="fake-model"` flag, so /model keeping the
// current model raises no "overridden" warning in the TUI.
func TestConfigWriteSameValueIsNotOverridden(t *testing.T) {
	data, err := os.ReadFile(apptest.ReferencePath("config_same_value.jsonl"))
	require.NoError(t, err)
	fake := apptest.StartFake(t, `{"steps":[],"exhausted_text":"ok"}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	r := d.RPC(t)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 4)
	statuses := map[string]int{}
	for _, line := range lines {
		var golden struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
			Answer struct {
				Result json.RawMessage `json:"result"`
			} `json:"answer"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &golden))
		var w, g struct {
			Status   string `json:"status"`
			Metadata *struct {
				EffectiveValue json.RawMessage `json:"effectiveValue"`
			} `json:"overriddenMetadata"`
		}
		require.NoError(t, json.Unmarshal(golden.Answer.Result, &w))
		require.NoError(t, json.Unmarshal(r.Call(golden.Method, golden.Params), &g))
		require.Equal(t, w.Status, g.Status, "%s", line)
		if w.Metadata == nil {
			require.Nil(t, g.Metadata, "%s", line)
		} else {
			require.NotNil(t, g.Metadata, "%s", line)
			require.JSONEq(t, string(w.Metadata.EffectiveValue), string(g.Metadata.EffectiveValue))
		}
		statuses[w.Status]++
	}
	require.Equal(t, map[string]int{"ok": 3, "okOverridden": 1}, statuses, "the capture holds both answers")
}
