package eventlog_test

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/store/sqlite"
)

// With event_log off a turn's notifications are numbered for the clients
// but nothing reaches the events table, and webhooks, which are delivered
// from the log, are not served.
func TestEventLogOff(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			dataDir := t.TempDir()
			fake := apptest.StartFake(t, `{"steps":[{"text":"one two three","chunks":3}]}`)
			args := append([]string{"--data-dir", dataDir}, apptest.FakeArgs(fake, "responses")...)
			if !on {
				args = append(args, "-c", "event_log=false")
			}
			d := apptest.Start(t, args...)
			r := apptest.RPC(t, d.Addr, "", map[string]any{"eventSeq": true})
			threadID := apptest.StartThread(t, r, nil)
			require.Equal(t, "completed", apptest.RunTurn(t, r, threadID, "count").Turn.Status)
			require.NotEmpty(t, numbered(r.Seen), "the clients get numbered notifications")
			resp := d.Do(t, "GET", "/v1/webhooks", "", nil)
			resp.Body.Close()
			d.Stop(t)

			st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(dataDir, "appserver.db")})
			require.NoError(t, err)
			defer st.Close()
			_, seqs := eventLogBytes(t, st, threadID)
			if on {
				require.NotEmpty(t, seqs)
				require.Equal(t, http.StatusOK, resp.StatusCode)
			} else {
				require.Empty(t, seqs, "nothing stored")
				require.Equal(t, http.StatusNotImplemented, resp.StatusCode)
			}
		})
	}
}
