package server_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// Past max_running_turns a turn/start is answered -32001 with the reason,
// and the HTTP API's 503 with Retry-After; turns below the limit run, and
// so does the refused one once the running one has ended.
func TestRunningTurnLimitIsTheOverloadRefusal(t *testing.T) {
	fake, d, c := apptest.StartWithFake(t, `{"steps":[{"text":"never finishes","fail":{"kind":"stall","after_events":2}},{"text":"two"},{"text":"three"}]}`,
		"-c", "max_running_turns=1")
	a := apptest.StartThread(t, c, nil)
	b := apptest.StartThread(t, c, nil)
	first := apptest.StartTurn(t, c, a, "hi")
	c.UntilInTurn("turn/started")

	refused := c.CallRaw("turn/start", apptest.Input(b, "hi"))
	require.NotNil(t, refused.Error)
	require.Equal(t, -32001, refused.Error.Code)
	require.Equal(t, "Server overloaded; retry later.", refused.Error.Message)
	var data struct {
		Reason string `json:"reason"`
	}
	require.NoError(t, json.Unmarshal(refused.Error.Data, &data))
	require.Contains(t, data.Reason, "max_running_turns")

	resp := d.Do(t, http.MethodPost, "/v1/threads/"+b+"/turns", "", map[string]any{"input": []any{map[string]any{"type": "text", "text": "hi"}}})
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))

	// The stalling step is the first turn's only once its request reached
	// the fake model: interrupted before that, the turn would leave the
	// step to the next turn's request.
	require.Eventually(t, func() bool { return len(fake.Requests()) == 1 }, 10*time.Second, time.Millisecond)
	c.Call("turn/interrupt", map[string]any{"threadId": a, "turnId": first})
	c.Until("turn/completed")
	// The ended turn gives its place back just after its turn/completed
	// (docs/protocol.md §2.5): a start sent at once may still be refused,
	// and is admitted on a retry, as a refused client is told to do.
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := c.CallRaw("turn/start", apptest.Input(b, "hi"))
		if res.Error == nil {
			break
		}
		require.Equal(t, -32001, res.Error.Code, "%+v", res.Error)
		require.True(t, time.Now().Before(deadline), "still refused 10 s after the running turn ended")
		time.Sleep(5 * time.Millisecond)
	}
	c.Until("turn/completed")
}
