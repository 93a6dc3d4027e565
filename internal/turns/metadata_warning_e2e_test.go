package turns_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// refWarnings are the messages of the warning notifications of a capture.
func refWarnings(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	for _, l := range apptest.ReferenceFrames(t, name) {
		var f struct {
			Method string `json:"method"`
			Params struct {
				Message string `json:"message"`
			} `json:"params"`
		}
		require.NoError(t, json.Unmarshal(l.Frame, &f))
		if f.Method == "warning" {
			out = append(out, f.Params.Message)
		}
	}
	return out
}

// As codex 0.171.0 with a model catalog
// (testdata/golden/reference/model_list_catalog.jsonl): model/list lists
// the catalog, and every turn on a model outside it warns its thread,
// before the turn/start answer, that the model runs with fallback
// metadata; a model of the catalog is not warned of. (Without a catalog
// the reference lists its built-in one and warns of fake-model too,
// model_list.jsonl; appserver has no built-in catalog and says nothing.)
func TestTurnOnModelOutsideCatalogWarns(t *testing.T) {
	want := refWarnings(t, "model_list_catalog.jsonl")
	require.Len(t, want, 1, "the turn on other-model")
	require.Len(t, refWarnings(t, "model_list.jsonl"), 3)

	fake := apptest.StartFake(t, `{"steps":[],"exhausted_text":"ok"}`)
	d := apptest.Start(t, append(append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...),
		"-c", `models.fake-model={display_name="Fake Model", description="A fake one"}`)...)
	r := d.RPC(t)
	var list struct {
		Data []struct {
			ID          string `json:"id"`
			DisplayName string `json:"displayName"`
			Description string `json:"description"`
			IsDefault   bool   `json:"isDefault"`
		} `json:"data"`
		NextCursor *string `json:"nextCursor"`
	}
	require.NoError(t, json.Unmarshal(r.Call("model/list", map[string]any{}), &list))
	require.Len(t, list.Data, 1)
	m := list.Data[0]
	require.Equal(t, []any{"fake-model", "Fake Model", "A fake one", true}, []any{m.ID, m.DisplayName, m.Description, m.IsDefault})
	require.Nil(t, list.NextCursor)

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
		warnings() // those before the answer
		apptest.TurnCompleted(t, r)
	}
	r.Call("thread/settings/update", map[string]any{"threadId": threadID, "model": "other-model"})
	r.Seen = nil
	r.Call("turn/start", apptest.Input(threadID, "third"))
	warnings()
	apptest.TurnCompleted(t, r)
	require.Equal(t, want, got)
}
