package execclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/api"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestBaseURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://127.0.0.1:7878", "http://127.0.0.1:7878/v1"},
		{"https://bots.example.com/", "https://bots.example.com/v1"},
		{"https://example.com/appserver", "https://example.com/appserver/v1"},
		{" ws://127.0.0.1:9000 ", "http://127.0.0.1:9000/v1"},
		{"wss://example.com", "https://example.com/v1"},
		{"ftp://example.com", ""},
		{"127.0.0.1:7878", ""},
		{"", ""},
	} {
		got, err := baseURL(tc.in)
		if tc.want == "" {
			require.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got)
	}
}

// fakeAPI is the daemon's HTTP API as exec uses it, scripted per test.
type fakeAPI struct {
	t *testing.T
	// turnPosts answers the POSTs of a turn in order (a status code; 0 is
	// 202 with the turn).
	turnPosts []int
	// streams are the event streams served in order: SSE text, or
	// "410" for a stream whose events are gone.
	streams []string
	// final is the turn the ?wait=true read returns.
	final string

	mu        sync.Mutex
	keys      []string // Idempotency-Key of each turn POST
	afters    []string // ?after= of each event stream
	auth      []string // Authorization headers seen
	interrupt int
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/threads":
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"thread":{"id":"th-1"}}`)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/threads/th-1/turns":
		f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
		status := 0
		if len(f.turnPosts) > 0 {
			status, f.turnPosts = f.turnPosts[0], f.turnPosts[1:]
		}
		if status != 0 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"type":"about:blank","title":"Unavailable","status":%d,"detail":"draining"}`, status)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{"id":"tu-1","threadId":"th-1","status":"inProgress","items":[],"eventsAfter":5}`)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/threads/th-1/events":
		f.afters = append(f.afters, r.URL.Query().Get("after"))
		if got := r.URL.Query().Get("until"); got != "turnCompleted" {
			f.t.Errorf("until=%q", got)
		}
		if len(f.streams) == 0 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		s := f.streams[0]
		f.streams = f.streams[1:]
		if s == "410" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusGone)
			fmt.Fprint(w, `{"type":"https://appserver/problems/events-gone","title":"Gone","status":410,"detail":"events expired"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, s)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/interrupt"):
		f.interrupt++
		fmt.Fprint(w, `{}`)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/threads/th-1/turns/tu-1":
		fmt.Fprint(w, f.final)
	default:
		http.NotFound(w, r)
	}
}

// sse is one SSE event of the thread.
func sse(id int, method string, params any) string {
	p, _ := json.Marshal(params)
	ev, _ := json.Marshal(api.HTTPEvent{Method: method, Params: p})
	return fmt.Sprintf("id: %d\ndata: %s\n\n", id, ev)
}

func run(t *testing.T, f *fakeAPI, o Options, prompt string) (string, string, error) {
	t.Helper()
	srv := httptest.NewServer(f)
	defer srv.Close()
	var out, errb bytes.Buffer
	o.Server, o.Stdout, o.Stderr = srv.URL, &out, &errb
	c, err := New(o)
	require.NoError(t, err)
	err = c.Run(context.Background(), prompt)
	return out.String(), errb.String(), err
}

const completed = `{"id":"tu-1","threadId":"th-1","status":"completed","items":[],"finalMessage":"Hello","usage":{"inputTokens":9,"cachedInputTokens":0,"outputTokens":4,"reasoningOutputTokens":0,"totalTokens":13}}`

// The agent's text streams to stdout; a stream that drops is resumed
// after the last event seen, and nothing is printed twice.
func TestRunStreamsAndResumes(t *testing.T) {
	delta := func(id int, s string) string {
		return sse(id, "item/agentMessage/delta", map[string]any{"turnId": "tu-1", "itemId": "msg-1", "delta": s})
	}
	f := &fakeAPI{t: t, final: completed, streams: []string{
		delta(6, "Hel"), // then the connection ends
		delta(7, "lo") +
			sse(8, "item/started", map[string]any{"turnId": "tu-1", "item": map[string]any{"type": "commandExecution", "id": "c1", "command": "make test"}}) +
			sse(9, "item/completed", map[string]any{"turnId": "tu-1", "item": map[string]any{"type": "commandExecution", "id": "c1", "command": "make test", "status": "failed", "exitCode": 2, "durationMs": 1234}}) +
			sse(10, "item/completed", map[string]any{"turnId": "tu-1", "item": map[string]any{"type": "dynamicToolCall", "id": "d1", "tool": "lookup", "status": "completed", "durationMs": 30}}) +
			sse(11, "item/completed", map[string]any{"turnId": "tu-1", "item": map[string]any{"type": "agentMessage", "id": "msg-1", "text": "Hello"}}) +
			sse(12, "turn/completed", map[string]any{"turn": map[string]any{"id": "tu-1"}}),
	}}
	// The clock moves 3.4 s between the turn's start and its end.
	clock := time.Unix(1000, 0)
	now := func() time.Time { t := clock; clock = clock.Add(3400 * time.Millisecond); return t }
	out, progress, err := run(t, f, Options{Token: "tok", Cwd: "/work", Now: now}, "say hello")
	require.NoError(t, err, progress)
	require.Equal(t, "Hello\n", out)
	require.Equal(t, []string{"5", "6"}, f.afters, "resumed after the last event seen")
	require.Contains(t, progress, "thread th-1 created")
	require.Contains(t, progress, "[exec] commandExecution: make test\n")
	require.Contains(t, progress, "[exec] commandExecution: make test -> exit 2 in 1.2s\n", "a command's exit status and run time")
	require.Contains(t, progress, "[exec] dynamicToolCall lookup -> completed in 30ms\n")
	require.Contains(t, progress, "turn tu-1 completed in 3.4s (13 tokens: 9 in, 4 out)")
	for _, a := range f.auth {
		require.Equal(t, "Bearer tok", a)
	}
}

// A 503 on the turn POST is retried with the same Idempotency-Key, so a
// retry never starts a second turn; a generated key is used when none is
// given.
func TestRunRetriesWithTheSameKey(t *testing.T) {
	f := &fakeAPI{t: t, final: completed, turnPosts: []int{503, 503, 0},
		streams: []string{sse(6, "turn/completed", map[string]any{"turn": map[string]any{"id": "tu-1"}})}}
	_, progress, err := run(t, f, Options{}, "go")
	require.NoError(t, err, progress)
	require.Len(t, f.keys, 3)
	require.True(t, strings.HasPrefix(f.keys[0], "exec-"), f.keys[0])
	require.Equal(t, f.keys[0], f.keys[1])
	require.Equal(t, f.keys[0], f.keys[2])
	require.Contains(t, progress, "retrying")

	f = &fakeAPI{t: t, final: completed, turnPosts: []int{409}}
	_, _, err = run(t, f, Options{IdempotencyKey: "job-7"}, "go")
	require.Error(t, err, "other errors are not retried")
	require.Equal(t, []string{"job-7"}, f.keys)
}

// Events that are gone (410): the final read prints the answer instead.
func TestRunEventsGone(t *testing.T) {
	f := &fakeAPI{t: t, final: completed, streams: []string{"410"}}
	out, progress, err := run(t, f, Options{}, "go")
	require.NoError(t, err)
	require.Equal(t, "Hello\n", out)
	require.Contains(t, progress, "no longer available")
}

// A turn that fails is an error carrying its status and message; --json
// prints the turn as one object.
func TestRunFailedTurn(t *testing.T) {
	failed := `{"id":"tu-1","threadId":"th-1","status":"failed","items":[],"error":{"message":"401 bad key"}}`
	f := &fakeAPI{t: t, final: failed, streams: []string{sse(6, "turn/completed", map[string]any{"turn": map[string]any{"id": "tu-1"}})}}
	out, _, err := run(t, f, Options{JSON: true, Thread: "th-1"}, "go")
	var ended TurnEndedError
	require.ErrorAs(t, err, &ended)
	require.Equal(t, api.TurnFailed, ended.Status)
	require.Equal(t, "turn failed: 401 bad key", err.Error())
	var turn api.HTTPTurn
	require.NoError(t, json.Unmarshal([]byte(out), &turn), out)
	require.Equal(t, "tu-1", turn.ID)
}

// Each way exec can end has its own exit status: a CI job tells the
// agent's failure (1) from a daemon it cannot reach (3) and from a request
// the daemon refuses (4).
func TestExitCodes(t *testing.T) {
	turnEnd := []string{sse(6, "turn/completed", map[string]any{"turn": map[string]any{"id": "tu-1"}})}
	failed := `{"id":"tu-1","threadId":"th-1","status":"failed","items":[],"error":{"message":"401 bad key"}}`
	for _, tc := range []struct {
		name string
		f    *fakeAPI
		o    Options
		want int
	}{
		{"completed", &fakeAPI{final: completed, streams: turnEnd}, Options{}, ExitCompleted},
		{"turn failed", &fakeAPI{final: failed, streams: turnEnd}, Options{}, ExitTurnFailed},
		{"unknown thread", &fakeAPI{}, Options{Thread: "th-2"}, ExitRejected},
		{"idempotency key reused", &fakeAPI{turnPosts: []int{422}}, Options{}, ExitRejected},
		{"draining past the retries", &fakeAPI{turnPosts: []int{503, 503, 503, 503, 503}}, Options{}, ExitUnreachable},
		{"stream fails", &fakeAPI{}, Options{}, ExitUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.t = t
			_, progress, err := run(t, tc.f, tc.o, "go")
			require.Equal(t, tc.want, ExitCode(err), "%v\n%s", err, progress)
		})
	}

	// Nothing listens: connection refused.
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	c, err := New(Options{Server: addr})
	require.NoError(t, err)
	err = c.Run(context.Background(), "go")
	require.Error(t, err)
	require.Equal(t, ExitUnreachable, ExitCode(err), "%v", err)
}
