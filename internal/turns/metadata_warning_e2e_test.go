package turns_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// As codex 0.171.0 (testdata/golden/reference/model_list.jsonl):
// every turn on a model the catalog does not describe warns its thread,
// before the turn/start answer, that the model runs with fallback
// metadata; a model of the catalog ([models.<id>]) is not warned of.
func TestTurnOnModelOutsideCatalogWarns(t *testing.T) {
	var want []string
	for _, l := range apptest.ReferenceFrames(t, "model_list.jsonl") {
		var f struct {
			Method string `json:"method"`
			Params struct {
				Message string `json:"message"`
			} `json:"params"`
		}
		require.NoError(t, json.Unmarshal(l.Frame, &f))
		if f.Method == "warning" {
			want = append(want, f.Params.Message)
		}
	}
	require.Len(t, want, 3, "two turns on fake-model, one on other-model")

	fake := apptest.StartFake(t, `{"steps":[],"exhausted_text":"ok"}`)
	d := apptest.Start(t, "--data-dir", t.TempDir(), "-c", `model="fake-model"`, "-c", `model_provider="fake"`,
		"-c", `model_providers.fake={name="Fake", base_url="`+fake.URL()+`", wire_api="responses", request_max_retries=0}`,
		"-c", `models.known-model={}`)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, nil)
	var got []string
	warnings := func() {
		for _, f := range r.Seen {
			if f.Method != "warning" {
				continue
			}
			var p struct {
				ThreadID string `json:"threadId"`
				Message  string `json:"message"`
			}
			require.NoError(t, json.Unmarshal(f.Params, &p))
			require.Equal(t, threadID, p.ThreadID)
			got = append(got, p.Message)
		}
	}
	for _, text := range []string{"hello", "again"} {
		r.Seen = nil
		r.Call("turn/start", apptest.Input(threadID, text))
		warnings() // before the answer
		apptest.TurnCompleted(t, r)
	}
	r.Call("thread/settings/update", map[string]any{"threadId": threadID, "model": "other-model"})
	r.Seen = nil
	r.Call("turn/start", apptest.Input(threadID, "third"))
	warnings()
	apptest.TurnCompleted(t, r)
	require.Equal(t, want, got)

	r.Call("thread/settings/update", map[string]any{"threadId": threadID, "model": "known-model"})
	r.Seen = nil
	frames := apptest.Turn(t, r, apptest.Input(threadID, "fourth"), nil)
	for _, f := range frames {
		require.NotEqual(t, "warning", f.Method, "a model of the catalog")
	}
}
