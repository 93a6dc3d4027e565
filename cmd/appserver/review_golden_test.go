package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// reviewItem is what a review's item/completed shows the TUI.
type reviewItem struct {
	Type   string `json:"type"`
	Review string `json:"review,omitempty"`
	Text   string `json:"text,omitempty"`
}

// reviewItems lists the items frames complete, in order; a user message's
// text is left out, the wording of the request being each server's own.
func reviewItems(t *testing.T, frames []frame) []reviewItem {
	t.Helper()
	var out []reviewItem
	for _, f := range frames {
		if f.Method != "item/completed" {
			continue
		}
		var p struct {
			Item reviewItem `json:"item"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &p))
		if p.Item.Type == "userMessage" {
			p.Item.Text = ""
		}
		out = append(out, p.Item)
	}
	return out
}

// review/start on uncommitted changes, against a capture of codex 0.169.0
// reviewing a git working tree with one uncommitted change (review.jsonl;
// its model request review_model.json, taken by a logging proxy; its
// model, provider "fake" = `appserver mockmodel --script
// review_script.json`; the client sent initialize, thread/start,
// review/start and thread/read): the TUI sees the same items — the target,
// the request as a user message, the rendered review twice — and the model
// is asked for the answer format the reference asks for, the request last.
func TestReviewMatchesReference(t *testing.T) {
	var refFrames []frame
	started := false
	for _, l := range referenceFrames(t, "review.jsonl") {
		var f frame
		require.NoError(t, json.Unmarshal(l.Frame, &f))
		if l.Dir == "send" {
			if started {
				break
			}
			started = f.Method == "review/start"
			continue
		}
		if started {
			refFrames = append(refFrames, f)
		}
	}
	want := reviewItems(t, refFrames)
	require.Equal(t, []string{"enteredReviewMode", "userMessage", "exitedReviewMode", "agentMessage"},
		[]string{want[0].Type, want[1].Type, want[2].Type, want[3].Type}, "the capture")

	raw, err := os.ReadFile(filepath.Join("testdata", "golden", "reference", "review_model.json"))
	require.NoError(t, err)
	var refReq modelRequestBody
	require.NoError(t, json.Unmarshal(raw, &refReq))
	script, err := os.ReadFile(filepath.Join("testdata", "golden", "reference", "review_script.json"))
	require.NoError(t, err)

	fake := startFake(t, string(script))
	d := startDaemon(t, fakeArgs(fake, "responses")...)
	r := newRPC(t, d)
	threadID := startThread(t, r, map[string]any{"cwd": t.TempDir()})
	r.seen = nil
	res := r.call("review/start", map[string]any{"threadId": threadID, "target": map[string]any{"type": "uncommittedChanges"}, "delivery": "inline"})
	schemaValidate(t, "ReviewStartResponse", res)
	frames := append([]frame(nil), r.seen...)
	for len(frames) == 0 || frames[len(frames)-1].Method != "turn/completed" {
		f, err := r.read(20 * time.Second)
		require.NoError(t, err)
		frames = append(frames, f)
	}
	require.Equal(t, want, reviewItems(t, frames))

	reqs := fake.Requests()
	require.Len(t, reqs, 1)
	var ours modelRequestBody
	require.NoError(t, reqs[0].Decode(&ours))
	text := func(in modelRequestBody) string {
		var b strings.Builder
		for _, m := range in.Input {
			for _, c := range m.Content {
				b.WriteString(c.Text)
			}
		}
		return b.String()
	}
	refText, ourText := text(refReq), text(ours)
	for _, key := range []string{`"findings"`, `"title"`, `"body"`, `"confidence_score"`, `"priority"`, `"code_location"`,
		`"absolute_file_path"`, `"line_range"`, `"overall_correctness"`, `"overall_explanation"`, `"overall_confidence_score"`} {
		require.Contains(t, refText, key)
		require.Contains(t, ourText, key, "the answer format the reference asks for")
	}
	last := func(in modelRequestBody) string { return in.Input[len(in.Input)-1].Role }
	require.Equal(t, last(refReq), last(ours), "the request comes last")
}
