package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/registry"
)

// State is where a server's connection stands.
type State string

// The states of a server (the startup states of
// mcpServer/startupStatus/updated, plus disabled).
const (
	// StateStarting: connecting, initializing and listing tools.
	StateStarting State = "starting"
	// StateReady: connected; its tools are offered.
	StateReady State = "ready"
	// StateFailed: the last start failed or the server died; a restart is
	// scheduled.
	StateFailed State = "failed"
	// StateDisabled: enabled = false, or a server name that is not valid.
	StateDisabled State = "disabled"
)

// protocolVersion is the MCP revision we ask for: the newest one with the
// initialize handshake, which every server in use speaks (the SDK
// negotiates down for older ones).
const protocolVersion = "2025-11-25"

// toolInfo is one tool a server listed.
type toolInfo struct {
	tool *mcpsdk.Tool
	// raw is the tool as JSON, for mcpServerStatus/list.
	raw json.RawMessage
	// params is the input schema after sanitizing, shared (read-only) by
	// every turn's spec; nil when it could not be sanitized.
	params *registry.Schema
	// specs holds the JSON of the listing's tools as their server's
	// namespace offers them (namespacedSpec), encoded once for every
	// turn that offers them; shared by the listing's tools.
	specs *registry.SpecCache
}

// namespacedSpec is the function a server's namespace offers for ti.
func (ti *toolInfo) namespacedSpec() registry.FunctionSpec {
	return registry.FunctionSpec{Name: modelToolName(ti.tool.Name), Description: ti.tool.Description, Parameters: ti.params}
}

// conn is one live session with a server.
type conn struct {
	sess  *mcpsdk.ClientSession
	proc  *stdioProcess // nil for HTTP servers
	tools []*toolInfo   // enabled tools, sorted by name
	// serverInfo and capabilities are from the initialize result, and
	// instructions its instructions (the description of the server's
	// namespace).
	serverInfo, capabilities json.RawMessage
	instructions             string
	dead                     chan struct{} // closed once the session ended
	// lost is closed when a call saw the connection fail (an HTTP
	// server's session does not end by itself), so the supervisor
	// reconnects; per connection, so that it never ends the next one.
	lost     chan struct{}
	lostOnce sync.Once
}

// markLost asks the supervisor to reconnect.
func (c *conn) markLost() { c.lostOnce.Do(func() { close(c.lost) }) }

// server is one configured MCP server and the supervisor of its
// connection.
type server struct {
	m    *Manager
	name string
	cfg  config.MCPServer

	cancel context.CancelFunc
	done   chan struct{} // closed when the supervisor returned
	// started is closed when the first start has ended (ready, failed,
	// or stopped), so that a turn can wait for it (StartupWait).
	started     chan struct{}
	startedOnce sync.Once

	mu      sync.Mutex
	state   State
	lastErr string
	conn    *conn
	// tools are the enabled tools of the last connection, kept while the
	// server restarts so that a turn's tool list does not flap, and
	// instructions the server's initialize instructions with them.
	tools        []*toolInfo
	instructions string
	inflight     []*inflight // calls running on this server, oldest first
	// waiting are the threads told the server is starting
	// (ThreadStarted), to be told how the start ended.
	waiting []waiter
}

// inflight is one running tools/call, for routing the server's
// elicitations and progress to the turn that made it.
type inflight struct {
	turn   *Turn
	callID string
}

func newServer(m *Manager, name string, cfg config.MCPServer) *server {
	s := &server{m: m, name: name, cfg: cfg, done: make(chan struct{}), started: make(chan struct{}), state: StateStarting}
	if !cfg.Enabled {
		s.state = StateDisabled
	} else if !validServerName.MatchString(name) {
		s.state = StateDisabled
		s.lastErr = fmt.Sprintf("invalid MCP server name %q: names must match ^[a-zA-Z0-9_-]+$", name)
	}
	return s
}

// start runs the supervisor, unless the server is disabled.
func (s *server) start(parent context.Context) {
	if s.state == StateDisabled {
		close(s.done)
		s.endFirstStart()
		return
	}
	ctx, cancel := context.WithCancel(parent)
	s.cancel = cancel
	go s.run(ctx)
}

// stop ends the supervisor, closes the session and kills the process
// group, and waits for all of it.
func (s *server) stop() {
	if s.cancel != nil {
		s.cancel()
	}
	<-s.done
}

// run connects, waits for the connection to end, and reconnects with
// backoff, until ctx is cancelled.
func (s *server) run(ctx context.Context) {
	defer close(s.done)
	defer s.endFirstStart()
	attempt := 0
	for {
		s.setState(StateStarting, "")
		c, err := s.connect(ctx)
		if ctx.Err() != nil {
			if c != nil {
				s.closeConn(c)
			}
			return
		}
		if err != nil {
			s.m.log.Warn("MCP server failed to start", "server", s.name, "err", err)
			s.setState(StateFailed, err.Error())
			s.endFirstStart()
			attempt++
			if !s.sleep(ctx, s.m.backoff(attempt)) {
				return
			}
			continue
		}
		up := s.m.now()
		s.mu.Lock()
		s.conn, s.tools, s.instructions = c, c.tools, c.instructions
		s.mu.Unlock()
		s.setState(StateReady, "")
		s.endFirstStart()
		select {
		case <-c.dead:
		case <-c.lost:
		case <-ctx.Done():
		}
		s.mu.Lock()
		s.conn = nil
		s.mu.Unlock()
		s.closeConn(c)
		if ctx.Err() != nil {
			return
		}
		s.m.log.Warn("MCP server connection lost; restarting", "server", s.name)
		s.setState(StateFailed, "MCP server exited or its connection was lost")
		if s.m.now().Sub(up) > s.m.cfg.MaxBackoff {
			attempt = 0 // it ran for a while: not a crash loop
		}
		attempt++
		if !s.sleep(ctx, s.m.backoff(attempt)) {
			return
		}
	}
}

// endFirstStart marks the first start as over.
func (s *server) endFirstStart() { s.startedOnce.Do(func() { close(s.started) }) }

// sleep waits d or until ctx ends; it reports whether to go on.
func (s *server) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// setState records the state and announces it.
func (s *server) setState(st State, errText string) {
	s.mu.Lock()
	// Every (re)start is announced, the first one included.
	changed := s.state != st || s.lastErr != errText || st == StateStarting
	s.state, s.lastErr = st, errText
	var waiting []waiter
	if st == StateReady || st == StateFailed {
		waiting, s.waiting = s.waiting, nil
	}
	s.mu.Unlock()
	for _, w := range waiting {
		w.status(s.name, st, errText)
	}
	s.m.metrics.setUp(s.name, st == StateReady)
	if changed {
		s.m.announce(s.name, st, errText)
	}
}

// connect starts the transport, initializes the session and lists the
// tools, all within startup_timeout_sec.
func (s *server) connect(ctx context.Context) (*conn, error) {
	timeout := seconds(s.cfg.StartupTimeoutSec, config.DefaultMCPStartupTimeoutSec)
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		t    mcpsdk.Transport
		proc *stdioProcess
		err  error
	)
	if s.cfg.Command != "" {
		t, proc = stdioTransport(s.name, s.cfg, s.m.cfg.Environ(), s.m.cfg.KillGrace, s.m.log)
	} else if t, err = httpTransport(s.cfg, s.m.cfg.Getenv); err != nil {
		return nil, err
	}
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: s.m.cfg.ClientName, Version: s.m.cfg.ClientVersion}, &mcpsdk.ClientOptions{
		ElicitationHandler:          s.elicit,
		ProgressNotificationHandler: s.progress,
		// No roots: the daemon serves many workspaces. Elicitation in
		// both modes, as codex 0.171.0 declares it: servers offer their
		// URL-elicitation tools only to a client that declares url.
		Capabilities: &mcpsdk.ClientCapabilities{Elicitation: &mcpsdk.ElicitationCapabilities{
			Form: &mcpsdk.FormElicitationCapabilities{}, URL: &mcpsdk.URLElicitationCapabilities{},
		}},
	})
	sess, err := client.Connect(sctx, t, &mcpsdk.ClientSessionOptions{ProtocolVersion: protocolVersion})
	if err != nil {
		proc.killGroup()
		return nil, s.startError(sctx, timeout, err)
	}
	tools, err := s.listTools(sctx, sess)
	if err != nil {
		_ = sess.Close()
		proc.killGroup()
		return nil, s.startError(sctx, timeout, fmt.Errorf("tools/list: %w", err))
	}
	c := &conn{sess: sess, proc: proc, tools: tools, dead: make(chan struct{}), lost: make(chan struct{})}
	if ir := sess.InitializeResult(); ir != nil {
		c.serverInfo, _ = json.Marshal(wireServerInfo(ir.ServerInfo))
		c.capabilities, _ = json.Marshal(ir.Capabilities)
		c.instructions = ir.Instructions
	}
	go func() {
		_ = sess.Wait()
		close(c.dead)
	}()
	return c, nil
}

// startError names the timeout when it is what ended the start.
func (s *server) startError(sctx context.Context, timeout time.Duration, err error) error {
	if errors.Is(sctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("MCP server %s did not start within %s (startup_timeout_sec): %w", s.name, timeout, err)
	}
	return fmt.Errorf("MCP server %s failed to start: %w", s.name, err)
}

// closeConn closes the session (stdin first, then signals, as the SDK
// does), kills the rest of the process group, and waits for the session's
// watcher.
func (s *server) closeConn(c *conn) {
	_ = c.sess.Close()
	c.proc.killGroup()
	<-c.dead
}

// listTools lists every page of tools and keeps the enabled ones.
func (s *server) listTools(ctx context.Context, sess *mcpsdk.ClientSession) ([]*toolInfo, error) {
	var out []*toolInfo
	seen := map[string]bool{}
	cursor := ""
	for {
		res, err := sess.ListTools(ctx, &mcpsdk.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, err
		}
		for _, t := range res.Tools {
			if t == nil || !toolEnabled(s.cfg, t.Name) {
				continue
			}
			raw, err := json.Marshal(t)
			if err != nil {
				return nil, err
			}
			params, err := inputSchema(t.InputSchema)
			if err != nil {
				s.m.log.Warn("MCP tool skipped: unsupported input schema", "server", s.name, "tool", t.Name, "err", err)
				continue
			}
			out = append(out, &toolInfo{tool: t, raw: raw, params: params})
		}
		if res.NextCursor == "" {
			break
		}
		if seen[res.NextCursor] {
			return nil, fmt.Errorf("the server repeated cursor %q", res.NextCursor)
		}
		seen[res.NextCursor] = true
		cursor = res.NextCursor
	}
	slices.SortFunc(out, func(a, b *toolInfo) int { return strings.Compare(a.tool.Name, b.tool.Name) })
	specs := make([]registry.FunctionSpec, len(out))
	for i, ti := range out {
		specs[i] = ti.namespacedSpec()
	}
	cache := registry.NewSpecCache(specs)
	for _, ti := range out {
		ti.specs = cache
	}
	return out, nil
}

// session returns the live session, or an error the model can read.
func (s *server) session() (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		return s.conn, nil
	}
	switch s.state {
	case StateDisabled:
		if s.lastErr != "" {
			return nil, errors.New(s.lastErr)
		}
		return nil, fmt.Errorf("MCP server '%s' is disabled", s.name)
	case StateFailed:
		return nil, fmt.Errorf("MCP server '%s' is not running (it is being restarted): %s", s.name, s.lastErr)
	}
	return nil, fmt.Errorf("MCP server '%s' is still starting; try again shortly", s.name)
}

// track registers a running call; the returned func forgets it.
func (s *server) track(f *inflight) func() {
	s.mu.Lock()
	s.inflight = append(s.inflight, f)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.inflight = slices.DeleteFunc(s.inflight, func(x *inflight) bool { return x == f })
		s.mu.Unlock()
	}
}

// serverInstructions are the instructions of the last connection.
func (s *server) serverInstructions() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.instructions
}

// snapshot returns the state, error and last known tools.
func (s *server) snapshot() (State, string, []*toolInfo, *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state, s.lastErr, s.tools, s.conn
}

// toolEnabled applies enabled_tools (an allow-list when set) and
// disabled_tools.
func toolEnabled(cfg config.MCPServer, tool string) bool {
	if cfg.EnabledTools != nil && !slices.Contains(cfg.EnabledTools, tool) {
		return false
	}
	return !slices.Contains(cfg.DisabledTools, tool)
}

// seconds converts a *_sec setting, 0 meaning def.
func seconds(v, def float64) time.Duration {
	if v <= 0 {
		v = def
	}
	return time.Duration(v * float64(time.Second))
}

// serverInfo is a server's implementation info as the reference lists it:
// every field present, null when the server left it out.
type serverInfo struct {
	Name        string        `json:"name"`
	Title       *string       `json:"title"`
	Version     string        `json:"version"`
	Description *string       `json:"description"`
	Icons       []mcpsdk.Icon `json:"icons"`
	WebsiteURL  *string       `json:"websiteUrl"`
}

// wireServerInfo converts the SDK's implementation info; nil stays nil.
func wireServerInfo(impl *mcpsdk.Implementation) *serverInfo {
	if impl == nil {
		return nil
	}
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return &serverInfo{Name: impl.Name, Title: opt(impl.Title), Version: impl.Version, Description: opt(impl.Description),
		Icons: impl.Icons, WebsiteURL: opt(impl.WebsiteURL)}
}
