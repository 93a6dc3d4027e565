package turns_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// thread/delete removes a thread with its history, loaded or not; every
// connection hears thread/deleted.
func TestThreadDelete(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[],"exhausted_text":"ok"}`)
			d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, "responses")...)...)
			r := d.RPC(t)
			watcher := d.RPC(t)
			threadID := apptest.StartThread(t, r, nil)
			r.Call("turn/start", apptest.Input(threadID, "hello"))
			r.Until("turn/completed")
			// A thread is listed once a user message has started it.
			keep := apptest.StartThread(t, r, nil)
			r.Call("turn/start", apptest.Input(keep, "keep me"))
			r.Until("turn/completed")

			res := r.Call("thread/delete", map[string]any{"threadId": threadID})
			apptest.ValidateSchema(t, "ThreadDeleteResponse", res)
			note := watcher.Until("thread/deleted")
			apptest.ValidateSchema(t, "ThreadDeletedNotification", note.Params)
			require.JSONEq(t, `{"threadId":"`+threadID+`"}`, string(note.Params))

			f := r.CallRaw("thread/read", map[string]any{"threadId": threadID})
			require.NotNil(t, f.Error, "the thread is gone")
			f = r.CallRaw("thread/delete", map[string]any{"threadId": threadID})
			require.NotNil(t, f.Error, "a second delete finds nothing")
			var list struct {
				Data []struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal(r.Call("thread/list", map[string]any{}), &list))
			var ids []string
			for _, th := range list.Data {
				ids = append(ids, th.ID)
			}
			require.NotContains(t, ids, threadID)
			require.Contains(t, ids, keep)
		})
	}
}
