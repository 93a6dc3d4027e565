package mcpserver_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/model/fakemodel"
)

// sniffer is a client transport that keeps the codex/event notifications
// (which the go-sdk client does not know) for the test to read.
type sniffer struct {
	mcp.Transport
	mu     sync.Mutex
	events []codexEvent
}

type codexEvent struct {
	Meta struct {
		RequestID any    `json:"requestId"`
		ThreadID  string `json:"threadId"`
	} `json:"_meta"`
	ID  string                     `json:"id"`
	Msg map[string]json.RawMessage `json:"msg"`
}

func (e codexEvent) typ() string {
	var s string
	_ = json.Unmarshal(e.Msg["type"], &s)
	return s
}

func (s *sniffer) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := s.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &sniffConn{Connection: c, s: s}, nil
}

// typesOf returns the msg types of a thread's events, in order.
func (s *sniffer) typesOf(thread string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events {
		if e.Meta.ThreadID == thread {
			out = append(out, e.typ())
		}
	}
	return out
}

type sniffConn struct {
	mcp.Connection
	s *sniffer
}

func (c *sniffConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return msg, err
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "codex/event" {
			var e codexEvent
			if json.Unmarshal(req.Params, &e) == nil {
				c.s.mu.Lock()
				c.s.events = append(c.s.events, e)
				c.s.mu.Unlock()
			}
			continue
		}
		return msg, nil
	}
}

// mcpConnect connects a go-sdk client that keeps the codex/event
// notifications; elicit answers elicitations (nil: the client declares no
// elicitation support).
func mcpConnect(t *testing.T, tr mcp.Transport, elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) (*mcp.ClientSession, *sniffer) {
	t.Helper()
	sn := &sniffer{Transport: tr}
	return apptest.MCPConnect(t, sn, elicit), sn
}

// requireHistory checks that the model's request of
// the reply turn replays the first turn: its prompt and its answer.
func requireHistory(t *testing.T, fake *fakemodel.Server, firstPrompt, firstAnswer, secondPrompt string) {
	t.Helper()
	for _, r := range fake.Requests() {
		body := string(r.Body)
		if strings.Contains(body, secondPrompt) {
			require.Contains(t, body, firstPrompt)
			require.Contains(t, body, firstAnswer)
			return
		}
	}
	t.Fatalf("no model request carried %q", secondPrompt)
}

// TestMCPStdioCodexThenReply spawns `appserver mcp` as an MCP host does:
// codex starts a thread, codex-reply continues it (the model sees the
// first turn), and the thread is then the daemon's like any other.
func TestMCPStdioCodexThenReply(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"text":"First answer.","chunks":2,"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}},{"text":"Second answer."}]}`)
	dataDir := t.TempDir()
	cmd := apptest.MCPCommand(t, append([]string{"--data-dir", dataDir, "--log-level", "warn"}, apptest.FakeArgs(fake, "responses")...)...)
	cs, sn := mcpConnect(t, &mcp.CommandTransport{Command: cmd}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	require.Len(t, tools.Tools, 2)

	text, thread, isErr := apptest.CallTool(t, ctx, cs, "codex", map[string]any{"prompt": "Say hello", "cwd": dataDir})
	require.False(t, isErr, text)
	require.Equal(t, "First answer.", text)
	require.NotEmpty(t, thread)
	types := sn.typesOf(thread)
	require.Equal(t, "session_configured", types[0])
	for _, want := range []string{"task_started", "agent_message_delta", "item_completed", "agent_message", "token_count"} {
		require.Contains(t, types, want)
	}
	require.Equal(t, "task_complete", types[len(types)-1])

	text, thread2, isErr := apptest.CallTool(t, ctx, cs, "codex-reply", map[string]any{"prompt": "And again", "threadId": thread})
	require.False(t, isErr, text)
	require.Equal(t, "Second answer.", text)
	require.Equal(t, thread, thread2)
	requireHistory(t, fake, "Say hello", "First answer.", "And again")

	// The deprecated conversationId still names the thread; an unknown one
	// is a clear isError result.
	text, _, isErr = apptest.CallTool(t, ctx, cs, "codex-reply", map[string]any{"prompt": "x", "conversationId": "01a2007c-e7fe-75b3-9b2c-d4ca854a9857"})
	require.True(t, isErr)
	require.Contains(t, text, `unknown threadId "01a2007c-e7fe-75b3-9b2c-d4ca854a9857"`)
	text, _, isErr = apptest.CallTool(t, ctx, cs, "codex", map[string]any{"prompt": "x", "sandbox": "everything"})
	require.True(t, isErr)
	require.Contains(t, text, "sandbox must be one of")

	require.NoError(t, cs.Close())
	d := apptest.Start(t, append([]string{"--data-dir", dataDir}, apptest.FakeArgs(fake, "responses")...)...)
	statuses, texts := apptest.ThreadTexts(t, d.RPC(t), thread)
	require.Equal(t, []string{"completed", "completed"}, statuses)
	require.Equal(t, []string{"user:Say hello", "agent:First answer.", "user:And again", "agent:Second answer."}, texts)
}
