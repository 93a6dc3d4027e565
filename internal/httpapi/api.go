package httpapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/reqlog"
	"github.com/appserver/appserver/internal/turns"
	"github.com/appserver/appserver/internal/turns/transcript"
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

// Threads is what the API asks of the thread table (turns.Manager): the
// methods it serves, and the read side of single turns and stored items,
// which answers for a turn whether or not a log here saw it run.
type Threads interface {
	StartThread(ctx context.Context, c turns.Caller, p api.ThreadStartParams) (api.ThreadStartResult, turns.After, error)
	ReadThread(ctx context.Context, p api.ThreadReadParams) (api.ThreadReadResult, error)
	ListAllThreads(ctx context.Context, who principal.Principal, p api.ThreadListParams) (api.ThreadListResult, error)
	ListChildren(ctx context.Context, threadID string) ([]api.Thread, error)
	ListItems(ctx context.Context, p api.ThreadItemsListParams) (api.ThreadItemsListResult, error)
	StartTurn(ctx context.Context, c turns.Caller, p api.TurnStartParams) (api.TurnStartResult, turns.After, error)
	InterruptTurn(ctx context.Context, p api.TurnInterruptParams) (turns.After, error)
	DeleteThread(ctx context.Context, p api.ThreadDeleteParams) (turns.After, error)
	TurnStatus(ctx context.Context, threadID, turnID string) (api.TurnStatus, error)
	TurnRecord(ctx context.Context, threadID, turnID string) (transcript.TurnRecord, error)
	ItemRecords(ctx context.Context, q transcript.ItemsQuery) ([]transcript.ItemRecord, string, error)
	Running(threadID string) bool
	QueueAdd(ctx context.Context, p api.ThreadQueueAddParams) (api.ThreadQueueAddResult, turns.After, error)
	QueueList(ctx context.Context, p api.ThreadQueueListParams) (api.ThreadQueueListResult, error)
	QueueUpdate(ctx context.Context, p api.ThreadQueueUpdateParams) (api.ThreadQueueUpdateResult, turns.After, error)
	QueueDelete(ctx context.Context, p api.ThreadQueueDeleteParams) (api.ThreadQueueDeleteResult, turns.After, error)
	QueueReorder(ctx context.Context, p api.ThreadQueueReorderParams) (api.ThreadQueueReorderResult, turns.After, error)
	QueueStart(ctx context.Context, c turns.Caller, p api.ThreadQueueStartParams) (api.TurnStartResult, turns.After, error)
}

// IdempotencyKeys keeps the claims of Idempotency-Keys for every daemon of
// the database (the store).
type IdempotencyKeys interface {
	ClaimIdempotencyKey(ctx context.Context, scope, key string, hash []byte, now, expires time.Time) (claimed bool, turnID string, err error)
	CompleteIdempotencyKey(ctx context.Context, scope, key, turnID string) error
	ReleaseIdempotencyKey(ctx context.Context, scope, key string) error
	PruneIdempotencyKeys(ctx context.Context, now time.Time) (int64, error)
}

// Config configures the API. Threads, Hub and Keys are required.
type Config struct {
	// Threads serves the threads; its Sink must be Hub.
	Threads Threads
	// Hub is where the per-thread event logs subscribe: they get the
	// thread's notifications and server requests like any client, and
	// answers posted over HTTP settle the same requests websocket clients
	// answer.
	Hub *hub.Hub
	// Keys keeps the Idempotency-Key claims.
	Keys IdempotencyKeys
	// Auth is the websocket's authenticator: its credential is the
	// operator's, who sees every thread, and it knows the principals'
	// tokens. Nil means none.
	Auth *auth.Authenticator
	// Browser issues tickets and session cookies (/v1/auth/...) and takes
	// them back: a ticket on the event streams, the cookie on every
	// route. Nil serves none (501).
	Browser *auth.Browser
	// Principals are the rules of the principals Auth identifies: the
	// threads each sees, the ceiling and the workspace roots of its
	// threads. Nil means none.
	Principals *principal.Rules
	// Audit reads the audit log (/audit); nil answers 501.
	Audit AuditLog
	// Recorder records the webhook subscriptions made and deleted in the
	// audit log; nil records nothing.
	Recorder *audit.Log
	// Webhooks keeps and runs the webhook subscriptions (/webhooks); nil
	// serves none (501).
	Webhooks Webhooks
	// MCP lists the MCP servers' status (GET /mcp-servers); nil lists
	// none.
	MCP MCPStatus
	// Budgets serves the budget endpoints (/budget, /threads/{id}/budget);
	// nil answers them 404.
	Budgets Budgets
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
	threads Threads
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
	if cfg.Threads == nil || cfg.Hub == nil || cfg.Keys == nil {
		return nil, errors.New("httpapi: Threads, Hub and Keys are required")
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
	m := newMetrics(cfg.Registerer)
	a := &API{
		cfg:      cfg,
		log:      cfg.Logger,
		now:      cfg.Now,
		threads:  cfg.Threads,
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
				if _, err := a.cfg.Keys.PruneIdempotencyKeys(context.Background(), a.now()); err != nil {
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
	a.bg.Go(func() { a.cfg.Hub.Detach(l.conn) })
}

func (a *API) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(a.instrument, refuseNUL)
	// Each route is behind the guard of its door: the credentials it
	// takes besides the Authorization header (auth.Identify).
	bearer, stream, rest := r.With(a.guard(auth.BearerDoor)), r.With(a.guard(auth.EventStreamDoor)), r.With(a.guard(auth.APIDoor))
	r.NotFound(a.guard(auth.APIDoor)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, notFound("no such endpoint: %s %s", r.Method, r.URL.Path))
	})).ServeHTTP)
	r.MethodNotAllowed(a.guard(auth.APIDoor)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, newProblem(http.StatusMethodNotAllowed, api.ProblemMethodNotAllowed,
			"%s is not allowed on %s", r.Method, r.URL.Path))
	})).ServeHTTP)
	rest.Method(http.MethodGet, "/openapi.yaml", http.HandlerFunc(serveOpenAPI))
	rest.Method(http.MethodPost, "/threads", a.handle(a.createThread))
	rest.Method(http.MethodGet, "/threads", a.handle(a.listThreads))
	rest.Method(http.MethodGet, "/threads/{threadID}", a.handle(a.getThread))
	rest.Method(http.MethodDelete, "/threads/{threadID}", a.handle(a.deleteThread))
	rest.Method(http.MethodGet, "/threads/{threadID}/items", a.handle(a.listItems))
	rest.Method(http.MethodGet, "/threads/{threadID}/children", a.handle(a.listChildren))
	rest.Method(http.MethodPost, "/threads/{threadID}/turns", a.handle(a.postTurn))
	rest.Method(http.MethodGet, "/threads/{threadID}/turns/{turnID}", a.handle(a.getTurn))
	rest.Method(http.MethodPost, "/threads/{threadID}/turns/{turnID}/interrupt", a.handle(a.interruptTurn))
	rest.Method(http.MethodGet, "/threads/{threadID}/queue", a.handle(a.listQueue))
	rest.Method(http.MethodPost, "/threads/{threadID}/queue", a.handle(a.addQueue))
	rest.Method(http.MethodPut, "/threads/{threadID}/queue", a.handle(a.orderQueue))
	rest.Method(http.MethodPatch, "/threads/{threadID}/queue/{queuedID}", a.handle(a.updateQueue))
	rest.Method(http.MethodDelete, "/threads/{threadID}/queue/{queuedID}", a.handle(a.deleteQueue))
	rest.Method(http.MethodPost, "/threads/{threadID}/queue/{queuedID}/start", a.handle(a.startQueue))
	stream.Method(http.MethodGet, "/threads/{threadID}/events", a.handle(a.events))
	rest.Method(http.MethodPost, "/threads/{threadID}/tool-calls/{callID}", a.handle(a.answerToolCall))
	rest.Method(http.MethodPost, "/threads/{threadID}/approvals/{requestID}", a.handle(a.answerApproval))
	rest.Method(http.MethodGet, "/mcp-servers", a.handle(a.listMCPServers))
	rest.Method(http.MethodGet, "/threads/{threadID}/budget", a.handle(a.getThreadBudget))
	rest.Method(http.MethodPut, "/threads/{threadID}/budget", a.handle(a.putThreadBudget))
	rest.Method(http.MethodGet, "/budget", a.handle(a.getBudget))
	rest.Method(http.MethodPost, "/webhooks", a.handle(a.createWebhook))
	rest.Method(http.MethodGet, "/webhooks", a.handle(a.listWebhooks))
	rest.Method(http.MethodGet, "/webhooks/{webhookID}", a.handle(a.getWebhook))
	rest.Method(http.MethodDelete, "/webhooks/{webhookID}", a.handle(a.deleteWebhook))
	rest.Method(http.MethodGet, "/webhooks/{webhookID}/deliveries", a.handle(a.listDeliveries))
	rest.Method(http.MethodGet, "/audit", a.handle(a.listAudit))
	bearer.Method(http.MethodPost, "/auth/ticket", a.handle(a.issueTicket))
	bearer.Method(http.MethodPost, "/auth/session", a.handle(a.startSession))
	rest.Method(http.MethodDelete, "/auth/session", a.handle(a.endSession))
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

// guard refuses requests while draining and authenticates the others
// with the credentials door takes; a ticket in the query is gone from the
// request next gets.
func (a *API) guard(door auth.Door) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Origin") != "" {
				// The server's origin guard admitted the origin; let browser
				// code read what our answers carry in headers.
				w.Header().Set("Access-Control-Expose-Headers", "Location, Idempotent-Replayed, Preference-Applied, Retry-After, X-Request-Id")
			}
			if a.cfg.Draining() {
				writeProblem(w, r, unavailable("the server is shutting down"))
				return
			}
			who, p := a.identify(r, door)
			if door.Tickets {
				r = auth.WithoutTicket(r)
			}
			if p != nil {
				a.metrics.authFailures.Inc()
				writeProblem(w, r, p)
				return
			}
			reqlog.SetPrincipal(r.Context(), who.LogName())
			next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), who)))
		})
	}
}

// refuseNUL answers 400 to a request whose path or query holds a NUL
// character (%00): the store can neither keep nor compare one, and every
// path and query parameter of the API is an id, a filter or a cursor.
func refuseNUL(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.IndexByte(r.URL.Path, 0) >= 0 {
			writeProblem(w, r, invalid("the path contains a NUL character"))
			return
		}
		if strings.Contains(r.URL.RawQuery, "%00") {
			for name, values := range r.URL.Query() {
				if strings.IndexByte(name, 0) >= 0 || slices.ContainsFunc(values, func(v string) bool { return strings.IndexByte(v, 0) >= 0 }) {
					writeProblem(w, r, invalid("query parameter %q contains a NUL character", name))
					return
				}
			}
		}
		next.ServeHTTP(w, r)
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
	res, err := a.threads.ReadThread(r.Context(), api.ThreadReadParams{ThreadID: raw})
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
	if !principalOf(r).Sees(res.Thread) {
		return api.Thread{}, notFound("thread %s not found", raw)
	}
	return res.Thread, nil
}
