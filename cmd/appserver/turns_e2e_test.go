package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/store/pgtest"
)

// frame is one decoded message from the server.
type frame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	} `json:"error"`
	// Seq is a thread notification's position in the thread's event log
	// (clients of the experimental API see it).
	Seq int64 `json:"seq"`
}

// rpc is a test client that records every notification it receives.
type rpc struct {
	t      *testing.T
	ws     *websocket.Conn
	nextID int
	seen   []frame
}

func newRPC(t *testing.T, d *testDaemon) *rpc {
	t.Helper()
	c, _, err := dialDaemon(t, d, nil)
	require.NoError(t, err)
	r := &rpc{t: t, ws: c.ws}
	res := r.call("initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "codex-tui", "title": nil, "version": "0.169.0"},
		"capabilities": map[string]any{"experimentalApi": true},
	})
	require.NotNil(t, res)
	return r
}

func (r *rpc) read(timeout time.Duration) (frame, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, data, err := r.ws.Read(ctx)
	if err != nil {
		return frame{}, err
	}
	var f frame
	require.NoError(r.t, json.Unmarshal(data, &f), string(data))
	return f, nil
}

// callRaw sends a request and returns its response frame, recording the
// notifications that arrive meanwhile.
func (r *rpc) callRaw(method string, params any) frame {
	r.t.Helper()
	r.nextID++
	id := r.nextID
	b, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	require.NoError(r.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(r.t, r.ws.Write(ctx, websocket.MessageText, b))
	for {
		f, err := r.read(10 * time.Second)
		require.NoError(r.t, err)
		if f.Method != "" {
			// A notification, or a server→client request (item/tool/call…).
			r.seen = append(r.seen, f)
			continue
		}
		if string(f.ID) == fmt.Sprint(id) {
			return f
		}
	}
}

func (r *rpc) call(method string, params any) json.RawMessage {
	r.t.Helper()
	f := r.callRaw(method, params)
	require.Nil(r.t, f.Error, "%s: %+v", method, f.Error)
	return f.Result
}

// until reads notifications until one with the given method arrives.
func (r *rpc) until(method string) frame {
	r.t.Helper()
	for i := range r.seen {
		if r.seen[i].Method == method {
			f := r.seen[i]
			r.seen = append(r.seen[:i:i], r.seen[i+1:]...)
			return f
		}
	}
	for {
		f, err := r.read(15 * time.Second)
		require.NoError(r.t, err, "waiting for %s", method)
		if f.Method == method {
			return f
		}
		r.seen = append(r.seen, f)
	}
}

// methods returns the recorded notification methods and clears them.
func (r *rpc) methods() []string {
	out := make([]string, 0, len(r.seen))
	for _, f := range r.seen {
		out = append(out, f.Method)
	}
	r.seen = nil
	return out
}

func startFake(t *testing.T, script string) *fakemodel.Server {
	t.Helper()
	s, err := fakemodel.ParseScript([]byte(script))
	require.NoError(t, err)
	srv, err := fakemodel.Start(s)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv
}

// fakeArgs configures the daemon to use the fake model server.
func fakeArgs(fake *fakemodel.Server, wire string) []string {
	return []string{
		"-c", `model="fake-model"`,
		"-c", `model_provider="fake"`,
		"-c", `model_providers.fake={name="Fake", base_url="` + fake.URL() + `", wire_api="` + wire + `", request_max_retries=0}`,
	}
}

type turnResult struct {
	Turn struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Items  []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"items"`
		Error *struct {
			Message        string          `json:"message"`
			CodexErrorInfo json.RawMessage `json:"codexErrorInfo"`
		} `json:"error"`
	} `json:"turn"`
}

func startThread(t *testing.T, r *rpc, extra map[string]any) string {
	params := map[string]any{"cwd": t.TempDir()}
	for k, v := range extra {
		params[k] = v
	}
	var res struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(r.call("thread/start", params), &res))
	r.until("thread/started")
	return res.Thread.ID
}

func runTurn(t *testing.T, r *rpc, threadID, text string) turnResult {
	t.Helper()
	r.call("turn/start", map[string]any{"threadId": threadID, "input": []any{map[string]any{"type": "text", "text": text}}})
	done := r.until("turn/completed")
	var tr turnResult
	require.NoError(t, json.Unmarshal(done.Params, &tr))
	return tr
}

func storeBackends(t *testing.T) map[string][]string {
	return map[string][]string{
		"embedded": {"--data-dir", t.TempDir()},
		"postgres": {"--database-url", pgtest.URL(t), "--migrate"},
	}
}

func TestPlainTurnStreamsAndPersists(t *testing.T) {
	for name, storeArgs := range storeBackends(t) {
		for _, wire := range []string{"responses", "chat"} {
			t.Run(name+"/"+wire, func(t *testing.T) {
				fake := startFake(t, `{"steps":[{"text":"Hello there, friend!","chunks":3,"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}]}`)
				d := startDaemon(t, append(storeArgs, fakeArgs(fake, wire)...)...)
				r := newRPC(t, d)
				threadID := startThread(t, r, nil)
				r.methods()

				tr := runTurn(t, r, threadID, "Say hello")
				require.Equal(t, "completed", tr.Turn.Status)
				require.Len(t, tr.Turn.Items, 1)
				require.Equal(t, "Hello there, friend!", tr.Turn.Items[0].Text)
				require.Equal(t, []string{
					"thread/status/changed", "turn/started",
					"item/started", "item/completed", // userMessage
					"item/started", "item/agentMessage/delta", "item/agentMessage/delta", "item/agentMessage/delta", "item/completed",
					"thread/tokenUsage/updated", "thread/status/changed",
				}, r.methods())

				items := r.call("thread/items/list", map[string]any{"threadId": threadID})
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
				tr = runTurn(t, r, threadID, "Again")
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
	fake := startFake(t, `{"steps":[{"error":{"status":401,"message":"bad key"}},{"text":"recovered"}]}`)
	d := startDaemon(t, append([]string{"--data-dir", t.TempDir()}, fakeArgs(fake, "responses")...)...)
	r := newRPC(t, d)
	threadID := startThread(t, r, nil)
	tr := runTurn(t, r, threadID, "hi")
	require.Equal(t, "failed", tr.Turn.Status)
	require.NotNil(t, tr.Turn.Error)
	require.Contains(t, tr.Turn.Error.Message, "401")
	require.JSONEq(t, `"unauthorized"`, string(tr.Turn.Error.CodexErrorInfo))
	ms := strings.Join(r.methods(), ",")
	require.Contains(t, ms, "thread/status/changed,turn/started")
	require.Contains(t, ms, "error")
	tr = runTurn(t, r, threadID, "again")
	require.Equal(t, "completed", tr.Turn.Status)
	_ = filepath.Join
}

func TestWebSearchIsHostedAndRecordedAsAnItem(t *testing.T) {
	fake := startFake(t, `{"steps":[{
		"output_items":[{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"go 1.26 release notes"}}],
		"text":"Found it."}]}`)
	d := startDaemon(t, append([]string{"--data-dir", t.TempDir(), "-c", `web_search="live"`}, fakeArgs(fake, "responses")...)...)
	r := newRPC(t, d)
	threadID := startThread(t, r, nil)
	tr := runTurn(t, r, threadID, "search the web")
	require.Equal(t, "completed", tr.Turn.Status)
	require.Contains(t, string(fake.Requests()[0].Body), `{"type":"web_search","external_web_access":true}`)
	var sawStarted, sawCompleted bool
	for _, f := range r.seen {
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
	items := r.call("thread/items/list", map[string]any{"threadId": threadID})
	require.Contains(t, string(items), `"type":"webSearch"`)
}

func TestBadApprovalPolicyIsRejectedNotStored(t *testing.T) {
	fake := startFake(t, `{"steps":[]}`)
	d := startDaemon(t, append([]string{"--data-dir", t.TempDir()}, fakeArgs(fake, "responses")...)...)
	r := newRPC(t, d)
	f := r.callRaw("thread/start", map[string]any{"cwd": t.TempDir(), "approvalPolicy": "bogus"})
	require.NotNil(t, f.Error)
	require.Equal(t, -32600, f.Error.Code)
	require.Contains(t, f.Error.Message, "unknown variant `bogus`")
	threadID := startThread(t, r, nil)
	f = r.callRaw("turn/start", map[string]any{"threadId": threadID, "approvalPolicy": "sometimes", "input": []any{}})
	require.NotNil(t, f.Error)
	read := r.call("thread/resume", map[string]any{"threadId": threadID})
	require.Contains(t, string(read), `"approvalPolicy":"on-request"`, "the bad value was not stored")
}

// A NUL byte in turn text is the client's error (-32602) at turn/start, not
// a turn that fails later with an internal error.
func TestNULInTurnTextIsInvalidParams(t *testing.T) {
	fake := startFake(t, `{"steps":[]}`)
	d := startDaemon(t, append([]string{"--data-dir", t.TempDir()}, fakeArgs(fake, "responses")...)...)
	r := newRPC(t, d)
	threadID := startThread(t, r, nil)
	f := r.callRaw("turn/start", map[string]any{"threadId": threadID,
		"input": []any{map[string]any{"type": "text", "text": "a\x00b", "text_elements": []any{}}}})
	require.NotNil(t, f.Error, "turn/start accepted text with a NUL byte")
	require.Equal(t, -32602, f.Error.Code)
	require.Equal(t, "Invalid params: input[0].text contains a NUL character", f.Error.Message)
}
