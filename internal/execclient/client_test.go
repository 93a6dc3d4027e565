package execclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
	// threadPost is the status of the thread POST (0 is 201).
	threadPost int
	// turnPosts answers the POSTs of a turn in order (a status code; 0 is
	// 202 with the turn).
	turnPosts []int
	// streams are the event streams served in order: SSE text, "410" for
	// a stream whose events are gone, or "hang" for one that sends
	// nothing until the client leaves.
	streams []string
	// final is the turn the ?wait=true read returns.
	final string
	// afterInterrupt, when set, is the final turn once an interrupt came.
	afterInterrupt string
	// answerStatus answers the POST of an approval with this status (by
	// request id) instead of 200.
	answerStatus map[string]int

	mu         sync.Mutex
	threadReqs []api.HTTPThreadCreateRequest
	turnReqs   []api.HTTPTurnCreateRequest
	keys       []string // Idempotency-Key of each turn POST
	afters     []string // ?after= of each event stream
	auth       []string // Authorization headers seen
	answers    map[string]string
	deletes    []string
	interrupts int
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	problem := func(status int) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"urn:appserver:problem:x","title":"%s","status":%d,"detail":"scripted"}`, http.StatusText(status), status)
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/threads":
		var req api.HTTPThreadCreateRequest
		require.NoError(f.t, json.NewDecoder(r.Body).Decode(&req))
		f.threadReqs = append(f.threadReqs, req)
		if f.threadPost != 0 {
			problem(f.threadPost)
			break
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"thread":{"id":"th-1"}}`)
	case r.Method == http.MethodDelete && r.URL.Path == "/v1/threads/th-1":
		f.deletes = append(f.deletes, "th-1")
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/threads/th-1/turns":
		var req api.HTTPTurnCreateRequest
		require.NoError(f.t, json.NewDecoder(r.Body).Decode(&req))
		f.turnReqs = append(f.turnReqs, req)
		f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
		status := 0
		if len(f.turnPosts) > 0 {
			status, f.turnPosts = f.turnPosts[0], f.turnPosts[1:]
		}
		if status != 0 {
			problem(status)
			break
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
			break
		}
		s := f.streams[0]
		f.streams = f.streams[1:]
		switch s {
		case "410":
			problem(http.StatusGone)
		case "hang":
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			f.mu.Unlock()
			<-r.Context().Done()
			return
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, s)
		}
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/threads/th-1/approvals/"):
		b, _ := io.ReadAll(r.Body)
		if f.answers == nil {
			f.answers = map[string]string{}
		}
		id := strings.TrimPrefix(r.URL.Path, "/v1/threads/th-1/approvals/")
		if status := f.answerStatus[id]; status != 0 {
			problem(status)
			break
		}
		f.answers[id] = string(b)
		fmt.Fprint(w, `{}`)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/threads/th-1/turns/tu-1/interrupt":
		f.interrupts++
		fmt.Fprint(w, `{}`)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/threads/th-1/turns/tu-1":
		if f.interrupts > 0 && f.afterInterrupt != "" {
			fmt.Fprint(w, f.afterInterrupt)
		} else {
			fmt.Fprint(w, f.final)
		}
	default:
		problem(http.StatusNotFound)
	}
	f.mu.Unlock()
}

// sse is one SSE event of the thread.
func sse(id int, method string, params any) string {
	p, _ := json.Marshal(params)
	ev, _ := json.Marshal(api.HTTPEvent{Method: method, Params: p})
	return fmt.Sprintf("id: %d\ndata: %s\n\n", id, ev)
}

// sseRequest is one server request on the stream, with its requestId.
func sseRequest(id int, requestID, method string, params any) string {
	p, _ := json.Marshal(params)
	ev, _ := json.Marshal(api.HTTPEvent{Method: method, Params: p, RequestID: &requestID})
	return fmt.Sprintf("id: %d\ndata: %s\n\n", id, ev)
}

var turnEnd = sse(99, "turn/completed", map[string]any{"threadId": "th-1", "turn": map[string]any{"id": "tu-1"}})

func runFake(t *testing.T, f *fakeAPI, o Options, prompt string) (string, string, error) {
	t.Helper()
	return runFakeCtx(t, context.Background(), f, o, prompt)
}

func runFakeCtx(t *testing.T, ctx context.Context, f *fakeAPI, o Options, prompt string) (string, string, error) {
	t.Helper()
	f.t = t
	srv := httptest.NewServer(f)
	defer srv.Close()
	var out, errb bytes.Buffer
	o.Server, o.Stdout, o.Stderr = srv.URL, &out, &errb
	if o.Cwd == "" && o.Resume == "" && !o.DaemonCwd {
		o.Cwd = "/work"
	}
	c, err := New(o)
	require.NoError(t, err)
	err = c.Run(ctx, prompt)
	return out.String(), errb.String(), err
}

const completed = `{"id":"tu-1","threadId":"th-1","status":"completed","items":[],"finalMessage":"Hello","usage":{"inputTokens":9,"cachedInputTokens":0,"outputTokens":4,"reasoningOutputTokens":0,"totalTokens":13}}`

// The agent's text streams to stdout; a stream that drops is resumed
// after the last event seen, and nothing is printed twice.
func TestRunStreamsAndResumes(t *testing.T) {
	delta := func(id int, s string) string {
		return sse(id, "item/agentMessage/delta", map[string]any{"turnId": "tu-1", "itemId": "msg-1", "delta": s})
	}
	f := &fakeAPI{final: completed, streams: []string{
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
	out, progress, err := runFake(t, f, Options{Token: "tok", Now: now}, "say hello")
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
	f := &fakeAPI{final: completed, turnPosts: []int{503, 503, 0}, streams: []string{turnEnd}}
	_, progress, err := runFake(t, f, Options{}, "go")
	require.NoError(t, err, progress)
	require.Len(t, f.keys, 3)
	require.True(t, strings.HasPrefix(f.keys[0], "exec-"), f.keys[0])
	require.Equal(t, f.keys[0], f.keys[1])
	require.Equal(t, f.keys[0], f.keys[2])
	require.Contains(t, progress, "retrying")

	f = &fakeAPI{final: completed, turnPosts: []int{409}}
	_, _, err = runFake(t, f, Options{IdempotencyKey: "job-7"}, "go")
	require.Error(t, err, "other errors are not retried")
	require.Equal(t, []string{"job-7"}, f.keys)
}

// Events that are gone (410): the final read prints the answer instead.
func TestRunEventsGone(t *testing.T) {
	f := &fakeAPI{final: completed, streams: []string{"410"}}
	out, progress, err := runFake(t, f, Options{}, "go")
	require.NoError(t, err)
	require.Equal(t, "Hello\n", out)
	require.Contains(t, progress, "no longer available")
}

// A thread exec created is deleted again when the daemon refuses its
// turn, whatever the reason; a resumed thread is left alone.
func TestRefusedStartLeavesNoThread(t *testing.T) {
	for _, status := range []int{400, 413, 422} {
		f := &fakeAPI{turnPosts: []int{status}}
		_, progress, err := runFake(t, f, Options{}, "go")
		require.Error(t, err)
		require.Equal(t, []string{"th-1"}, f.deletes, "status %d", status)
		require.Contains(t, progress, "thread th-1 deleted: its turn did not start")
	}
	f := &fakeAPI{turnPosts: []int{400}}
	_, _, err := runFake(t, f, Options{Resume: "th-1"}, "go")
	require.Equal(t, ExitRejected, ExitCode(err))
	require.Empty(t, f.deletes, "a resumed thread is not exec's to delete")
}

// Each way exec can end has its own exit status.
func TestExitCodes(t *testing.T) {
	ended := func(status, msg string) string {
		return fmt.Sprintf(`{"id":"tu-1","threadId":"th-1","status":%q,"items":[],"error":{"message":%q}}`, status, msg)
	}
	for _, tc := range []struct {
		name string
		f    *fakeAPI
		o    Options
		want int
	}{
		{"completed", &fakeAPI{final: completed, streams: []string{turnEnd}}, Options{}, ExitCompleted},
		{"turn failed", &fakeAPI{final: ended("failed", "401 bad key"), streams: []string{turnEnd}}, Options{}, ExitTurnFailed},
		{"interrupted by another client", &fakeAPI{final: ended("interrupted", ""), streams: []string{turnEnd}}, Options{}, ExitInterrupted},
		{"unknown thread", &fakeAPI{}, Options{Resume: "th-2"}, ExitRejected},
		{"invalid input", &fakeAPI{turnPosts: []int{400}}, Options{}, ExitRejected},
		{"idempotency key reused", &fakeAPI{turnPosts: []int{422}}, Options{}, ExitRejected},
		{"wrong token", &fakeAPI{threadPost: 401}, Options{}, ExitAuth},
		{"beyond the ceiling", &fakeAPI{threadPost: 403}, Options{Sandbox: "danger-full-access"}, ExitAuth},
		{"draining past the retries", &fakeAPI{turnPosts: []int{503, 503, 503, 503, 503}}, Options{}, ExitUnreachable},
		{"stream fails", &fakeAPI{}, Options{}, ExitUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, progress, err := runFake(t, tc.f, tc.o, "go")
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

// --timeout bounds the whole run: the turn is interrupted on the daemon
// and the run ends with ExitTimeout; a cancelled context (a signal) ends
// it the same way with ExitSignal.
func TestTimeoutAndSignalInterruptTheTurn(t *testing.T) {
	interrupted := `{"id":"tu-1","threadId":"th-1","status":"interrupted","items":[],"error":null}`
	f := &fakeAPI{final: completed, afterInterrupt: interrupted, streams: []string{"hang"}}
	// The test's own bound, should --timeout not work: a signal then.
	guard, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	_, progress, err := runFakeCtx(t, guard, f, Options{Timeout: 300 * time.Millisecond}, "go")
	require.Equal(t, ExitTimeout, ExitCode(err), "%v\n%s", err, progress)
	require.Equal(t, 1, f.interrupts)
	require.Contains(t, progress, "--timeout 300ms expired: interrupting the turn")
	require.Contains(t, err.Error(), "--timeout 300ms expired")

	f = &fakeAPI{final: completed, afterInterrupt: interrupted, streams: []string{"hang"}}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, progress, err = runFakeCtx(t, ctx, f, Options{}, "go")
	require.Equal(t, ExitSignal, ExitCode(err), "%v\n%s", err, progress)
	require.Equal(t, 1, f.interrupts)

	// Expiring before the turn started: the thread made for it goes.
	f = &fakeAPI{turnPosts: []int{503, 503, 503, 503, 503}}
	_, _, err = runFake(t, f, Options{Timeout: 200 * time.Millisecond}, "go")
	require.Equal(t, ExitTimeout, ExitCode(err), "%v", err)
	require.Equal(t, []string{"th-1"}, f.deletes)
}

// commandApproval is a command approval request on the stream.
func commandApproval(id int, requestID string) string {
	return sseRequest(id, requestID, api.MethodCommandExecutionRequestApproval, map[string]any{
		"threadId": "th-1", "turnId": "tu-1", "itemId": "call_1", "startedAtMs": 1,
		"command": "make deploy", "cwd": "/work", "reason": "it needs the network",
	})
}

// Without a terminal, a request is answered by the rule at once and
// stderr says so with the command: decline lets the turn go on, fail
// refuses and interrupts it (ExitApprovalRefused).
func TestApprovalRules(t *testing.T) {
	f := &fakeAPI{final: completed, streams: []string{commandApproval(6, "7") + turnEnd}}
	_, progress, err := runFake(t, f, Options{}, "deploy")
	require.NoError(t, err, progress)
	require.JSONEq(t, `{"decision":"decline"}`, f.answers["7"])
	require.Zero(t, f.interrupts)
	require.Contains(t, progress, "[exec] approval requested: run `make deploy` in /work (reason: it needs the network)\n")
	require.Contains(t, progress, "[exec] --on-approval decline: declined; the turn goes on\n")

	interrupted := `{"id":"tu-1","threadId":"th-1","status":"interrupted","items":[],"error":null}`
	f = &fakeAPI{final: interrupted, streams: []string{commandApproval(6, "7") + turnEnd}}
	_, progress, err = runFake(t, f, Options{OnApproval: ApprovalFail}, "deploy")
	require.Equal(t, ExitApprovalRefused, ExitCode(err), "%v\n%s", err, progress)
	require.JSONEq(t, `{"decision":"cancel"}`, f.answers["7"])
	require.Equal(t, 1, f.interrupts)
	require.Contains(t, progress, "[exec] --on-approval fail: refused; interrupting the turn\n")
	require.Contains(t, err.Error(), "run `make deploy`")

	// User input and MCP elicitations get the answers of the same rule.
	f = &fakeAPI{final: completed, streams: []string{
		sseRequest(6, "8", api.MethodToolRequestUserInput, map[string]any{"threadId": "th-1", "turnId": "tu-1", "itemId": "c", "questions": []any{
			map[string]any{"id": "env", "header": "Env", "question": "Which environment?", "isOther": false, "isSecret": false, "options": []any{}},
		}}) +
			sseRequest(7, "9", api.MethodMcpServerElicitationRequest, map[string]any{"threadId": "th-1", "turnId": "tu-1", "serverName": "docs", "mode": "form", "message": "Log in?"}) +
			turnEnd,
	}}
	_, progress, err = runFake(t, f, Options{}, "go")
	require.NoError(t, err, progress)
	require.JSONEq(t, `{"answers":{}}`, f.answers["8"])
	require.JSONEq(t, `{"action":"decline"}`, f.answers["9"])
	require.Contains(t, progress, `user input requested: "Which environment?"`)
	require.Contains(t, progress, `MCP server docs asks: "Log in?"`)

	// A sub-agent's request is answered too: nobody else may be there. A
	// request another client answered first is left alone, and a
	// dynamic tool call is not exec's: stderr says so.
	subAgent := sseRequest(6, "12", api.MethodCommandExecutionRequestApproval, map[string]any{
		"threadId": "th-9", "turnId": "tu-9", "itemId": "c9", "startedAtMs": 1, "command": "ls",
	})
	toolCall := sse(8, api.HTTPToolCallEventMethod, map[string]any{"threadId": "th-1", "turnId": "tu-1", "callId": "call_d", "tool": "lookup", "arguments": map[string]any{}})
	f = &fakeAPI{final: completed, answerStatus: map[string]int{"13": 409}, streams: []string{subAgent + commandApproval(7, "13") + toolCall + turnEnd}}
	_, progress, err = runFake(t, f, Options{}, "go")
	require.NoError(t, err, progress)
	require.JSONEq(t, `{"decision":"decline"}`, f.answers["12"])
	require.Contains(t, progress, "request 13 was already answered or has ended")
	require.Contains(t, progress, "tool call lookup (call_d) is waiting for a client that registered the tool; exec registers none")

	// A request exec does not know how to answer interrupts the turn.
	f = &fakeAPI{final: interrupted, streams: []string{sseRequest(6, "10", "item/permissions/requestApproval", map[string]any{"threadId": "th-1"}) + turnEnd}}
	_, progress, err = runFake(t, f, Options{}, "go")
	require.Equal(t, ExitApprovalRefused, ExitCode(err), "%v\n%s", err, progress)
	require.Equal(t, 1, f.interrupts)
	require.Contains(t, progress, "exec cannot answer item/permissions/requestApproval")
}

// With a terminal, exec shows the request there and posts what the
// person answers.
func TestApprovalAtTheTerminal(t *testing.T) {
	term := newPipeTerminal(t)
	patch := sse(6, "item/started", map[string]any{"threadId": "th-1", "turnId": "tu-1", "item": map[string]any{
		"type": "fileChange", "id": "p1", "status": "inProgress",
		"changes": []any{map[string]any{"path": "notes.txt", "kind": map[string]any{"type": "update", "move_path": nil}, "diff": "@@\n-one\n+two"}},
	}})
	fileApproval := sseRequest(7, "11", api.MethodFileChangeRequestApproval, map[string]any{"threadId": "th-1", "turnId": "tu-1", "itemId": "p1", "startedAtMs": 1})
	f := &fakeAPI{final: completed, streams: []string{commandApproval(5, "7") + patch + fileApproval + turnEnd}}
	// Answers typed ahead: a wrong key is asked again.
	term.typeIn("x\ny\nn\n")
	_, progress, err := runFake(t, f, Options{Terminal: term}, "deploy")
	require.NoError(t, err, progress)
	require.JSONEq(t, `{"decision":"accept"}`, f.answers["7"])
	require.JSONEq(t, `{"decision":"decline"}`, f.answers["11"])
	shown := term.shown()
	require.Contains(t, shown, "$ make deploy")
	require.Contains(t, shown, "reason: it needs the network")
	require.Equal(t, 2, strings.Count(shown, "Run it? [y]es, [a]lways in this thread, [n]o, go on, [c]ancel the turn: "), "asked again after a wrong key")
	require.Contains(t, shown, "update notes.txt\n  @@\n  -one\n  +two\n")
	require.Contains(t, shown, "Apply it?")

	// Nobody answers: --timeout still ends the run, and the turn.
	interrupted := `{"id":"tu-1","threadId":"th-1","status":"interrupted","items":[],"error":null}`
	f = &fakeAPI{final: interrupted, streams: []string{commandApproval(5, "7")}}
	_, progress, err = runFake(t, f, Options{Terminal: term, Timeout: 500 * time.Millisecond}, "deploy")
	require.Equal(t, ExitTimeout, ExitCode(err), "%v\n%s", err, progress)
	require.Empty(t, f.answers)
	require.Equal(t, 1, f.interrupts)
}

// Questions and MCP requests at the terminal: an option by its number,
// own words, a skipped question; an elicitation cancelled interrupts the
// turn; a terminal that closes leaves the rule's answer.
func TestQuestionsAtTheTerminal(t *testing.T) {
	term := newPipeTerminal(t)
	questions := sseRequest(6, "8", api.MethodToolRequestUserInput, map[string]any{"threadId": "th-1", "turnId": "tu-1", "itemId": "c", "questions": []any{
		map[string]any{"id": "env", "header": "Env", "question": "Which environment?", "isOther": true, "isSecret": false, "options": []any{
			map[string]any{"label": "staging", "description": "safe"}, map[string]any{"label": "production", "description": "careful"}}},
		map[string]any{"id": "why", "header": "Why", "question": "Why now?", "isOther": true, "isSecret": false, "options": []any{}},
		map[string]any{"id": "skip", "header": "Skip", "question": "Anything else?", "isOther": true, "isSecret": false, "options": []any{}},
	}})
	elicit := sseRequest(7, "9", api.MethodMcpServerElicitationRequest, map[string]any{"threadId": "th-1", "turnId": "tu-1", "serverName": "docs", "mode": "form", "message": "Log in?"})
	interrupted := `{"id":"tu-1","threadId":"th-1","status":"interrupted","items":[],"error":null}`
	f := &fakeAPI{final: interrupted, streams: []string{questions + elicit + turnEnd}}
	term.typeIn("2\nthe release is due\n\nc\n")
	out, progress, err := runFake(t, f, Options{Terminal: term, JSON: true}, "deploy")
	require.Equal(t, ExitApprovalRefused, ExitCode(err), "%v\n%s", err, progress)
	require.JSONEq(t, `{"answers":{"env":{"answers":["production"]},"why":{"answers":["the release is due"]}}}`, f.answers["8"])
	require.JSONEq(t, `{"action":"cancel"}`, f.answers["9"])
	require.Equal(t, 1, f.interrupts)
	require.Contains(t, err.Error(), "cancelled at the terminal")
	shown := term.shown()
	require.Contains(t, shown, "Env: Which environment?\n    1. staging — safe\n    2. production — careful\n")
	require.Contains(t, shown, "docs: Log in?")
	require.Contains(t, shown, "Answer? [a]ccept, [d]ecline, [c]ancel the turn: ")
	require.Contains(t, out, `{"type":"approval.answered","request_id":"8","decision":"answered","by":"terminal"}`)
	require.Contains(t, out, `{"type":"approval.answered","request_id":"9","decision":"cancel","by":"terminal"}`)

	// The terminal closes (Ctrl-D) with a question pending: the request is
	// declined, as without a terminal.
	term = newPipeTerminal(t)
	_ = term.typing.Close()
	f = &fakeAPI{final: completed, streams: []string{commandApproval(5, "7") + turnEnd}}
	_, progress, err = runFake(t, f, Options{Terminal: term}, "deploy")
	require.NoError(t, err, progress)
	require.JSONEq(t, `{"decision":"decline"}`, f.answers["7"])
	require.Contains(t, progress, "no answer from the terminal (EOF): declined; the turn goes on")
}

// pipeTerminal is a terminal made of two pipes: what exec writes, and
// what the test types.
type pipeTerminal struct {
	in, typing *os.File // exec reads in; the test writes typing
	out        *os.File // exec writes out
	mu         sync.Mutex
	written    bytes.Buffer // what the copier read from out so far
	sent       atomic.Int64 // bytes exec wrote to out
	done       chan struct{}
}

func newPipeTerminal(t *testing.T) *pipeTerminal {
	in, typing, err := os.Pipe()
	require.NoError(t, err)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	p := &pipeTerminal{in: in, typing: typing, out: w, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewReader(r)
		buf := make([]byte, 4096)
		for {
			n, err := sc.Read(buf)
			p.mu.Lock()
			p.written.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = in.Close()
		_ = typing.Close()
		_ = w.Close()
		<-p.done
		_ = r.Close()
	})
	return p
}

func (p *pipeTerminal) Read(b []byte) (int, error) { return p.in.Read(b) }
func (p *pipeTerminal) Write(b []byte) (int, error) {
	n, err := p.out.Write(b)
	p.sent.Add(int64(n))
	return n, err
}
func (p *pipeTerminal) SetReadDeadline(t time.Time) error { return p.in.SetReadDeadline(t) }
func (p *pipeTerminal) typeIn(s string)                   { _, _ = p.typing.WriteString(s) }

// shown returns what exec wrote to the terminal, once the copier has read
// all of it from the pipe (it runs behind the writes).
func (p *pipeTerminal) shown() string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		got := p.written.String()
		p.mu.Unlock()
		if int64(len(got)) >= p.sent.Load() || time.Now().After(deadline) {
			return got
		}
		time.Sleep(time.Millisecond)
	}
}

// --json prints the turn's events as JSONL: every line an object with a
// type, thread.started and turn.started first, the ended turn last.
func TestJSONLStream(t *testing.T) {
	item := func(id int, method string, it map[string]any) string {
		return sse(id, method, map[string]any{"threadId": "th-1", "turnId": "tu-1", "item": it})
	}
	cmd := map[string]any{"type": "commandExecution", "id": "c1", "command": "ls", "cwd": "/work", "status": "inProgress", "aggregatedOutput": nil, "exitCode": nil}
	done := map[string]any{"type": "commandExecution", "id": "c1", "command": "ls", "cwd": "/work", "status": "completed", "aggregatedOutput": "a\n", "exitCode": 0}
	stream := item(6, "item/started", map[string]any{"type": "userMessage", "id": "u1", "content": []any{}}) +
		item(7, "item/started", map[string]any{"type": "reasoning", "id": "r1", "summary": []any{}, "content": []any{}}) +
		item(8, "item/completed", map[string]any{"type": "reasoning", "id": "r1", "summary": []any{"Thinking."}, "content": []any{}}) +
		sse(9, "turn/plan/updated", map[string]any{"threadId": "th-1", "turnId": "tu-1", "plan": []any{map[string]any{"step": "list", "status": "inProgress"}}}) +
		item(10, "item/started", cmd) +
		sse(11, "item/agentMessage/delta", map[string]any{"threadId": "th-1", "turnId": "tu-1", "itemId": "m1", "delta": "Hel"}) +
		item(12, "item/completed", done) +
		sse(12, "item/fileChange/patchUpdated", map[string]any{"threadId": "th-1", "turnId": "tu-1", "itemId": "p1", "changes": []any{
			map[string]any{"path": "a.go", "kind": map[string]any{"type": "add"}, "diff": "+x"}}}) +
		commandApproval(13, "7") +
		sse(14, "error", map[string]any{"threadId": "th-1", "turnId": "tu-1", "willRetry": true, "error": map[string]any{"message": "overloaded", "additionalDetails": "retrying"}}) +
		item(15, "item/completed", map[string]any{"type": "agentMessage", "id": "m1", "text": "Hello"}) +
		// A sub-agent's message, on its own thread.
		sse(16, "item/completed", map[string]any{"threadId": "th-9", "turnId": "tu-9", "item": map[string]any{"type": "agentMessage", "id": "x1", "text": "a sub-agent's"}}) +
		turnEnd
	f := &fakeAPI{final: completed, streams: []string{stream}}
	out, progress, err := runFake(t, f, Options{JSON: true}, "go")
	require.NoError(t, err, progress)
	var types []string
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &v), line)
		typ, ok := v["type"].(string)
		require.True(t, ok, line)
		types = append(types, typ)
		lines = append(lines, v)
	}
	require.Equal(t, []string{
		"thread.started", "turn.started",
		"item.completed",                 // reasoning, shown once complete
		"item.started",                   // the plan's to-do list
		"item.started", "item.completed", // the command
		"item.updated", // a patch as it is written
		"approval.requested", "approval.answered",
		"error",
		"item.completed", // the agent's message
		"item.completed", // the to-do list, at the turn's end
		"turn.completed",
	}, types, out)
	require.Equal(t, "th-1", lines[0]["thread_id"])
	require.Equal(t, "tu-1", lines[1]["turn_id"])
	require.Equal(t, map[string]any{"id": "r1", "type": "reasoning", "text": "Thinking."}, lines[2]["item"])
	require.Equal(t, map[string]any{"id": "c1", "type": "command_execution", "command": "ls", "aggregated_output": "a\n", "exit_code": float64(0), "status": "completed"}, lines[5]["item"])
	require.Equal(t, map[string]any{"id": "p1", "type": "file_change", "changes": []any{map[string]any{"path": "a.go", "kind": "add"}}, "status": "in_progress"}, lines[6]["item"])
	require.Equal(t, "make deploy", lines[7]["command"])
	require.Equal(t, "decline", lines[8]["decision"])
	require.Equal(t, "rule", lines[8]["by"])
	require.Equal(t, "overloaded (retrying)", lines[9]["message"])
	require.Equal(t, map[string]any{"id": "m1", "type": "agent_message", "text": "Hello"}, lines[10]["item"])
	last := lines[len(lines)-1]
	require.Equal(t, "Hello", last["turn"].(map[string]any)["finalMessage"])
	require.Equal(t, float64(9), last["usage"].(map[string]any)["input_tokens"])
	require.NotContains(t, out, "a sub-agent's")
	require.NotContains(t, out, "Hel\"", "no deltas in the stream")
}

// A failed turn's last line is turn.failed with its error; an interrupted
// one's turn.interrupted.
func TestJSONLTurnEnds(t *testing.T) {
	for status, want := range map[string]string{"failed": "turn.failed", "interrupted": "turn.interrupted"} {
		final := fmt.Sprintf(`{"id":"tu-1","threadId":"th-1","status":%q,"items":[],"error":{"message":"401 bad key","additionalDetails":null}}`, status)
		f := &fakeAPI{final: final, streams: []string{turnEnd}}
		out, _, err := runFake(t, f, Options{JSON: true, Resume: "th-1"}, "go")
		require.Error(t, err)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var last struct {
			Type  string `json:"type"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
			Turn api.HTTPTurn `json:"turn"`
		}
		require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
		require.Equal(t, want, last.Type)
		require.Equal(t, api.TurnStatus(status), last.Turn.Status)
		if status == "failed" {
			require.Equal(t, "401 bad key", last.Error.Message)
		}
	}
}

// --output-schema is sent with the turn and the final message checked
// against it.
func TestOutputSchema(t *testing.T) {
	dir := t.TempDir()
	schema := filepath.Join(dir, "schema.json")
	require.NoError(t, os.WriteFile(schema, []byte(`{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"],"additionalProperties":false}`), 0o600))
	final := func(msg *string) string {
		b, _ := json.Marshal(map[string]any{"id": "tu-1", "threadId": "th-1", "status": "completed", "items": []any{}, "finalMessage": msg})
		return string(b)
	}
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		msg  *string
		want string // "" is valid
	}{
		{str(`{"answer": 42}`), ""},
		{str(`{"answer": "42"}`), "/answer"},
		{str(`{"answer": 42, "extra": 1}`), "extra"},
		{str(`the answer is 42`), "it is not JSON"},
		{nil, "no final message"},
	} {
		f := &fakeAPI{final: final(tc.msg), streams: []string{turnEnd}}
		_, progress, err := runFake(t, f, Options{OutputSchema: schema}, "go")
		require.JSONEq(t, `{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"],"additionalProperties":false}`, string(f.turnReqs[0].OutputSchema), "the schema goes with the turn")
		if tc.want == "" {
			require.NoError(t, err, progress)
			require.Contains(t, progress, "the final message matches --output-schema")
			continue
		}
		require.Equal(t, ExitOutputInvalid, ExitCode(err), "%v", err)
		require.Contains(t, err.Error(), tc.want)
		require.Contains(t, progress, "does not match --output-schema")
	}

	for _, bad := range []string{`{"type": 12}`, `not json`, `[1]`} {
		require.NoError(t, os.WriteFile(schema, []byte(bad), 0o600))
		_, err := New(Options{Server: "http://x", OutputSchema: schema})
		require.Error(t, err, bad)
	}
	_, err := New(Options{Server: "http://x", OutputSchema: filepath.Join(dir, "missing.json")})
	require.ErrorContains(t, err, "--output-schema")
}

// Images go with the prompt as data: URLs, whatever machine the daemon is
// on; a file that is not an image is refused before anything is sent.
func TestImages(t *testing.T) {
	dir := t.TempDir()
	png := filepath.Join(dir, "shot.png")
	pngBytes := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	require.NoError(t, os.WriteFile(png, pngBytes, 0o600))
	f := &fakeAPI{final: completed, streams: []string{turnEnd}}
	_, progress, err := runFake(t, f, Options{Images: []string{png}}, "what is this?")
	require.NoError(t, err, progress)
	in := f.turnReqs[0].Input
	require.Len(t, in, 2)
	require.Equal(t, api.UserInputImage, in[0].Type)
	require.True(t, strings.HasPrefix(in[0].URL, "data:image/png;base64,iVBORw0KGgo"), in[0].URL)
	require.Equal(t, api.UserInputText, in[1].Type)
	require.Equal(t, "what is this?", in[1].Text)

	txt := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(txt, []byte("hello"), 0o600))
	_, err = New(Options{Server: "http://x", Images: []string{txt}})
	require.ErrorContains(t, err, "not a PNG, JPEG, GIF or WebP image")
	_, err = New(Options{Server: "http://x", Images: []string{filepath.Join(dir, "gone.png")}})
	require.ErrorContains(t, err, "--image")
}

// The settings of a new thread go with its creation; a resumed thread
// keeps its own, and the model changes with the turn.
func TestThreadSettings(t *testing.T) {
	f := &fakeAPI{final: completed, streams: []string{turnEnd}}
	_, _, err := runFake(t, f, Options{Model: "m1", ApprovalPolicy: "never", Sandbox: "read-only", Cwd: "/src"}, "go")
	require.NoError(t, err)
	req := f.threadReqs[0]
	require.Equal(t, "m1", *req.Model)
	require.Equal(t, api.ApprovalNever, req.ApprovalPolicy.Policy)
	require.Equal(t, api.SandboxReadOnly, *req.Sandbox)
	require.Equal(t, "/src", *req.Cwd)
	require.Nil(t, f.turnReqs[0].Model)

	f = &fakeAPI{final: completed, streams: []string{turnEnd}}
	_, _, err = runFake(t, f, Options{DaemonCwd: true}, "go")
	require.NoError(t, err)
	require.Nil(t, f.threadReqs[0].Cwd, "the daemon picks the directory")

	f = &fakeAPI{final: completed, streams: []string{turnEnd}}
	_, progress, err := runFake(t, f, Options{Model: "m2", Resume: "th-1"}, "go")
	require.NoError(t, err)
	require.Empty(t, f.threadReqs, "no thread created")
	require.Equal(t, "m2", *f.turnReqs[0].Model)
	require.Contains(t, progress, "[exec] thread th-1\n")
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{ApprovalPolicy: "sometimes"}, "--approval-policy"},
		{Options{Sandbox: "none"}, "--sandbox"},
		{Options{OnApproval: "maybe"}, "--on-approval"},
		{Options{OnApproval: ApprovalAsk}, "needs a terminal"},
		{Options{Resume: "th-1", Sandbox: "read-only"}, "a resumed thread keeps its own"},
		{Options{Timeout: -time.Second}, "--timeout"},
	} {
		tc.o.Server = "http://127.0.0.1:1"
		_, err := New(tc.o)
		require.ErrorContains(t, err, tc.want)
	}
	c, err := New(Options{Server: "http://x"})
	require.NoError(t, err)
	require.Equal(t, ApprovalDecline, c.opts.OnApproval, "no terminal: decline, as codex exec")
	c, err = New(Options{Server: "http://x", Terminal: newPipeTerminal(t)})
	require.NoError(t, err)
	require.Equal(t, ApprovalAsk, c.opts.OnApproval, "a terminal: ask")
}

func TestReadPrompt(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		stdin string
		tty   bool
		want  string
		err   string
	}{
		{[]string{"fix", "it"}, "ignored", false, "fix it", ""},
		{[]string{"-"}, "from stdin\n", false, "from stdin\n", ""},
		{[]string{"-"}, "\uFEFFwith a BOM", true, "with a BOM", ""},
		{nil, "piped", false, "piped", ""},
		{nil, "", true, "", "exec needs a prompt"},
		{nil, "  \n", false, "", "the prompt on stdin is empty"},
		{[]string{"-"}, "\xff\xfe", false, "", "not UTF-8"},
	} {
		got, err := ReadPrompt(tc.args, strings.NewReader(tc.stdin), tc.tty)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.args)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
}
