package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/eventlog"
	"github.com/appserver/appserver/internal/frontdoor"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/reqlog"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/memory"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/turns"
)

// env is the real stack the API runs on: a store, the server (whose router
// mounts the API at /v1 behind a real listener), the turns manager, the
// dynamic tool broker and a scripted fake model.
type env struct {
	t      testing.TB
	fake   *fakemodel.Server
	st     store.Store
	srv    *server.Server
	drain  *frontdoor.Drain
	mgr    *turns.Manager
	hub    *hub.Hub
	broker *dynamic.Broker
	api    *API
	url    string // http://127.0.0.1:PORT
	token  string // the operator's token, "" without auth
	close  func() // shuts the daemon down in its order; idempotent
	// clock is the browser credentials' clock, which advance moves.
	clockMu sync.Mutex
	clock   time.Time
}

func (e *env) now() time.Time {
	e.clockMu.Lock()
	defer e.clockMu.Unlock()
	return e.clock
}

// advance moves the browser credentials' clock.
func (e *env) advance(d time.Duration) {
	e.clockMu.Lock()
	defer e.clockMu.Unlock()
	e.clock = e.clock.Add(d)
}

type envOpts struct {
	script string
	// token enables capability-token auth with this token.
	token string
	// principals maps principal names to their tokens; each gets a
	// workspace root of its own.
	principals map[string]string
	// ceiling bounds the principals' threads.
	ceiling principal.Ceiling
	// sandbox and approvalPolicy are the daemon's defaults.
	sandbox, approvalPolicy string
	// config adjusts the API's configuration.
	config func(*Config)
	// reconnect is the broker's ReconnectTimeout; 0 means a minute.
	reconnect time.Duration
	// manual leaves the housekeeping off: the test detaches idle logs.
	manual bool
	// approval is the hub's approval timeout rule.
	approval hub.Timeouts
	// durable gives the hub the durable event log as its journal.
	durable bool
	// dbPath is the SQLite file; "" means a new one.
	dbPath string
	// origins are the front door's allowed_origins.
	origins []string
	// logs receives the debug log of the front door, the API, the server,
	// the turns and the model client, as JSON lines with request ids;
	// nil discards it.
	logs io.Writer
}

func digest(token string) string {
	d := sha256.Sum256([]byte(token))
	return hex.EncodeToString(d[:])
}

type oneProvider struct{ c model.Client }

func (p oneProvider) Client(string) (model.Client, error) { return p.c, nil }

// dynamicTools builds each turn's tools: the thread's dynamic tools only.
func dynamicTools(b *dynamic.Broker) turns.ToolsFactory {
	return func(tc turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
		bld := registry.NewBuilder(registry.Config{})
		if len(tc.DynamicTools) == 0 {
			specs, reg := bld.Build()
			return specs, reg, nil
		}
		tools, err := dynamic.Restore(tc.DynamicTools, dynamic.Options{})
		if err != nil {
			return nil, nil, err
		}
		h := dynamic.NewHandler(dynamic.HandlerConfig{ThreadID: tc.ThreadID, Tools: tools, Broker: b, Items: tc.Sink})
		if err := tools.AddTo(bld, h); err != nil {
			return nil, nil, err
		}
		specs, reg := bld.Build()
		return tools.OfferedSpecs(specs), reg, nil
	}
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	if o.script == "" {
		o.script = `{"steps":[]}`
	}
	s, err := fakemodel.ParseScript([]byte(o.script))
	require.NoError(t, err)
	fake, err := fakemodel.Start(s)
	require.NoError(t, err)
	if o.dbPath == "" {
		o.dbPath = filepath.Join(t.TempDir(), "a.db")
	}
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: o.dbPath, Migrate: true})
	require.NoError(t, err)
	var journal *eventlog.Log
	hcfg := hub.Config{ToolCall: hub.Timeouts{NoClient: o.reconnect}, Approval: o.approval}
	if o.durable {
		journal, err = eventlog.New(eventlog.Config{Store: st})
		require.NoError(t, err)
		require.NoError(t, journal.Start(context.Background()))
		hcfg.Journal = journal
	}
	principals := map[string]string{}
	roots := map[string][]string{}
	for name, tok := range o.principals {
		principals[name] = digest(tok)
		roots[name] = nil
	}
	var authn *auth.Authenticator
	switch {
	case o.token != "":
		authn, err = auth.New(auth.Config{Mode: auth.CapabilityToken, TokenSHA256: digest(o.token), Principals: principals})
		require.NoError(t, err)
	case len(principals) > 0:
		authn, err = auth.New(auth.Config{Principals: principals})
		require.NoError(t, err)
	}
	rules, err := principal.New(principal.Config{Roots: roots, Ceiling: o.ceiling, WorkspacesDir: t.TempDir()})
	require.NoError(t, err)
	if o.reconnect == 0 {
		o.reconnect = time.Minute
	}
	if hcfg.ToolCall.NoClient == 0 {
		hcfg.ToolCall.NoClient = o.reconnect
	}
	hb := hub.New(hcfg)
	broker := hb.Broker()
	log := slog.New(slog.DiscardHandler)
	if o.logs != nil {
		log = slog.New(reqlog.NewHandler(slog.NewJSONHandler(o.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	}
	client, err := model.New(model.ProviderConfig{ID: "fake", BaseURL: fake.URL(), MaxRetries: -1}, log)
	require.NoError(t, err)
	mgr, err := turns.New(turns.Config{
		Store: st, Sink: hb, Ephemeral: memory.New(memory.Config{}), Models: oneProvider{client}, Tools: dynamicTools(broker),
		ValidateDynamicTools: func(specs []api.DynamicToolSpec) (json.RawMessage, error) {
			tools, err := dynamic.Validate(specs, dynamic.Options{})
			if err != nil {
				return nil, err
			}
			return json.Marshal(tools)
		},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir(), SandboxMode: o.sandbox, ApprovalPolicy: o.approvalPolicy},
		Logger:   log,
	})
	require.NoError(t, err)
	e := &env{t: t, fake: fake, st: st, hub: hb, broker: broker, mgr: mgr, token: o.token, clock: time.Now()}
	browser, err := auth.NewBrowser(auth.BrowserConfig{Store: st, Now: e.now, Logger: log})
	require.NoError(t, err)
	drain := new(frontdoor.Drain)
	srv, err := server.New(server.Config{Auth: authn, Browser: browser, Principals: rules, Hub: hb, Threads: mgr, Draining: drain.Draining, Logger: log})
	require.NoError(t, err)
	cfg := Config{
		Threads: mgr, Hub: hb, Keys: st, Auth: authn, Browser: browser, Principals: rules,
		Draining: drain.Draining, Heartbeat: 50 * time.Millisecond, Logger: log,
	}
	if o.config != nil {
		o.config(&cfg)
	}
	a, err := New(cfg)
	require.NoError(t, err)
	fd, err := frontdoor.New(frontdoor.Config{
		Drain: drain, Mounts: []frontdoor.Mount{{Pattern: "/v1", Handler: a.Handler()}}, Upgrade: srv.Handler(),
		AllowedOrigins: o.origins, Logger: log,
	})
	require.NoError(t, err)
	if !o.manual {
		require.NoError(t, a.Start(context.Background()))
	}
	hs := httptest.NewServer(fd.Handler())
	e.srv, e.drain, e.api, e.url = srv, drain, a, hs.URL
	var once sync.Once
	e.close = func() {
		once.Do(func() {
			// The order of the daemon's shutdown: turns, broker, streams,
			// connections, event log, store.
			mgr.Stop()
			broker.Close()
			a.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.CloseConnections(ctx)
			hs.Close()
			http.DefaultClient.CloseIdleConnections()
			if journal != nil {
				journal.Stop()
			}
			_ = st.Close()
			fake.Close()
		})
	}
	t.Cleanup(e.close)
	return e
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) problem(t testing.TB) api.Problem {
	t.Helper()
	require.Equal(t, api.ProblemContentType, r.header.Get("Content-Type"), "%d %s", r.status, r.body)
	var p api.Problem
	require.NoError(t, json.Unmarshal(r.body, &p), string(r.body))
	require.Equal(t, r.status, p.Status)
	require.NotEmpty(t, p.Title)
	return p
}

func (r response) decode(t testing.TB, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.body, v), string(r.body))
}

// req is one request to send.
type req struct {
	method, path string
	body         any // string: sent as is; else JSON-encoded
	token        *string
	header       http.Header
}

// do sends a request with the operator's token unless r.token says other.
func (e *env) do(r req) response {
	e.t.Helper()
	var rd io.Reader
	if r.body != nil {
		if s, ok := r.body.(string); ok {
			rd = strings.NewReader(s)
		} else {
			b, err := json.Marshal(r.body)
			require.NoError(e.t, err)
			rd = bytes.NewReader(b)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, r.method, e.url+r.path, rd)
	require.NoError(e.t, err)
	if r.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	token := e.token
	if r.token != nil {
		token = *r.token
	}
	if token != "" {
		hr.Header.Set("Authorization", "Bearer "+token)
	}
	for k, vs := range r.header {
		hr.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(hr)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func tok(s string) *string { return &s }

// createThread creates a thread (as the operator unless token is given).
func (e *env) createThread(body map[string]any, token *string) api.Thread {
	e.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	r := e.do(req{method: "POST", path: "/v1/threads", body: body, token: token})
	require.Equal(e.t, http.StatusCreated, r.status, string(r.body))
	var th api.HTTPThread
	r.decode(e.t, &th)
	require.Equal(e.t, "/v1/threads/"+th.Thread.ID, r.header.Get("Location"))
	return th.Thread
}

func textInput(s string) map[string]any {
	return map[string]any{"input": []any{map[string]any{"type": "text", "text": s}}}
}

// postTurn posts a turn and decodes the answer.
func (e *env) postTurn(threadID, query string, body any, hdr http.Header, token *string) (response, api.HTTPTurn) {
	e.t.Helper()
	r := e.do(req{method: "POST", path: "/v1/threads/" + threadID + "/turns" + query, body: body, header: hdr, token: token})
	var turn api.HTTPTurn
	if r.status < 300 {
		r.decode(e.t, &turn)
	}
	return r, turn
}

// sseEvent is one event read from a stream.
type sseEvent struct {
	id     int64
	name   string
	data   []byte
	method string
	params json.RawMessage
}

// stream is an open event stream.
type stream struct {
	t      testing.TB
	resp   *http.Response
	cancel context.CancelFunc
	sc     *bufio.Scanner
}

// openStream opens GET .../events with query and headers; it returns the
// response for non-200 answers.
func (e *env) openStream(threadID, query string, hdr http.Header, token *string) (*stream, response) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/v1/threads/"+threadID+"/events"+query, nil)
	require.NoError(e.t, err)
	t := e.token
	if token != nil {
		t = *token
	}
	if t != "" {
		hr.Header.Set("Authorization", "Bearer "+t)
	}
	for k, vs := range hdr {
		hr.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(hr)
	require.NoError(e.t, err)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, response{status: resp.StatusCode, header: resp.Header, body: b}
	}
	require.Equal(e.t, "text/event-stream", resp.Header.Get("Content-Type"))
	s := &stream{t: e.t, resp: resp, cancel: cancel, sc: bufio.NewScanner(resp.Body)}
	s.sc.Buffer(make([]byte, 64<<10), 16<<20)
	e.t.Cleanup(s.close)
	return s, response{status: http.StatusOK, header: resp.Header}
}

func (s *stream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next returns the next event; ok is false at the end of the stream.
// Comments and the retry field are skipped.
func (s *stream) next() (ev sseEvent, ok bool) {
	s.t.Helper()
	done := make(chan struct{})
	timer := time.AfterFunc(15*time.Second, func() {
		select {
		case <-done:
		default:
			s.cancel()
		}
	})
	defer func() { close(done); timer.Stop() }()
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if ev.data != nil {
				var f struct {
					Method string          `json:"method"`
					Params json.RawMessage `json:"params"`
				}
				require.NoError(s.t, json.Unmarshal(ev.data, &f), string(ev.data))
				ev.method, ev.params = f.Method, f.Params
				require.Equal(s.t, ev.name, ev.method)
				return ev, true
			}
		case strings.HasPrefix(line, "id: "):
			n, err := strconv.ParseInt(line[4:], 10, 64)
			require.NoError(s.t, err)
			ev.id = n
		case strings.HasPrefix(line, "event: "):
			ev.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = []byte(line[6:])
		}
	}
	return sseEvent{}, false
}

// until reads events until one with method arrives and returns every event
// read, that one last.
func (s *stream) until(method string) []sseEvent {
	s.t.Helper()
	var out []sseEvent
	for {
		ev, ok := s.next()
		require.True(s.t, ok, "stream ended before %s; got %v", method, methodsOf(out))
		out = append(out, ev)
		if ev.method == method {
			return out
		}
	}
}

func methodsOf(evs []sseEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.method
	}
	return out
}
