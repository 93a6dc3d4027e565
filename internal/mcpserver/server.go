package mcpserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/turns"
)

// Defaults of the Config fields left zero.
const (
	DefaultClientName    = "appserver-mcp"
	DefaultInterruptWait = 10 * time.Second
)

// protocolVersions are the MCP versions served: the session-based ones, in
// which a server may send requests (elicitation) and notifications during
// a tool call. The go-sdk's client falls back to them from its stateless
// 2026 protocol.
var protocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Threads is what the MCP sessions ask of the thread table
// (turns.Manager): a thread for codex, a turn on it, its end read back for
// codex-reply, and the caller's subscription.
type Threads interface {
	StartThread(ctx context.Context, c turns.Caller, p api.ThreadStartParams) (api.ThreadStartResult, turns.After, error)
	ReadThread(ctx context.Context, p api.ThreadReadParams) (api.ThreadReadResult, error)
	StartTurn(ctx context.Context, c turns.Caller, p api.TurnStartParams) (api.TurnStartResult, turns.After, error)
	InterruptTurn(ctx context.Context, p api.TurnInterruptParams) (turns.After, error)
	Unsubscribe(c turns.Caller, p api.ThreadUnsubscribeParams) (api.ThreadUnsubscribeResult, error)
}

// Config configures a Server. Threads and Hub are required.
type Config struct {
	// Threads runs the threads (the thread table); its Sink must be Hub.
	Threads Threads
	// Hub is where each MCP session subscribes to its threads.
	Hub *hub.Hub
	// ClientName is the originator of the threads the operator's sessions
	// create (what thread/list shows); "" means "appserver-mcp".
	ClientName string
	// Version is the server version in the initialize answer.
	Version string
	// InterruptWait bounds how long a cancelled call waits for its
	// interrupted turn to end; 0 means 10 s.
	InterruptWait time.Duration
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
}

// Server serves the codex tools to MCP sessions.
type Server struct {
	cfg Config
	log *slog.Logger
	mgr Threads
	hub *hub.Hub

	mu       sync.Mutex
	sessions map[*session]struct{}
	stopped  bool
	bg       sync.WaitGroup // the HTTP sessions' watchers
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Threads == nil || cfg.Hub == nil {
		return nil, errors.New("mcpserver: Threads and Hub are required")
	}
	if cfg.ClientName == "" {
		cfg.ClientName = DefaultClientName
	}
	if cfg.InterruptWait <= 0 {
		cfg.InterruptWait = DefaultInterruptWait
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: cfg.Logger, mgr: cfg.Threads, hub: cfg.Hub, sessions: map[*session]struct{}{}}, nil
}

// errStopped refuses sessions once Stop has begun.
var errStopped = errors.New("mcpserver: stopped")

// connect starts a session for who over t.
func (s *Server) connect(ctx context.Context, t mcp.Transport, who principal.Principal) (*session, error) {
	sess := newSession(s, who)
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		sess.close()
		return nil, errStopped
	}
	s.sessions[sess] = struct{}{}
	s.mu.Unlock()
	ss, err := sess.srv.Connect(ctx, &eventTransport{inner: t, sess: sess}, nil)
	if err != nil {
		s.forget(sess)
		return nil, err
	}
	sess.setSession(ss)
	return sess, nil
}

// forget closes a session and drops it.
func (s *Server) forget(sess *session) {
	sess.close()
	s.mu.Lock()
	delete(s.sessions, sess)
	s.mu.Unlock()
}

// ServeStdio serves one session as the operator over in and out (the
// process's stdin and stdout for `appserver mcp`) until the host closes
// in or ctx is done.
func (s *Server) ServeStdio(ctx context.Context, in io.ReadCloser, out io.WriteCloser) error {
	sess, err := s.connect(ctx, &mcp.IOTransport{Reader: in, Writer: out}, principal.Operator())
	if err != nil {
		return err
	}
	defer s.forget(sess)
	done := make(chan error, 1)
	go func() { done <- sess.serverSession().Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = sess.serverSession().Close()
		err = <-done
	}
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// Stop closes every session (their running calls interrupt their turns)
// and waits for them. Call it after the turns have stopped, so that calls
// answer with their turns' ends. It tolerates being called twice.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopped = true
	all := make([]*session, 0, len(s.sessions))
	for sess := range s.sessions {
		all = append(all, sess)
	}
	s.mu.Unlock()
	for _, sess := range all {
		if ss := sess.serverSession(); ss != nil {
			_ = ss.Close()
		}
		s.forget(sess)
	}
	s.bg.Wait()
}
