package turns_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// thread/metadata/update patches a thread's Git metadata field by field;
// the thread keeps it across a restart.
func TestThreadMetadataUpdate(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			d := apptest.Start(t, storeArgs...)
			r := d.RPC(t)
			threadID := apptest.StartThread(t, r, nil)
			type thread struct {
				GitInfo         json.RawMessage `json:"gitInfo"`
				DaybreakEnabled *bool           `json:"daybreakEnabled"`
			}
			update := func(params map[string]any) thread {
				t.Helper()
				params["threadId"] = threadID
				res := r.Call("thread/metadata/update", params)
				apptest.ValidateSchema(t, "ThreadMetadataUpdateResponse", res)
				var out struct {
					Thread thread `json:"thread"`
				}
				require.NoError(t, json.Unmarshal(res, &out))
				return out.Thread
			}
			th := update(map[string]any{"gitInfo": map[string]any{"sha": "abc123", "branch": "main"}})
			require.JSONEq(t, `{"sha":"abc123","branch":"main","originUrl":null}`, string(th.GitInfo))
			th = update(map[string]any{"gitInfo": map[string]any{"sha": nil, "originUrl": "https://example.com/r.git"}, "daybreakEnabled": true})
			require.JSONEq(t, `{"sha":null,"branch":"main","originUrl":"https://example.com/r.git"}`, string(th.GitInfo))
			require.NotNil(t, th.DaybreakEnabled)
			require.True(t, *th.DaybreakEnabled)
			th = update(map[string]any{"projectId": ""})
			require.JSONEq(t, `{"sha":null,"branch":"main","originUrl":"https://example.com/r.git"}`, string(th.GitInfo), "an absent gitInfo changes nothing")

			for _, bad := range []map[string]any{
				{"threadId": threadID, "gitInfo": map[string]any{"branch": ""}},
				{"threadId": threadID, "projectId": "p1"},
				{"threadId": "00000000-0000-7000-8000-000000000000"},
			} {
				f := r.CallRaw("thread/metadata/update", bad)
				require.NotNil(t, f.Error, "%v", bad)
			}

			d.Stop(t)
			r = apptest.Start(t, storeArgs...).RPC(t)
			var read struct {
				Thread thread `json:"thread"`
			}
			require.NoError(t, json.Unmarshal(r.Call("thread/read", map[string]any{"threadId": threadID}), &read))
			require.JSONEq(t, `{"sha":null,"branch":"main","originUrl":"https://example.com/r.git"}`, string(read.Thread.GitInfo))
		})
	}
}
