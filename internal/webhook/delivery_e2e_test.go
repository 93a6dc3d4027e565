package webhook_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// e2eWebhookSecret is "whsec_" and the base64 of 24 bytes.
const e2eWebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// hookReceiver accepts the notices whose signature verifies, or answers
// 500 to every one while failing is set; it keeps every webhook-id it was
// sent, in order.
type hookReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	failing  bool
	sent     []string
	accepted []hookNotice
	changed  chan struct{}
}

type hookNotice struct {
	ID   string
	Type string `json:"type"`
	Data struct {
		ThreadID string `json:"threadId"`
		Seq      int64  `json:"seq"`
		Turn     struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"turn"`
	} `json:"data"`
}

func newHookReceiver(t *testing.T) *hookReceiver {
	wh, err := standardwebhooks.NewWebhook(e2eWebhookSecret)
	require.NoError(t, err)
	r := &hookReceiver{changed: make(chan struct{}, 1)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if err := wh.Verify(body, req.Header); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		defer func() {
			select {
			case r.changed <- struct{}{}:
			default:
			}
		}()
		id := req.Header.Get("webhook-id")
		r.sent = append(r.sent, id)
		if r.failing {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		n := hookNotice{ID: id}
		if err := json.Unmarshal(body, &n); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.accepted = append(r.accepted, n)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *hookReceiver) setFailing(f bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing = f
}

// wait waits until ok holds of the ids sent and the notices accepted.
func (r *hookReceiver) wait(t *testing.T, what string, ok func(sent []string, accepted []hookNotice) bool) []hookNotice {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		r.mu.Lock()
		sent, accepted := append([]string(nil), r.sent...), append([]hookNotice(nil), r.accepted...)
		r.mu.Unlock()
		if ok(sent, accepted) {
			return accepted
		}
		select {
		case <-r.changed:
		case <-deadline:
			t.Fatalf("webhook receiver: %s; sent %v, accepted %+v", what, sent, accepted)
		}
	}
}

// A turn on the fake model ends in a signed turn.completed notice; a
// notice its receiver refuses (500) when the daemon is killed (kill -9) is
// sent again, with the same id, by the restarted daemon, which goes on
// with the next turn's; no id is accepted twice.
func TestWebhookDeliveryAcrossKillNine(t *testing.T) {
	apptest.BuildBinary()
	fake := apptest.StartFake(t, `{"steps":[{"match":{"user_text":"one"},"text":"1"},{"match":{"user_text":"two"},"text":"2"},{"match":{"user_text":"three"},"text":"3"}]}`)
	recv := newHookReceiver(t)
	cfg := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(cfg, []byte(`
[[webhooks]]
url = "`+recv.URL+`/hook"
secret = "`+e2eWebhookSecret+`"
events = ["turn.completed", "turn.failed"]
allow_private = true
`), 0o600))
	args := append([]string{"--config", cfg, "--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)

	d1 := apptest.StartProc(t, args...)
	r := d1.RPC(t)
	thread := apptest.StartThread(t, r, nil)
	one := apptest.RunTurn(t, r, thread, "one")
	got := recv.wait(t, "turn one's notice", func(_ []string, acc []hookNotice) bool { return len(acc) == 1 })
	require.Equal(t, "turn.completed", got[0].Type)
	require.Equal(t, thread, got[0].Data.ThreadID)
	require.Equal(t, one.Turn.ID, got[0].Data.Turn.ID)

	recv.setFailing(true)
	two := apptest.RunTurn(t, r, thread, "two")
	var twoID string
	recv.wait(t, "turn two's notice refused twice", func(sent []string, _ []hookNotice) bool {
		if len(sent) >= 3 && sent[1] == sent[2] {
			twoID = sent[1]
			return true
		}
		return false
	})
	_ = r.WS.CloseNow()
	d1.Kill9(t)
	recv.setFailing(false)

	d2 := apptest.StartProc(t, args...)
	// Turn one's notice may come again before turn two's (see below), so
	// the wait is for turn two's, not for a count.
	recv.wait(t, "turn two's notice after the restart", func(_ []string, acc []hookNotice) bool {
		for _, n := range acc {
			if n.Data.Turn.ID == two.Turn.ID {
				return true
			}
		}
		return false
	})
	r2 := d2.RPC(t)
	r2.Call("thread/resume", map[string]any{"threadId": thread})
	three := apptest.RunTurn(t, r2, thread, "three")
	got = recv.wait(t, "turn three's notice", func(_ []string, acc []hookNotice) bool {
		return len(acc) > 0 && acc[len(acc)-1].Data.Turn.ID == three.Turn.ID
	})
	// What a receiver keeps, dropping the ids it has: the cursor is saved
	// every second, so a notice accepted in the second before the kill
	// may come again (at least once), with its id.
	var kept []hookNotice
	times := map[string]int{}
	for _, n := range got {
		if times[n.ID]++; times[n.ID] == 1 {
			kept = append(kept, n)
		}
	}
	require.Len(t, kept, 3, "accepted: %+v", got)
	for id, k := range times {
		if id != kept[0].ID {
			require.Equal(t, 1, k, "%s accepted twice", id)
		}
		require.LessOrEqual(t, k, 2, "only turn one's notice, accepted just before the kill, may come again")
	}
	for i, want := range []string{one.Turn.ID, two.Turn.ID, three.Turn.ID} {
		require.Equal(t, want, kept[i].Data.Turn.ID, "in the thread's order")
	}
	require.Equal(t, twoID, kept[1].ID, "turn two's notice has the id it had before the kill")
	_ = r2.WS.CloseNow()
	d2.Terminate(t)
}
