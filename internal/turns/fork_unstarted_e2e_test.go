package turns_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// TestForkOfUnusedThreadMatchesReference replays
// testdata/golden/reference/fork_unstarted.jsonl (codex 0.171.0, see
// fork_unstarted_capture.js): thread/fork refuses, with -32600 "no rollout
// found for thread id <id>", a thread only started (even one whose
// settings were changed), any ephemeral thread (used or not, and whatever
// the copy asks for) and an id no thread has; it copies a thread once it
// has a turn (a user message or a `!cmd`, even interrupted at once), a
// name, injected items, a goal or Git metadata, and a fork of such a
// thread.
func TestForkOfUnusedThreadMatchesReference(t *testing.T) {
	steps := referenceThreadList(t, "fork_unstarted.jsonl")
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"HANG-MODEL"},"text":"never","fail":{"kind":"stall","after_events":1},"times":2}],
		"exhausted_text":"ok"}`)
	args := append([]string{"--data-dir", apptest.RealTempDir(t)}, apptest.FakeArgs(fake, "responses")...)
	d := apptest.Start(t, append(args, "-c", `approval_policy="never"`)...)
	c := apptest.RPC(t, d.Addr, apptest.OperatorToken, nil)
	cwd := apptest.RealTempDir(t)
	ours := map[string]string{} // the reference's thread and turn ids to ours
	forks := 0
	for _, st := range steps {
		if st.method == "initialize" {
			continue
		}
		params, p := st.ours(t, cwd, ours)
		threadID, _ := p["threadId"].(string)
		f := c.CallRaw(st.method, p)
		if st.method == "thread/fork" {
			forks++
			if st.answer.Error != nil {
				require.NotNil(t, f.Error, "thread/fork %s: the reference refused it", params)
				msg := f.Error.Message
				for ref, our := range ours {
					msg = strings.ReplaceAll(msg, our, ref)
				}
				require.Equal(t, st.answer.Error.Code, f.Error.Code, "thread/fork %s", params)
				require.Equal(t, st.answer.Error.Message, msg, "thread/fork %s", params)
				continue
			}
		}
		require.Nil(t, f.Error, "%s %s: %+v", st.method, params, f.Error)
		require.Nil(t, st.answer.Error)
		var want, got map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(st.answer.Result, &want))
		require.NoError(t, json.Unmarshal(f.Result, &got))
		completed := func(f apptest.Frame) bool {
			return f.Method == "turn/completed" && strings.Contains(string(f.Params), threadID)
		}
		switch st.method {
		case "thread/start", "thread/fork":
			ours[threadField(t, want, "id")] = threadField(t, got, "id")
		case "turn/start":
			var w, g struct {
				Turn struct {
					ID string `json:"id"`
				} `json:"turn"`
			}
			require.NoError(t, json.Unmarshal(st.answer.Result, &w))
			require.NoError(t, json.Unmarshal(f.Result, &g))
			ours[w.Turn.ID] = g.Turn.ID
			if !strings.Contains(params, "HANG-MODEL") {
				c.UntilFunc("turn/completed", completed)
			}
		case "thread/shellCommand", "turn/interrupt":
			c.UntilFunc("turn/completed", completed)
		}
	}
	require.Equal(t, 15, forks, "every fork of the capture was replayed")
}
