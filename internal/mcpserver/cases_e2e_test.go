package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/model/fakemodel"
)

// postMCP posts one JSON-RPC message to /mcp as a streamable HTTP client
// does, with more headers, and returns the response (body closed).
func postMCP(t *testing.T, ctx context.Context, d *apptest.Daemon, body string, h http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL("/mcp"), strings.NewReader(body))
	require.NoError(t, err)
	req.Header = h.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp
}

// eventOf returns the first codex/event of a thread with a msg type.
func (s *sniffer) eventOf(thread, typ string) (codexEvent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.events {
		if e.Meta.ThreadID == thread && e.typ() == typ {
			return e, true
		}
	}
	return codexEvent{}, false
}

// TestMCPPrincipals runs /mcp with principals: a principal's token calls
// codex; another principal cannot continue that thread (it is as unknown
// as a thread that does not exist), nor ask for a sandbox beyond the
// principal ceiling; a missing or wrong token is refused before MCP.
func TestMCPPrincipals(t *testing.T) {
	const bobToken = "bob-secret-token"
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"Say hello"},"text":"Hello from ci."},
		{"match":{"user_text":"Steal it"},"text":"stolen"},
		{"match":{"user_text":"Go on"},"text":"ci goes on."},
		{"match":{"user_text":"Unsandboxed"},"text":"unsandboxed"}
	]}`)
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	bobWS, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	dataDir := t.TempDir()
	args := append(append([]string{"--data-dir", dataDir}, apptest.FakeArgs(fake, "responses")...), apptest.AuthArgs(ws)...)
	args = append(args, "-c", `http_api.principals.bob.token_sha256="`+apptest.SHA256Hex(bobToken)+`"`)
	args = append(args, apptest.PrincipalRoots("bob", bobWS)...)
	d := apptest.Start(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// No token, a wrong one: 401 before any MCP, so no session either.
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, token := range []string{"", "not-a-token"} {
		h := http.Header{}
		if token != "" {
			h.Set("Authorization", "Bearer "+token)
		}
		resp := postMCP(t, ctx, d, initialize, h)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "token %q", token)
		require.Empty(t, resp.Header.Get("Mcp-Session-Id"))
	}
	_, err = mcp.NewClient(&mcp.Implementation{Name: "x", Version: "1"}, nil).Connect(ctx, d.MCPHTTP("not-a-token"), nil)
	require.Error(t, err, "a client with a wrong token cannot connect")

	// The ci principal starts a thread.
	ci, _ := mcpConnect(t, d.MCPHTTP(apptest.CIToken), nil)
	text, thread, isErr := apptest.CallTool(t, ctx, ci, "codex", map[string]any{"prompt": "Say hello", "cwd": ws})
	require.False(t, isErr, text)
	require.Equal(t, "Hello from ci.", text)
	require.NotEmpty(t, thread)

	// bob cannot continue it: the answer is the one for a thread that does
	// not exist, and names no thread in structuredContent.
	bob, _ := mcpConnect(t, d.MCPHTTP(bobToken), nil)
	res, err := bob.CallTool(ctx, &mcp.CallToolParams{Name: "codex-reply", Arguments: map[string]any{"prompt": "Steal it", "threadId": thread}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Nil(t, res.StructuredContent)
	stolen := res.Content[0].(*mcp.TextContent).Text
	require.Contains(t, stolen, "unknown threadId")
	const missing = "01a2007c-e7fe-75b3-9b2c-d4ca854a9857"
	unknown, _, isErr := apptest.CallTool(t, ctx, bob, "codex-reply", map[string]any{"prompt": "Steal it", "threadId": missing})
	require.True(t, isErr)
	require.Equal(t, strings.ReplaceAll(unknown, missing, thread), stolen, "another principal's thread reads as a missing one")
	for _, r := range fake.Requests() {
		require.NotContains(t, string(r.Body), "Steal it", "no turn ran on the stolen thread")
	}

	// Nor use ci's MCP session: it is unknown to any other token.
	tools := `{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`
	for token, want := range map[string]int{bobToken: http.StatusNotFound, apptest.CIToken: http.StatusOK} {
		resp := postMCP(t, ctx, d, tools, http.Header{
			"Authorization":        {"Bearer " + token},
			"Mcp-Session-Id":       {ci.ID()},
			"Mcp-Protocol-Version": {ci.InitializeResult().ProtocolVersion},
		})
		require.Equal(t, want, resp.StatusCode, "token %q", token)
	}

	// Its owner can.
	text, thread2, isErr := apptest.CallTool(t, ctx, ci, "codex-reply", map[string]any{"prompt": "Go on", "threadId": thread})
	require.False(t, isErr, text)
	require.Equal(t, "ci goes on.", text)
	require.Equal(t, thread, thread2)

	// A principal works in its own workspace roots only: "/", the data
	// directory and another principal's root are refused; no thread is
	// started.
	for _, cwd := range []string{"/", dataDir, ws} {
		text, th, isErr := apptest.CallTool(t, ctx, bob, "codex", map[string]any{"prompt": "Unsandboxed", "cwd": cwd})
		require.True(t, isErr, cwd)
		require.Empty(t, th)
		require.Contains(t, text, "is outside this principal's workspace roots ("+bobWS+")")
	}

	// The principal ceiling (workspace-write by default) refuses
	// danger-full-access; no thread is started.
	text, th, isErr := apptest.CallTool(t, ctx, bob, "codex", map[string]any{"prompt": "Unsandboxed", "cwd": bobWS, "sandbox": "danger-full-access"})
	require.True(t, isErr)
	require.Empty(t, th)
	require.Contains(t, text, `sandbox "danger-full-access" is beyond this principal's ceiling "workspace-write"`)
	for _, r := range fake.Requests() {
		require.NotContains(t, string(r.Body), "Unsandboxed")
	}
	// workspace-write is within it.
	text, _, isErr = apptest.CallTool(t, ctx, bob, "codex", map[string]any{"prompt": "Unsandboxed", "cwd": bobWS, "sandbox": "workspace-write"})
	require.False(t, isErr, text)
	require.Equal(t, "unsandboxed", text)
}

// TestMCPProgressNotifications: a codex call with a progressToken gets
// notifications/progress for that token while its turn runs, counting up,
// from session_configured to task_complete; a call without one gets none.
func TestMCPProgressNotifications(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"text":"Progressing.","chunks":3,"times":2,"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)

	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	c := mcp.NewClient(&mcp.Implementation{Name: "mcp-progress", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, req.Params)
			mu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, d.MCPHTTP(""), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	// Without a token: no progress.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "codex", Arguments: map[string]any{"prompt": "quiet", "cwd": ws}})
	require.NoError(t, err)
	require.False(t, res.IsError)

	p := &mcp.CallToolParams{Name: "codex", Arguments: map[string]any{"prompt": "loud", "cwd": ws}}
	p.SetProgressToken("tok-1")
	res, err = cs.CallTool(ctx, p)
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.Equal(t, "Progressing.", res.Content[0].(*mcp.TextContent).Text)

	// Notifications may be handled just after the result.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0 && got[len(got)-1].Message == "task_complete"
	}, 10*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	var msgs []string
	for i, n := range got {
		require.Equal(t, "tok-1", n.ProgressToken, "only the call with a token gets progress")
		require.Equal(t, float64(i+1), n.Progress, "progress counts up")
		msgs = append(msgs, n.Message)
	}
	require.Equal(t, "session_configured", msgs[0])
	for _, want := range []string{"task_started", "item_started", "item_completed", "agent_message", "token_count"} {
		require.Contains(t, msgs, want)
	}
	require.NotContains(t, msgs, "agent_message_delta", "deltas are not progress")
}

// touchDaemon starts a daemon whose model, asked to "touch it", runs
// `touch file` as callID and then answers answer; extra are more daemon
// flags. It returns the workspace, the fake model and the daemon.
func touchDaemon(t *testing.T, callID, file, answer string, extra ...string) (string, *fakemodel.Server, *apptest.Daemon) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"touch it"},"tool_calls":[`+apptest.ShellCall(callID, "touch "+file)+`]},
		{"match":{"call_output":"`+callID+`"},"text":"`+answer+`"}
	]}`)
	args := append([]string{"--data-dir", t.TempDir()}, extra...)
	return ws, fake, apptest.Start(t, append(args, apptest.FakeArgs(fake, "responses")...)...)
}

// touchArgs are the codex arguments of the "touch it" turn: a command
// that asks for approval.
func touchArgs(ws string) map[string]any {
	return map[string]any{"prompt": "touch it", "cwd": ws, "approval-policy": "untrusted", "sandbox": "danger-full-access"}
}

// TestMCPApprovalWithoutElicitation: a host that declared no elicitation
// is not asked; the approval falls to the no-client rule (declined after
// approval_client_timeout), the command does not run, and the model and
// the host's events say why.
func TestMCPApprovalWithoutElicitation(t *testing.T) {
	ws, fake, d := touchDaemon(t, "call_n", "nobody.txt", "could not touch it", "-c", `approval_client_timeout="300ms"`)
	cs, sn := mcpConnect(t, d.MCPHTTP(""), nil) // no elicitation handler: no capability
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	text, thread, isErr := apptest.CallTool(t, ctx, cs, "codex", touchArgs(ws))
	require.False(t, isErr, text)
	require.Equal(t, "could not touch it", text)
	require.NoFileExists(t, filepath.Join(ws, "nobody.txt"))
	require.Contains(t, apptest.ModelOutput(t, fake, 1, "call_n"), "rejected: approval was required, but no client is connected to approve or decline it")
	_, asked := sn.eventOf(thread, "exec_approval_request")
	require.False(t, asked, "a host that cannot elicit is not told it is being asked")
	require.True(t, commandDeclined(t, sn, thread, "call_n"), "the host's events show the command declined")
	statuses, _ := apptest.ThreadTexts(t, d.RPC(t), thread)
	require.Equal(t, []string{"completed"}, statuses)
}

// commandDeclined reports whether an item_completed event of the thread
// shows the command item declined.
func commandDeclined(t *testing.T, sn *sniffer, thread, item string) bool {
	t.Helper()
	sn.mu.Lock()
	defer sn.mu.Unlock()
	for _, e := range sn.events {
		if e.Meta.ThreadID != thread || e.typ() != "item_completed" {
			continue
		}
		var it struct {
			ID     string `json:"id"`
			Type   string `json:"type"`
			Status string `json:"status"`
		}
		require.NoError(t, json.Unmarshal(e.Msg["item"], &it))
		if it.ID == item && it.Type == "commandExecution" {
			return it.Status == "declined"
		}
	}
	return false
}

// TestMCPPatchApprovalElicitation: apply_patch under read-only asks the
// host through elicitation as a patch approval; accepted, the file
// changes; declined, it stays as it was.
func TestMCPPatchApprovalElicitation(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	notes := filepath.Join(ws, "notes.txt")
	require.NoError(t, os.WriteFile(notes, []byte("one\n"), 0o644))
	patch := func(id, from, to string) string {
		b, _ := json.Marshal(map[string]any{"type": "custom", "call_id": id, "name": "apply_patch",
			"input": "*** Begin Patch\n*** Update File: notes.txt\n@@\n-" + from + "\n+" + to + "\n*** End Patch\n"})
		return string(b)
	}
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"patch yes"},"tool_calls":[`+patch("call_yes", "one", "two")+`]},
		{"match":{"call_output":"call_yes"},"text":"patched"},
		{"match":{"user_text":"patch no"},"tool_calls":[`+patch("call_no", "two", "three")+`]},
		{"match":{"call_output":"call_no"},"text":"not patched"}
	]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)

	var mu sync.Mutex
	var kinds []string
	answer := "accept"
	elicit := func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		kind, _ := req.Params.Meta["codex_elicitation"].(string)
		kinds = append(kinds, kind)
		if kind != "patch-approval" {
			return &mcp.ElicitResult{Action: "cancel"}, nil
		}
		return &mcp.ElicitResult{Action: answer}, nil
	}
	cs, sn := mcpConnect(t, d.MCPHTTP(""), elicit)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := map[string]any{"prompt": "patch yes", "cwd": ws, "sandbox": "read-only", "approval-policy": "on-request"}

	text, thread, isErr := apptest.CallTool(t, ctx, cs, "codex", args)
	require.False(t, isErr, text)
	require.Equal(t, "patched", text)
	b, err := os.ReadFile(notes)
	require.NoError(t, err)
	require.Equal(t, "two\n", string(b), "an accepted patch is applied")
	ev, ok := sn.eventOf(thread, "apply_patch_approval_request")
	require.True(t, ok, "the host sees the patch approval event")
	require.JSONEq(t, `"call_yes"`, string(ev.Msg["call_id"]))

	mu.Lock()
	answer = "decline"
	mu.Unlock()
	args["prompt"] = "patch no"
	text, _, isErr = apptest.CallTool(t, ctx, cs, "codex", args)
	require.False(t, isErr, text)
	require.Equal(t, "not patched", text)
	b, err = os.ReadFile(notes)
	require.NoError(t, err)
	require.Equal(t, "two\n", string(b), "a declined patch is not applied")
	require.Equal(t, "patch rejected by user", apptest.ModelOutput(t, fake, 3, "call_no"))

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"patch-approval", "patch-approval"}, kinds)
}

// TestMCPElicitationError: a host that declared elicitation but answers
// an approval's elicitation with an error is asked once, as a websocket
// client answering with an error is: the approval fails, the command does
// not run, and the model reads why.
func TestMCPElicitationError(t *testing.T) {
	ws, fake, d := touchDaemon(t, "call_e", "broken.txt", "the host failed to ask")
	var mu sync.Mutex
	asked := 0
	elicit := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		asked++
		mu.Unlock()
		return nil, errors.New("the host's approval dialog crashed")
	}
	cs, _ := mcpConnect(t, d.MCPHTTP(""), elicit)
	// Bounded so that a call that never ends fails here instead of
	// hanging the package's tests.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	text, _, isErr := apptest.CallTool(t, ctx, cs, "codex", touchArgs(ws))
	require.False(t, isErr, text)
	require.Equal(t, "the host failed to ask", text)
	require.NoFileExists(t, filepath.Join(ws, "broken.txt"))
	out := apptest.ModelOutput(t, fake, 1, "call_e")
	require.Contains(t, out, "rejected: the approval request failed")
	require.Contains(t, out, "the host's approval dialog crashed")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, asked, "the host is asked once")
}

// TestMCPCancelDuringElicitation: the host cancels a codex call while its
// approval's elicitation is open; the turn is interrupted, the command
// does not run, and the host is not asked again.
func TestMCPCancelDuringElicitation(t *testing.T) {
	ws, fake, d := touchDaemon(t, "call_c", "cancelled.txt", "should not be asked")
	var mu sync.Mutex
	asked := 0
	open, dismissed := make(chan struct{}, 1), make(chan struct{})
	elicit := func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		asked++
		mu.Unlock()
		select {
		case open <- struct{}{}:
		default:
		}
		// The dialog stays open until the host cancels the call: over
		// streamable HTTP the server's notifications/cancelled for it
		// would go on the cancelled call's stream, which is gone.
		select {
		case <-ctx.Done():
		case <-dismissed:
		}
		return &mcp.ElicitResult{Action: "cancel"}, nil
	}
	cs, sn := mcpConnect(t, d.MCPHTTP(""), elicit)
	// Before the session's close (cleanups run last first): a failure
	// must not leave the dialog open, or the close waits for it.
	var dismiss sync.Once
	t.Cleanup(func() { dismiss.Do(func() { close(dismissed) }) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	known := sn.threads()
	callCtx, callCancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "codex", Arguments: touchArgs(ws)})
		done <- err
	}()
	select {
	case <-open:
	case <-ctx.Done():
		t.Fatal("the host was never asked")
	}
	// The turn's events and the elicitation come on different streams
	// over streamable HTTP: the dialog may open before the sniffer has
	// read the turn's start.
	var thread string
	require.Eventually(t, func() bool {
		thread = sn.startedAfter(known)
		return thread != ""
	}, 10*time.Second, 10*time.Millisecond)
	callCancel()
	require.Error(t, <-done)
	dismiss.Do(func() { close(dismissed) })
	require.Eventually(t, func() bool {
		st, _ := apptest.ThreadTexts(t, d.RPC(t), thread)
		return len(st) == 1 && st[0] == "interrupted"
	}, 15*time.Second, 50*time.Millisecond)
	require.NoFileExists(t, filepath.Join(ws, "cancelled.txt"))
	require.Len(t, fake.Requests(), 1, "the interrupted turn asks the model nothing more")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, asked, "the host is asked once")
}
