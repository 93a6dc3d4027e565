package serve_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// TestShutdownOrder pins what the order of serve's shutdown promises
// to clients: a turn running at shutdown is interrupted while the
// websocket and the HTTP event stream are still open, so both hear its
// turn/completed before they end; the exec session the model left running
// is killed while the websocket is open and the store is not yet closed,
// so its item completes on the wire and in the transcript a restarted
// daemon reads.
func TestShutdownOrder(t *testing.T) {
	ws := apptest.Workspace(t)
	execCall := `{"call_id":"call_s","name":"exec_command","arguments":{"cmd":"exec sleep 60","yield_time_ms":300}}`
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"start"},"tool_calls":[`+execCall+`]},
		{"match":{"call_output":"call_s"},"text":"left running"},
		{"match":{"user_text":"hang"},"tool_calls":[`+apptest.ShellCall("call_h", "sleep 60")+`]}]}`)
	dataDir := t.TempDir()
	args := append([]string{"--data-dir", dataDir, "--shutdown-grace-period", "1s"}, apptest.FakeArgs(fake, "responses")...)
	d := apptest.Start(t, args...)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws, "sandbox": "danger-full-access", "approvalPolicy": "never"})
	frames := apptest.Turn(t, r, apptest.Input(threadID, "start"), nil)
	require.Equal(t, "inProgress", apptest.Items(t, frames, "started")["call_s"].Status, "the session outlives its turn")
	require.NotContains(t, apptest.Items(t, frames, "completed"), "call_s")

	// An HTTP event stream on the thread, attached before the next turn.
	events := d.OpenEvents(t, "/v1/threads/"+threadID+"/events", "")

	// A turn that is still running when the daemon stops.
	r.Seen = nil
	r.Call("turn/start", apptest.Input(threadID, "hang"))
	for {
		f := r.Until("item/started")
		var p struct {
			Item apptest.Item `json:"item"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &p))
		if p.Item.ID == "call_h" {
			break
		}
	}
	type wsEnd struct {
		frames []apptest.Frame
		err    error
	}
	wsDone := make(chan wsEnd, 1)
	go func() {
		var got []apptest.Frame
		for {
			f, err := r.Read(30 * time.Second)
			if err != nil {
				wsDone <- wsEnd{got, err}
				return
			}
			got = append(got, f)
		}
	}()
	d.Stop(t)

	end := <-wsDone
	require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(end.err), "%v", end.err)
	// Turns stop first, then the tools: the session is killed after the
	// turn's end, and both reach the websocket and the event stream
	// before they close.
	var wsMethods []string
	for _, f := range end.frames {
		wsMethods = append(wsMethods, f.Method+itemID(f.Method, f.Params))
	}
	want := []string{"turn/completed", "item/completed:call_s"}
	require.GreaterOrEqual(t, len(wsMethods), 2)
	require.Equal(t, want, wsMethods[len(wsMethods)-2:], "%v", wsMethods)
	var seen []string
	for {
		ev, ok := events.Next()
		if !ok {
			break
		}
		seen = append(seen, ev.Method+itemID(ev.Method, ev.Params))
	}
	require.GreaterOrEqual(t, len(seen), 2)
	require.Equal(t, want, seen[len(seen)-2:], "%v", seen)

	// The session's item reached the store before it closed.
	d2 := apptest.Start(t, args...)
	r2 := d2.RPC(t)
	turns := apptest.ReadTurns(t, r2, threadID)
	require.Len(t, turns, 2)
	require.Equal(t, "interrupted", turns[1].Status)
	var session *apptest.Item
	items := turns[0].ItemsOf(t)
	for i, it := range items {
		if it.ID == "call_s" {
			session = &items[i]
		}
	}
	if session == nil {
		require.Fail(t, "the exec session's item is not in the transcript", "%+v", items)
	}
	require.Equal(t, "failed", session.Status, "killed at shutdown")
}

// itemID is ":" and the item's id for item/completed, "" otherwise.
func itemID(method string, params json.RawMessage) string {
	if method != "item/completed" {
		return ""
	}
	var p struct {
		Item apptest.Item `json:"item"`
	}
	_ = json.Unmarshal(params, &p)
	return ":" + p.Item.ID
}
