package turns_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// reviewItem is what a review's item/completed shows the TUI.
type reviewItem struct {
	Type   string `json:"type"`
	Review string `json:"review,omitempty"`
	Text   string `json:"text,omitempty"`
}

// reviewItems lists the items frames complete, in order; a user message's
// text is left out, the wording of the request being each server's own.
func reviewItems(t *testing.T, frames []apptest.Frame) []reviewItem {
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
// review/start and thread/read; the capture keeps the reference's request
// without its prompts: its instructions are reduced to the keys of the
// answer format they ask for, its tool descriptions are left out): the
// TUI sees the same items — the target, the request as a user message, the
// rendered review twice — and the model is asked for the answer format the
// reference asks for, the request last.
func TestReviewMatchesReference(t *testing.T) {
	var refFrames []apptest.Frame
	started := false
	for _, l := range apptest.ReferenceFrames(t, "review.jsonl") {
		var f apptest.Frame
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
	var refReq apptest.ModelRequest
	require.NoError(t, json.Unmarshal(raw, &refReq))
	script, err := os.ReadFile(filepath.Join("testdata", "golden", "reference", "review_script.json"))
	require.NoError(t, err)

	fake := apptest.StartFake(t, string(script))
	d := apptest.Start(t, apptest.FakeArgs(fake, "responses")...)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": t.TempDir()})
	r.Seen = nil
	res := r.Call("review/start", map[string]any{"threadId": threadID, "target": map[string]any{"type": "uncommittedChanges"}, "delivery": "inline"})
	apptest.ValidateSchema(t, "ReviewStartResponse", res)
	frames := append([]apptest.Frame(nil), r.Seen...)
	for len(frames) == 0 || frames[len(frames)-1].Method != "turn/completed" {
		f, err := r.Read(20 * time.Second)
		require.NoError(t, err)
		frames = append(frames, f)
	}
	require.Equal(t, want, reviewItems(t, frames))

	reqs := fake.Requests()
	require.Len(t, reqs, 1)
	var ours apptest.ModelRequest
	require.NoError(t, reqs[0].Decode(&ours))
	text := func(in apptest.ModelRequest) string {
		var b strings.Builder
		b.WriteString(in.Instructions)
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
	last := func(in apptest.ModelRequest) string { return in.Input[len(in.Input)-1].Role }
	require.Equal(t, last(refReq), last(ours), "the request comes last")
}

// review/start on the uncommitted changes of a directory that is no git
// repository, against a capture of codex 0.171.0 doing the same
// (review_nogit.jsonl, made by review_nogit_capture.js with the model of
// review_script.json): the reference does not refuse it, there being
// nothing to diff, but runs the review (the model finds out), and so do
// we, with the same answer and the same items.
func TestReviewOutsideGitMatchesReference(t *testing.T) {
	var refStart json.RawMessage
	var refFrames []apptest.Frame
	started := false
	for _, l := range apptest.ReferenceFrames(t, "review_nogit.jsonl") {
		var f apptest.Frame
		require.NoError(t, json.Unmarshal(l.Frame, &f))
		if l.Dir == "send" {
			if started {
				break
			}
			started = f.Method == "review/start"
			continue
		}
		if !started {
			continue
		}
		if string(f.ID) == "3" {
			refStart = f.Result
			continue
		}
		refFrames = append(refFrames, f)
	}
	require.NotNil(t, refStart, "the capture answers review/start")

	script, err := os.ReadFile(filepath.Join("testdata", "golden", "reference", "review_script.json"))
	require.NoError(t, err)
	fake := apptest.StartFake(t, string(script))
	d := apptest.Start(t, apptest.FakeArgs(fake, "responses")...)
	r := d.RPC(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello\n"), 0o644))
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": dir})
	r.Seen = nil
	f := r.CallRaw("review/start", map[string]any{"threadId": threadID, "target": map[string]any{"type": "uncommittedChanges"}})
	require.Nil(t, f.Error, "the reference answers a review of a directory without git")
	type startResult struct {
		Turn struct {
			RootTurnID *string `json:"rootTurnId"`
			Status     string  `json:"status"`
			Items      []struct {
				Type    string `json:"type"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"items"`
		} `json:"turn"`
		ReviewThreadID string `json:"reviewThreadId"`
	}
	var want, got startResult
	require.NoError(t, json.Unmarshal(refStart, &want))
	require.NoError(t, json.Unmarshal(f.Result, &got))
	want.ReviewThreadID, got.ReviewThreadID = "", ""
	require.Equal(t, want, got)

	frames := append([]apptest.Frame(nil), r.Seen...)
	for len(frames) == 0 || frames[len(frames)-1].Method != "turn/completed" {
		f, err := r.Read(20 * time.Second)
		require.NoError(t, err)
		frames = append(frames, f)
	}
	require.Equal(t, reviewItems(t, refFrames), reviewItems(t, frames))
	var ended apptest.TurnResult
	require.NoError(t, json.Unmarshal(frames[len(frames)-1].Params, &ended))
	require.Equal(t, "completed", ended.Turn.Status)
}
