package turns_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// A thread's read state is kept with it: marked read, it reads as read
// after the daemon restarts on the same store; a turn finished later is
// the first unread one; a stale revision changes nothing.
func TestReadStateSurvivesRestart(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[{"text":"ok","times":5}]}`)
			args := append(storeArgs, apptest.FakeArgs(fake, "responses")...)
			type readState struct {
				FirstUnread *struct {
					Type   string `json:"type"`
					TurnID string `json:"turnId"`
				} `json:"firstUnread"`
				Revision string `json:"revision"`
			}
			read := func(r *apptest.Client, id string) readState {
				t.Helper()
				var res struct {
					ReadState *readState `json:"readState"`
				}
				require.NoError(t, json.Unmarshal(r.Call("thread/read", map[string]any{"threadId": id}), &res))
				require.NotNil(t, res.ReadState)
				return *res.ReadState
			}
			d := apptest.Start(t, args...)
			r := d.RPC(t)
			id := apptest.StartThread(t, r, nil)
			var started struct {
				Turn struct {
					ID string `json:"id"`
				} `json:"turn"`
			}
			require.NoError(t, json.Unmarshal(r.Call("turn/start", apptest.Input(id, "hello")), &started))
			r.Until("turn/completed")
			before := read(r, id)
			require.NotNil(t, before.FirstUnread)
			require.Equal(t, started.Turn.ID, before.FirstUnread.TurnID)
			var upd struct {
				ReadState readState `json:"readState"`
			}
			require.NoError(t, json.Unmarshal(r.Call("thread/readState/update", map[string]any{
				"threadId": id, "expectedRevision": before.Revision, "operation": map[string]any{"type": "read"},
			}), &upd))
			require.Nil(t, upd.ReadState.FirstUnread)
			d.Stop(t)

			d = apptest.Start(t, args...)
			r = d.RPC(t)
			require.Equal(t, upd.ReadState, read(r, id))
			f := r.CallRaw("thread/readState/update", map[string]any{
				"threadId": id, "expectedRevision": before.Revision, "operation": map[string]any{"type": "unread"},
			})
			require.NotNil(t, f.Error)
			require.Equal(t, "read state changed", f.Error.Message)
			require.Equal(t, upd.ReadState, read(r, id))

			r.Call("thread/resume", map[string]any{"threadId": id})
			require.NoError(t, json.Unmarshal(r.Call("turn/start", apptest.Input(id, "again")), &started))
			r.Until("turn/completed")
			after := read(r, id)
			require.NotNil(t, after.FirstUnread)
			require.Equal(t, started.Turn.ID, after.FirstUnread.TurnID)
			require.NotEqual(t, upd.ReadState.Revision, after.Revision)
		})
	}
}

// A finished turn changes the thread's read state, and every connection
// that may see the thread hears it (thread/readState/changed, before the
// thread goes idle, as the reference sends it): the TUI marks a thread it
// shows read on hearing this, so its resume picker does not list that
// thread as unread.
func TestReadStateChangedWhenTurnEnds(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"text":"ok","times":5}]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	r := d.RPC(t)
	id := apptest.StartThread(t, r, nil)
	var started struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	require.NoError(t, json.Unmarshal(r.Call("turn/start", apptest.Input(id, "hello")), &started))
	var methods []string
	var changed struct {
		ThreadID  string `json:"threadId"`
		ReadState struct {
			FirstUnread *struct {
				Type   string `json:"type"`
				TurnID string `json:"turnId"`
			} `json:"firstUnread"`
			Revision string `json:"revision"`
		} `json:"readState"`
	}
	for _, f := range r.Through(func(f apptest.Frame) bool { return f.Method == "turn/completed" }) {
		switch f.Method {
		case "thread/readState/changed":
			require.NoError(t, json.Unmarshal(f.Params, &changed))
			methods = append(methods, f.Method)
		case "thread/status/changed", "turn/completed":
			methods = append(methods, f.Method)
		}
	}
	require.Equal(t, []string{"thread/status/changed", "thread/readState/changed", "thread/status/changed", "turn/completed"}, methods)
	require.Equal(t, id, changed.ThreadID)
	require.NotNil(t, changed.ReadState.FirstUnread)
	require.Equal(t, "turn", changed.ReadState.FirstUnread.Type)
	require.Equal(t, started.Turn.ID, changed.ReadState.FirstUnread.TurnID)

	var upd struct {
		ReadState struct {
			FirstUnread any `json:"firstUnread"`
		} `json:"readState"`
	}
	require.NoError(t, json.Unmarshal(r.Call("thread/readState/update", map[string]any{
		"threadId": id, "expectedRevision": changed.ReadState.Revision, "operation": map[string]any{"type": "read"},
	}), &upd), "the announced revision is the one to mark read with")
	require.Nil(t, upd.ReadState.FirstUnread)
}
