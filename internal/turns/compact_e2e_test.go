package turns_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// compactReference reads compact.jsonl (codex-cli 0.169.0: a turn, then
// thread/compact/start with turn/steer and turn/start sent while the
// summary is being written, then a turn): the frames received from the
// thread/compact/start response to the compaction's turn/completed, and
// the errors answered to turn/steer and turn/start meanwhile.
func compactReference(t *testing.T) (turn []apptest.Frame, steerErr, startErr json.RawMessage) {
	t.Helper()
	sent := map[string]string{}
	compacting := false
	for _, l := range apptest.ReferenceFrames(t, "compact.jsonl") {
		var f apptest.Frame
		require.NoError(t, json.Unmarshal(l.Frame, &f))
		if l.Dir == "send" {
			sent[string(f.ID)] = f.Method
			continue
		}
		if f.Method == "" {
			var e struct {
				Error json.RawMessage `json:"error"`
			}
			require.NoError(t, json.Unmarshal(l.Frame, &e))
			switch m := sent[string(f.ID)]; {
			case m == "thread/compact/start":
				compacting = true
			case compacting && m == "turn/steer":
				steerErr = e.Error
			case compacting && m == "turn/start":
				startErr = e.Error
			}
			continue
		}
		if compacting {
			turn = append(turn, f)
			if f.Method == "turn/completed" {
				return turn, steerErr, startErr
			}
		}
	}
	t.Fatal("compact.jsonl: no compaction turn")
	return nil, nil, nil
}

// collapseUsage drops repeats of thread/tokenUsage/updated: the reference
// reports the summary request's usage twice more before the estimate of
// the compacted context; the count carries no meaning for a client.
func collapseUsage(lines []string) []string {
	var out []string
	for _, l := range lines {
		if l == "thread/tokenUsage/updated" && len(out) > 0 && out[len(out)-1] == l {
			continue
		}
		out = append(out, l)
	}
	return out
}

// The TUI's /compact (thread/compact/start) against the reference: the
// same notifications of a compaction turn, the same errors for input sent
// while it runs, and a next request that carries the summary and the
// user's messages instead of the history.
func TestCompactMatchesReference(t *testing.T) {
	refTurn, refSteer, refStart := compactReference(t)
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"first question"},"text":"FIRST-ANSWER"},
		{"match":{"user_text":"handoff note"},"text":"SUMMARY-E2E","delay_ms":1000},
		{"match":{"user_text":"second question"},"text":"second answer"}]}`)
	d := apptest.Start(t, apptest.FakeArgs(fake, "responses")...)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, map[string]any{"sandbox": "read-only", "approvalPolicy": "never"})
	r.Call("turn/start", apptest.Input(threadID, "first question"))
	r.Until("turn/completed")

	r.Seen = nil
	res := r.Call("thread/compact/start", map[string]any{"threadId": threadID})
	require.JSONEq(t, `{}`, string(res))
	apptest.ValidateSchema(t, "ThreadCompactStartResponse", res)
	started := r.Until("item/started")
	var sp struct {
		TurnID string `json:"turnId"`
	}
	require.NoError(t, json.Unmarshal(started.Params, &sp))
	frames := append(append([]apptest.Frame(nil), r.Seen...), started)
	r.Seen = nil

	steer := r.CallRaw("turn/steer", map[string]any{"threadId": threadID, "expectedTurnId": sp.TurnID,
		"input": []map[string]any{{"type": "text", "text": "steered", "text_elements": []any{}}}})
	require.NotNil(t, steer.Error)
	got, err := json.Marshal(steer.Error)
	require.NoError(t, err)
	require.JSONEq(t, string(refSteer), string(got))
	start := r.CallRaw("turn/start", apptest.Input(threadID, "during compaction"))
	require.NotNil(t, start.Error)
	got, err = json.Marshal(start.Error)
	require.NoError(t, err)
	require.JSONEq(t, string(refStart), string(got))

	frames = append(frames, r.Seen...)
	r.Seen = nil
	for frames[len(frames)-1].Method != "turn/completed" {
		f, err := r.Read(20 * time.Second)
		require.NoError(t, err)
		frames = append(frames, f)
	}
	require.Equal(t, collapseUsage(apptest.Outline(t, refTurn)), collapseUsage(apptest.Outline(t, frames)))
	for _, f := range frames {
		if name, ok := apptest.NotificationSchemas[f.Method]; ok {
			apptest.ValidateSchema(t, name, f.Params)
		}
		if f.Method == "thread/tokenUsage/updated" {
			apptest.ValidateSchema(t, "ThreadTokenUsageUpdatedNotification", f.Params)
		}
	}

	r.Call("turn/start", apptest.Input(threadID, "second question"))
	r.Until("turn/completed")
	reqs := fake.Requests()
	require.Len(t, reqs, 3, "the input sent during the compaction started nothing")
	var summary, next apptest.ModelRequest
	require.NoError(t, reqs[1].Decode(&summary))
	require.Empty(t, summary.Tools, "the reference asks for the summary without tools")
	require.Equal(t, "user", summary.Input[len(summary.Input)-1].Role)
	require.NoError(t, reqs[2].Decode(&next))
	var texts []string
	for _, in := range next.Input {
		for _, c := range in.Content {
			texts = append(texts, in.Role+": "+c.Text)
		}
	}
	joined := strings.Join(texts, "\n")
	require.NotContains(t, joined, "FIRST-ANSWER", "the history before the compaction is not sent")
	n := len(texts)
	require.GreaterOrEqual(t, n, 3)
	require.Equal(t, "user: first question", texts[n-3])
	require.True(t, strings.HasPrefix(texts[n-2], "user: ") && strings.HasSuffix(texts[n-2], "\nSUMMARY-E2E"), texts[n-2])
	require.Equal(t, "user: second question", texts[n-1])
}
