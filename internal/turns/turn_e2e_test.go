package turns_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

func TestPlainTurnStreamsAndPersists(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		for _, wire := range []string{"responses", "chat"} {
			t.Run(name+"/"+wire, func(t *testing.T) {
				fake := apptest.StartFake(t, `{"steps":[{"text":"Hello there, friend!","chunks":3,"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}]}`)
				d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, wire)...)...)
				r := d.RPC(t)
				threadID := apptest.StartThread(t, r, nil)
				r.Methods()

				tr := apptest.RunTurn(t, r, threadID, "Say hello")
				require.Equal(t, "completed", tr.Turn.Status)
				require.Len(t, tr.Turn.Items, 1)
				require.Equal(t, "Hello there, friend!", tr.Turn.Items[0].Text)
				require.Equal(t, []string{
					"thread/status/changed", "turn/started",
					"item/started", "item/completed", // userMessage
					"item/started", "item/agentMessage/delta", "item/agentMessage/delta", "item/agentMessage/delta", "item/completed",
					"thread/tokenUsage/updated", "thread/readState/changed", "thread/status/changed",
				}, r.Methods())

				items := r.Call("thread/items/list", map[string]any{"threadId": threadID})
				var il struct {
					Data []struct {
						TurnID string `json:"turnId"`
						Item   struct {
							Type string `json:"type"`
							Text string `json:"text"`
						} `json:"item"`
					} `json:"data"`
				}
				require.NoError(t, json.Unmarshal(items, &il))
				require.Len(t, il.Data, 2)
				require.Equal(t, "userMessage", il.Data[0].Item.Type)
				require.Equal(t, "agentMessage", il.Data[1].Item.Type)
				require.Equal(t, "Hello there, friend!", il.Data[1].Item.Text)
				require.Equal(t, tr.Turn.ID, il.Data[1].TurnID)

				// The second turn's request carries the first turn exactly.
				tr = apptest.RunTurn(t, r, threadID, "Again")
				require.Equal(t, "completed", tr.Turn.Status)
				reqs := fake.Requests()
				require.Len(t, reqs, 2)
				body := string(reqs[1].Body)
				require.Contains(t, body, "Say hello")
				require.Contains(t, body, "Hello there, friend!")
				require.Contains(t, body, "Again")
			})
		}
	}
}

func TestModelFailureFailsTurnThreadStaysUsable(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"error":{"status":401,"message":"bad key"}},{"text":"recovered"}]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, nil)
	tr := apptest.RunTurn(t, r, threadID, "hi")
	require.Equal(t, "failed", tr.Turn.Status)
	require.NotNil(t, tr.Turn.Error)
	require.Contains(t, tr.Turn.Error.Message, "401")
	require.JSONEq(t, `"unauthorized"`, string(tr.Turn.Error.CodexErrorInfo))
	ms := strings.Join(r.Methods(), ",")
	require.Contains(t, ms, "thread/status/changed,turn/started")
	require.Contains(t, ms, "error")
	tr = apptest.RunTurn(t, r, threadID, "again")
	require.Equal(t, "completed", tr.Turn.Status)
}

func TestWebSearchIsHostedAndRecordedAsAnItem(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{
		"output_items":[{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"go 1.26 release notes"}}],
		"text":"Found it."}]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir(), "-c", `web_search="live"`}, apptest.FakeArgs(fake, "responses")...)...)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, nil)
	tr := apptest.RunTurn(t, r, threadID, "search the web")
	require.Equal(t, "completed", tr.Turn.Status)
	require.Contains(t, string(fake.Requests()[0].Body), `{"type":"web_search","external_web_access":true}`)
	var sawStarted, sawCompleted bool
	for _, f := range r.Seen {
		if f.Method == "item/started" && strings.Contains(string(f.Params), `"type":"webSearch"`) {
			sawStarted = true
		}
		if f.Method == "item/completed" && strings.Contains(string(f.Params), `"type":"webSearch"`) {
			sawCompleted = true
			require.Contains(t, string(f.Params), `"query":"go 1.26 release notes"`)
			require.Contains(t, string(f.Params), `"action":{"type":"search"`)
		}
	}
	require.True(t, sawStarted && sawCompleted, "webSearch item started and completed")
	items := r.Call("thread/items/list", map[string]any{"threadId": threadID})
	require.Contains(t, string(items), `"type":"webSearch"`)
}

func TestBadApprovalPolicyIsRejectedNotStored(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	r := d.RPC(t)
	f := r.CallRaw("thread/start", map[string]any{"cwd": t.TempDir(), "approvalPolicy": "bogus"})
	require.NotNil(t, f.Error)
	require.Equal(t, -32600, f.Error.Code)
	require.Contains(t, f.Error.Message, "unknown variant `bogus`")
	threadID := apptest.StartThread(t, r, nil)
	f = r.CallRaw("turn/start", map[string]any{"threadId": threadID, "approvalPolicy": "sometimes", "input": []any{}})
	require.NotNil(t, f.Error)
	read := r.Call("thread/resume", map[string]any{"threadId": threadID})
	require.Contains(t, string(read), `"approvalPolicy":"on-request"`, "the bad value was not stored")
}

// A NUL byte in turn text is the client's error (-32602) at turn/start, not
// a turn that fails later with an internal error.
func TestNULInTurnTextIsInvalidParams(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, nil)
	f := r.CallRaw("turn/start", map[string]any{"threadId": threadID,
		"input": []any{map[string]any{"type": "text", "text": "a\x00b", "text_elements": []any{}}}})
	require.NotNil(t, f.Error, "turn/start accepted text with a NUL byte")
	require.Equal(t, -32602, f.Error.Code)
	require.Equal(t, "Invalid params: input[0].text contains a NUL character", f.Error.Message)
}
