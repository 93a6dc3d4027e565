package fakemodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// maxBody bounds a request body.
const maxBody = 64 << 20

// maxPreallocated bounds the buffer readBody allocates on a request's
// declared length, before its bytes arrive.
const maxPreallocated = 4 << 20

// Config configures a Server.
type Config struct {
	// Addr is the listen address; empty means 127.0.0.1:0.
	Addr string
	// Script is what the server answers.
	Script Script
	// Logger receives one line per request; nil discards.
	Logger *slog.Logger
}

// RecordedRequest is a request the server received.
type RecordedRequest struct {
	// Method is the HTTP method.
	Method string
	// Path is the URL path, e.g. "/v1/responses".
	Path string
	// Query is the raw URL query.
	Query string
	// Header holds the request headers.
	Header http.Header
	// Body is the request body as received.
	Body []byte
	// Step is the index of the step that answered, or -1 when none did
	// (script exhausted, no matching step, bad request).
	Step int
}

// Decode unmarshals the recorded body into v.
func (r RecordedRequest) Decode(v any) error {
	return json.Unmarshal(r.Body, v)
}

// Server is a scripted fake model server on loopback, speaking
// POST /v1/responses and POST /v1/chat/completions with streaming.
type Server struct {
	ln       net.Listener
	srv      *http.Server
	log      *slog.Logger
	done     chan struct{}
	serveErr chan error
	handlers sync.WaitGroup
	stop     sync.Once

	// mu guards the fields below.
	mu     sync.Mutex
	closed bool // set by Close; no handler may start after it
	script Script
	used   []int // requests answered per step
	reqs   []RecordedRequest
	seq    int // responses served, for ids
}

// Start starts a server on 127.0.0.1 with a free port.
func Start(script Script) (*Server, error) {
	return StartConfig(Config{Script: script})
}

// StartConfig starts a server as configured.
func StartConfig(cfg Config) (*Server, error) {
	if err := cfg.Script.Validate(); err != nil {
		return nil, err
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("fakemodel: %w", err)
	}
	s := &Server{
		ln:       ln,
		log:      cfg.Logger,
		done:     make(chan struct{}),
		serveErr: make(chan error, 1),
		script:   cfg.Script,
		used:     make([]int, len(cfg.Script.Steps)),
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	go func() { s.serveErr <- s.srv.Serve(ln) }()
	return s, nil
}

// URL returns the API base URL, e.g. "http://127.0.0.1:41234/v1"; append
// "/responses" or "/chat/completions".
func (s *Server) URL() string {
	return "http://" + s.ln.Addr().String() + "/v1"
}

// Close stops the server, cutting any stream in progress, and waits for its
// goroutines. It may be called more than once.
func (s *Server) Close() {
	s.stop.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.done)
		_ = s.srv.Close()
		<-s.serveErr
		s.handlers.Wait()
	})
}

// Requests returns the requests received so far, oldest first.
func (s *Server) Requests() []RecordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]RecordedRequest, len(s.reqs))
	copy(out, s.reqs)
	return out
}

// Reset forgets the recorded requests and rewinds the script.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
}

// SetScript replaces the script and resets the server.
func (s *Server) SetScript(script Script) error {
	if err := script.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = script
	s.resetLocked()
	return nil
}

func (s *Server) resetLocked() {
	s.reqs = nil
	s.used = make([]int, len(s.script.Steps))
	s.seq = 0
}

// wireAPI tells which API a request speaks.
type wireAPI int

const (
	apiResponses wireAPI = iota
	apiChat
)

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		writeError(w, &HTTPError{Status: http.StatusServiceUnavailable, Message: "fake model: shutting down"})
		return
	}
	s.handlers.Add(1)
	s.mu.Unlock()
	defer s.handlers.Done()

	var api wireAPI
	switch strings.TrimPrefix(r.URL.Path, "/v1") {
	case "/responses":
		api = apiResponses
	case "/chat/completions":
		api = apiChat
	default:
		writeError(w, &HTTPError{Status: http.StatusNotFound, Message: "fake model: unknown path " + r.URL.Path, Type: "invalid_request_error"})
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, &HTTPError{Status: http.StatusMethodNotAllowed, Message: "fake model: use POST", Type: "invalid_request_error"})
		return
	}
	body, err := readBody(r)
	if err != nil {
		return // the client went away
	}
	rec := RecordedRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body, Step: -1}

	var req request
	if err := decodeRequest(body, &req); err != nil {
		s.record(rec)
		writeError(w, &HTTPError{Status: http.StatusBadRequest, Message: "fake model: request body is not JSON: " + err.Error(), Type: "invalid_request_error"})
		return
	}
	if stream, _ := req.Stream.(bool); !stream {
		s.record(rec)
		writeError(w, &HTTPError{Status: http.StatusBadRequest, Message: "fake model: only stream=true is supported", Type: "invalid_request_error"})
		return
	}
	facts := requestFacts(api, req)

	s.mu.Lock()
	idx, pending := s.pickLocked(facts)
	rec.Step = idx
	s.reqs = append(s.reqs, rec)
	s.seq++
	seq := s.seq
	var step Step
	switch {
	case idx >= 0:
		step = s.script.Steps[idx]
	case pending == 0:
		step = Step{Name: "exhausted", Text: s.script.ExhaustedText}
		if step.Text == "" {
			step.Text = DefaultExhaustedText
		}
	}
	s.mu.Unlock()

	s.log.Info("fake model request", "path", r.URL.Path, "step", idx, "name", step.Name)
	if idx < 0 && pending > 0 {
		writeError(w, &HTTPError{Status: http.StatusBadRequest, Type: "invalid_request_error",
			Message: fmt.Sprintf("fake model: none of the %d pending script steps matches this request", pending)})
		return
	}
	if !s.wait(r, step.DelayMS) {
		return
	}
	for k, v := range step.Headers {
		w.Header().Set(k, v)
	}
	if step.Error != nil {
		writeError(w, step.Error)
		return
	}
	model, _ := req.Model.(string)
	sw := newStreamWriter(w, r, s.done, step, api == apiChat)
	if api == apiChat {
		includeUsage := false
		if so, ok := req.StreamOptions.(map[string]any); ok {
			includeUsage, _ = so["include_usage"].(bool)
		}
		writeChat(sw, step, seq, model, includeUsage)
	} else {
		writeResponses(sw, step, seq, model)
	}
}

// readBody reads a request body whole (at most maxBody bytes): into one
// buffer of its declared length when it declares one up to
// maxPreallocated, which the server's reader fills straight from the
// connection. io.ReadAll, growing from 512 bytes, read a long thread's
// request through the server's 4 KB buffer and copied it at each growth.
// Past maxPreallocated the buffer grows with the bytes received, so that
// a declared length alone holds no memory.
func readBody(r *http.Request) ([]byte, error) {
	body := io.LimitReader(r.Body, maxBody)
	if n := r.ContentLength; n > 0 && n <= maxPreallocated {
		buf := make([]byte, n)
		if _, err := io.ReadFull(body, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	return io.ReadAll(body)
}

func (s *Server) record(rec RecordedRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, rec)
}

// pickLocked consumes the first pending step that matches; it returns -1
// and the number of pending steps when none does.
func (s *Server) pickLocked(f facts) (idx, pending int) {
	idx = -1
	for i, st := range s.script.Steps {
		if s.used[i] >= st.times() {
			continue
		}
		pending++
		if idx < 0 && f.matches(st.Match) {
			idx = i
		}
	}
	if idx >= 0 {
		s.used[idx]++
	}
	return idx, pending
}

// wait sleeps for ms milliseconds unless the client or the server goes away
// first; it reports whether to carry on.
func (s *Server) wait(r *http.Request, ms int) bool {
	if ms <= 0 {
		return true
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-s.done:
	}
	return false
}

// facts are what step matching looks at.
type facts struct {
	lastCallOutput string // call id, when the last input item is a tool output
	lastUserText   string
}

func (f facts) matches(m *Match) bool {
	if m == nil {
		return true
	}
	if m.CallOutput != "" && m.CallOutput != f.lastCallOutput {
		return false
	}
	if m.UserText != "" && !strings.Contains(f.lastUserText, m.UserText) {
		return false
	}
	return true
}

// request is what the server reads of a request body. The fields it
// does not look at stay undecoded, and so do the input items' contents
// but for the user messages that decide a match: decoding a whole body
// into maps, as this server did before, was 61 % of the bench
// process's CPU in BenchmarkShellTurns/threads=1 (its profile): 1 to 2 ms
// a request by the end of a 200-turn thread, on the cores the daemon
// under test shares. Fields of an unexpected JSON type read as absent.
// Unlike the maps, keys match in any letter case ("Role" reads as
// "role"), as encoding/json matches struct fields; the daemon's requests
// spell them one way.
type request struct {
	Stream        any `json:"stream"`
	Model         any `json:"model"`
	StreamOptions any `json:"stream_options"`
	// Input has every item of the request, but read by scanRequest only
	// the items requestFacts looks at are filled in: those before the
	// last user message are zero (scanInput).
	Input    []inputItem `json:"input"`
	Messages []inputItem `json:"messages"`
	// InputText is input when it is a string.
	InputText string `json:"-"`
}

// decodeRequest decodes body into req in one pass of encoding/json. A
// value of an unexpected type (an input that is a string, an element
// that is not an object) leaves that field zero and is reported as an
// *json.UnmarshalTypeError after the rest is decoded; then body is
// decoded again, item by item, so that each such value reads as absent
// and the rest as written.
func decodeRequest(body []byte, req *request) error {
	if scanRequest(body, req) {
		return nil
	}
	*req = request{}
	err := json.Unmarshal(body, req)
	var typeErr *json.UnmarshalTypeError
	if err == nil || !errors.As(err, &typeErr) || typeErr.Field == "" {
		return err
	}
	var raw struct {
		Input    json.RawMessage `json:"input"`
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return err
	}
	if json.Unmarshal(raw.Input, &req.InputText) != nil {
		req.InputText = ""
	}
	req.Input, req.Messages = items(raw.Input), items(raw.Messages)
	return nil
}

// inputItem is what matching reads of an input item or chat message.
type inputItem struct {
	Type       lenientString   `json:"type"`
	Role       lenientString   `json:"role"`
	CallID     lenientString   `json:"call_id"`
	ToolCallID lenientString   `json:"tool_call_id"`
	Content    json.RawMessage `json:"content"`
}

// isUserMessage reports whether the item is a message of the user.
func (it inputItem) isUserMessage() bool {
	return it.Role == "user" && (it.Type == "" || it.Type == "message")
}

// lenientString is a JSON string, or "" for a value of another type.
type lenientString string

func (s *lenientString) UnmarshalJSON(b []byte) error {
	if len(b) >= 2 && b[0] == '"' && bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b) {
		*s = lenientString(b[1 : len(b)-1]) // nothing to unescape
		return nil
	}
	var v string
	if json.Unmarshal(b, &v) != nil {
		v = "" // a later duplicate key of another type wins, as in a map
	}
	*s = lenientString(v)
	return nil
}

// items returns the elements of a JSON array, each decoded as far as
// matching reads it (zero when it is not an object); nil when raw is not
// an array.
func items(raw json.RawMessage) []inputItem {
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return nil
	}
	out := make([]inputItem, len(elems))
	for i, e := range elems {
		if json.Unmarshal(e, &out[i]) != nil {
			out[i] = inputItem{}
		}
	}
	return out
}

func requestFacts(api wireAPI, req request) facts {
	var f facts
	if api == apiChat {
		// A tool message counts as the last input until an assistant
		// message or a user message with text follows it; a trailing
		// image-only user message (how images in tool output travel over
		// chat) does not hide it.
		for _, msg := range req.Messages {
			switch msg.Role {
			case "tool":
				f.lastCallOutput = string(msg.ToolCallID)
			case "user":
				if text := contentText(msg.Content); text != "" {
					f.lastUserText = text
					f.lastCallOutput = ""
				}
			default:
				f.lastCallOutput = ""
			}
		}
		return f
	}
	if req.InputText != "" {
		f.lastUserText = req.InputText
		return f
	}
	input := req.Input
	lastUser := -1
	for i, item := range input {
		if item.isUserMessage() {
			lastUser = i
		}
		if i == len(input)-1 && (item.Type == "function_call_output" || item.Type == "custom_tool_call_output" || item.Type == "tool_search_output") {
			f.lastCallOutput = string(item.CallID)
		}
	}
	if lastUser >= 0 {
		f.lastUserText = contentText(input[lastUser].Content)
	}
	return f
}

// contentText joins the text of a string or content-part array.
func contentText(raw json.RawMessage) string {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return text
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		var part struct {
			Text any `json:"text"`
		}
		if json.Unmarshal(p, &part) == nil {
			if t, ok := part.Text.(string); ok {
				b.WriteString(t)
			}
		}
	}
	return b.String()
}

func writeError(w http.ResponseWriter, e *HTTPError) {
	if e.RetryAfter != "" {
		w.Header().Set("Retry-After", e.RetryAfter)
	}
	body := []byte(e.Body)
	if e.Body == "" {
		w.Header().Set("Content-Type", "application/json")
		var code any
		if e.Code != "" {
			code = e.Code
		}
		body, _ = json.Marshal(map[string]any{"error": map[string]any{
			"message": e.Message, "type": e.Type, "param": nil, "code": code,
		}})
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// errStop ends a stream early, as scripted or because the peer went away.
var errStop = errors.New("stop stream")

// streamWriter writes SSE events, applying the step's delays and failure.
type streamWriter struct {
	w     http.ResponseWriter
	r     *http.Request
	done  <-chan struct{}
	delay time.Duration
	fail  *StreamFailure
	chat  bool
	sent  int
	err   error
}

func newStreamWriter(w http.ResponseWriter, r *http.Request, done <-chan struct{}, step Step, chat bool) *streamWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush()
	return &streamWriter{w: w, r: r, done: done, delay: time.Duration(step.EventDelayMS) * time.Millisecond, fail: step.Fail, chat: chat}
}

// send writes one event (event is the SSE event name, or "" for none; data
// is JSON-encoded unless it is a string). Once it fails, later calls do
// nothing, so writers can ignore errors until the end.
func (sw *streamWriter) send(event string, data any) {
	if sw.err != nil {
		return
	}
	if f := sw.fail; f != nil && sw.sent == f.AfterEvents {
		sw.err = errStop
		switch f.Kind {
		case FailReset:
			panic(http.ErrAbortHandler) // net/http drops the connection
		case FailMalformed:
			sw.write("", `{"type":"response.output_text.delta","delta":`)
		case FailFailed:
			if sw.chat {
				sw.write("", sw.failure())
			} else {
				sw.write("response.failed", sw.failure())
			}
		case FailStall:
			select {
			case <-sw.r.Context().Done():
			case <-sw.done:
			}
		}
		return
	}
	if sw.delay > 0 {
		t := time.NewTimer(sw.delay)
		select {
		case <-t.C:
		case <-sw.r.Context().Done():
			sw.err = errStop
		case <-sw.done:
			sw.err = errStop
		}
		t.Stop()
		if sw.err != nil {
			return
		}
	}
	if err := sw.write(event, data); err != nil {
		sw.err = err
		return
	}
	sw.sent++
}

// failure is the payload of a scripted "failed" event.
func (sw *streamWriter) failure() any {
	f := sw.fail
	msg := f.Message
	if msg == "" {
		msg = "fake model: scripted failure"
	}
	var code any
	if f.Code != "" {
		code = f.Code
	}
	errObj := map[string]any{"code": code, "message": msg}
	if sw.chat {
		errObj["type"] = "server_error"
		return map[string]any{"error": errObj}
	}
	return map[string]any{"type": "response.failed", "response": map[string]any{
		"id": "resp_failed", "object": "response", "status": "failed", "error": errObj, "output": []any{},
	}}
}

func (sw *streamWriter) write(event string, data any) error {
	var payload []byte
	if s, ok := data.(string); ok {
		payload = []byte(s)
	} else {
		var err error
		if payload, err = json.Marshal(data); err != nil {
			return err
		}
	}
	var b bytes.Buffer
	if event != "" {
		fmt.Fprintf(&b, "event: %s\n", event)
	}
	fmt.Fprintf(&b, "data: %s\n\n", payload)
	if _, err := sw.w.Write(b.Bytes()); err != nil {
		return err
	}
	return http.NewResponseController(sw.w).Flush()
}
