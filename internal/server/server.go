package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/go-chi/chi/v5"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/server/rpcws"
	"github.com/appserver/appserver/internal/turns"
)

// DefaultIngressCapacity is the number of requests that may be queued or in
// flight across all connections before new ones are answered -32001.
const DefaultIngressCapacity = 128

// Pinger reports whether the transcript store is reachable; /readyz uses it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Config configures a Server. Zero values get the defaults noted per field.
type Config struct {
	// AllowedOrigins lists the exact Origin header values that may connect;
	// any other request carrying an Origin header is refused with 403.
	AllowedOrigins []string
	// Auth checks websocket upgrades; nil means no authentication.
	Auth *auth.Authenticator
	// Store is pinged by /readyz; nil means always ready.
	Store Pinger
	// Info is what initialize and the informational methods report.
	Info Info
	// LoadedThreads lists the ids of threads loaded in memory, for
	// thread/loaded/list; nil reports none.
	LoadedThreads func() []string
	// IngressCapacity bounds queued plus running requests; 0 means 128.
	IngressCapacity int
	// OutboundQueue bounds each connection's unsent frames; 0 means 1024.
	OutboundQueue int
	// OutboundBytes bounds each connection's unsent bytes (a client that
	// lets more wait is disconnected as a slow consumer); 0 means
	// rpcws.DefaultOutboundBytes (32 MiB).
	OutboundBytes int64
	// InboundBytes bounds the inbound frame bytes in flight across all
	// connections (frames beyond it are refused, requests answered
	// -32001); 0 means rpcws.DefaultInboundBytes (128 MiB).
	InboundBytes int64
	// MaxMessageBytes bounds one inbound websocket message; 0 means 16 MiB.
	MaxMessageBytes int64
	Logger          *slog.Logger
	Metrics         *Metrics
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Hub carries notifications and server requests to the sessions, which
	// attach to it once initialized; nil gives the server a hub of its own
	// with the default configuration.
	Hub *hub.Hub
	// Threads serves the thread and turn methods; nil serves none. Its
	// Notifier and Subscribers must be Hub.
	Threads *turns.Manager
	// Cwd is the daemon's working directory, absolute: command/exec runs
	// there and skills/list lists it when the request names no directory.
	Cwd string
	// CommandExec serves command/exec and its write, resize and terminate
	// methods; nil serves none of them.
	CommandExec *CommandExecConfig
	// Skills answers skills/list; nil does not serve it.
	Skills SkillLister
	// MCP serves the MCP status, call, resource and reload methods; nil
	// leaves them unanswered (-32601).
	MCP *MCPConfig
	// ConfigWriter persists config/value/write and config/batchWrite; nil
	// refuses them.
	ConfigWriter ConfigWriter
	// Terminals serves thread/backgroundTerminals/*; nil leaves them
	// unanswered (-32601).
	Terminals BackgroundTerminals
}

// BackgroundTerminals lists and ends the commands the model left running in
// a thread; *orchestrate.Service is one.
type BackgroundTerminals interface {
	// BackgroundTerminals lists the thread's running commands, by process id.
	BackgroundTerminals(threadID string) []api.ThreadBackgroundTerminal
	// TerminateBackgroundTerminal ends one; false if there is none such.
	TerminateBackgroundTerminal(threadID, processID string) bool
	// CleanBackgroundTerminals ends them all.
	CleanBackgroundTerminals(threadID string)
}

// ConfigWriter applies clients' config edits (all of them or none) and
// says where they were written.
type ConfigWriter interface {
	WriteConfig(ctx context.Context, p api.ConfigBatchWriteParams) (api.ConfigWriteResult, error)
}

// SkillLister answers skills/list for the request's directories, or for
// defaultCwd when it names none; *skills.Catalog is one.
type SkillLister interface {
	SkillsList(ctx context.Context, p api.SkillsListParams, defaultCwd string) (api.SkillsListResult, error)
}

// Server owns the listener's handler, the live sessions and the method table.
type Server struct {
	cfg     Config
	log     *slog.Logger
	metrics *Metrics
	now     func() time.Time
	router  chi.Router
	methods map[string]Method
	origins map[string]struct{}

	ingress  chan struct{}
	inbound  *rpcws.InboundBudget
	hub      *hub.Hub
	draining atomic.Bool

	byID          sessionIndex
	onInitialized func(*Session)
	responseHook  atomic.Pointer[responseHook]

	mu       sync.Mutex // guards sessions, hs and served
	sessions map[*Session]struct{}
	conns    sync.WaitGroup // one per websocket connection handler
	hs       *http.Server   // the listener's server once Serve ran
	served   chan struct{}  // closed when hs.Serve has returned
}

// New builds a Server; Handler returns what to serve.
func New(cfg Config) (*Server, error) {
	if cfg.IngressCapacity <= 0 {
		cfg.IngressCapacity = DefaultIngressCapacity
	}
	if cfg.OutboundQueue <= 0 {
		cfg.OutboundQueue = rpcws.DefaultOutboundQueue
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 16 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Hub == nil {
		cfg.Hub = hub.New(hub.Config{Logger: cfg.Logger, Now: cfg.Now, Encode: rpcws.EncodeNotification})
	}
	cfg.Info.setDefaults()
	s := &Server{
		hub:      cfg.Hub,
		cfg:      cfg,
		log:      cfg.Logger,
		metrics:  cfg.Metrics,
		now:      cfg.Now,
		methods:  map[string]Method{},
		origins:  map[string]struct{}{},
		ingress:  make(chan struct{}, cfg.IngressCapacity),
		inbound:  rpcws.NewInboundBudget(cfg.InboundBytes),
		sessions: map[*Session]struct{}{},
	}
	for _, o := range cfg.AllowedOrigins {
		s.origins[o] = struct{}{}
	}
	s.metrics.inbound.Store(s.inbound)
	s.registerCoreMethods()
	hook := responseHook(func(sess *Session, req *rpcws.PendingCall, id api.RequestID) {
		if w := sess.sub.Load(); w != nil {
			w.response(req, id)
		}
	})
	s.responseHook.Store(&hook)
	s.onInitialized = s.attach
	if cfg.Threads != nil {
		s.registerThreads(cfg.Threads)
	}
	if cfg.CommandExec != nil {
		s.registerCommandExec(*cfg.CommandExec)
	}
	if cfg.Skills != nil {
		s.Handle("skills/list", s.skillsList)
	}
	if cfg.MCP != nil {
		s.registerMCP(*cfg.MCP)
	}
	if cfg.Terminals != nil {
		s.registerTerminals(cfg.Terminals)
	}
	s.router = s.routes()
	return s, nil
}

// Handler returns the HTTP handler for the listener.
func (s *Server) Handler() http.Handler { return s.router }

// Metrics returns the server's metrics.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Handle registers (or replaces) the handler of a JSON-RPC method. It must be
// called before the server starts serving.
func (s *Server) Handle(method string, m Method) { s.methods[method] = m }

func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(s.originGuard)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	r.Get("/readyz", s.readyz)
	r.Method(http.MethodGet, "/metrics", s.metrics.Handler())
	r.NotFound(s.upgrade)
	r.MethodNotAllowed(s.upgrade)
	return r
}

// originGuard refuses any request whose Origin header is not allowed, which
// blocks cross-site websocket hijacking, and answers CORS for allowed ones.
func (s *Server) originGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin, present := r.Header["Origin"]
		if !present {
			next.ServeHTTP(w, r)
			return
		}
		if len(origin) != 1 {
			s.metrics.OriginRejections.Inc()
			w.WriteHeader(http.StatusForbidden)
			return
		}
		if _, ok := s.origins[origin[0]]; !ok {
			s.metrics.OriginRejections.Inc()
			w.WriteHeader(http.StatusForbidden)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin[0])
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key, Last-Event-ID, Prefer")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if s.cfg.Store != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.cfg.Store.Ping(ctx); err != nil {
			s.log.Warn("readiness check: store unreachable", "err", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) {
	if !headerHasToken(r.Header, "Connection", "upgrade") {
		http.Error(w, "Connection header did not include 'upgrade'", http.StatusBadRequest)
		return
	}
	if s.cfg.Auth != nil {
		if f := s.cfg.Auth.Check(r); f != nil {
			s.metrics.AuthFailures.WithLabelValues(f.Message).Inc()
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(f.Status)
			_, _ = w.Write([]byte(f.Message))
			return
		}
	}
	if s.draining.Load() {
		http.Error(w, "server is shutting down", http.StatusServiceUnavailable)
		return
	}
	bw, batch := rpcws.BatchWrites(w)
	ws, err := websocket.Accept(bw, r, &websocket.AcceptOptions{
		// The origin guard has already enforced the exact allow-list.
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		s.log.Debug("websocket upgrade failed", "err", err)
		return
	}
	// The handler returns now: the connection is hijacked and runs on its
	// own goroutines, and its teardown (endConn) runs when it ends.
	s.serveConn(ws, batch, r.RemoteAddr)
}

// serveConn starts a session on ws and returns without waiting for it to
// end. The connection's goroutines are its reader, which also runs the
// teardown, and a stream writer only while frames are queued.
func (s *Server) serveConn(ws *websocket.Conn, batch *rpcws.Batcher, remote string) {
	sess := &Session{srv: s, id: uint64(s.hub.NewConnID())}
	sess.log = s.log.With("conn", sess.id, "remote", remote)
	m := s.metrics
	stream := rpcws.NewStream(ws, rpcws.Options{
		OutboundQueue: s.cfg.OutboundQueue,
		OutboundBytes: s.cfg.OutboundBytes,
		ReadLimit:     s.cfg.MaxMessageBytes,
		Inbound:       s.inbound,
		Logger:        sess.log,
		Hooks: rpcws.Hooks{
			FrameIn:      m.Frames.WithLabelValues("in").Inc,
			FrameOut:     m.Frames.WithLabelValues("out").Inc,
			Dropped:      func(r rpcws.DropReason) { m.DroppedFrames.WithLabelValues(string(r)).Inc() },
			SlowConsumer: m.SlowConsumers.Inc,
			Overloaded:   m.Overloaded.Inc,
		},
		Batch: batch,
	})
	sess.conn = rpcws.NewConn(stream, sess, rpcws.ConnOptions{OnResponse: sess.response, Logger: sess.log})

	// Count the connection in the same critical section as
	// CloseConnections' snapshot: a connection is either closed by
	// CloseConnections and waited for, or refused here.
	s.mu.Lock()
	if s.draining.Load() {
		// Drain raced with this upgrade.
		s.mu.Unlock()
		sess.log.Debug("websocket refused: server is shutting down")
		stream.CloseWith(websocket.StatusGoingAway, "server shutting down")
		<-stream.Done()
		return
	}
	s.conns.Add(1)
	s.sessions[sess] = struct{}{}
	s.mu.Unlock()
	m.OpenConnections.Inc()
	sess.log.Debug("websocket connected")
	go s.run(sess)
}

// run serves a connection until it ends and then finishes its teardown:
// by the time Serve returns, the requests the client was waiting for have
// failed, the session's context is cancelled, the websocket is closed and
// every request it was serving has finished. The session is then
// forgotten, its close hooks run, and only then may CloseConnections
// return.
func (s *Server) run(sess *Session) {
	defer s.conns.Done()
	if err := sess.conn.Serve(); err != nil {
		sess.log.Debug("websocket read failed", "err", err)
	}
	s.mu.Lock()
	delete(s.sessions, sess)
	s.mu.Unlock()
	s.metrics.OpenConnections.Dec()
	sess.runCloseHooks()
	sess.log.Debug("websocket disconnected")
}

// responseHook sees every response a client sends, on the connection's
// reader goroutine, before the waiting request gets it: call is the server
// request it answers, nil when none with its id is outstanding (the
// response is then dropped); id is the id the client sent. It must not
// block.
type responseHook func(sess *Session, call *rpcws.PendingCall, id api.RequestID)

// Sessions returns a snapshot of the initialized sessions.
func (s *Server) Sessions() []*Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Session, 0, len(s.sessions))
	for sess := range s.sessions {
		if sess.Initialized() {
			out = append(out, sess)
		}
	}
	return out
}

// Broadcast sends a notification to every initialized connection.
func (s *Server) Broadcast(n *Notification) {
	for _, sess := range s.Sessions() {
		sess.Notify(n)
	}
}

// Notification is a server notification encoded once and shared by every
// connection it is sent to.
type Notification = hub.Notification

// NewNotification encodes a notification with its emittedAtMs stamp.
func (s *Server) NewNotification(method string, params any) (*Notification, error) {
	return s.hub.NewNotification(method, params)
}

// Drain stops accepting new work: /readyz turns 503, new upgrades are
// refused and requests are answered with the draining error.
func (s *Server) Drain() { s.draining.Store(true) }

// CloseConnections closes every websocket after flushing what is queued and
// waits for their handlers to finish or ctx to end.
func (s *Server) CloseConnections(ctx context.Context) error {
	s.Drain()
	s.mu.Lock()
	for sess := range s.sessions {
		sess.conn.Stream().CloseWith(websocket.StatusGoingAway, "server shutting down")
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.conns.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errors.New("timed out waiting for connections to close")
	}
}

// Serve serves on ln until ctx is cancelled or the listener fails, then
// stops accepting new work (Drain) and returns the listener's error, nil
// when ctx ended. The websockets stay open, so that they still hear the
// end of the turns running; Shutdown closes them and the listener.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.router,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	served := make(chan struct{})
	s.mu.Lock()
	if s.hs != nil {
		s.mu.Unlock()
		return errors.New("server: Serve called twice")
	}
	s.hs, s.served = hs, served
	s.mu.Unlock()
	errc := make(chan error, 1)
	go func() {
		defer close(served)
		errc <- hs.Serve(ln)
	}()
	var err error
	select {
	case err = <-errc:
		// The listener failed: stop accepting just the same, so that the
		// caller's shutdown finds the same state as after ctx ended.
		s.log.Error("listener failed", "err", err)
	case <-ctx.Done():
		s.log.Info("shutting down")
	}
	s.Drain()
	return err
}

// Shutdown stops accepting new work, closes the listener and every
// websocket (after flushing what is queued) and waits for their handlers
// and for Serve's listener goroutine, or for ctx. It tolerates a server
// that never served and being called twice.
func (s *Server) Shutdown(ctx context.Context) error {
	s.Drain()
	s.mu.Lock()
	hs, served := s.hs, s.served
	s.mu.Unlock()
	var err error
	if hs != nil {
		if err = hs.Shutdown(ctx); errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	}
	if cerr := s.CloseConnections(ctx); err == nil {
		err = cerr
	}
	if served != nil {
		select {
		case <-served:
		case <-ctx.Done():
			if err == nil {
				err = errors.New("timed out waiting for the listener to close")
			}
		}
	}
	return err
}
