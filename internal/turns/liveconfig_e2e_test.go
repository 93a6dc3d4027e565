package turns_test

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// model_verbosity and service_tier as the TUI's /model and /fast save them
// (config/batchWrite) apply as the reference applies them
// (testdata/golden/reference/live_config.jsonl): threads started after the
// write send service_tier and text.verbosity, for a model that takes
// them; a thread already loaded keeps what it started with (its model's
// default verbosity, no tier), and a model without verbosity support gets
// neither.
func TestConfigVerbosityAndServiceTierForNewThreads(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[],"exhausted_text":"ok"}`)
	d := apptest.Start(t, append(append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...),
		"-c", `models.fake-model={support_verbosity=true, default_verbosity="low", service_tiers=[{id="priority", name="fast"}]}`,
		"-c", `models.plain-model={}`)...)
	r := d.RPC(t)
	var seen [][2]any
	sent := func() (verbosity, tier any) {
		reqs := fake.Requests()
		var body struct {
			Text        map[string]any `json:"text"`
			ServiceTier any            `json:"service_tier"`
		}
		require.NoError(t, json.Unmarshal(reqs[len(reqs)-1].Body, &body))
		if len(seen) == 0 || seen[len(seen)-1] != [2]any{body.Text["verbosity"], body.ServiceTier} {
			seen = append(seen, [2]any{body.Text["verbosity"], body.ServiceTier})
		}
		return body.Text["verbosity"], body.ServiceTier
	}
	cwd := apptest.RealTempDir(t)
	loaded := apptest.StartThread(t, r, map[string]any{"cwd": cwd})
	plain := apptest.StartThread(t, r, map[string]any{"cwd": cwd, "model": "plain-model"})
	apptest.Turn(t, r, apptest.Input(loaded, "one"), nil)
	v, tier := sent()
	require.Equal(t, "low", v, "the model's default verbosity")
	require.Nil(t, tier)

	r.Call("config/batchWrite", map[string]any{"edits": []any{
		map[string]any{"keyPath": "model_verbosity", "value": "high", "mergeStrategy": "replace"},
		map[string]any{"keyPath": "service_tier", "value": "priority", "mergeStrategy": "replace"},
	}, "reloadUserConfig": true})

	apptest.Turn(t, r, apptest.Input(loaded, "two"), nil)
	v, tier = sent()
	require.Equal(t, "low", v, "a loaded thread keeps its settings")
	require.Nil(t, tier)
	apptest.Turn(t, r, apptest.Input(plain, "three"), nil)
	v, tier = sent()
	require.Nil(t, v, "no verbosity for a model without support")
	require.Nil(t, tier, "no tier the model does not list")

	var st struct {
		ServiceTier *string `json:"serviceTier"`
		Thread      struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(r.Call("thread/start", map[string]any{"cwd": cwd}), &st))
	require.NotNil(t, st.ServiceTier)
	require.Equal(t, "priority", *st.ServiceTier)
	apptest.Turn(t, r, apptest.Input(st.Thread.ID, "four"), nil)
	v, tier = sent()
	require.Equal(t, "high", v)
	require.Equal(t, "priority", tier)
	require.Equal(t, referenceVerbosityAndTiers(t), seen, "the reference's requests, in the same order")
}

// referenceVerbosityAndTiers are the text.verbosity and service_tier of the
// reference's model requests in live_config.jsonl, repeats dropped.
func referenceVerbosityAndTiers(t *testing.T) [][2]any {
	f, err := os.Open("testdata/golden/reference/live_config.jsonl")
	require.NoError(t, err)
	defer f.Close()
	var out [][2]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Dir   string `json:"dir"`
			Frame struct {
				Text        map[string]any `json:"text"`
				ServiceTier any            `json:"service_tier"`
			} `json:"frame"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		v := [2]any{line.Frame.Text["verbosity"], line.Frame.ServiceTier}
		if line.Dir == "model" && (len(out) == 0 || out[len(out)-1] != v) {
			out = append(out, v)
		}
	}
	require.NoError(t, sc.Err())
	return out
}
