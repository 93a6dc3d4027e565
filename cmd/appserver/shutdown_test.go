package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
)

// TestShutdownOrder pins what the order of runServe's shutdown promises
// to clients: a turn running at shutdown is interrupted while the
// websocket and the HTTP event stream are still open, so both hear its
// turn/completed before they end; the exec session the model left running
// is killed while the websocket is open and the store is not yet closed,
// so its item completes on the wire and in the transcript a restarted
// daemon reads.
func TestShutdownOrder(t *testing.T) {
	ws := teWorkspace(t)
	execCall := `{"call_id":"call_s","name":"exec_command","arguments":{"cmd":"exec sleep 60","yield_time_ms":300}}`
	fake := startFake(t, `{"steps":[
		{"match":{"user_text":"start"},"tool_calls":[`+execCall+`]},
		{"match":{"call_output":"call_s"},"text":"left running"},
		{"match":{"user_text":"hang"},"tool_calls":[`+teShellCall("call_h", "sleep 60")+`]}]}`)
	dataDir := t.TempDir()
	args := append([]string{"--data-dir", dataDir, "--shutdown-grace-period", "1s"}, fakeArgs(fake, "responses")...)
	d := startDaemon(t, args...)
	r := newRPC(t, d)
	threadID := startThread(t, r, map[string]any{"cwd": ws, "sandbox": "danger-full-access", "approvalPolicy": "never"})
	frames := teTurn(t, r, teInput(threadID, "start"), nil)
	require.Equal(t, "inProgress", teItems(t, frames, "started")["call_s"].Status, "the session outlives its turn")
	require.NotContains(t, teItems(t, frames, "completed"), "call_s")

	// An HTTP event stream on the thread, attached before the next turn.
	events := httpDo(t, d, "GET", "/v1/threads/"+threadID+"/events", "", nil)
	require.Equal(t, http.StatusOK, events.StatusCode)
	sse := bufioScanner(events)
	require.True(t, sse.Scan(), "the stream opens with its retry line")
	sseMethods := make(chan []string, 1)
	go func() {
		var seen []string
		for sse.Scan() {
			if data, ok := strings.CutPrefix(sse.Text(), "data: "); ok {
				var ev api.HTTPEvent
				if json.Unmarshal([]byte(data), &ev) == nil {
					seen = append(seen, ev.Method+itemID(ev.Method, ev.Params))
				}
			}
		}
		sseMethods <- seen
	}()

	// A turn that is still running when the daemon stops.
	r.seen = nil
	r.call("turn/start", teInput(threadID, "hang"))
	for {
		f := r.until("item/started")
		var p struct {
			Item teItem `json:"item"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &p))
		if p.Item.ID == "call_h" {
			break
		}
	}
	type wsEnd struct {
		frames []frame
		err    error
	}
	wsDone := make(chan wsEnd, 1)
	go func() {
		var got []frame
		for {
			f, err := r.read(30 * time.Second)
			if err != nil {
				wsDone <- wsEnd{got, err}
				return
			}
			got = append(got, f)
		}
	}()
	d.stop(t)

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
	seen := <-sseMethods
	require.GreaterOrEqual(t, len(seen), 2)
	require.Equal(t, want, seen[len(seen)-2:], "%v", seen)

	// The session's item reached the store before it closed.
	d2 := startDaemon(t, args...)
	r2 := newRPC(t, d2)
	turns := readTurns(t, r2, threadID)
	require.Len(t, turns, 2)
	require.Equal(t, "interrupted", turns[1].Status)
	var session *teItem
	for i, it := range turns[0].Items {
		if it.ID == "call_s" {
			session = &turns[0].Items[i]
		}
	}
	if session == nil {
		require.Fail(t, "the exec session's item is not in the transcript", "%+v", turns[0].Items)
	}
	require.Equal(t, "failed", session.Status, "killed at shutdown")
}

// itemID is ":" and the item's id for item/completed, "" otherwise.
func itemID(method string, params json.RawMessage) string {
	if method != "item/completed" {
		return ""
	}
	var p struct {
		Item teItem `json:"item"`
	}
	_ = json.Unmarshal(params, &p)
	return ":" + p.Item.ID
}

// readTurn is a turn as thread/read returns it.
type readTurn struct {
	Status string   `json:"status"`
	Items  []teItem `json:"items"`
}

// readTurns reads a thread's turns with their items.
func readTurns(t *testing.T, r *rpc, threadID string) []readTurn {
	t.Helper()
	var read struct {
		Thread struct {
			Turns []readTurn `json:"turns"`
		} `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(r.call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true}), &read))
	return read.Thread.Turns
}
