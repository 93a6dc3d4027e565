package httpapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// Defaults of the Config fields left zero.
const (
	DefaultMaxBodyBytes       = 1 << 20
	DefaultEventBuffer        = 2048
	DefaultEventBufferBytes   = 1 << 20
	DefaultMaxThreadLogs      = 1024
	DefaultIdleDetach         = 5 * time.Minute
	DefaultHeartbeat          = 15 * time.Second
	DefaultWriteTimeout       = 30 * time.Second
	DefaultIdempotencyTTL     = 24 * time.Hour
	DefaultMaxIdempotencyKeys = 10000
)

// Config configures the API. Manager, Hub and Store are required.
type Config struct {
	// Manager serves the threads; its Notifier, Subscribers and Requests
	// must be Hub.
	Manager *turns.Manager
	// Hub is where the per-thread event logs subscribe: they get the
	// thread's notifications and server requests like any client, and
	// answers posted over HTTP settle the same requests websocket clients
	// answer.
	Hub *hub.Hub
	// Store is read for items and turns.
	Store store.Store
	// Auth is the websocket's authenticator: its credential is the
	// operator's, who sees every thread. Nil means none.
	Auth *auth.Authenticator
	// Principals maps principal names to the hex SHA-256 of their bearer
	// token; a principal sees only the threads it created.
	Principals map[string]string
	// Ceiling bounds the sandbox and approval policy of the principals'
	// threads (not the operator's); the zero value is workspace-write with
	// any approval policy.
	Ceiling Ceiling
	// MCP lists the MCP servers' status (GET /mcp-servers); nil lists
	// none.
	MCP MCPStatus
	// Draining reports that the daemon is shutting down; requests then get
	// 503. Nil means never.
	Draining func() bool
	// Registerer receives the API's metrics; nil means none.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// MaxBodyBytes bounds a request body; 0 means 1 MiB.
	MaxBodyBytes int64
	// EventBuffer is how many events each thread's log keeps for
	// resuming streams; 0 means 2048.
	EventBuffer int
	// EventBufferBytes bounds the bytes a log keeps; 0 means 1 MiB.
	EventBufferBytes int
	// MaxThreadLogs is how many threads are recorded at once before idle
	// logs are detached early; 0 means 1024.
	MaxThreadLogs int
	// IdleDetach is how long a log with no running turn, no stream, no
	// pending tool call and no request stays subscribed; 0 means 5 minutes.
	IdleDetach time.Duration
	// Heartbeat is the interval of SSE keep-alive comments; 0 means 15 s.
	Heartbeat time.Duration
	// WriteTimeout bounds one write to an event stream; 0 means 30 s.
	WriteTimeout time.Duration
	// IdempotencyTTL is how long an Idempotency-Key is remembered; 0
	// means 24 hours.
	IdempotencyTTL time.Duration
	// MaxIdempotencyKeys bounds the keys remembered (oldest forgotten
	// first); 0 means 10,000.
	MaxIdempotencyKeys int
}

// API serves the HTTP/JSON API. Mount Handler at /v1 behind the server's
// origin guard; Start it, and Stop it after the turns have stopped.
type API struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	mgr     *turns.Manager
	auth    *authenticator
	logs    *logs
	idem    *idempotency
	metrics *metrics
	router  chi.Router

	stopOnce sync.Once
	stopping chan struct{} // closed by Stop: streams and waits end

	bgMu    sync.Mutex // guards started, stopped and bg.Add
	started bool
	stopped bool
	bg      sync.WaitGroup // the housekeeping and unsubscribe goroutines
}

// New builds the API.
func New(cfg Config) (*API, error) {
	if cfg.Manager == nil || cfg.Hub == nil || cfg.Store == nil {
		return nil, errors.New("httpapi: Manager, Hub and Store are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Draining == nil {
		cfg.Draining = func() bool { return false }
	}
	setDefault(&cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	setDefault(&cfg.EventBuffer, DefaultEventBuffer)
	setDefault(&cfg.EventBufferBytes, DefaultEventBufferBytes)
	setDefault(&cfg.MaxThreadLogs, DefaultMaxThreadLogs)
	setDefault(&cfg.IdleDetach, DefaultIdleDetach)
	setDefault(&cfg.Heartbeat, DefaultHeartbeat)
	setDefault(&cfg.WriteTimeout, DefaultWriteTimeout)
	setDefault(&cfg.IdempotencyTTL, DefaultIdempotencyTTL)
	setDefault(&cfg.MaxIdempotencyKeys, DefaultMaxIdempotencyKeys)
	authn, err := newAuthenticator(cfg.Auth, cfg.Principals)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	a := &API{
		cfg:      cfg,
		log:      cfg.Logger,
		now:      cfg.Now,
		mgr:      cfg.Manager,
		auth:     authn,
		metrics:  m,
		stopping: make(chan struct{}),
	}
	a.logs = newLogs(a)
	a.idem = newIdempotency(cfg.IdempotencyTTL, cfg.MaxIdempotencyKeys, cfg.Now)
	a.router = a.routes()
	return a, nil
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Handler returns the router to mount at /v1.
func (a *API) Handler() http.Handler { return a.router }

// Start runs the housekeeping goroutine: idle event logs are detached and
// expired idempotency keys forgotten. It returns at once.
func (a *API) Start(context.Context) error {
	a.bgMu.Lock()
	defer a.bgMu.Unlock()
	if a.started || a.stopped {
		return nil
	}
	a.started = true
	period := max(min(a.cfg.IdleDetach/2, 30*time.Second), time.Second)
	a.bg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-a.stopping:
				return
			case <-t.C:
				a.logs.detachIdle()
				a.idem.expire()
				if _, err := a.cfg.Store.PruneIdempotencyKeys(context.Background(), a.now()); err != nil {
					a.log.Warn("pruning idempotency keys", "err", err)
				}
			}
		}
	})
	return nil
}

// Stop ends every event stream and wait (after what they have is written)
// and the housekeeping, and waits for them. Call it after the turns have
// stopped so that streams end with the turns' last events. It tolerates
// being called twice and without Start.
func (a *API) Stop() {
	a.stopOnce.Do(func() { close(a.stopping) })
	a.bgMu.Lock()
	a.stopped = true
	a.bgMu.Unlock()
	a.bg.Wait()
}

// unsubscribe detaches a log's subscription on a goroutine of its own: it
// calls into the manager and the broker, which must not happen under the
// logs' lock.
func (a *API) unsubscribe(l *eventLog) {
	a.bgMu.Lock()
	defer a.bgMu.Unlock()
	if a.stopped {
		return // the daemon is stopping: subscriptions no longer matter
	}
	a.bg.Go(func() {
		if _, err := a.mgr.Unsubscribe(turns.Caller{Conn: l.conn}, api.ThreadUnsubscribeParams{ThreadID: l.thread}); err != nil {
			a.log.Debug("http api: unsubscribe event log", "thread", l.thread, "err", err)
		}
		a.cfg.Hub.Detach(l.conn)
	})
}

func (a *API) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(a.instrument, a.guard)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, notFound("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, newProblem(http.StatusMethodNotAllowed, api.ProblemMethodNotAllowed,
			"%s is not allowed on %s", r.Method, r.URL.Path))
	})
	r.Method(http.MethodGet, "/openapi.yaml", http.HandlerFunc(serveOpenAPI))
	r.Method(http.MethodPost, "/threads", a.handle(a.createThread))
	r.Method(http.MethodGet, "/threads", a.handle(a.listThreads))
	r.Method(http.MethodGet, "/threads/{threadID}", a.handle(a.getThread))
	r.Method(http.MethodGet, "/threads/{threadID}/items", a.handle(a.listItems))
	r.Method(http.MethodGet, "/threads/{threadID}/children", a.handle(a.listChildren))
	r.Method(http.MethodPost, "/threads/{threadID}/turns", a.handle(a.postTurn))
	r.Method(http.MethodGet, "/threads/{threadID}/turns/{turnID}", a.handle(a.getTurn))
	r.Method(http.MethodPost, "/threads/{threadID}/turns/{turnID}/interrupt", a.handle(a.interruptTurn))
	r.Method(http.MethodGet, "/threads/{threadID}/events", a.handle(a.events))
	r.Method(http.MethodPost, "/threads/{threadID}/tool-calls/{callID}", a.handle(a.answerToolCall))
	r.Method(http.MethodPost, "/threads/{threadID}/approvals/{requestID}", a.handle(a.answerApproval))
	r.Method(http.MethodGet, "/mcp-servers", a.handle(a.listMCPServers))
	return r
}

// serveOpenAPI answers with the API's description, the one built into this
// binary, so that a client can be generated for the daemon it talks to.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Length", strconv.Itoa(len(api.OpenAPI)))
	_, _ = io.WriteString(w, api.OpenAPI)
}

// handlerFunc is an API handler: it writes its answer, or returns the
// problem to answer with.
type handlerFunc func(w http.ResponseWriter, r *http.Request) *problem

func (a *API) handle(f handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := f(w, r); p != nil {
			writeProblem(w, r, p)
		}
	})
}

// guard refuses requests while draining and authenticates the others.
func (a *API) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") != "" {
			// The server's origin guard admitted the origin; let browser
			// code read what our answers carry in headers.
			w.Header().Set("Access-Control-Expose-Headers", "Location, Idempotent-Replayed, Preference-Applied, Retry-After")
		}
		if a.cfg.Draining() {
			writeProblem(w, r, unavailable("the server is shutting down"))
			return
		}
		who, p := a.auth.identify(r)
		if p != nil {
			a.metrics.authFailures.Inc()
			writeProblem(w, r, p)
			return
		}
		next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), who)))
	})
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes and
// write deadlines of event streams).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// instrument counts requests by route pattern and status.
func (a *API) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := a.now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			method := r.Method
			switch method {
			case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions:
			default:
				method = "OTHER" // any token is a method: bound the label values
			}
			route = method + " " + rc.RoutePattern()
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		a.metrics.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
		a.metrics.duration.WithLabelValues(route).Observe(a.now().Sub(start).Seconds())
	})
}

// visibleThread returns a thread the caller may see; any other id, valid
// or not, is the same 404, so that nothing tells another principal's
// thread from a missing one.
func (a *API) visibleThread(r *http.Request) (api.Thread, *problem) {
	raw := chi.URLParam(r, "threadID")
	res, err := a.mgr.ReadThread(r.Context(), api.ThreadReadParams{ThreadID: raw})
	if err != nil {
		var p *problem
		if errors.As(err, &p) {
			return api.Thread{}, p
		}
		if apperr.Is(err, apperr.NotFound) || apperr.Is(err, apperr.Invalid) {
			return api.Thread{}, notFound("thread %s not found", raw)
		}
		return api.Thread{}, a.fromError(r, err)
	}
	if !principalOf(r).sees(res.Thread) {
		return api.Thread{}, notFound("thread %s not found", raw)
	}
	return res.Thread, nil
}
