package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/cluster"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/config/configview"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/eventlog"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/mcp"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/server/rpcws"
	"github.com/appserver/appserver/internal/skills"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/postgres"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/tools/agents"
	"github.com/appserver/appserver/internal/tools/orchestrate"
	"github.com/appserver/appserver/internal/turns"
)

// The steps of the daemon's shutdown, in order (docs/design.md §5): they
// run after the server stopped taking work (/readyz 503, upgrades refused,
// requests get the draining error) while the connections stay open to hear
// the turns end.
const (
	StopTurns       = iota // running turns get the grace period, then are interrupted
	StopHub                // server requests still waiting fail
	StopTools              // exec sessions are killed and reaped; their items complete
	StopMCP                // stdio MCP servers' process groups are killed
	StopMCPSessions        // MCP host sessions end, after the turns' last events
	StopHTTP               // HTTP event streams end, after the turns' last events
	StopConns              // the listener and the websockets close (1001)
	StopCerts              // SIGHUP no longer reloads the TLS certificate
	StopSkills             // the skills watcher, then the catalog
	StopTraces             // the last spans are exported, after the turns ended
	StopLeases             // thread leases are given back, after the turns ended
	StopEvents             // the event log writes its last events, after the turns ended
	StopStore              // last: every writer has stopped
	StopGC                 // the GC heap floor goes with the daemon
	NumStops
)

// Stops holds the stop of each step that has started; Run runs them in
// order, each once.
type Stops [NumStops]func()

// Run runs the stops that were set, in order, and clears them.
func (s *Stops) Run() {
	for i, stop := range s {
		if stop != nil {
			s[i] = nil
			stop()
		}
	}
}

// Core is what serve and mcp share, built from one configuration: the
// store, the hub, the skill catalog and its watcher, the MCP connections,
// the built-in tools and the turns manager.
type Core struct {
	Metrics *server.Metrics
	Store   store.Store // the group committer, which owns the backend
	Where   string
	Cwd     string
	Hub     *hub.Hub
	Events  *eventlog.Log // the durable event log, the hub's journal
	Catalog *skills.Catalog
	Watcher *skills.Watcher
	MCP     *mcp.Manager
	Tools   *orchestrate.Service
	Manager *turns.Manager
	// Node is this daemon's side of thread ownership among the daemons
	// sharing a Postgres database; nil on the embedded store.
	Node *cluster.Node
}

// embeddedEventFlushDelay is the event log's FlushDelay on the embedded
// store (see NewCore).
const embeddedEventFlushDelay = 50 * time.Millisecond

// NewCore builds the core. Each part puts its stop in stops as soon as it
// runs, in the shutdown order of runServe, so the caller stops what was
// built whether or not the rest could be.
func NewCore(ctx context.Context, cfg *config.Config, configFile, version string, log *slog.Logger, stops *Stops) (*Core, error) {
	c := &Core{Metrics: server.NewMetrics()}
	tel := newTelemetry(c.Metrics.Registry, version)
	var err error
	if c.Cwd, err = os.Getwd(); err != nil {
		return nil, fmt.Errorf("working directory: %w", err)
	}
	backend, where, err := OpenStore(ctx, cfg, cfg.MigrateOnStart(), c.Metrics.ObserveStoreOp)
	if err != nil {
		return nil, err
	}
	c.Where = where
	// Items of many threads are committed together (group commit); the
	// committer owns the backend. The event log's entries ride the same
	// commits.
	events := store.NewEventQueue(eventlog.DefaultMaxPending)
	c.Store = store.NewGroupCommitter(backend, store.GroupCommitConfig{OnCommit: tel.ObserveCommit, Events: events})
	stops[StopStore] = func() {
		if err := c.Store.Close(); err != nil {
			log.Error("closing store", "err", err)
		}
	}
	// The hub: every client of a thread (websocket, HTTP or MCP) subscribes
	// there, notifications fan out from there, and it routes the server
	// requests (approvals and user input to every subscriber, dynamic tool
	// calls through its broker to one live client), one timeout rule per
	// kind.
	// The durable event log numbers every thread notification and appends
	// it through the group committer; on Postgres a listener brings the
	// events of threads run by other daemons to this one's subscribers.
	// Events that no transcript commit carries are written alone after
	// FlushDelay. Only other daemons need them stored that soon (a resume
	// here reads the queue too): on the embedded store they wait longer,
	// so that nearly all of them ride the transcript's commits instead of
	// queueing separate writes behind them on SQLite's one writer.
	flushDelay := eventlog.DefaultFlushDelay
	if cfg.DatabaseURL == "" {
		flushDelay = embeddedEventFlushDelay
	}
	if c.Events, err = eventlog.New(eventlog.Config{Store: c.Store, Queue: events, Retention: cfg.EventRetention, FlushDelay: flushDelay, Logger: log}); err != nil {
		return nil, err
	}
	if err := c.Events.Start(ctx); err != nil {
		return nil, err
	}
	stops[StopEvents] = c.Events.Stop
	// Several daemons may share a Postgres database: turns then run under
	// thread leases and their writes are fenced, and the hub shows the
	// clients here the server requests of turns other daemons run. The
	// embedded store serves one daemon, which owns every thread.
	var remote hub.Remote
	if pg, ok := backend.(*postgres.Store); ok {
		if c.Node, err = cluster.New(cluster.Config{Pool: pg.Pool(), NodeID: cfg.NodeID, LeaseTTL: cfg.LeaseTTL, Logger: log}); err != nil {
			return nil, err
		}
		remote = remoteAnswers{c.Node}
	}
	c.Hub = hub.New(hub.Config{
		Journal:         c.Events,
		Approval:        hub.Timeouts{NoClient: cfg.ApprovalClientTimeout},
		UserInput:       hub.Timeouts{NoClient: cfg.ApprovalClientTimeout},
		ToolCall:        hub.Timeouts{NoClient: cfg.DynamicToolReconnectTimeout},
		Encode:          rpcws.EncodeNotification,
		ToolMetrics:     c.Metrics.DynamicMetrics(),
		ApprovalMetrics: tel,
		Remote:          remote,
		Logger:          log,
	})
	stops[StopHub] = c.Hub.Close
	if pg, ok := backend.(*postgres.Store); ok {
		ln, err := eventlog.NewListener(eventlog.ListenerConfig{
			Log: c.Events, Hub: c.Hub, Pool: pg.Pool(), Channel: postgres.EventsChannel, Logger: log,
		})
		if err != nil {
			return nil, err
		}
		if err := ln.Start(ctx); err != nil {
			return nil, err
		}
		stops[StopEvents] = func() { ln.Stop(); c.Events.Stop() }
	}
	// The skill catalog: the workspace's own skill folders always (for
	// skills/list), plus configured roots and remotes.
	if c.Catalog, err = skills.New(skillsConfig(cfg), skills.Options{Logger: log}); err != nil {
		return nil, err
	}
	c.Watcher = c.Catalog.NewWatcher(skills.WatcherConfig{
		Logger:   log,
		OnChange: func() { c.Hub.Broadcast("skills/changed", struct{}{}) },
	})
	stops[StopSkills] = func() { c.Watcher.Stop(); c.Catalog.Close() }
	// MCP servers connect in the background; a turn gets the tools of
	// those connected when it starts, and status changes are broadcast.
	c.MCP, err = mcp.New(mcp.Config{
		Servers:       cfg.MCPServers,
		ClientVersion: version,
		OnStatus: func(n api.McpServerStartupStatusUpdatedNotification) {
			c.Hub.Broadcast(api.MethodMcpServerStartupStatusUpdated, n)
		},
		Metrics: mcp.NewMetrics(c.Metrics.Registry),
		Logger:  log,
	})
	if err != nil {
		return nil, err
	}
	if err := c.MCP.Start(ctx); err != nil {
		return nil, err
	}
	stops[StopMCP] = c.MCP.Stop
	// Built-in tools: commands and patches under the thread's approval and
	// sandbox policies; approvals and user input reach the subscribed
	// clients through the hub.
	if c.Tools, err = newTools(cfg, configFile, log, c.Hub.Broker(), c.Catalog, c.MCP); err != nil {
		return nil, err
	}
	stops[StopTools] = c.Tools.Close
	obs, err := turnsObserver(ctx, cfg, tel, version, log, stops)
	if err != nil {
		return nil, err
	}
	turnStore := c.Store
	var owner turns.Ownership
	if c.Node != nil {
		turnStore, owner = c.Node.Fenced(c.Store), c.Node
	}
	// The journal of turn ends told but not stored is read by the
	// single-daemon start-up recovery; with leases the cluster settles
	// such turns, and nothing would read it.
	pendingEndsFile := ""
	if c.Node == nil {
		pendingEndsFile = filepath.Join(cfg.DataDir, "pending-turn-ends.json")
	}
	c.Manager, err = turns.New(turns.Config{
		Store:                turnStore,
		Ownership:            owner,
		Notifier:             c.Hub,
		Subscribers:          c.Hub,
		Requests:             c.Hub,
		Models:               modelRouter(cfg, log),
		Tools:                c.Tools.Build,
		ValidateDynamicTools: orchestrate.ValidateDynamicTools,
		ThreadUnloaded:       c.Tools.ThreadUnloaded,
		UserShell:            c.Tools,
		Defaults: turns.Defaults{
			Model:            cfg.Model,
			ModelProvider:    cfg.ModelProvider,
			ApprovalPolicy:   string(cfg.ApprovalPolicy),
			SandboxMode:      string(cfg.SandboxMode),
			Cwd:              c.Cwd,
			CLIVersion:       version,
			ContextWindow:    configview.ContextWindow(cfg),
			AutoCompactLimit: configview.AutoCompactLimit(cfg),
			CompactPrompt:    cfg.CompactPrompt,
		},
		ShutdownGrace:   cfg.ShutdownGracePeriod,
		PendingEndsFile: pendingEndsFile,
		Observer:        obs,
		Logger:          log,
	})
	if err != nil {
		return nil, err
	}
	stops[StopTurns] = c.Manager.Stop
	if c.Node != nil {
		// Settles the turns of dead daemons before this one serves.
		stops[StopLeases] = c.Node.Stop
		if err := c.Node.Start(ctx, clusterEvents{Manager: c.Manager, hub: c.Hub}); err != nil {
			return nil, err
		}
		log.Info("thread leases", "node", c.Node.ID(), "lease_ttl", cfg.LeaseTTL)
	}
	registerCounts(c.Metrics.Registry, c.Manager)
	return c, nil
}

// clusterEvents is what the cluster node tells this daemon: lost leases,
// recovered turns and forwarded turn requests go to the turns manager;
// forwarded answers to server requests go to the hub, which holds the
// pending requests.
type clusterEvents struct {
	*turns.Manager
	hub *hub.Hub
}

// Command runs a request another daemon forwarded.
func (e clusterEvents) Command(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case cluster.MethodAnswer:
	case cluster.MethodHeld:
		var ref cluster.RequestRef
		if err := json.Unmarshal(params, &ref); err != nil {
			return nil, apperr.Wrap(apperr.Invalid, err, "invalid forwarded request reference")
		}
		if !e.hub.HeldRemote(ref.ThreadID, ref.RequestID, ref.Node, ref.Held) {
			return nil, apperr.New(apperr.NotFound, "no pending request %d on thread %s", ref.RequestID, ref.ThreadID)
		}
		return struct{}{}, nil
	case cluster.MethodPending:
		var ref cluster.RequestRef
		if err := json.Unmarshal(params, &ref); err != nil {
			return nil, apperr.Wrap(apperr.Invalid, err, "invalid forwarded request reference")
		}
		return e.hub.PendingRequests(ref.ThreadID), nil
	default:
		return e.Manager.Command(ctx, method, params)
	}
	var a cluster.Answer
	if err := json.Unmarshal(params, &a); err != nil {
		return nil, apperr.Wrap(apperr.Invalid, err, "invalid forwarded answer")
	}
	var clientErr error
	if a.Error != "" {
		clientErr = errors.New(a.Error)
	}
	if !e.hub.AnswerRemote(a.ThreadID, a.RequestID, a.Result, clientErr) {
		return nil, apperr.New(apperr.NotFound, "no pending request %d on thread %s", a.RequestID, a.ThreadID)
	}
	return struct{}{}, nil
}

// remoteAnswers carries to the daemon running a turn that a client of this
// daemon holds one of its server requests, and that client's answer: the
// hub's Remote.
type remoteAnswers struct{ node *cluster.Node }

// Answer implements hub.Remote.
func (r remoteAnswers) Answer(ctx context.Context, threadID string, requestID int64, result json.RawMessage, clientErr error) error {
	a := cluster.Answer{ThreadID: threadID, RequestID: requestID, Result: result}
	if clientErr != nil {
		a.Error = clientErr.Error()
	}
	ok, err := r.node.AnswerRequest(ctx, a)
	if err == nil && !ok {
		err = apperr.New(apperr.NotFound, "no daemon runs thread %s", threadID)
	}
	return err
}

// Held implements hub.Remote.
func (r remoteAnswers) Held(ctx context.Context, threadID string, requestID int64, held bool) error {
	ok, err := r.node.RequestHeld(ctx, threadID, requestID, held)
	if err == nil && !ok {
		err = apperr.New(apperr.NotFound, "no daemon runs thread %s", threadID)
	}
	return err
}

// Pending implements hub.Remote.
func (r remoteAnswers) Pending(ctx context.Context, threadID string) ([]hub.Offer, error) {
	raw, ok, err := r.node.PendingRequests(ctx, threadID)
	if err != nil || !ok {
		return nil, err
	}
	var offers []hub.Offer
	if err := json.Unmarshal(raw, &offers); err != nil {
		return nil, apperr.Wrap(apperr.Internal, err, "decode another daemon's pending requests")
	}
	return offers, nil
}

// turnsObserver is the turns manager's Observer: the series, with spans
// when [otel] configures an exporter (the provider's shutdown, which
// exports the last spans, goes in stops).
func turnsObserver(ctx context.Context, cfg *config.Config, tel *telemetry, version string, log *slog.Logger, stops *Stops) (turns.Observer, error) {
	tp, err := newTracerProvider(ctx, cfg.OTel, version)
	if err != nil || tp == nil {
		return tel, err
	}
	stops[StopTraces] = func() {
		ctx, cancel := context.WithTimeout(context.Background(), traceShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("exporting the last spans", "err", err)
		}
	}
	return tracing{Observer: tel, tracer: tp.Tracer(tracerName)}, nil
}

// OpenStore opens the configured backend: Postgres when database_url is
// set, otherwise the embedded store inside data_dir (created on first run).
func OpenStore(ctx context.Context, cfg *config.Config, migrate bool, observe store.ObserveFunc) (store.Store, string, error) {
	if cfg.DatabaseURL != "" {
		st, err := postgres.Open(ctx, postgres.Config{URL: cfg.DatabaseURL, Migrate: migrate, Observe: observe})
		return st, "postgres", err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, "", fmt.Errorf("create data dir: %w", err)
	}
	path := filepath.Join(cfg.DataDir, "appserver.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, Migrate: migrate, Observe: observe})
	return st, "embedded:" + path, err
}

// modelRouter maps [model_providers] to the model clients' router.
func modelRouter(cfg *config.Config, log *slog.Logger) *model.Router {
	providers := make(map[string]model.ProviderSource, len(cfg.ModelProviders))
	for id, pc := range cfg.ModelProviders {
		// The config counts retries (0 = none); the client's 0 means its
		// default and a negative count none.
		retries := pc.RequestMaxRetries
		if retries <= 0 {
			retries = -1
		}
		providers[id] = model.ProviderSource{
			Config: model.ProviderConfig{
				Name:              pc.Name,
				BaseURL:           pc.BaseURL,
				WireAPI:           string(pc.WireAPI),
				Headers:           pc.HTTPHeaders,
				QueryParams:       pc.QueryParams,
				MaxRetries:        retries,
				StreamIdleTimeout: time.Duration(pc.StreamIdleTimeoutMS) * time.Millisecond,
			},
			APIKeyEnv: pc.EnvKey,
			HeaderEnv: pc.EnvHTTPHeaders,
		}
	}
	return model.NewRouter(model.RouterConfig{Providers: providers, Logger: log})
}

// skillsConfig maps the [skills] config section.
func skillsConfig(cfg *config.Config) skills.Config {
	sc := skills.Config{Roots: cfg.Skills.Roots, Remote: map[string]skills.RemoteConfig{}}
	for id, r := range cfg.Skills.Remote {
		sc.Remote[id] = skills.RemoteConfig{URL: r.URL, BearerTokenEnv: r.BearerTokenEnv}
	}
	return sc
}

// newTools builds the tool orchestration: the exec-policy rules live in
// data_dir/rules; the skills namespace is offered only when [skills]
// configures roots or remotes.
func newTools(cfg *config.Config, configFile string, log *slog.Logger, broker *dynamic.Broker, cat *skills.Catalog, mcpServers *mcp.Manager) (*orchestrate.Service, error) {
	if !skillsConfig(cfg).Configured() {
		cat = nil
	}
	return orchestrate.New(orchestrate.Config{
		RulesDir:       filepath.Join(cfg.DataDir, "rules"),
		RulesFile:      policy.DefaultRulesFile(cfg.DataDir),
		SandboxBackend: cfg.SandboxBackend,
		// The daemon's own state: sandboxed commands neither read nor write it.
		Hidden:    []string{cfg.DataDir, configFile, cfg.WSTokenFile, cfg.WSSharedSecretFile},
		WebSearch: cfg.WebSearch,
		MultiAgent: agents.Config{
			Enabled: cfg.Features.MultiAgent, MaxDepth: cfg.Agents.MaxDepth,
			MaxPerThread: cfg.Agents.MaxThreads, MaxTotal: cfg.Agents.MaxTotal,
		},
		Providers: cfg.ModelProviders,
		Models:    cfg.ModelCatalog,
		MCP:       mcpServers,
		Logger:    log,
	}, broker, cat)
}

// Authenticator checks that the listen address may go without
// authentication (loopback only) and builds the websocket's (and the HTTP
// API's operator) authenticator from ws_auth; nil when ws_auth is off.
func Authenticator(cfg *config.Config) (*auth.Authenticator, error) {
	if err := auth.RequireForAddress(auth.Mode(cfg.WSAuth), cfg.ListenHost()); err != nil {
		return nil, err
	}
	if cfg.WSAuth == config.WSAuthNone {
		return nil, nil
	}
	ac := auth.Config{
		Mode:             auth.Mode(cfg.WSAuth),
		TokenFile:        cfg.WSTokenFile,
		TokenSHA256:      cfg.WSTokenSHA256,
		SharedSecretFile: cfg.WSSharedSecretFile,
		Issuer:           cfg.WSIssuer,
		Audience:         cfg.WSAudience,
	}
	if cfg.WSAuth == config.WSAuthSignedBearerToken {
		ac.MaxClockSkew = time.Duration(cfg.WSMaxClockSkewSeconds) * time.Second
	}
	return auth.New(ac)
}
