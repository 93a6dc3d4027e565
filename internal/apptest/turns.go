package apptest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/store/pgtest"
)

// TurnResult is what tests read of a turn/completed notification.
type TurnResult struct {
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

// StartThread starts a thread in a new temporary directory (params in
// extra add to or replace the cwd), waits for thread/started and returns
// the thread's id.
func StartThread(t testing.TB, c *Client, extra map[string]any) string {
	t.Helper()
	params := map[string]any{"cwd": t.TempDir()}
	for k, v := range extra {
		params[k] = v
	}
	var res struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(c.Call("thread/start", params), &res))
	c.Until("thread/started")
	return res.Thread.ID
}

// Input is the params of a turn/start of text on the thread.
func Input(threadID, text string) map[string]any {
	return map[string]any{"threadId": threadID, "input": []any{map[string]any{"type": "text", "text": text}}}
}

// StartTurn starts a turn of text on the thread and returns its id.
func StartTurn(t testing.TB, c *Client, threadID, text string) string {
	t.Helper()
	var res struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	require.NoError(t, json.Unmarshal(c.Call("turn/start", Input(threadID, text)), &res))
	return res.Turn.ID
}

// RunTurn starts a turn of text on the thread and returns its
// turn/completed.
func RunTurn(t testing.TB, c *Client, threadID, text string) TurnResult {
	t.Helper()
	c.Call("turn/start", Input(threadID, text))
	return Decode[TurnResult](t, c.Until("turn/completed").Params)
}

// TurnCompleted waits for turn/completed and returns it.
func TurnCompleted(t testing.TB, c *Client) TurnResult {
	t.Helper()
	return Decode[TurnResult](t, c.Until("turn/completed").Params)
}

// Turn runs one turn of params (turn/start's) on c and returns every frame
// from the turn/start response to turn/completed, answering server
// requests with answer (nil: fail the test on any).
func Turn(t testing.TB, c *Client, params map[string]any, answer func(f Frame) any) []Frame {
	t.Helper()
	c.Seen = nil
	c.Call("turn/start", params)
	var frames []Frame
	handle := func(f Frame) bool {
		frames = append(frames, f)
		if f.IsRequest() {
			require.NotNil(t, answer, "unexpected server request %s", f.Method)
			c.Reply(f.ID, answer(f))
		}
		return f.Method == "turn/completed"
	}
	pending := c.Seen
	c.Seen = nil
	for _, f := range pending {
		if handle(f) {
			return frames
		}
	}
	for {
		if handle(c.Next()) {
			return frames
		}
	}
}

// Item is a commandExecution or fileChange item as notifications and
// thread/read carry it.
type Item struct {
	Type             string            `json:"type"`
	ID               string            `json:"id"`
	Status           string            `json:"status"`
	Command          string            `json:"command"`
	Cwd              string            `json:"cwd"`
	ProcessID        *string           `json:"processId"`
	Source           string            `json:"source"`
	CommandActions   []json.RawMessage `json:"commandActions"`
	AggregatedOutput *string           `json:"aggregatedOutput"`
	ExitCode         *int              `json:"exitCode"`
	DurationMs       *int64            `json:"durationMs"`
	Changes          []struct {
		Path string          `json:"path"`
		Kind json.RawMessage `json:"kind"`
		Diff string          `json:"diff"`
	} `json:"changes"`
}

// Items returns the items of frames' item/<phase> notifications
// ("started", "completed"), by item id (a tool call's call id).
func Items(t testing.TB, frames []Frame, phase string) map[string]Item {
	t.Helper()
	out := map[string]Item{}
	for _, f := range frames {
		if f.Method != "item/"+phase {
			continue
		}
		var p struct {
			Item Item `json:"item"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &p))
		out[p.Item.ID] = p.Item
	}
	return out
}

// ReadThread is what tests check of a thread thread/read returns.
type ReadThread struct {
	Status struct {
		Type string `json:"type"`
	} `json:"status"`
	Turns []ReadTurn `json:"turns"`
}

// ReadTurn is a turn as thread/read returns it, its items as they came.
type ReadTurn struct {
	ID          string            `json:"id"`
	Status      string            `json:"status"`
	ItemsView   string            `json:"itemsView"`
	Items       []json.RawMessage `json:"items"`
	CompletedAt *int64            `json:"completedAt"`
	Error       json.RawMessage   `json:"error"`
}

// ItemsOf decodes the turn's items.
func (tu ReadTurn) ItemsOf(t testing.TB) []Item {
	t.Helper()
	out := make([]Item, len(tu.Items))
	for i, raw := range tu.Items {
		out[i] = Decode[Item](t, raw)
	}
	return out
}

// ReadTurns reads a thread's turns with their items.
func ReadTurns(t testing.TB, c *Client, threadID string) []ReadTurn {
	t.Helper()
	var read struct {
		Thread ReadThread `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(c.Call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true}), &read))
	return read.Thread.Turns
}

// Workspace is a new temporary directory, symlinks resolved, holding
// notes.txt ("one\n").
func Workspace(t testing.TB) string {
	t.Helper()
	ws := RealTempDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\n"), 0o644))
	return ws
}

// RealTempDir is t.TempDir with symlinks resolved, as the daemon reports
// paths.
func RealTempDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return dir
}

// StoreBackends are the flags of a daemon on each store: the embedded one
// in a new data directory, and a new Postgres database (pgtest).
func StoreBackends(t testing.TB) map[string][]string {
	t.Helper()
	return map[string][]string{
		"embedded": {"--data-dir", t.TempDir()},
		"postgres": {"--database-url", pgtest.URL(t), "--migrate"},
	}
}

// ToolCallParams are item/tool/call's params.
type ToolCallParams struct {
	ThreadID  string          `json:"threadId"`
	TurnID    string          `json:"turnId"`
	CallID    string          `json:"callId"`
	Namespace *string         `json:"namespace"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolCall waits for the next item/tool/call request and returns its id
// (for Reply) and params.
func ToolCall(t testing.TB, c *Client) (json.RawMessage, ToolCallParams) {
	t.Helper()
	f := c.Until("item/tool/call")
	require.True(t, f.IsRequest(), "item/tool/call is a request")
	return f.ID, Decode[ToolCallParams](t, f.Params)
}

// ToolAnswer is a dynamic tool call's answer of one text.
func ToolAnswer(text string, success bool) map[string]any {
	return map[string]any{"contentItems": []any{map[string]any{"type": "inputText", "text": text}}, "success": success}
}

// Sync makes a round trip on c: once it returns, the daemon has read
// every frame c sent before.
func Sync(c *Client) { c.Call("thread/loaded/list", map[string]any{}) }

// ThreadTexts reads a thread with thread/read and returns its turns'
// statuses and its user and agent messages' texts ("user:…", "agent:…").
func ThreadTexts(t testing.TB, c *Client, threadID string) (statuses, texts []string) {
	t.Helper()
	for _, tu := range ReadTurns(t, c, threadID) {
		statuses = append(statuses, tu.Status)
		for _, raw := range tu.Items {
			it := Decode[struct {
				Type    string `json:"type"`
				Text    string `json:"text"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			}](t, raw)
			switch it.Type {
			case "agentMessage":
				texts = append(texts, "agent:"+it.Text)
			case "userMessage":
				for _, c := range it.Content {
					texts = append(texts, "user:"+c.Text)
				}
			}
		}
	}
	return statuses, texts
}

// SocketDir is a temporary directory whose path is short enough for a
// unix socket (t.TempDir's may not be), removed when the test ends.
func SocketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "as")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
