package mcp

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/config"
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

// Start connects every enabled server in the background; it does not wait
// for any of them. The servers live until Stop, not until ctx ends.
func (m *Manager) Start(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return errors.New("mcp: Start after Stop")
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
// and waits for the supervisors. It may be called more than once, and
// without Start.
func (m *Manager) Stop() {
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	m.stopped = true
	servers := m.servers
	started := m.started
	if m.cancel != nil {
		m.cancel()
	}
	m.mu.Unlock()
	if !started {
		return
	}
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
