package daemon_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
)

// With traces exported, an audit entry names the trace of the request
// that acted (its caller's traceparent) and the request's id.
func TestAuditEntryNamesTheTrace(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"text":"hi"}]}`)
	_, endpoint := startCollector(t)
	d := apptest.Start(t, append(apptest.FakeArgs(fake, "responses"), "--data-dir", t.TempDir(),
		"-c", `otel.exporter="otlp-http"`, "-c", `otel.endpoint="`+endpoint+`"`)...)
	resp := d.Do(t, http.MethodPost, "/v1/threads", "", map[string]any{})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var th api.HTTPThread
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&th))

	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, err := http.NewRequest(http.MethodDelete, d.URL("/v1/threads/"+th.Thread.ID), http.NoBody)
	require.NoError(t, err)
	req.Header.Set("Traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
	req.Header.Set("X-Request-Id", "ci-delete-1")
	del, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	del.Body.Close()
	require.Equal(t, http.StatusNoContent, del.StatusCode)

	var page api.HTTPAuditList
	require.Eventually(t, func() bool {
		page = apptest.GetJSON[api.HTTPAuditList](t, d, "/v1/audit?kind=thread_delete", "")
		return len(page.Data) == 1
	}, 20*time.Second, 20*time.Millisecond)
	e := page.Data[0]
	require.NotNil(t, e.TraceID)
	require.Equal(t, trace, *e.TraceID)
	require.Equal(t, "http#ci-delete-1", e.Client)
	require.Equal(t, th.Thread.ID, *e.ThreadID)
}
