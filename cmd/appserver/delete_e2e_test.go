package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// thread/delete removes a thread with its history, loaded or not; every
// connection hears thread/deleted.
func TestThreadDelete(t *testing.T) {
	for name, storeArgs := range storeBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := startFake(t, `{"steps":[{"text":"ok"}]}`)
			d := startDaemon(t, append(storeArgs, fakeArgs(fake, "responses")...)...)
			r := newRPC(t, d)
			watcher := newRPC(t, d)
			threadID := startThread(t, r, nil)
			r.call("turn/start", teInput(threadID, "hello"))
			r.until("turn/completed")
			keep := startThread(t, r, nil)

			res := r.call("thread/delete", map[string]any{"threadId": threadID})
			schemaValidate(t, "ThreadDeleteResponse", res)
			note := watcher.until("thread/deleted")
			schemaValidate(t, "ThreadDeletedNotification", note.Params)
			require.JSONEq(t, `{"threadId":"`+threadID+`"}`, string(note.Params))

			f := r.callRaw("thread/read", map[string]any{"threadId": threadID})
			require.NotNil(t, f.Error, "the thread is gone")
			f = r.callRaw("thread/delete", map[string]any{"threadId": threadID})
			require.NotNil(t, f.Error, "a second delete finds nothing")
			var list struct {
				Data []struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal(r.call("thread/list", map[string]any{}), &list))
			var ids []string
			for _, th := range list.Data {
				ids = append(ids, th.ID)
			}
			require.NotContains(t, ids, threadID)
			require.Contains(t, ids, keep)
		})
	}
}
