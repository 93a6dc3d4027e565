package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/service"
)

// Config configures a Manager. Every field but Servers is optional.
type Config struct {
	// Servers are the [mcp_servers] tables, by server name.
	Servers map[string]config.MCPServer
	// ClientName and ClientVersion are sent in initialize; "" is
	// "appserver" and "dev".
	ClientName, ClientVersion string
	// OnStatus is told every change of a server's state, as the
	// mcpServer/startupStatus/updated notification to broadcast (threadId
	// null: servers are shared by every thread); nil tells nobody. It must
	// not block.
	OnStatus func(api.McpServerStartupStatusUpdatedNotification)
	// StartupWait is how long a turn waits for the servers still on their
	// first start before it takes the tools of those that are ready (codex
	// 0.171.0 offers a server that is ready within about a second of the
	// turn and starts without one that is later); 0 means 1s, a negative
	// value never waits.
	StartupWait time.Duration
	// MinBackoff and MaxBackoff bound the delay before a restart, doubled
	// at each failure in a row; 0 means 500ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// KillGrace is how long a stdio server has to exit after its stdin is
	// closed, and again after SIGTERM, before it is killed; 0 means 2s.
	KillGrace time.Duration
	// MaxOutputBytes bounds the text of one tool result sent to the model;
	// a longer one is replaced by a preview. 0 means DefaultMaxOutputBytes.
	MaxOutputBytes int
	// Environ is the environment stdio servers inherit from (filtered);
	// nil is os.Environ.
	Environ func() []string
	// Getenv reads bearer tokens and env_http_headers; nil is os.Getenv.
	Getenv func(string) string
	// Metrics receives the call and up measurements; nil records none.
	Metrics *Metrics
	// Logger receives server stderr and connection events; nil discards.
	Logger *slog.Logger
	// Now is the clock of durations and item times; nil is time.Now.
	Now func() time.Time
}

// DefaultMaxOutputBytes is the default bound of one tool result's text.
const DefaultMaxOutputBytes = 256 << 10

// Manager owns the connections to the configured MCP servers. It is safe
// for concurrent use.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	metrics *Metrics
	now     func() time.Time

	mu      sync.Mutex // guards servers, ctx, started, stopped
	servers map[string]*server
	ctx     context.Context
	cancel  context.CancelFunc
	started bool
	stopped bool

	// search is the index of the last deferred tool set, which the next
	// turn reuses while the set is the same (indexing is the cost of a
	// deferring turn; searching is cheap). Its own lock, taken alone.
	search searchCache
}

// New returns the manager of cfg.Servers; Start connects them.
func New(cfg Config) (*Manager, error) {
	if cfg.ClientName == "" {
		cfg.ClientName = "appserver"
	}
	if cfg.ClientVersion == "" {
		cfg.ClientVersion = "dev"
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		return nil, apperr.New(apperr.Invalid, "mcp: MaxBackoff %s is below MinBackoff %s", cfg.MaxBackoff, cfg.MinBackoff)
	}
	if cfg.StartupWait == 0 {
		cfg.StartupWait = time.Second
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = 2 * time.Second
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if cfg.Environ == nil {
		cfg.Environ = os.Environ
	}
	if cfg.Getenv == nil {
		cfg.Getenv = osGetenv
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, metrics: cfg.Metrics, now: cfg.Now, servers: map[string]*server{}}
	for name, sc := range cfg.Servers {
		m.servers[name] = newServer(m, name, sc)
	}
	return m, nil
}

var _ service.Service = (*Manager)(nil)

// Start connects every enabled server in the background; it does not wait
// for any of them. The servers live until Stop, not until ctx ends.
func (m *Manager) Start(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return service.ErrStopped
	}
	if m.started {
		return nil
	}
	m.started = true
	m.ctx, m.cancel = context.WithCancel(context.Background())
	for _, name := range sortedNames(m.servers) {
		m.servers[name].start(m.ctx)
	}
	return nil
}

// Stop closes every connection, kills the stdio servers' process groups
// and waits for the supervisors. It may be called more than once; before
// Start it does nothing.
func (m *Manager) Stop() {
	m.mu.Lock()
	if m.stopped || !m.started {
		m.mu.Unlock()
		return
	}
	m.stopped = true
	servers := m.servers
	m.cancel()
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(s.stop)
	}
	wg.Wait()
}

// Reload applies a new [mcp_servers] configuration (config/mcpServer/
// reload): servers whose table changed or that were removed are stopped
// (their process groups killed), new and changed ones are started;
// unchanged servers keep their connection.
func (m *Manager) Reload(servers map[string]config.MCPServer) error {
	m.mu.Lock()
	if m.stopped || !m.started {
		m.mu.Unlock()
		return apperr.New(apperr.Unavailable, "MCP servers are not running")
	}
	var old, added []*server
	next := make(map[string]*server, len(servers))
	for _, name := range sortedNames(servers) {
		sc := servers[name]
		if s, ok := m.servers[name]; ok && reflect.DeepEqual(s.cfg, sc) {
			next[name] = s
			continue
		}
		next[name] = newServer(m, name, sc)
		added = append(added, next[name])
	}
	for name, s := range m.servers {
		if next[name] != s {
			old = append(old, s)
		}
	}
	m.servers = next
	m.cfg.Servers = servers
	for _, s := range added {
		s.start(m.ctx)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range old {
		wg.Go(s.stop)
		if _, kept := servers[s.name]; !kept {
			m.metrics.forget(s.name)
		}
	}
	wg.Wait()
	return nil
}

// done is closed once the manager stops, and before Start (nothing is
// starting then, so nothing is worth waiting for).
func (m *Manager) done() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx == nil {
		return closedChan
	}
	return m.ctx.Done()
}

// closedChan is a channel that is always ready.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// server returns the named server.
func (m *Manager) server(name string) (*server, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.servers[name]
	return s, ok
}

// list returns the servers sorted by name.
func (m *Manager) list() []*server {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*server, 0, len(m.servers))
	for _, name := range sortedNames(m.servers) {
		out = append(out, m.servers[name])
	}
	return out
}

// backoff is the delay before the attempt-th restart in a row.
func (m *Manager) backoff(attempt int) time.Duration {
	d := m.cfg.MinBackoff
	for i := 1; i < attempt && d < m.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, m.cfg.MaxBackoff)
}

// ThreadStarted tells a new thread, through tell (which must not block),
// the start-up of each server its config leaves on, as codex 0.171.0,
// whose threads start their own servers, reports it: "starting", then
// "ready" or "failed" (at once for a server whose start has ended, else
// when it ends), each as mcpServer/startupStatus/updated with the
// thread's id. A thread with every server off hears nothing.
func (m *Manager) ThreadStarted(threadID string, cfg map[string]json.RawMessage, tell func(api.McpServerStartupStatusUpdatedNotification)) {
	disabled, none := ThreadSwitches(cfg)
	if none {
		return
	}
	for _, s := range m.list() {
		if disabled[s.name] {
			continue
		}
		s.mu.Lock()
		st, errText := s.state, s.lastErr
		w := waiter{threadID: threadID, tell: tell}
		if st == StateStarting {
			s.waiting = append(s.waiting, w)
		}
		s.mu.Unlock()
		if st == StateDisabled {
			continue
		}
		w.status(s.name, StateStarting, "")
		if st != StateStarting {
			w.status(s.name, st, errText)
		}
	}
}

// waiter is a thread to be told how a server's start ended.
type waiter struct {
	threadID string
	tell     func(api.McpServerStartupStatusUpdatedNotification)
}

// status tells the thread one server's status.
func (w waiter) status(name string, st State, errText string) {
	n := api.McpServerStartupStatusUpdatedNotification{ThreadID: &w.threadID, Name: name, Status: string(st)}
	if errText != "" {
		n.Error = &errText
	}
	w.tell(n)
}

// ThreadSwitches reads the MCP switches of a thread's config (flattened
// to dotted keys): the servers it turns off (mcp_servers.<name>.enabled =
// false), and whether it empties mcp_servers (mcp_servers = {}, as the
// TUI's title thread sends it: no server at all). Values of the wrong type
// are ignored as absent.
func ThreadSwitches(cfg map[string]json.RawMessage) (disabled map[string]bool, none bool) {
	for k, v := range cfg {
		if k == "mcp_servers" {
			var servers map[string]json.RawMessage
			if json.Unmarshal(v, &servers) == nil && len(servers) == 0 {
				none = true
			}
			continue
		}
		server, ok := strings.CutPrefix(k, "mcp_servers.")
		if !ok {
			continue
		}
		var on bool
		if server, ok = strings.CutSuffix(server, ".enabled"); ok && json.Unmarshal(v, &on) == nil && !on {
			if disabled == nil {
				disabled = map[string]bool{}
			}
			disabled[server] = true
		}
	}
	return disabled, none
}

// announce reports a state change to OnStatus.
func (m *Manager) announce(name string, st State, errText string) {
	if m.cfg.OnStatus == nil || st == StateDisabled {
		return
	}
	n := api.McpServerStartupStatusUpdatedNotification{Name: name, Status: string(st)}
	if errText != "" {
		n.Error = &errText
	}
	m.cfg.OnStatus(n)
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
