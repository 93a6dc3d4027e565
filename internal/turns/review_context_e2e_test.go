package turns_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// reviewContextSent are the texts the client of review_context.jsonl
// sends, and the answers of its model that are not about the review.
var reviewContextSent = []string{"hello there", "fix the first finding", "what next", "SUMMARY of the conversation so far."}

// reviewContextLabels reduces a model request to what each input item is,
// as review_context_capture.js labels the reference's: the conversation's
// texts verbatim, the review's result, the summary, the requests for a
// review and for a compaction; the server's own instructions and context
// are left out (their wording is each server's own). compaction says the
// request is a compaction's (its last message asks for the summary).
func reviewContextLabels(texts []string, roles []string, compaction bool) []string {
	okN := regexp.MustCompile(`^ok \d+$`)
	var out []string
	for i, text := range texts {
		role := roles[i]
		var what string
		switch {
		case role == "developer" || role == "system" || strings.HasPrefix(text, "<environment_context>"):
			continue
		case slices.Contains(reviewContextSent, text) || okN.MatchString(text):
			what = text
		case strings.Contains(text, "The change divides without a check."):
			what = "[review]"
			if role == "user" {
				what = "[review result]"
			}
		case strings.Contains(text, "SUMMARY of the conversation so far."):
			what = "[summary]"
		case compaction && i == len(texts)-1:
			what = "[compaction request]"
		case role == "user" && strings.Contains(strings.ToLower(text), "review"):
			what = "[review request]"
		default:
			what = "[other]"
		}
		out = append(out, role+": "+what)
	}
	return out
}

// A review against the capture of codex 0.171.0 reviewing a repository's
// uncommitted change between two turns, then compacting
// (review_context.jsonl, made by review_context_capture.js): the reviewer
// works in a fresh context (the review request alone, none of the
// conversation, no sub-agent, goal or web search tools), the thread's
// next turn gets the review's result (as a user message, then the review
// as the assistant's) and nothing of the reviewer's request, /compact
// after it works, and the prompt after the compaction is answered, not
// reviewed again.
func TestReviewFreshContextMatchesReference(t *testing.T) {
	type modelLine struct {
		Tools []string `json:"tools"`
		Input []struct {
			Role string `json:"role"`
			Text string `json:"text"`
		} `json:"input"`
	}
	var want [][]string
	var wantTools [][]string
	for _, l := range apptest.ReferenceFrames(t, "review_context.jsonl") {
		if l.Dir != "model" {
			continue
		}
		var m modelLine
		require.NoError(t, json.Unmarshal(l.Frame, &m))
		var labels []string
		for _, it := range m.Input {
			if it.Text == "[instructions]" || it.Text == "[environment context]" {
				continue
			}
			labels = append(labels, it.Role+": "+it.Text)
		}
		want = append(want, labels)
		wantTools = append(wantTools, m.Tools)
	}
	require.GreaterOrEqual(t, len(want), 5, "the capture")
	want = want[:5]
	// The reference's reviewer is offered fewer tools than the thread.
	for _, name := range []string{"multi_agent_v1", "get_goal", "web_search"} {
		require.Contains(t, wantTools[0], name, "the capture")
		require.NotContains(t, wantTools[1], name, "the capture")
	}

	review := `{"findings":[{"title":"[P1] Divide by zero","body":"b may be 0.","confidence_score":0.8,"priority":1,` +
		`"code_location":{"absolute_file_path":"/w/calc.py","line_range":{"start":2,"end":2}}}],` +
		`"overall_correctness":"patch is incorrect","overall_explanation":"The change divides without a check.","overall_confidence_score":0.8}`
	script := `{"steps":[{"text":"ok 1"},{"text":` + string(apptest.JSON(t, review)) + `},{"text":"ok 3"},` +
		`{"text":"SUMMARY of the conversation so far."},{"text":"ok 5"}]}`
	fake := apptest.StartFake(t, script)
	d := apptest.Start(t, append(apptest.FakeArgs(fake, "responses"), "-c", "features.goals=true", "-c", `web_search="live"`)...)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, nil)

	require.Equal(t, "completed", apptest.RunTurn(t, r, threadID, "hello there").Turn.Status)
	r.Call("review/start", map[string]any{"threadId": threadID, "target": map[string]any{"type": "uncommittedChanges"}, "delivery": "inline"})
	require.Equal(t, "completed", apptest.TurnCompleted(t, r).Turn.Status)
	require.Equal(t, "completed", apptest.RunTurn(t, r, threadID, "fix the first finding").Turn.Status)
	r.Call("thread/compact/start", map[string]any{"threadId": threadID})
	compacted := apptest.TurnCompleted(t, r)
	require.Equal(t, "completed", compacted.Turn.Status, "%+v", compacted.Turn.Error)
	last := apptest.RunTurn(t, r, threadID, "what next")
	require.Equal(t, "completed", last.Turn.Status)
	require.Len(t, last.Turn.Items, 1)
	require.Equal(t, "ok 5", last.Turn.Items[0].Text, "the prompt after the compaction is answered, not reviewed")

	var got [][]string
	var gotTools [][]string
	for i, req := range apptest.ModelRequests(t, fake) {
		var texts, roles []string
		for _, in := range req.Input {
			var b strings.Builder
			for _, c := range in.Content {
				b.WriteString(c.Text)
			}
			texts, roles = append(texts, b.String()), append(roles, in.Role)
		}
		got = append(got, reviewContextLabels(texts, roles, i == 3))
		var names []string
		for _, raw := range req.Tools {
			var spec struct {
				Name string `json:"name"`
				Type string `json:"type"`
			}
			require.NoError(t, json.Unmarshal(raw, &spec))
			names = append(names, spec.Name+spec.Type)
		}
		gotTools = append(gotTools, names)
	}
	require.Equal(t, want, got)

	// Our reviewer, too, gets none of the thread's tools that reach
	// beyond the review.
	reach := regexp.MustCompile(`agent|goal|web_search`)
	require.True(t, slices.ContainsFunc(gotTools[0], reach.MatchString), "the thread's tools: %v", gotTools[0])
	require.False(t, slices.ContainsFunc(gotTools[1], reach.MatchString), "the reviewer's tools: %v", gotTools[1])
}

// Input for a thread while its review runs is refused, as the reference
// refuses it: the reviewer's fresh context must not take the user's
// messages, which would then be lost to the thread.
func TestReviewRefusesInput(t *testing.T) {
	// The reviewer's answer is held back while the test sends input.
	fake := apptest.StartFake(t, `{"steps":[{"delay_ms":1500,"text":"Looks fine."}]}`)
	d := apptest.Start(t, apptest.FakeArgs(fake, "responses")...)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, nil)
	res := apptest.Decode[struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}](t, r.Call("review/start", map[string]any{"threadId": threadID, "target": map[string]any{"type": "uncommittedChanges"}}))
	r.Until("turn/started")

	f := r.CallRaw("turn/steer", map[string]any{"threadId": threadID, "expectedTurnId": res.Turn.ID, "input": []any{map[string]any{"type": "text", "text": "stop"}}})
	require.NotNil(t, f.Error)
	require.Equal(t, -32600, f.Error.Code)
	require.Contains(t, string(f.Error.Data), `"turnKind":"review"`)
	code, msg := r.CallError("turn/start", apptest.Input(threadID, "also this"))
	require.Equal(t, -32603, code)
	require.Equal(t, "failed to submit turn input: ActiveTurnNotSteerable { turn_kind: Review }", msg)

	done := apptest.TurnCompleted(t, r)
	require.Equal(t, "completed", done.Turn.Status)
	require.Len(t, fake.Requests(), 1, "the refused input reached no model")
}
