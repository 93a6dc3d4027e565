package turns_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// injectedTexts lists the role and first text of every message of a model
// request's input, after the thread's instructions and context.
func injectedTexts(t *testing.T, body []byte) []string {
	t.Helper()
	var req struct {
		Input []struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"input"`
	}
	require.NoError(t, json.Unmarshal(body, &req))
	var out []string
	for _, it := range req.Input {
		if it.Type != "message" || it.Role == "developer" || len(it.Content) == 0 || strings.HasPrefix(it.Content[0].Text, "<") {
			continue
		}
		out = append(out, it.Role+": "+it.Content[0].Text)
	}
	return out
}

// thread/inject_items answers as codex 0.171.0 does (inject_items.jsonl,
// made by inject_items_capture.js): the same errors for an unknown or
// malformed thread id, no items and an item that is not an object, {} and
// no notification otherwise. Items injected into an idle thread reach the
// model before the next turn's input, survive a restart, and items of an
// unknown type are dropped; items injected while a turn runs make it ask
// the model once more, without cutting the answer in flight.
func TestThreadInjectItemsAsReference(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"slow turn"},"text":"ok","delay_ms":600},
		{"match":{"user_text":"injected during"},"text":"ok again"},
		{"text":"ok","times":10}]}`)
	args := append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)
	d := apptest.Start(t, args...)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, map[string]any{"approvalPolicy": "never"})

	var refThread string
	sends := map[string]json.RawMessage{}
	replies := map[string]apptest.Frame{}
	for _, l := range apptest.ReferenceFrames(t, "inject_items.jsonl") {
		var f apptest.Frame
		require.NoError(t, json.Unmarshal(l.Frame, &f))
		switch {
		case l.Dir == "send" && f.Method == "thread/start":
		case l.Dir == "send" && f.Method == "thread/inject_items":
			sends[string(f.ID)] = f.Params
		case l.Dir == "recv" && f.ID != nil && refThread == "" && f.Result != nil:
			var res struct {
				Thread struct {
					ID string `json:"id"`
				} `json:"thread"`
			}
			if json.Unmarshal(f.Result, &res) == nil && res.Thread.ID != "" {
				refThread = res.Thread.ID
			}
		case l.Dir == "recv" && f.ID != nil:
			replies[string(f.ID)] = f
		}
	}
	require.NotEmpty(t, refThread)
	// The idle-thread calls, in the capture's order (ids 3 to 9).
	for _, id := range []string{"3", "4", "5", "6", "7", "8", "9"} {
		params := strings.ReplaceAll(string(sends[id]), refThread, threadID)
		var p any
		require.NoError(t, json.Unmarshal([]byte(params), &p))
		got := r.CallRaw("thread/inject_items", p)
		want := replies[id]
		if want.Error == nil {
			require.Nil(t, got.Error, "call %s: %+v", id, got.Error)
			require.JSONEq(t, string(want.Result), string(got.Result), "call %s", id)
			continue
		}
		require.NotNil(t, got.Error, "call %s", id)
		require.Equal(t, want.Error.Code, got.Error.Code, "call %s", id)
		if strings.HasPrefix(want.Error.Message, "invalid thread id") {
			// The parser's own words follow; ours differ.
			require.True(t, strings.HasPrefix(got.Error.Message, "invalid thread id"), "call %s: %s", id, got.Error.Message)
			continue
		}
		if i := strings.Index(want.Error.Message, ": invalid type"); i > 0 {
			require.True(t, strings.HasPrefix(got.Error.Message, want.Error.Message[:i]), "call %s: %s", id, got.Error.Message)
			continue
		}
		require.Equal(t, want.Error.Message, got.Error.Message, "call %s", id)
	}
	require.Empty(t, r.Methods(), "inject_items announces nothing")

	// Durable: a restart keeps the items for the next turn.
	d.Stop(t)
	d = apptest.Start(t, args...)
	r = d.RPC(t)
	r.Call("thread/resume", map[string]any{"threadId": threadID})
	tr := apptest.RunTurn(t, r, threadID, "first turn")
	require.Equal(t, "completed", tr.Turn.Status, "%+v", tr.Turn.Error)
	reqs := fake.Requests()
	require.Equal(t, []string{"user: nul \x00 here", "user: side note one", "assistant: side answer one", "user: first turn"},
		injectedTexts(t, reqs[len(reqs)-1].Body), "as the reference's model got them")
	require.NotContains(t, string(reqs[len(reqs)-1].Body), "bogus")

	// During a running turn: taken before the turn ends.
	r.Call("turn/start", map[string]any{"threadId": threadID, "input": []any{map[string]any{"type": "text", "text": "slow turn"}}})
	r.Until("turn/started")
	// Injected once the model has the turn's request in hand.
	require.Eventually(t, func() bool {
		reqs := fake.Requests()
		return strings.Contains(string(reqs[len(reqs)-1].Body), "slow turn")
	}, 10*time.Second, 5*time.Millisecond)
	r.Call("thread/inject_items", map[string]any{"threadId": threadID, "items": []any{
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "injected during"}}},
	}})
	done := r.Until("turn/completed")
	var end apptest.TurnResult
	require.NoError(t, json.Unmarshal(done.Params, &end))
	require.Equal(t, "completed", end.Turn.Status)
	var read struct {
		Thread struct {
			Turns []struct {
				Items []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"items"`
			} `json:"turns"`
		} `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(r.Call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true}), &read))
	turns := read.Thread.Turns
	var answers []string
	for _, it := range turns[len(turns)-1].Items {
		if it.Type == "agentMessage" {
			answers = append(answers, it.Text)
		}
	}
	require.Equal(t, []string{"ok", "ok again"}, answers, "the answer in flight kept, then one more request")
	reqs = fake.Requests()
	require.Equal(t, []string{"user: nul \x00 here", "user: side note one", "assistant: side answer one", "user: first turn", "assistant: ok",
		"user: slow turn", "assistant: ok", "user: injected during"}, injectedTexts(t, reqs[len(reqs)-1].Body))
	tr = apptest.RunTurn(t, r, threadID, "third turn")
	require.Equal(t, "completed", tr.Turn.Status)
	reqs = fake.Requests()
	require.Contains(t, injectedTexts(t, reqs[len(reqs)-1].Body), "user: injected during", "stored with the turn that took it")
}
