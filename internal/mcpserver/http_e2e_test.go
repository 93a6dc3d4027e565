package mcpserver_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// TestMCPHTTPEndpoint runs the tools over streamable HTTP at /mcp: codex
// then codex-reply on one thread, approvals accepted and declined through
// elicitation, cancellation, two concurrent calls, and the thread as the
// websocket reads it.
func TestMCPHTTPEndpoint(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	touch := func(id, file string) string {
		b, _ := json.Marshal(map[string]any{"call_id": id, "name": "shell_command", "arguments": map[string]any{"command": "touch " + file}})
		return string(b)
	}
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"Say hello"},"text":"First answer."},
		{"match":{"user_text":"And again"},"text":"Second answer."},
		{"match":{"user_text":"touch yes"},"tool_calls":[`+touch("call_yes", "yes.txt")+`]},
		{"match":{"call_output":"call_yes"},"text":"touched yes"},
		{"match":{"user_text":"touch no"},"tool_calls":[`+touch("call_no", "no.txt")+`]},
		{"match":{"call_output":"call_no"},"text":"did not touch no"},
		{"match":{"user_text":"slow"},"delay_ms":60000,"text":"too late"},
		{"match":{"user_text":"parallel"},"text":"parallel answer","times":2,"event_delay_ms":50}
	]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)

	var elicited []string
	var mu sync.Mutex
	elicit := func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		elicited = append(elicited, req.Params.Message)
		mu.Unlock()
		if req.Params.Meta["codex_elicitation"] != "exec-approval" {
			return &mcp.ElicitResult{Action: "cancel"}, nil
		}
		if strings.Contains(req.Params.Message, "touch yes.txt") {
			return &mcp.ElicitResult{Action: "accept"}, nil
		}
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	cs, sn := mcpConnect(t, &mcp.StreamableClientTransport{Endpoint: d.URL("/mcp")}, elicit)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// codex, then codex-reply on the same thread.
	text, thread, isErr := apptest.CallTool(t, ctx, cs, "codex", map[string]any{"prompt": "Say hello", "cwd": ws})
	require.False(t, isErr, text)
	require.Equal(t, "First answer.", text)
	text, thread2, isErr := apptest.CallTool(t, ctx, cs, "codex-reply", map[string]any{"prompt": "And again", "threadId": thread})
	require.False(t, isErr, text)
	require.Equal(t, "Second answer.", text)
	require.Equal(t, thread, thread2)
	requireHistory(t, fake, "Say hello", "First answer.", "And again")
	statuses, texts := apptest.ThreadTexts(t, d.RPC(t), thread)
	require.Equal(t, []string{"completed", "completed"}, statuses)
	require.Equal(t, []string{"user:Say hello", "agent:First answer.", "user:And again", "agent:Second answer."}, texts)

	// Approvals: the host accepts one command and declines the other.
	args := map[string]any{"prompt": "touch yes", "cwd": ws, "approval-policy": "untrusted", "sandbox": "danger-full-access"}
	text, appr, isErr := apptest.CallTool(t, ctx, cs, "codex", args)
	require.False(t, isErr, text)
	require.Equal(t, "touched yes", text)
	require.FileExists(t, filepath.Join(ws, "yes.txt"))
	require.Contains(t, sn.typesOf(appr), "exec_approval_request")
	args["prompt"] = "touch no"
	text, _, isErr = apptest.CallTool(t, ctx, cs, "codex", args)
	require.False(t, isErr, text)
	require.Equal(t, "did not touch no", text)
	require.NoFileExists(t, filepath.Join(ws, "no.txt"))
	mu.Lock()
	seen := append([]string(nil), elicited...)
	mu.Unlock()
	require.Len(t, seen, 2)
	require.Contains(t, seen[0], "touch yes.txt")

	// Cancellation: notifications/cancelled interrupts the turn.
	known := sn.threads()
	slowCtx, slowCancel := context.WithCancel(ctx)
	slowDone := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(slowCtx, &mcp.CallToolParams{Name: "codex", Arguments: map[string]any{"prompt": "slow", "cwd": ws}})
		slowDone <- err
	}()
	var slow string
	require.Eventually(t, func() bool {
		slow = sn.startedAfter(known)
		return slow != ""
	}, 30*time.Second, 20*time.Millisecond)
	slowCancel()
	require.Error(t, <-slowDone)
	require.Eventually(t, func() bool {
		st, _ := apptest.ThreadTexts(t, d.RPC(t), slow)
		return len(st) == 1 && st[0] == "interrupted"
	}, 20*time.Second, 50*time.Millisecond)

	// Two concurrent calls run on two threads.
	var wg sync.WaitGroup
	results := make([]string, 2)
	threads := make([]string, 2)
	for i := range 2 {
		wg.Go(func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "codex", Arguments: map[string]any{"prompt": "parallel", "cwd": ws}})
			if err == nil && !res.IsError {
				results[i] = res.Content[0].(*mcp.TextContent).Text
				b, _ := json.Marshal(res.StructuredContent)
				var sc struct{ ThreadID string }
				_ = json.Unmarshal(b, &sc)
				threads[i] = sc.ThreadID
			}
		})
	}
	wg.Wait()
	require.Equal(t, []string{"parallel answer", "parallel answer"}, results)
	require.NotEqual(t, threads[0], threads[1])
	for _, th := range threads {
		types := sn.typesOf(th)
		require.Equal(t, "session_configured", types[0])
		require.Equal(t, "task_complete", types[len(types)-1])
	}
}

// threads returns the threads the session has seen events of.
func (s *sniffer) threads() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]bool{}
	for _, e := range s.events {
		out[e.Meta.ThreadID] = true
	}
	return out
}

// startedAfter returns a thread not in known whose turn has started.
func (s *sniffer) startedAfter(known map[string]bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.events {
		if !known[e.Meta.ThreadID] && e.typ() == "task_started" {
			return e.Meta.ThreadID
		}
	}
	return ""
}
