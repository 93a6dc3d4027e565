package turns_test

import (
	"encoding/json"
	"strings"
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
// metadata; a model of the catalog is not warned of.
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

	require.Equal(t, want, catalogWarnings(t, r, nil))
}

// catalogWarnings runs the turns of the model_list captures on a new
// thread (started with extra): two turns, a switch to other-model and a
// third turn; it returns the messages of the warnings sent before each
// turn/start answer, all of them to the thread.
func catalogWarnings(t *testing.T, r *apptest.Client, extra map[string]any) []string {
	t.Helper()
	threadID := apptest.StartThread(t, r, extra)
	got := []string{}
	turn := func(text string) {
		r.Seen = nil
		r.Call("turn/start", apptest.Input(threadID, text))
		for _, f := range r.Seen { // those before the answer
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
		require.Equal(t, "completed", apptest.TurnCompleted(t, r).Turn.Status)
	}
	turn("hello")
	turn("again")
	r.Call("thread/settings/update", map[string]any{"threadId": threadID, "model": "other-model"})
	turn("third")
	return got
}

// listedModel is the part of a model/list entry that the built-in catalog
// takes from the reference (the descriptions are our own).
type listedModel struct {
	ID                        string  `json:"id"`
	DisplayName               string  `json:"displayName"`
	Hidden                    bool    `json:"hidden"`
	DefaultReasoningEffort    string  `json:"defaultReasoningEffort"`
	InputModalities           []any   `json:"inputModalities"`
	MultiAgentVersion         *string `json:"multiAgentVersion"`
	AdditionalSpeedTiers      []any   `json:"additionalSpeedTiers"`
	SupportedReasoningEfforts []struct {
		ReasoningEffort string `json:"reasoningEffort"`
	} `json:"supportedReasoningEfforts"`
	ServiceTiers []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"serviceTiers"`
	IsDefault bool `json:"isDefault"`
}

// refModelLists are the answers of the model/list requests of a capture
// without a limit, by their params.
func refModelLists(t *testing.T, name string) map[string][]listedModel {
	t.Helper()
	out := map[string][]listedModel{}
	for _, st := range referenceThreadList(t, name) {
		if st.method != "model/list" || strings.Contains(string(st.params), "limit") {
			continue
		}
		var res struct {
			Data []listedModel `json:"data"`
		}
		require.NoError(t, json.Unmarshal(st.answer.Result, &res))
		out[string(st.params)] = res.Data
	}
	require.Len(t, out, 2)
	return out
}

// With no [models] table and the default provider (OpenAI's API),
// model/list offers, after the configured model, the catalog of OpenAI's
// models that codex 0.171.0 lists (testdata/golden/reference/model_list.jsonl:
// the same ids in the same order, names, efforts, default efforts,
// modalities, tiers and sub-agent versions), and every turn on a model
// outside it is warned of as the reference warns of it, whatever provider
// the thread runs on; a client may still save any model, as with the
// reference, and the max and ultra efforts the catalog offers. A daemon
// whose provider is another server lists its model alone and warns of
// nothing.
func TestBuiltinCatalogMatchesReference(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[],"exhausted_text":"ok"}`)
	fakeArgs := apptest.FakeArgs(fake, "responses")
	t.Run("openai", func(t *testing.T) {
		// The default provider stays openai; the threads run on the fake.
		d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, fakeArgs[0], fakeArgs[1], fakeArgs[4], fakeArgs[5])...)
		r := d.RPC(t)
		for params, want := range refModelLists(t, "model_list.jsonl") {
			var p map[string]any
			require.NoError(t, json.Unmarshal([]byte(params), &p))
			var got struct {
				Data []listedModel `json:"data"`
			}
			require.NoError(t, json.Unmarshal(r.Call("model/list", p), &got))
			require.NotEmpty(t, got.Data)
			require.Equal(t, "fake-model", got.Data[0].ID, "the configured model first")
			require.True(t, got.Data[0].IsDefault)
			want[0].IsDefault = false // the reference's default is the catalog's first; ours the configured model
			require.Equal(t, want, got.Data[1:], "model/list %s", params)
		}
		require.Equal(t, refWarnings(t, "model_list.jsonl"), catalogWarnings(t, r, map[string]any{"modelProvider": "fake"}))

		// Unlike an operator's [models] table, the built-in catalog is no
		// list of the models a client may save.
		r.Call("config/value/write", map[string]any{"keyPath": "model", "value": "other-model", "mergeStrategy": "replace"})
		// The TUI's /model saves the deepest efforts the catalog offers
		// (the reference takes them), and new threads get them.
		for _, effort := range []string{"ultra", "max"} {
			r.Call("config/value/write", map[string]any{"keyPath": "model_reasoning_effort", "value": effort, "mergeStrategy": "replace"})
		}
		var started struct {
			ReasoningEffort *string `json:"reasoningEffort"`
		}
		require.NoError(t, json.Unmarshal(r.Call("thread/start", map[string]any{"cwd": t.TempDir()}), &started))
		require.NotNil(t, started.ReasoningEffort)
		require.Equal(t, "max", *started.ReasoningEffort)
		f := r.CallRaw("thread/start", map[string]any{"cwd": t.TempDir(), "config": map[string]any{"model_reasoning_effort": "ultra"}})
		require.Nil(t, f.Error, "a thread's config may name ultra")
	})
	t.Run("another server", func(t *testing.T) {
		d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, fakeArgs...)...)
		r := d.RPC(t)
		var got struct {
			Data []listedModel `json:"data"`
		}
		require.NoError(t, json.Unmarshal(r.Call("model/list", map[string]any{"includeHidden": true}), &got))
		require.Len(t, got.Data, 1)
		require.Equal(t, "fake-model", got.Data[0].ID)
		require.Empty(t, catalogWarnings(t, r, nil))
	})
}
