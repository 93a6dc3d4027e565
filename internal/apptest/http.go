package apptest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
)

// Tokens of the daemons AuthArgs configures: the operator's (the
// websocket's capability token) and the "ci" principal's.
const (
	OperatorToken = "operator-secret-token"
	CIToken       = "ci-bot-secret-token"
)

// SHA256Hex is the hex SHA-256 digest of s, as the configuration takes
// tokens.
func SHA256Hex(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// AuthArgs are the flags of a daemon with capability-token auth
// (OperatorToken) and a "ci" principal (CIToken) whose workspace roots are
// ciRoots (none: its own directory).
func AuthArgs(ciRoots ...string) []string {
	args := []string{
		"--ws-auth", "capability-token", "--ws-token-sha256", SHA256Hex(OperatorToken),
		"-c", `http_api.principals.ci.token_sha256="` + SHA256Hex(CIToken) + `"`,
	}
	return append(args, PrincipalRoots("ci", ciRoots...)...)
}

// PrincipalRoots are the flags setting a principal's workspace_roots
// (none: the default).
func PrincipalRoots(name string, roots ...string) []string {
	if len(roots) == 0 {
		return nil
	}
	quoted := make([]string, len(roots))
	for i, r := range roots {
		quoted[i] = strconv.Quote(r)
	}
	return []string{"-c", "http_api.principals." + name + ".workspace_roots=[" + strings.Join(quoted, ",") + "]"}
}

// Tokens of the other principals StartPrincipals configures.
const (
	BobToken = "bob-principal-token"
	DevToken = "dev-principal-token"
)

// Principals is a daemon with the operator's token (OperatorToken) and
// three principals: ci (CIToken, roots: CIRoot), bob (BobToken, roots:
// BobRoot) and dev (DevToken, no roots: its own directory beside the data
// directory).
type Principals struct {
	D                        *Daemon
	DataDir, CIRoot, BobRoot string
}

// StartPrincipals starts the fake model with script and a Principals
// daemon using it, with extra flags after.
func StartPrincipals(t testing.TB, script string, extra ...string) Principals {
	t.Helper()
	p := Principals{DataDir: RealTempDir(t), CIRoot: RealTempDir(t), BobRoot: RealTempDir(t)}
	fake := StartFake(t, script)
	args := append(append([]string{"--data-dir", p.DataDir}, FakeArgs(fake, "responses")...), AuthArgs(p.CIRoot)...)
	args = append(args,
		"-c", `http_api.principals.bob.token_sha256="`+SHA256Hex(BobToken)+`"`,
		"-c", `http_api.principals.dev.token_sha256="`+SHA256Hex(DevToken)+`"`)
	args = append(args, PrincipalRoots("bob", p.BobRoot)...)
	p.D = Start(t, append(args, extra...)...)
	return p
}

// Do sends an HTTP request to path on the daemon with a bearer token
// (none when "") and body as JSON (none when nil). The response's body is
// closed when the test ends.
func (d *Daemon) Do(t testing.TB, method, path, token string, body any) *http.Response {
	t.Helper()
	return Do(t, method, d.URL(path), token, body)
}

// Do sends an HTTP request to url with a bearer token (none when "") and
// body as JSON (none when nil). The response's body is closed when the
// test ends.
func Do(t testing.TB, method, url, token string, body any) *http.Response {
	t.Helper()
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(JSON(t, body))
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// GetJSON GETs path on d with token, requires 200 and decodes the body.
func GetJSON[T any](t testing.TB, d *Daemon, path, token string) T {
	t.Helper()
	resp := d.Do(t, http.MethodGet, path, token, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var v T
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	return v
}

// Status GETs url and returns the response's status.
func Status(t testing.TB, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// SSEEvent is one event of a server-sent event stream.
type SSEEvent struct {
	ID    string
	Event string
	Data  string
}

// SSEReader reads the events of a server-sent event stream; comments and
// the retry field are skipped.
type SSEReader struct{ sc *bufio.Scanner }

// NewSSEReader reads the events of r.
func NewSSEReader(r io.Reader) *SSEReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	return &SSEReader{sc: sc}
}

// Next returns the next event, or io.EOF (or the read's error) at the end
// of the stream.
func (r *SSEReader) Next() (SSEEvent, error) {
	var ev SSEEvent
	var data []string
	for r.sc.Scan() {
		line := r.sc.Text()
		if line == "" {
			if data != nil {
				ev.Data = strings.Join(data, "\n")
				return ev, nil
			}
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Event = value
		case "data":
			data = append(data, value)
		}
	}
	if err := r.sc.Err(); err != nil {
		return SSEEvent{}, err
	}
	return SSEEvent{}, io.EOF
}

// Events is a thread's HTTP event stream, read on a goroutine that ends
// when the stream or the test does.
type Events struct {
	t      testing.TB
	events chan SSEEvent // closed when the stream ends
}

// OpenEvents opens GET path (a thread's …/events, with its query) on d
// with token (none when ""), requires 200 and reads the stream; once it
// returns, the stream is subscribed to the thread.
func (d *Daemon) OpenEvents(t testing.TB, path, token string) *Events {
	t.Helper()
	return OpenEvents(t, d.URL(path), token)
}

// OpenEvents is Daemon.OpenEvents for any daemon's url (a subprocess's).
func OpenEvents(t testing.TB, url, token string) *Events {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	s := &Events{t: t, events: make(chan SSEEvent, 256)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(s.events)
		r := NewSSEReader(resp.Body)
		for {
			sse, err := r.Next()
			if err != nil {
				return
			}
			select {
			case s.events <- sse:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return s
}

// NextSSE returns the next event as the stream sent it, with its id; ok
// is false once the stream ended.
func (s *Events) NextSSE() (SSEEvent, bool) {
	s.t.Helper()
	select {
	case sse, ok := <-s.events:
		return sse, ok
	case <-time.After(Wait):
		s.t.Fatal("no event on the stream")
		return SSEEvent{}, false
	}
}

// Next returns the next event; ok is false once the stream ended.
func (s *Events) Next() (api.HTTPEvent, bool) {
	s.t.Helper()
	sse, ok := s.NextSSE()
	if !ok {
		return api.HTTPEvent{}, false
	}
	return decodeEvent(sse), true
}

// decodeEvent reads an event's data; data that is not an event shows in
// its Method.
func decodeEvent(sse SSEEvent) api.HTTPEvent {
	var ev api.HTTPEvent
	if json.Unmarshal([]byte(sse.Data), &ev) != nil {
		ev.Method = "undecodable: " + sse.Data
	}
	return ev
}

// UntilSSE reads events until one named method (the SSE event name, the
// notification's method) and returns it as sent, with its id, failing if
// the stream ends or the turn completes first (unless method is
// turn/completed).
func (s *Events) UntilSSE(method string) SSEEvent {
	s.t.Helper()
	for {
		sse, ok := s.NextSSE()
		require.True(s.t, ok, "the event stream ended before %s", method)
		if sse.Event == method {
			return sse
		}
		require.NotEqual(s.t, "turn/completed", sse.Event, "the turn completed before %s", method)
	}
}

// Until reads events until one with method, failing if the stream ends or
// the turn completes first (unless method is turn/completed).
func (s *Events) Until(method string) api.HTTPEvent {
	s.t.Helper()
	return decodeEvent(s.UntilSSE(method))
}

// Rest reads the stream to its end and returns its events' methods.
func (s *Events) Rest() []string {
	s.t.Helper()
	var out []string
	for {
		ev, ok := s.Next()
		if !ok {
			return out
		}
		out = append(out, ev.Method)
	}
}

// Metrics scrapes url (a /metrics endpoint) and returns each sample as
// "name{labels}" (labels as the text format prints them) → value.
func Metrics(t testing.TB, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return out
}
