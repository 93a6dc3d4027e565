package turns_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// review/start runs a review as a turn of the thread: the TUI's /review
// sees enteredReviewMode naming the target, the model's work, and
// exitedReviewMode carrying the review, which stays in the thread.
func TestReviewStart(t *testing.T) {
	// The reviewer answers in JSON (after some words); the review shown is
	// rendered from it.
	answer := `Done. {"findings":[{"title":"[P1] Nil map write","body":"m is nil;\nwriting panics.","confidence_score":0.9,"priority":1,` +
		`"code_location":{"absolute_file_path":"/w/main.go","line_range":{"start":5,"end":6}}}],` +
		`"overall_correctness":"patch is incorrect","overall_explanation":"The change writes to a nil map.","overall_confidence_score":0.9}`
	const review = "The change writes to a nil map.\n\nReview comment:\n\n- [P1] Nil map write — /w/main.go:5-6\n  m is nil;\n  writing panics."
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[{"text":`+string(apptest.JSON(t, answer))+`}]}`)
			d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, "responses")...)...)
			r := d.RPC(t)
			threadID := apptest.StartThread(t, r, nil)

			for _, bad := range []map[string]any{
				{"type": "baseBranch", "branch": " "},
				{"type": "commit", "sha": ""},
				{"type": "custom", "instructions": ""},
				{"type": "everything"},
			} {
				f := r.CallRaw("review/start", map[string]any{"threadId": threadID, "target": bad})
				require.NotNil(t, f.Error, "%v", bad)
				require.Equal(t, -32600, f.Error.Code, "%v: %s", bad, f.Error.Message)
			}
			f := r.CallRaw("review/start", map[string]any{"threadId": threadID, "target": map[string]any{"type": "uncommittedChanges"}, "delivery": "detached"})
			require.NotNil(t, f.Error)

			r.Seen = nil
			res := r.Call("review/start", map[string]any{"threadId": threadID, "target": map[string]any{"type": "baseBranch", "branch": "main"}, "delivery": "inline"})
			apptest.ValidateSchema(t, "ReviewStartResponse", res)
			var out struct {
				ReviewThreadID string `json:"reviewThreadId"`
				Turn           struct {
					ID     string `json:"id"`
					Status string `json:"status"`
				} `json:"turn"`
			}
			require.NoError(t, json.Unmarshal(res, &out))
			require.Equal(t, threadID, out.ReviewThreadID)
			require.Equal(t, "inProgress", out.Turn.Status)

			frames := append([]apptest.Frame(nil), r.Seen...)
			for len(frames) == 0 || frames[len(frames)-1].Method != "turn/completed" {
				f, err := r.Read(20 * time.Second)
				require.NoError(t, err)
				frames = append(frames, f)
			}
			var items []string
			for _, f := range frames {
				if name, ok := apptest.NotificationSchemas[f.Method]; ok {
					apptest.ValidateSchema(t, name, f.Params)
				}
				if f.Method == "item/completed" {
					var p struct {
						TurnID string `json:"turnId"`
						Item   struct {
							Type   string `json:"type"`
							Review string `json:"review"`
							Text   string `json:"text"`
						} `json:"item"`
					}
					require.NoError(t, json.Unmarshal(f.Params, &p))
					require.Equal(t, out.Turn.ID, p.TurnID)
					items = append(items, p.Item.Type+": "+p.Item.Review+p.Item.Text)
				}
			}
			// The request shows as a user message; the reviewer's own
			// message is not shown: no delta, no item.
			require.Equal(t, []string{
				"enteredReviewMode: changes against 'main'",
				"userMessage: ",
				"exitedReviewMode: " + review,
				"agentMessage: " + review,
			}, items)
			var started []string
			for _, f := range frames {
				require.NotEqual(t, "item/agentMessage/delta", f.Method)
				if f.Method == "item/started" {
					var p struct {
						Item struct {
							Type string `json:"type"`
						} `json:"item"`
					}
					require.NoError(t, json.Unmarshal(f.Params, &p))
					started = append(started, p.Item.Type)
				}
			}
			require.Equal(t, []string{"enteredReviewMode", "userMessage", "exitedReviewMode", "agentMessage"}, started)

			// The model was asked to review the branch.
			reqs := fake.Requests()
			require.Len(t, reqs, 1)
			var body struct {
				Input []struct {
					Role    string `json:"role"`
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"input"`
			}
			require.NoError(t, reqs[0].Decode(&body))
			last := body.Input[len(body.Input)-1]
			require.Equal(t, "user", last.Role)
			require.True(t, strings.Contains(last.Content[0].Text, "base branch 'main'"), last.Content[0].Text)

			// The review items are the thread's history.
			read := r.Call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true})
			var rd struct {
				Thread struct {
					Turns []struct {
						Items []struct {
							Type   string `json:"type"`
							Review string `json:"review"`
						} `json:"items"`
					} `json:"turns"`
				} `json:"thread"`
			}
			require.NoError(t, json.Unmarshal(read, &rd))
			require.Len(t, rd.Thread.Turns, 1)
			var types []string
			for _, it := range rd.Thread.Turns[0].Items {
				types = append(types, it.Type)
			}
			require.Equal(t, []string{"enteredReviewMode", "userMessage", "exitedReviewMode", "agentMessage"}, types)
		})
	}
}
