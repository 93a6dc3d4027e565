package turns_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// settingsStep is one request of testdata/golden/reference/settings.jsonl
// with the reference's answer.
type settingsStep struct {
	method string
	params map[string]any
	answer apptest.Frame
}

// settingsCapture is settings.jsonl read: the requests in order, the
// thread/settings/updated notifications each client heard, and what each
// model request asked for.
type settingsCapture struct {
	steps          []settingsStep
	heard, heard2  []json.RawMessage
	modelRequests  []map[string]any
	threadID, cwd  string
	provider, home string
}

func referenceSettings(t *testing.T) settingsCapture {
	t.Helper()
	c := settingsCapture{cwd: "/home/dev/project"}
	byID := map[string]int{}
	for _, l := range apptest.ReferenceFrames(t, "settings.jsonl") {
		var f apptest.Frame
		require.NoError(t, json.Unmarshal(l.Frame, &f))
		switch {
		case l.Dir == "model":
			var m map[string]any
			require.NoError(t, json.Unmarshal(l.Frame, &m))
			c.modelRequests = append(c.modelRequests, m)
		case l.Dir == "send":
			var p map[string]any
			require.NoError(t, json.Unmarshal(f.Params, &p))
			byID[string(f.ID)] = len(c.steps)
			c.steps = append(c.steps, settingsStep{method: f.Method, params: p})
		case f.Method == "thread/settings/updated":
			var n struct {
				ThreadSettings json.RawMessage `json:"threadSettings"`
			}
			require.NoError(t, json.Unmarshal(f.Params, &n))
			if l.Dir == "recv2" {
				c.heard2 = append(c.heard2, n.ThreadSettings)
			} else {
				c.heard = append(c.heard, n.ThreadSettings)
			}
		case f.Method == "" && len(f.ID) > 0:
			i := byID[string(f.ID)]
			c.steps[i].answer = f
			if c.steps[i].method == "thread/start" {
				var r struct {
					Thread struct {
						ID string `json:"id"`
					} `json:"thread"`
					ModelProvider string `json:"modelProvider"`
				}
				require.NoError(t, json.Unmarshal(f.Result, &r))
				c.threadID, c.provider = r.Thread.ID, r.ModelProvider
			}
		}
	}
	require.NotEmpty(t, c.threadID)
	return c
}

// TestThreadSettingsUpdateMatchesReference replays testdata/golden/reference/settings.jsonl
// (codex 0.171.0): thread/settings/update changes the thread's next turns
// (permission profile, model, effort, summary, service tier, approval
// policy, sandbox), answers {} and, only when something changed, tells
// every subscriber of the thread with thread/settings/updated carrying the
// settings as the reference reports them; turn/start's effort is the
// thread's from then on and is announced too; bad requests get the
// reference's errors. A principal cannot widen its sandbox past its
// ceiling this way either.
func TestThreadSettingsUpdateMatchesReference(t *testing.T) {
	ref := referenceSettings(t)
	fake := apptest.StartFake(t, `{"steps":[],"exhausted_text":"ok"}`)
	ciRoot := apptest.RealTempDir(t)
	args := append(append([]string{"--data-dir", apptest.RealTempDir(t)}, apptest.FakeArgs(fake, "responses")...), apptest.AuthArgs(ciRoot)...)
	d := apptest.Start(t, append(args, "-c", `approval_policy="never"`, "-c", `sandbox_mode="workspace-write"`)...)
	a := apptest.RPC(t, d.Addr, apptest.OperatorToken, nil)
	cwd := apptest.RealTempDir(t)

	var ours struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
		ModelProvider string `json:"modelProvider"`
	}
	require.NoError(t, json.Unmarshal(a.Call("thread/start", map[string]any{"cwd": cwd}), &ours))
	tid := ours.Thread.ID
	// The reference's settings with our thread, cwd and provider.
	want := func(raw json.RawMessage) string {
		s := strings.ReplaceAll(string(raw), ref.cwd, cwd)
		return strings.ReplaceAll(s, `"modelProvider":"`+ref.provider+`"`, `"modelProvider":"`+ours.ModelProvider+`"`)
	}
	var heard []json.RawMessage
	take := func(frames []apptest.Frame) {
		for _, f := range frames {
			if f.Method != "thread/settings/updated" {
				continue
			}
			var n struct {
				ThreadID       string          `json:"threadId"`
				ThreadSettings json.RawMessage `json:"threadSettings"`
			}
			require.NoError(t, json.Unmarshal(f.Params, &n))
			require.Equal(t, tid, n.ThreadID)
			heard = append(heard, n.ThreadSettings)
		}
	}
	var b *apptest.Client
	turns := 0
	for _, st := range ref.steps {
		switch st.method {
		case "turn/start":
			params := st.params
			params["threadId"] = tid
			take(a.Seen)
			frames := apptest.Turn(t, a, params, nil)
			take(frames)
			turns++
			if turns == 1 {
				// The second client subscribes after the first turn, as
				// in the capture.
				b = apptest.RPC(t, d.Addr, apptest.OperatorToken, nil)
				b.Call("thread/resume", map[string]any{"threadId": tid})
			}
		case "thread/settings/update":
			params := st.params
			if params["threadId"] == ref.threadID {
				params["threadId"] = tid
			}
			got := a.CallRaw(st.method, params)
			if st.answer.Error != nil {
				require.NotNil(t, got.Error, "%v", params)
				require.Equal(t, st.answer.Error.Code, got.Error.Code, "%v: %s", params, got.Error.Message)
				require.Equal(t, st.answer.Error.Message, strings.ReplaceAll(got.Error.Message, tid, ref.threadID))
				continue
			}
			require.Nil(t, got.Error, "%v: %+v", params, got.Error)
			require.JSONEq(t, string(st.answer.Result), string(got.Result))
		}
	}
	// A round trip after the last step: every notification it caused has
	// arrived.
	a.Call("thread/read", map[string]any{"threadId": tid})
	take(a.Seen)
	a.Seen = nil
	require.Len(t, heard, len(ref.heard), "one thread/settings/updated per change, none for a request that changed nothing")
	for i := range heard {
		require.JSONEq(t, want(ref.heard[i]), string(heard[i]), "notification %d", i)
	}
	// The other subscriber heard the changes made after it subscribed.
	for i := range ref.heard2 {
		f := b.Until("thread/settings/updated")
		var n struct {
			ThreadSettings json.RawMessage `json:"threadSettings"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &n))
		require.JSONEq(t, want(ref.heard2[i]), string(n.ThreadSettings), "second client's notification %d", i)
	}
	b.Call("thread/read", map[string]any{"threadId": tid})
	for _, f := range b.Seen {
		require.NotEqual(t, "thread/settings/updated", f.Method, "no more changes than the reference's")
	}

	// The model requests used the settings, as the reference's did.
	reqs := fake.Requests()
	require.Len(t, reqs, len(ref.modelRequests))
	for i, w := range ref.modelRequests {
		var body struct {
			Model     string `json:"model"`
			Reasoning *struct {
				Effort  string `json:"effort"`
				Summary string `json:"summary"`
			} `json:"reasoning"`
		}
		require.NoError(t, json.Unmarshal(reqs[i].Body, &body))
		require.Equal(t, w["model"], body.Model, "request %d", i)
		wr, _ := w["reasoning"].(map[string]any)
		if eff, ok := wr["effort"]; ok {
			require.NotNil(t, body.Reasoning, "request %d", i)
			require.Equal(t, eff, body.Reasoning.Effort, "request %d", i)
			require.Equal(t, wr["summary"], body.Reasoning.Summary, "request %d", i)
		}
	}

	// A principal's ceiling (workspace-write) holds for thread/settings/update.
	ci := apptest.RPC(t, d.Addr, apptest.CIToken, nil)
	var own struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(ci.Call("thread/start", map[string]any{"permissions": ":read-only"}), &own))
	for _, p := range []map[string]any{
		{"permissions": ":danger-full-access"},
		{"sandboxPolicy": map[string]any{"type": "dangerFullAccess"}},
	} {
		p["threadId"] = own.Thread.ID
		f := ci.CallRaw("thread/settings/update", p)
		require.NotNil(t, f.Error, "%v", p)
		require.Equal(t, -32602, f.Error.Code)
		require.Contains(t, f.Error.Message, "beyond this principal's ceiling")
	}
	ci.Call("thread/settings/update", map[string]any{"threadId": own.Thread.ID, "permissions": ":workspace"})
	f := ci.Until("thread/settings/updated")
	require.Contains(t, string(f.Params), `"activePermissionProfile":{"id":":workspace","extends":null}`)
}

// A configured catalog offers several models, each with its service tiers
// in model/list (the TUI's /fast); a thread's tier reaches the Responses
// API as service_tier when its model lists it, and not otherwise.
func TestServiceTiers(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[],"exhausted_text":"ok"}`)
	d := apptest.Start(t, append(append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...),
		"-c", `models.fake-model={display_name="Fake", service_tiers=[{id="priority", name="fast", description="Fastest inference"}]}`,
		"-c", `models.other-model={description="Another"}`)...)
	r := d.RPC(t)
	var list struct {
		Data []struct {
			ID                   string   `json:"id"`
			AdditionalSpeedTiers []string `json:"additionalSpeedTiers"`
			ServiceTiers         []struct {
				ID          string `json:"id"`
				Name        string `json:"name"`
				Description string `json:"description"`
			} `json:"serviceTiers"`
		} `json:"data"`
	}
	res := r.Call("model/list", map[string]any{})
	require.NoError(t, json.Unmarshal(res, &list))
	require.Len(t, list.Data, 2)
	require.Equal(t, "fake-model", list.Data[0].ID)
	require.Len(t, list.Data[0].ServiceTiers, 1)
	require.Equal(t, "priority", list.Data[0].ServiceTiers[0].ID)
	require.Equal(t, "fast", list.Data[0].ServiceTiers[0].Name)
	require.Equal(t, []string{"fast"}, list.Data[0].AdditionalSpeedTiers, "as the reference lists a model with the priority tier (model_list.jsonl)")
	require.Equal(t, "other-model", list.Data[1].ID)
	require.Empty(t, list.Data[1].ServiceTiers)
	require.Equal(t, []string{}, list.Data[1].AdditionalSpeedTiers)

	tid := apptest.StartThread(t, r, map[string]any{"cwd": apptest.RealTempDir(t)})
	tier := func() any {
		reqs := fake.Requests()
		var body map[string]any
		require.NoError(t, json.Unmarshal(reqs[len(reqs)-1].Body, &body))
		return body["service_tier"]
	}
	apptest.Turn(t, r, apptest.Input(tid, "one"), nil)
	require.Nil(t, tier(), "no tier chosen")
	r.Call("thread/settings/update", map[string]any{"threadId": tid, "serviceTier": "fast"})
	apptest.Turn(t, r, apptest.Input(tid, "two"), nil)
	require.Equal(t, "priority", tier(), "the reference's fast is the priority tier")
	r.Call("thread/settings/update", map[string]any{"threadId": tid, "model": "other-model"})
	apptest.Turn(t, r, apptest.Input(tid, "three"), nil)
	require.Nil(t, tier(), "a tier the model does not list is not sent")
	r.Call("thread/settings/update", map[string]any{"threadId": tid, "model": "fake-model", "serviceTier": nil})
	apptest.Turn(t, r, apptest.Input(tid, "four"), nil)
	require.Nil(t, tier(), "null is the default tier")
}
