package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testSecret is "whsec_" and the base64 of 24 bytes.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// verify checks a request's Standard Webhooks signature as the
// specification states it, independently of the library the sender uses:
// the HMAC-SHA256, keyed with the base64 after "whsec_", of
// "id.timestamp.body", base64, among the space-separated "v1,<sig>"
// entries of webhook-signature, with a timestamp within five minutes.
func verify(secret string, h http.Header, body []byte) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook headers")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("bad timestamp")
	}
	if d := time.Since(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return errors.New("timestamp out of tolerance")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, s := range strings.Fields(sigs) {
		v, sig, ok := strings.Cut(s, ",")
		if ok && v == "v1" && hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return errors.New("no matching signature")
}

// notice is what a receiver accepted.
type notice struct {
	ID     string
	Type   string
	Thread string
	Seq    int64
	Data   map[string]any
}

// receiver is a webhook receiver on a local listener that verifies every
// request and answers 500 to the next fail ones.
type receiver struct {
	t      *testing.T
	secret string
	srv    *http.Server
	addr   string

	mu       sync.Mutex
	accepted []notice
	attempts map[string]int // by webhook-id, every request
	fail     int
	bad      []string // signature failures
	changed  chan struct{}
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t, secret: testSecret, attempts: map[string]int{}, changed: make(chan struct{}, 1)}
	r.listen(t, "127.0.0.1:0")
	return r
}

// listen serves on addr (again, after down).
func (r *receiver) listen(t *testing.T, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	r.addr = ln.Addr().String()
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve)}
	done := make(chan struct{})
	go func() { defer close(done); _ = r.srv.Serve(ln) }()
	srv := r.srv
	t.Cleanup(func() { _ = srv.Close(); <-done })
}

// down stops the listener; listen(r.addr) brings it back.
func (r *receiver) down() { _ = r.srv.Close() }

func (r *receiver) url() string { return "http://" + r.addr + "/hook" }

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() {
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}()
	id := req.Header.Get("webhook-id")
	r.attempts[id]++
	if err := verify(r.secret, req.Header, body); err != nil {
		r.bad = append(r.bad, id+": "+err.Error())
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.fail > 0 {
		r.fail--
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	var n struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(body, &n); err != nil {
		r.bad = append(r.bad, id+": "+err.Error())
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	thread, _ := n.Data["threadId"].(string)
	seq, _ := n.Data["seq"].(float64)
	r.accepted = append(r.accepted, notice{ID: id, Type: n.Type, Thread: thread, Seq: int64(seq), Data: n.Data})
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) failNext(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = n
}

func (r *receiver) list() []notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(r.t, r.bad, "every request carries a valid signature")
	return append([]notice(nil), r.accepted...)
}

func (r *receiver) requests(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts[id]
}

// waitFor waits until the receiver accepted n notices.
func (r *receiver) waitFor(n int) []notice {
	r.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if got := r.list(); len(got) >= n {
			return got
		}
		select {
		case <-r.changed:
		case <-deadline:
			r.t.Fatalf("the receiver accepted %d notices, want %d: %v", len(r.list()), n, r.list())
		}
	}
}

// TestVerifyIsNotVacuous shows that the receiver's check fails a wrong
// secret, a changed body and a stale timestamp.
func TestVerifyIsNotVacuous(t *testing.T) {
	body := []byte(`{"type":"turn.completed"}`)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(testSecret, "whsec_"))
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("evt_1." + ts + "." + string(body)))
	h := http.Header{}
	h.Set("webhook-id", "evt_1")
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", "v0,x v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	require.NoError(t, verify(testSecret, h, body))
	require.Error(t, verify("whsec_"+base64.StdEncoding.EncodeToString([]byte("another secret of 24 byt")), h, body))
	require.Error(t, verify(testSecret, h, append(body, ' ')))
	h.Set("webhook-timestamp", strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10))
	require.Error(t, verify(testSecret, h, body))
}
