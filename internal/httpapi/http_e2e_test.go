package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
)

// Tokens of the HTTP API tests: the operator's (the websocket's
// capability token) and the CI principal's.
// TestCIBotScript runs testdata/ci_bot.sh, a CI bot written in bash + curl,
// against the daemon, then checks from a websocket client that the thread
// it made is there and matches what the HTTP API reported.
func TestCIBotScript(t *testing.T) {
	apptest.NeedTools(t, "bash", "curl", "jq")
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[
				{"text":"Build 1234 failed in TestFlaky.","usage":{"input_tokens":40,"output_tokens":8,"total_tokens":48}},
				{"tool_calls":[{"call_id":"call_ci1","name":"ci_build_status","arguments":{"build":"1234"}}]},
				{"match":{"call_output":"call_ci1"},"text":"Build 1234 still fails: TestFlaky timed out. Rerun it.","chunks":4}]}`)
			dir := t.TempDir()
			args := append(append(storeArgs, apptest.FakeArgs(fake, "responses")...), apptest.AuthArgs(dir)...)
			d := apptest.Start(t, args...)
			script, err := filepath.Abs("testdata/ci_bot.sh")
			require.NoError(t, err)
			out, errOut := apptest.RunBash(t, d.URL(""), dir, script, apptest.CIToken)
			res := apptest.KV(out)
			require.Equal(t, "Build 1234 still fails: TestFlaky timed out. Rerun it.", res["answer"], errOut)
			threadID := res["thread"]

			// The retried POST did not start a turn: the model saw three
			// requests, one for the first turn and two (call, answer) for the
			// second.
			reqs := fake.Requests()
			require.Len(t, reqs, 3)
			require.Contains(t, string(reqs[2].Body), "TestFlaky timed out after 60s")

			// The operator's websocket client sees the same thread.
			r := apptest.RPC(t, d.Addr, apptest.OperatorToken, nil)
			var read struct {
				Thread struct {
					ID         string  `json:"id"`
					Originator *string `json:"originator"`
					Turns      []struct {
						ID     string            `json:"id"`
						Status string            `json:"status"`
						Items  []json.RawMessage `json:"items"`
					} `json:"turns"`
				} `json:"thread"`
			}
			require.NoError(t, json.Unmarshal(r.Call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true}), &read))
			require.Equal(t, "appserver-http/ci", *read.Thread.Originator)
			require.Len(t, read.Thread.Turns, 2)
			require.Equal(t, res["first_turn"], read.Thread.Turns[0].ID)
			require.Equal(t, res["second_turn"], read.Thread.Turns[1].ID)
			for _, tr := range read.Thread.Turns {
				require.Equal(t, "completed", tr.Status)
			}

			// Item for item, the websocket's transcript is the HTTP one.
			var wsItems []json.RawMessage
			for _, tr := range read.Thread.Turns {
				wsItems = append(wsItems, tr.Items...)
			}
			httpItems := apptest.GetJSON[api.HTTPItemList](t, d, "/v1/threads/"+threadID+"/items?limit=100", apptest.CIToken)
			require.Len(t, httpItems.Data, len(wsItems))
			for i, it := range httpItems.Data {
				b, err := json.Marshal(it.Item)
				require.NoError(t, err)
				require.JSONEq(t, string(wsItems[i]), string(b), "item %d", i)
			}
			var kinds []string
			for _, it := range httpItems.Data {
				kinds = append(kinds, string(it.Item.Body.ItemType()))
			}
			require.Equal(t, []string{"userMessage", "agentMessage", "userMessage", "dynamicToolCall", "agentMessage"}, kinds)

			// And the websocket's thread/items/list agrees.
			var list struct {
				Data []struct {
					TurnID string          `json:"turnId"`
					Item   json.RawMessage `json:"item"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal(r.Call("thread/items/list", map[string]any{"threadId": threadID}), &list))
			require.Len(t, list.Data, len(httpItems.Data))
			for i := range list.Data {
				require.Equal(t, httpItems.Data[i].TurnID, list.Data[i].TurnID)
			}

			// The principal cannot see the operator's threads; the operator
			// sees the principal's.
			opThread := apptest.StartThread(t, r, nil)
			resp := d.Do(t, "GET", "/v1/threads/"+opThread, apptest.CIToken, nil)
			require.Equal(t, http.StatusNotFound, resp.StatusCode)
			resp = d.Do(t, "GET", "/v1/threads/"+threadID, apptest.OperatorToken, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			// Over the websocket the principal sees the same: its thread,
			// not the operator's.
			ci := apptest.RPC(t, d.Addr, apptest.CIToken, nil)
			ci.Call("thread/read", map[string]any{"threadId": threadID})
			f := ci.CallRaw("thread/read", map[string]any{"threadId": opThread})
			require.NotNil(t, f.Error)
			require.Equal(t, "thread not loaded: "+opThread, f.Error.Message)
		})
	}
}

// TestREADMEFirstTurn runs the README's first turn with curl, as a
// newcomer would paste it, against a daemon on the fake model with no
// token (its address put in place of the default one).
func TestREADMEFirstTurn(t *testing.T) {
	apptest.NeedTools(t, "bash", "curl", "jq")
	blocks := apptest.ShBlocks(t, "README.md", "readme-first-turn")
	require.Len(t, blocks, 1)
	fake := apptest.StartFake(t, `{"steps":[{"text":"Hello from the fake model!","chunks":3}]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	script := "set -euo pipefail\n" + strings.ReplaceAll(blocks[0], "http://127.0.0.1:7878", d.URL(""))
	out, errOut := apptest.RunBash(t, d.URL(""), t.TempDir(), script, "")
	require.Equal(t, "completed\nHello from the fake model!\n", out, "stderr:\n%s", errOut)
}

// TestHTTPAPIDocExamples runs the curl examples of docs/http-api.md, in
// order, as one bash script against a daemon, so that they cannot rot.
func TestHTTPAPIDocExamples(t *testing.T) {
	apptest.NeedTools(t, "bash", "curl", "jq")
	blocks := apptest.ShBlocks(t, "docs/http-api.md", "http-api-examples")
	require.GreaterOrEqual(t, len(blocks), 5)
	fake := apptest.StartFake(t, `{"steps":[
		{"text":"Looks good to me: the change is small and tested.","usage":{"input_tokens":30,"output_tokens":12,"total_tokens":42}},
		{"text":"Build 1234: 2 failures, both in TestFlaky.","chunks":4},
		{"tool_calls":[{"call_id":"call_ci7","name":"ci_build_status","arguments":{"build":"1234"}}]},
		{"match":{"call_output":"call_ci7"},"text":"TestFlaky timed out; rerun the build."}]}`)
	dir := t.TempDir()
	d := apptest.Start(t, append(append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...), apptest.AuthArgs(dir)...)...)
	script := "set -euo pipefail\n" + strings.Join(blocks, "\n")
	out, errOut := apptest.RunBash(t, d.URL(""), dir, script, apptest.CIToken)
	t.Logf("output of the examples of docs/http-api.md:\n%s", out)
	for _, want := range []string{
		"Looks good to me: the change is small and tested.",
		"Build 1234: 2 failures, both in TestFlaky.",
		"TestFlaky timed out; rerun the build.",
		api.ProblemInvalidRequest,
	} {
		require.Contains(t, out, want, "stderr:\n%s", errOut)
	}
}

// TestHTTPApprovalOfABuiltInCommand answers a real command approval over
// HTTP: the request appears on the event stream with a requestId, the
// bot's POST approves it, the command runs and the turn completes.
func TestHTTPApprovalOfABuiltInCommand(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	call, _ := json.Marshal(map[string]any{"call_id": "call_t", "name": "shell_command", "arguments": map[string]any{"command": "touch approved.txt"}})
	fake := apptest.StartFake(t, `{"steps":[{"tool_calls":[`+string(call)+`]},{"match":{"call_output":"call_t"},"text":"done"}]}`)
	d := apptest.Start(t, append(append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...), apptest.AuthArgs(ws)...)...)

	resp := d.Do(t, "POST", "/v1/threads", apptest.CIToken, map[string]any{"cwd": ws, "approvalPolicy": "untrusted", "sandbox": "workspace-write"})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var th api.HTTPThread
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&th))
	resp = d.Do(t, "POST", "/v1/threads/"+th.Thread.ID+"/turns", apptest.CIToken, map[string]any{"input": []any{map[string]any{"type": "text", "text": "go"}}})
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var turn api.HTTPTurn
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&turn))

	events := d.OpenEvents(t, fmt.Sprintf("/v1/threads/%s/events?after=%d&until=turnCompleted", th.Thread.ID, *turn.EventsAfter), apptest.CIToken)
	var seen []string
	for {
		ev, ok := events.Next()
		if !ok {
			break
		}
		seen = append(seen, ev.Method)
		if ev.Method == "item/commandExecution/requestApproval" {
			require.NotNil(t, ev.RequestID)
			a := d.Do(t, "POST", "/v1/threads/"+th.Thread.ID+"/approvals/"+*ev.RequestID, apptest.CIToken, map[string]any{"decision": "accept"})
			require.Equal(t, http.StatusOK, a.StatusCode)
			again := d.Do(t, "POST", "/v1/threads/"+th.Thread.ID+"/approvals/"+*ev.RequestID, apptest.CIToken, map[string]any{"decision": "accept"})
			require.Equal(t, http.StatusConflict, again.StatusCode)
		}
	}
	require.Contains(t, seen, "serverRequest/resolved")
	require.Equal(t, "turn/completed", seen[len(seen)-1])
	done := apptest.GetJSON[api.HTTPTurn](t, d, "/v1/threads/"+th.Thread.ID+"/turns/"+turn.ID+"?wait=true", apptest.CIToken)
	require.Equal(t, api.TurnCompleted, done.Status)
	require.Equal(t, "done", *done.FinalMessage)
	require.FileExists(t, filepath.Join(ws, "approved.txt"))
}
