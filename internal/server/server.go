package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/clientfs"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/reqlog"
	"github.com/appserver/appserver/internal/server/rpcws"
)

// DefaultIngressCapacity is the number of requests that may be queued or in
// flight across all connections before new ones are answered -32001.
const DefaultIngressCapacity = 128

// Config configures a Server. Zero values get the defaults noted per field.
type Config struct {
	// Auth checks websocket upgrades of Handler (not of LocalHandler) and
	// says who opened them (the operator, or a principal by its token);
	// nil means no authentication.
	Auth *auth.Authenticator
	// Browser takes the credentials a browser opens Handler's upgrades
	// with instead of an Authorization header: a ticket (a subprotocol or
	// the ticket query parameter) or the session cookie. Nil takes none.
	Browser *auth.Browser
	// PingInterval is how often every websocket session (Handler's and
	// LocalHandler's) pings its peer; 0 sends no pings.
	PingInterval time.Duration
	// PongTimeout is how long a ping waits for its pong before the
	// connection is closed; 0 means rpcws.DefaultPongTimeout.
	PongTimeout time.Duration
	// Principals are the rules of the principals Auth identifies: a
	// principal's connection sees its own threads only, within its
	// ceiling and workspace roots. Nil means none.
	Principals *principal.Rules
	// Draining reports whether the daemon stopped taking work (the front
	// door's drain state): upgrades are then refused and requests get the
	// draining error. nil means never.
	Draining func() bool
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
	// MaxMessageBytes bounds one inbound message (a websocket message, a
	// line of stdio); 0 means 16 MiB.
	MaxMessageBytes int64
	Logger          *slog.Logger
	Metrics         *Metrics
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Hub carries notifications and server requests to the sessions, which
	// attach to it once initialized; nil gives the server a hub of its own
	// with the default configuration.
	Hub *hub.Hub
	// Threads serves the thread and turn methods (the thread table); nil
	// serves none. Its Sink must be Hub.
	Threads Threads
	// Cwd is the daemon's working directory, absolute: command/exec runs
	// there and skills/list lists it when the request names no directory.
	Cwd string
	// CommandExec serves command/exec and its write, resize and terminate
	// methods; nil serves none of them.
	CommandExec *CommandExecConfig
	// Processes serves process/spawn and its follow-ups; nil serves none
	// of them.
	Processes *ProcessConfig
	// Skills answers skills/list and serves skills/extraRoots/set; nil
	// serves neither.
	Skills SkillLister
	// MCP serves the MCP status, call, resource and reload methods; nil
	// leaves them unanswered (-32601).
	MCP *MCPConfig
	// Audit records the configuration writes of this server's
	// connections; nil records nothing.
	Audit *audit.Log
	// ConfigWriter persists config/value/write and config/batchWrite (and
	// modelProvider/default/set and modelProvider/config/write, as config
	// edits); nil refuses them.
	ConfigWriter ConfigWriter
	// SkillSwitches keeps the skills clients turn off
	// (skills/config/write) in their user configs; nil leaves
	// skills/config/write refused.
	SkillSwitches SkillSwitches
	// Features serves experimentalFeature/list and
	// experimentalFeature/enablement/set; nil leaves them unanswered
	// (-32601).
	Features FeatureSwitches
	// Providers answers modelProvider/list and
	// modelProvider/capabilities/read for the caller's principal; nil
	// reports no provider.
	Providers ProviderSettings
	// Terminals serves thread/backgroundTerminals/*; nil leaves them
	// unanswered (-32601).
	Terminals BackgroundTerminals
	// Files serves fs/* and fuzzyFileSearch; nil leaves them unanswered
	// (-32601).
	Files *clientfs.Service
	// Feedback serves feedback/save; nil leaves it unanswered (-32601).
	Feedback *FeedbackConfig
	// Tracer traces the sessions' requests; nil traces none.
	Tracer Tracer
}

// Tracer traces the requests of the sessions (the composition root's
// OpenTelemetry): a span per request method, none per notification.
type Tracer interface {
	// Session returns base, the context a session opened by an upgrade
	// request descends from, with what it keeps of that request's
	// context, upgrade: the request's trace, which its spans continue.
	Session(base, upgrade context.Context) context.Context
	// Request starts the span of a request, from ctx (its session's),
	// and returns the context its method runs in with the function that
	// ends the span once it is answered: with the JSON-RPC error's code
	// and message, or 0 and "" for a result. id is the request's id as
	// the client wrote it, strings unquoted.
	Request(ctx context.Context, method, id string) (context.Context, func(code int64, message string))
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
// says where they were written. principal is who the connection acts for
// ("" for the operator's credentials); an error whose chain holds a
// ConfigWriteErrorCode method is answered with that code in its data.
type ConfigWriter interface {
	WriteConfig(ctx context.Context, principal string, p api.ConfigBatchWriteParams) (api.ConfigWriteResult, error)
}

// SkillSwitches turns skills off and on in a principal's user config
// ("" for the operator's clients); *configview.Writer is one.
type SkillSwitches interface {
	// SetSkillEnabled turns the skills of name, or the one whose SKILL.md
	// is at path, on or off, and returns the state asked for.
	SetSkillEnabled(ctx context.Context, principal, name, path string, enabled bool) (bool, error)
	// DisabledSkills returns the names and SKILL.md paths turned off.
	DisabledSkills(principal string) (names, paths []string)
}

// SkillLister answers skills/list for the request's directories, or for
// defaultCwd when it names none, searching extraRoots as well;
// *skills.Catalog is one.
type SkillLister interface {
	SkillsList(ctx context.Context, p api.SkillsListParams, defaultCwd string, extraRoots []string) (api.SkillsListResult, error)
}

// Server owns the JSON-RPC sessions, whatever their transport, and the
// method table they serve: ServeConn starts a session on any framer,
// Handler and LocalHandler upgrade HTTP requests to websocket sessions.
type Server struct {
	cfg     Config
	log     *slog.Logger
	metrics *Metrics
	now     func() time.Time
	methods map[string]Method

	ingress chan struct{}
	// inFlight and queued count the admitted requests running and those
	// waiting behind an earlier one of their connection on the same
	// resource (server/diagnostics).
	inFlight, queued atomic.Int64
	inbound          *rpcws.InboundBudget
	hub              *hub.Hub

	byID          sessionIndex
	searches      searches
	onInitialized func(*Session)
	responseHook  atomic.Pointer[responseHook]

	mu       sync.Mutex // guards sessions and closed
	sessions map[*Session]struct{}
	// closed is set by CloseConnections: sessions that start afterwards
	// are closed at once.
	closed bool
	conns  sync.WaitGroup // one per session's reader

	skillRoots skillRoots
}

// New builds a Server; Handler, LocalHandler and ServeConn serve its
// sessions.
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
		cfg.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Hub == nil {
		cfg.Hub = hub.New(hub.Config{Logger: cfg.Logger, Now: cfg.Now, Encode: rpcws.EncodeNotification})
	}
	cfg.Info.setDefaults()
	if cfg.Providers == nil {
		cfg.Providers = noProviders{}
	}
	s := &Server{
		hub:      cfg.Hub,
		cfg:      cfg,
		log:      cfg.Logger,
		metrics:  cfg.Metrics,
		now:      cfg.Now,
		methods:  map[string]Method{},
		ingress:  make(chan struct{}, cfg.IngressCapacity),
		inbound:  rpcws.NewInboundBudget(cfg.InboundBytes),
		sessions: map[*Session]struct{}{},
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
		s.registerSearch(cfg.Threads)
	}
	if cfg.CommandExec != nil {
		s.registerCommandExec(*cfg.CommandExec)
	}
	if cfg.Processes != nil {
		s.registerProcesses(*cfg.Processes)
	}
	if cfg.Feedback != nil {
		s.registerFeedback(*cfg.Feedback)
	}
	if cfg.Skills != nil {
		s.Handle(api.MethodSkillsList, s.skillsList)
		s.Handle(api.MethodSkillsExtraRootsSet, s.skillsExtraRootsSet)
		s.Handle(api.MethodSkillsConfigWrite, s.skillsConfigWrite)
	}
	if cfg.MCP != nil {
		s.registerMCP(*cfg.MCP)
	}
	if cfg.Terminals != nil {
		s.registerTerminals(cfg.Terminals)
	}
	if cfg.Features != nil {
		s.registerFeatures(cfg.Features)
	}
	if cfg.Files != nil {
		s.registerFiles(cfg.Files)
	}
	return s, nil
}

// Handler returns the websocket upgrade of the network listener: every
// request is an upgrade, checked by Auth. The front door serves it behind
// its origin guard.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.upgrade(w, r, false) })
}

// LocalHandler returns the websocket upgrade of the unix control socket,
// which only the daemon's own user can reach: it trusts the peer as the
// reference's control socket does, without Auth.
func (s *Server) LocalHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.upgrade(w, r, true) })
}

// draining reports whether the daemon stopped taking work.
func (s *Server) draining() bool { return s.cfg.Draining != nil && s.cfg.Draining() }

// Metrics returns the server's metrics.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Handle registers (or replaces) the handler of a JSON-RPC method. It must be
// called before the server starts serving.
func (s *Server) Handle(method string, m Method) { s.methods[method] = m }

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

// upgrade upgrades r to a websocket session; trusted skips Auth.
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request, trusted bool) {
	if !headerHasToken(r.Header, "Connection", "upgrade") {
		http.Error(w, "Connection header did not include 'upgrade'", http.StatusBadRequest)
		return
	}
	// The control socket's peer is the daemon's own user: the operator,
	// without a token.
	who := principal.Operator()
	if !trusted {
		var f *auth.Failure
		if who, f = s.identify(r); f != nil {
			s.metrics.AuthFailures.WithLabelValues(f.Message).Inc()
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(f.Status)
			_, _ = w.Write([]byte(f.Message))
			return
		}
	}
	reqlog.SetPrincipal(r.Context(), who.LogName())
	if s.draining() {
		http.Error(w, "server is shutting down", http.StatusServiceUnavailable)
		return
	}
	bw, batch := rpcws.BatchWrites(w)
	ws, err := websocket.Accept(bw, r, &websocket.AcceptOptions{
		// The origin guard has already enforced the exact allow-list.
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled,
		// A browser that offers a ticket as a subprotocol offers this one
		// too, and must get one back: the only one ever selected, so that
		// the ticket is never echoed.
		Subprotocols: []string{auth.WebSocketProtocol},
	})
	if err != nil {
		s.log.Debug("websocket upgrade failed", "err", err)
		return
	}
	// The session outlives the upgrade request: it keeps the request's id
	// and trace, and nothing else of its context.
	base := reqlog.Detach(r.Context())
	if s.cfg.Tracer != nil {
		base = s.cfg.Tracer.Session(base, r.Context())
	}
	// The handler returns now: the connection is hijacked and runs on its
	// own goroutines, and its teardown runs when it ends.
	s.serveConn(base, rpcws.WebSocket(ws, rpcws.WebSocketOptions{
		ReadLimit:    s.cfg.MaxMessageBytes,
		Batch:        batch,
		PingInterval: s.cfg.PingInterval,
		PongTimeout:  s.cfg.PongTimeout,
		PingTimedOut: s.metrics.PingTimeouts.Inc,
		Logger:       s.log.With("remote", r.RemoteAddr),
	}), r.RemoteAddr, who)
}

// identify says who an upgrade request is: a principal by its token, its
// ticket or its session cookie, or the operator (auth.Identify).
func (s *Server) identify(r *http.Request) (principal.Principal, *auth.Failure) {
	name, f := auth.Identify(r.Context(), s.cfg.Auth, s.cfg.Browser, r, auth.WebSocketDoor)
	if f != nil {
		return principal.Principal{}, f
	}
	if name == "" {
		return principal.Operator(), nil
	}
	who, ok := s.cfg.Principals.Get(name)
	if !ok {
		return principal.Principal{}, &auth.Failure{Status: http.StatusUnauthorized, Message: "invalid websocket bearer token"}
	}
	return who, nil
}

// ServeConn starts a session for who on the connection f frames and
// returns without waiting for it to end; done is closed once its teardown
// (run) is over. The session's goroutines are its reader, which also runs
// the teardown, and a stream writer only while frames are queued. A
// session started after CloseConnections is closed at once.
func (s *Server) ServeConn(f rpcws.Framer, remote string, who principal.Principal) (done <-chan struct{}) {
	return s.serveConn(context.Background(), f, remote, who)
}

// serveConn is ServeConn for a session whose context descends from base
// (for its values: the request id and trace of the request that opened
// it).
func (s *Server) serveConn(base context.Context, f rpcws.Framer, remote string, who principal.Principal) <-chan struct{} {
	sess := &Session{srv: s, id: uint64(s.hub.NewConnID()), who: who}
	sess.log = s.log.With("conn", sess.id, "remote", remote)
	if id := reqlog.ID(base); id != "" {
		// Every line of the session names the request that opened it,
		// those logged without a context too.
		sess.log = sess.log.With(reqlog.Key, id)
	}
	if !who.IsOperator() {
		sess.log = sess.log.With("principal", who.Name())
	}
	m := s.metrics
	stream := rpcws.NewFramedStream(f, rpcws.Options{
		OutboundQueue: s.cfg.OutboundQueue,
		OutboundBytes: s.cfg.OutboundBytes,
		Inbound:       s.inbound,
		Logger:        sess.log,
		Hooks: rpcws.Hooks{
			FrameIn:      m.Frames.WithLabelValues("in").Inc,
			FrameOut:     m.Frames.WithLabelValues("out").Inc,
			Dropped:      func(r rpcws.DropReason) { m.DroppedFrames.WithLabelValues(string(r)).Inc() },
			SlowConsumer: m.SlowConsumers.Inc,
			Overloaded:   m.Overloaded.Inc,
		},
	})
	sess.conn = rpcws.NewConn(stream, sess, rpcws.ConnOptions{OnResponse: sess.response, Logger: sess.log, Context: base})
	ended := make(chan struct{})

	// Count the connection in the same critical section as
	// CloseConnections' snapshot: a connection is either closed by
	// CloseConnections and waited for, or refused here.
	s.mu.Lock()
	if s.closed {
		// CloseConnections raced with this connection.
		s.mu.Unlock()
		sess.log.Debug("connection refused: server is shutting down")
		stream.CloseWith(rpcws.CloseGoingAway, "server shutting down")
		<-stream.Done()
		close(ended)
		return ended
	}
	s.conns.Add(1)
	s.sessions[sess] = struct{}{}
	s.mu.Unlock()
	m.OpenConnections.Inc()
	sess.log.Debug("connected")
	go s.run(sess, ended)
	return ended
}

// run serves a connection until it ends and then finishes its teardown:
// by the time Serve returns, the requests the client was waiting for have
// failed, the session's context is cancelled, the transport is closed and
// every request it was serving has finished. The session is then
// forgotten, its close hooks run, and only then may CloseConnections
// return and ended close.
func (s *Server) run(sess *Session, ended chan struct{}) {
	defer close(ended)
	defer s.conns.Done()
	if err := sess.conn.Serve(); err != nil {
		sess.log.Debug("read failed", "err", err)
	}
	s.mu.Lock()
	delete(s.sessions, sess)
	s.mu.Unlock()
	s.metrics.OpenConnections.Dec()
	sess.runCloseHooks()
	sess.log.Debug("disconnected")
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

// CloseConnections closes every connection after flushing what is queued
// (1001 on a websocket) and waits for their teardown to finish or ctx to
// end. Connections that start afterwards are closed at once.
func (s *Server) CloseConnections(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for sess := range s.sessions {
		sess.conn.Stream().CloseWith(rpcws.CloseGoingAway, "server shutting down")
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
