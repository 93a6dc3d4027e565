package webhook_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
)

const otherToken = "other-principal-secret-token"

// createHook posts a subscription as token and returns the answer's
// status and body.
func createHook(t *testing.T, d *apptest.Daemon, token string, body any) (int, api.HTTPWebhook, string) {
	t.Helper()
	resp := d.Do(t, "POST", "/v1/webhooks", token, body)
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	var h api.HTTPWebhook
	if resp.StatusCode == http.StatusCreated {
		require.NoError(t, json.Unmarshal(buf.Bytes(), &h))
	}
	return resp.StatusCode, h, buf.String()
}

// Subscriptions over the HTTP API, on both stores: a principal creates,
// sees and deletes its own only (another's is a 404 to it), may not allow
// private addresses, and gets specific errors for bad input; the
// operator's subscription delivers a turn's notice, signed, after a 500,
// and the delivery log shows the 500 then the success of the same event
// id; the subscription and its log survive a restart, whose daemon goes on
// delivering; once deleted, it is gone.
func TestWebhookSubscriptionsOverHTTP(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[{"match":{"user_text":"one"},"text":"1"},{"match":{"user_text":"two"},"text":"2"},{"match":{"user_text":"mine"},"text":"3"}]}`)
			args := append(append(storeArgs, apptest.FakeArgs(fake, "responses")...), apptest.AuthArgs()...)
			args = append(args, "-c", `http_api.principals.other.token_sha256="`+apptest.SHA256Hex(otherToken)+`"`)
			d := apptest.Start(t, args...)

			// A principal's subscription, and what it may not do.
			code, ci, body := createHook(t, d, apptest.CIToken, map[string]any{"url": "https://hooks.invalid/ci", "events": []string{"turn.completed"}})
			require.Equal(t, http.StatusCreated, code, body)
			require.True(t, strings.HasPrefix(*ci.Secret, "whsec_"), "a made secret, answered once")
			require.Equal(t, "ci", *ci.Owner)
			for _, bad := range []struct {
				body any
				code int
				says string
			}{
				{map[string]any{"url": "http://127.0.0.1:1/x", "allowPrivate": true}, http.StatusForbidden, "operator's only"},
				{map[string]any{"url": "ftp://hooks.example/"}, http.StatusBadRequest, "http:// or https://"},
				{map[string]any{"url": "https://user:pw@hooks.example/"}, http.StatusBadRequest, "credentials"},
				{map[string]any{"url": "https://hooks.example/\u0000"}, http.StatusBadRequest, "NUL"},
				{map[string]any{"url": "https://hooks.example/", "events": []string{"turn.done"}}, http.StatusBadRequest, "unknown event type"},
				{map[string]any{"url": "https://hooks.example/", "secret": "s3cret"}, http.StatusBadRequest, "whsec_"},
				{map[string]any{"url": "https://hooks.example/", "threadId": "9a4e2c1e-0000-7000-8000-000000000000"}, http.StatusNotFound, "not found"},
				{map[string]any{"url": "https://hooks.example/" + strings.Repeat("a", 2<<20)}, http.StatusRequestEntityTooLarge, ""},
			} {
				code, _, body := createHook(t, d, apptest.CIToken, bad.body)
				require.Equal(t, bad.code, code, body)
				require.Contains(t, body, bad.says)
			}
			mine := apptest.GetJSON[api.HTTPWebhookList](t, d, "/v1/webhooks", apptest.CIToken)
			require.Len(t, mine.Data, 1)
			require.Nil(t, mine.Data[0].Secret, "the secret is answered at creation only")
			require.Empty(t, apptest.GetJSON[api.HTTPWebhookList](t, d, "/v1/webhooks", otherToken).Data)
			require.Equal(t, http.StatusNotFound, d.Do(t, "GET", "/v1/webhooks/"+ci.ID, otherToken, nil).StatusCode)
			require.Equal(t, http.StatusNotFound, d.Do(t, "GET", "/v1/webhooks/"+ci.ID+"/deliveries", otherToken, nil).StatusCode)
			require.Equal(t, http.StatusNotFound, d.Do(t, "DELETE", "/v1/webhooks/"+ci.ID, otherToken, nil).StatusCode)
			require.Len(t, apptest.GetJSON[api.HTTPWebhookList](t, d, "/v1/webhooks", apptest.CIToken).Data, 1, "still there")

			// The operator's subscription to a local receiver.
			recv := newHookReceiver(t)
			code, op, body := createHook(t, d, apptest.OperatorToken, map[string]any{"url": recv.URL + "/hook", "secret": e2eWebhookSecret,
				"events": []string{"turn.completed"}, "allowPrivate": true})
			require.Equal(t, http.StatusCreated, code, body)
			require.Nil(t, op.Owner)
			require.Len(t, apptest.GetJSON[api.HTTPWebhookList](t, d, "/v1/webhooks", apptest.OperatorToken).Data, 2, "the operator sees all")
			require.Equal(t, http.StatusNotFound, d.Do(t, "GET", "/v1/webhooks/"+op.ID, apptest.CIToken, nil).StatusCode)

			recv.setFailing(true)
			r := apptest.RPC(t, d.Addr, apptest.OperatorToken, nil)
			thread := apptest.StartThread(t, r, nil)
			one := apptest.RunTurn(t, r, thread, "one")
			recv.wait(t, "a refused attempt", func(sent []string, _ []hookNotice) bool { return len(sent) >= 1 })
			recv.setFailing(false)
			got := recv.wait(t, "turn one's notice", func(_ []string, acc []hookNotice) bool { return len(acc) == 1 })
			require.Equal(t, one.Turn.ID, got[0].Data.Turn.ID)
			_ = r.WS.CloseNow()

			// The attempt is logged once its answer is read: the receiver
			// may have the notice first.
			require.Eventually(t, func() bool {
				all := apptest.GetJSON[api.HTTPWebhookDeliveryList](t, d, "/v1/webhooks/"+op.ID+"/deliveries", apptest.OperatorToken)
				return len(all.Data) >= 2 && all.Data[0].Status != nil && *all.Data[0].Status == http.StatusOK
			}, 30*time.Second, 10*time.Millisecond, "the 500 and the 200 logged")
			log := apptest.GetJSON[api.HTTPWebhookDeliveryList](t, d, "/v1/webhooks/"+op.ID+"/deliveries?limit=1", apptest.OperatorToken)
			require.Len(t, log.Data, 1)
			require.NotNil(t, log.NextCursor)
			ok := log.Data[0]
			require.Equal(t, http.StatusOK, *ok.Status)
			require.Nil(t, ok.Error)
			require.Equal(t, got[0].ID, ok.EventID)
			older := apptest.GetJSON[api.HTTPWebhookDeliveryList](t, d, "/v1/webhooks/"+op.ID+"/deliveries?limit=1&cursor="+*log.NextCursor, apptest.OperatorToken)
			require.NotEmpty(t, older.Data)
			failed := older.Data[len(older.Data)-1]
			require.Equal(t, http.StatusInternalServerError, *failed.Status)
			require.Equal(t, ok.EventID, failed.EventID, "the retry is the same event")
			require.NotNil(t, failed.NextRetryAt)
			require.Equal(t, http.StatusBadRequest, d.Do(t, "GET", "/v1/webhooks/"+op.ID+"/deliveries?cursor=x", apptest.OperatorToken, nil).StatusCode)

			// The principal's subscription takes its own thread's turn, never
			// the operator's: its log (attempts at an unresolvable host) has
			// the one and not the other.
			resp := d.Do(t, "POST", "/v1/threads", apptest.CIToken, map[string]any{})
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			var created api.HTTPThread
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&created))
			resp = d.Do(t, "POST", "/v1/threads/"+created.Thread.ID+"/turns?wait=true", apptest.CIToken,
				map[string]any{"input": []map[string]any{{"type": "text", "text": "mine"}}})
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Eventually(t, func() bool {
				l := apptest.GetJSON[api.HTTPWebhookDeliveryList](t, d, "/v1/webhooks/"+ci.ID+"/deliveries", apptest.CIToken)
				return len(l.Data) > 0
			}, 30*time.Second, 10*time.Millisecond, "the principal's subscription tried its thread's notice")
			for _, a := range apptest.GetJSON[api.HTTPWebhookDeliveryList](t, d, "/v1/webhooks/"+ci.ID+"/deliveries?limit=200", apptest.CIToken).Data {
				require.True(t, strings.HasPrefix(a.EventID, "evt_"+created.Thread.ID+"_"), "only its own thread: %+v", a)
				require.NotContains(t, a.EventID, thread)
			}

			// A restart keeps the subscriptions and the log, and delivers.
			d.Stop(t)
			d = apptest.Start(t, args...)
			require.Len(t, apptest.GetJSON[api.HTTPWebhookList](t, d, "/v1/webhooks", apptest.OperatorToken).Data, 2)
			again := apptest.GetJSON[api.HTTPWebhookDeliveryList](t, d, "/v1/webhooks/"+op.ID+"/deliveries", apptest.OperatorToken)
			require.GreaterOrEqual(t, len(again.Data), 2)
			r = apptest.RPC(t, d.Addr, apptest.OperatorToken, nil)
			r.Call("thread/resume", map[string]any{"threadId": thread})
			two := apptest.RunTurn(t, r, thread, "two")
			got = recv.wait(t, "turn two's notice", func(_ []string, acc []hookNotice) bool {
				return len(acc) > 0 && acc[len(acc)-1].Data.Turn.ID == two.Turn.ID
			})
			_ = r.WS.CloseNow()

			require.Equal(t, http.StatusNoContent, d.Do(t, "DELETE", "/v1/webhooks/"+ci.ID, apptest.CIToken, nil).StatusCode)
			require.Equal(t, http.StatusNoContent, d.Do(t, "DELETE", "/v1/webhooks/"+op.ID, apptest.OperatorToken, nil).StatusCode)
			require.Equal(t, http.StatusNotFound, d.Do(t, "GET", "/v1/webhooks/"+op.ID+"/deliveries", apptest.OperatorToken, nil).StatusCode)
			require.Empty(t, apptest.GetJSON[api.HTTPWebhookList](t, d, "/v1/webhooks", apptest.OperatorToken).Data)
		})
	}
}
