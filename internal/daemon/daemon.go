package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/clientfs"
	"github.com/appserver/appserver/internal/cluster"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/config/configview"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/eventlog"
	"github.com/appserver/appserver/internal/frontdoor"
	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/mcp"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/pgnotify"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/server/rpcws"
	"github.com/appserver/appserver/internal/skills"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/memory"
	"github.com/appserver/appserver/internal/store/postgres"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/tools/agents"
	"github.com/appserver/appserver/internal/tools/orchestrate"
	"github.com/appserver/appserver/internal/turns"
	"github.com/appserver/appserver/internal/webhook"
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
	StopFiles              // file watches and search sessions end, after their connections
	StopCerts              // SIGHUP no longer reloads the TLS certificate
	StopSkills             // the skills watcher, then the catalog
	StopTraces             // the last spans are exported, after the turns ended
	StopWebhooks           // webhook deliveries stop, their cursors saved, after the turns ended
	StopLeases             // thread leases are given back, after the turns ended
	StopEvents             // the event log writes its last events, after the turns ended
	StopAudit              // the audit log writes its last entries, after every door closed
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
	// Registry holds the daemon's series; the front door serves it.
	Registry *prometheus.Registry
	Metrics  *server.Metrics
	Store    store.Store // the group committer, which owns the backend
	Where    string
	Cwd      string
	Hub      *hub.Hub
	Events   *eventlog.Log // the durable event log, the hub's journal; nil with event_log off
	Audit    *audit.Log    // the audit log, whose entries ride the store's commits
	Catalog  *skills.Catalog
	Watcher  *skills.Watcher
	MCP      *mcp.Manager
	// Guard is the one rule of what the daemon touches on a model's or a
	// client's behalf (the tools' and the file-system methods' paths).
	Guard *fsguard.Guard
	// Files serves the fs/* methods and the fuzzy file search through
	// Guard.
	Files   *clientfs.Service
	Tools   *orchestrate.Service
	Manager *turns.Manager
	// Webhooks runs the [[webhooks]] entries and the stored subscriptions;
	// nil with event_log off.
	Webhooks *webhook.Sender
	// Node is this daemon's side of thread ownership among the daemons
	// sharing a Postgres database; nil on the embedded store.
	Node *cluster.Node
	// Traces gives the front doors their spans when [otel] configures an
	// exporter; nil (whose hooks are nil) otherwise.
	Traces *Traces
}

// embeddedEventFlushDelay is the event log's FlushDelay on the embedded
// store (see NewCore).
const embeddedEventFlushDelay = 50 * time.Millisecond

// Doors are what the core's services must know of the front doors the
// caller opens on top of it.
type Doors struct {
	// TCP is set when a listener serves cfg's listen address (serve; the
	// stdio MCP session opens none): without ws_auth it takes requests
	// from anyone who can connect, so sandboxed commands with network
	// access are refused (NetworkRefusal).
	TCP bool
}

// NetworkRefusal is why sandboxed commands with network access are
// refused by a daemon serving cfg's listen address (sandbox.Options.
// NetworkRefused), or "" when they are not: such a command shares the
// host's loopback, and a listener without authentication would let it
// start an unsandboxed thread.
func NetworkRefusal(cfg *config.Config) string {
	if cfg.WSAuth != config.WSAuthNone {
		return ""
	}
	return fmt.Sprintf("the daemon takes requests without authentication on %s (ws_auth is off), which such a command could reach to run anything; "+
		"set ws_auth (%q or %q), or run the command without network access", cfg.Listen, config.WSAuthCapabilityToken, config.WSAuthSignedBearerToken)
}

// NewCore builds the core. Each part puts its stop in stops as soon as it
// runs, in the shutdown order of runServe, so the caller stops what was
// built whether or not the rest could be.
func NewCore(ctx context.Context, cfg *config.Config, doors Doors, configFile, version string, log *slog.Logger, stops *Stops) (*Core, error) {
	reg := frontdoor.NewRegistry()
	c := &Core{Registry: reg, Metrics: server.NewMetrics(reg)}
	tel := newTelemetry(reg, version)
	var err error
	if c.Cwd, err = os.Getwd(); err != nil {
		return nil, fmt.Errorf("working directory: %w", err)
	}
	backend, where, err := OpenStore(ctx, cfg, cfg.MigrateOnStart(), c.Metrics.ObserveStoreOp, log)
	if err != nil {
		return nil, err
	}
	c.Where = where
	// Items of many threads are committed together (group commit); the
	// committer owns the backend. The event log's entries ride the same
	// commits.
	events := store.NewEventQueue(eventlog.DefaultMaxPending)
	auditQueue := store.NewAuditQueue(audit.DefaultMaxPending)
	c.Store = store.NewGroupCommitter(backend, store.GroupCommitConfig{OnCommit: tel.ObserveCommit, Events: events, Audit: auditQueue})
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
	// Deltas (a message's text, a command's output, piece by piece) are
	// stored only for other daemons, which read a thread's events from the
	// store: on the embedded store a resuming client gets those of the
	// running items from memory and every completed item whole.
	// With event_log off (refused on Postgres) the hub numbers in memory
	// and nothing is stored.
	flushDelay := eventlog.DefaultFlushDelay
	if cfg.DatabaseURL == "" {
		flushDelay = embeddedEventFlushDelay
	}
	var journal hub.Journal
	if cfg.EventLog {
		if c.Events, err = eventlog.New(eventlog.Config{
			Store: c.Store, Queue: events, Retention: cfg.EventRetention, FlushDelay: flushDelay, Logger: log,
			ItemMaxBytes: int64(cfg.EventItemMaxKiB) << 10, ThreadMaxBytes: int64(cfg.EventThreadMaxMiB) << 20,
			PruneEvery: cfg.EventPruneInterval, StoreDeltas: cfg.DatabaseURL != "",
		}); err != nil {
			return nil, err
		}
		if err := c.Events.Start(ctx); err != nil {
			return nil, err
		}
		stops[StopEvents] = c.Events.Stop
		journal = c.Events
	}
	// Several daemons may share a Postgres database: turns then run under
	// thread leases and their writes are fenced, and the hub shows the
	// clients here the server requests of turns other daemons run. The
	// embedded store serves one daemon, which owns every thread.
	// On Postgres one LISTEN connection (the notifier) serves both the
	// cross-daemon event fan-out and the cluster's forwarded requests.
	var (
		remote   hub.Remote
		notifier *pgnotify.Notifier
		clEvents = &clusterEvents{}
	)
	if pg, ok := backend.(*postgres.Store); ok {
		if notifier, err = pgnotify.New(pgnotify.Config{Pool: pg.Pool(), Logger: log}); err != nil {
			return nil, err
		}
		if c.Node, err = cluster.New(cluster.Config{
			Pool: pg.Pool(), Notifier: notifier, Events: clEvents, NodeID: cfg.NodeID, LeaseTTL: cfg.LeaseTTL, Logger: log,
		}); err != nil {
			return nil, err
		}
		remote = remoteAnswers{c.Node}
	}
	// The audit log's entries ride the same commits; what none carries
	// is written alone a few milliseconds later.
	if c.Audit, err = audit.New(audit.Config{
		Store: c.Store, Queue: auditQueue, Node: nodeName(cfg, c.Node), Retention: cfg.Audit.Retention,
		PruneEvery: cfg.Audit.PruneInterval, Logger: log, TraceID: traceID,
	}); err != nil {
		return nil, err
	}
	if err := c.Audit.Start(ctx); err != nil {
		return nil, err
	}
	stops[StopAudit] = c.Audit.Stop
	c.Hub = hub.New(hub.Config{
		Journal:         journal,
		Approval:        hub.Timeouts{NoClient: cfg.ApprovalClientTimeout},
		UserInput:       hub.Timeouts{NoClient: cfg.ApprovalClientTimeout},
		ToolCall:        hub.Timeouts{NoClient: cfg.DynamicToolReconnectTimeout},
		Encode:          rpcws.EncodeNotification,
		ToolMetrics:     c.Metrics.DynamicMetrics(),
		ApprovalMetrics: tel,
		Audit:           c.Audit,
		Remote:          remote,
		Logger:          log,
	})
	stops[StopHub] = c.Hub.Close
	if notifier != nil {
		if err := eventlog.NewListener(eventlog.ListenerConfig{
			Log: c.Events, Hub: c.Hub, Notifier: notifier, Channel: postgres.EventsChannel,
		}); err != nil {
			return nil, err
		}
		stops[StopEvents] = func() { notifier.Stop(); c.Events.Stop() }
		if err := notifier.Start(ctx); err != nil {
			return nil, err
		}
		// Serving before the LISTEN is in effect would let a client
		// subscribe to a thread whose events another daemon then commits
		// unheard here, and wait for them forever.
		if err := waitListening(ctx, notifier, listenWait); err != nil {
			return nil, err
		}
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
	// those connected when it starts (after a short wait for those still
	// starting), status changes are broadcast, and each new thread is
	// told the start-up of its servers (turns.Config.ThreadStarted).
	c.MCP, err = mcp.New(mcp.Config{
		Servers:       cfg.MCPServers,
		ClientVersion: version,
		OnStatus: func(n api.McpServerStartupStatusUpdatedNotification) {
			c.Hub.Broadcast(api.MethodMcpServerStartupStatusUpdated, n)
		},
		Metrics: mcp.NewMetrics(reg),
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
	if c.Guard, err = newGuard(cfg, configFile); err != nil {
		return nil, err
	}
	if c.Tools, err = newTools(cfg, doors, c.Guard, c.Audit, log, c.Hub.Broker(), c.Catalog, c.MCP); err != nil {
		return nil, err
	}
	stops[StopTools] = c.Tools.Close
	c.Files = clientfs.New(clientfs.Config{Guard: c.Guard, Logger: log})
	stops[StopFiles] = c.Files.Stop
	if c.Traces, err = newTraces(ctx, cfg.OTel, version, log, stops); err != nil {
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
	budgets, err := newBudgets(cfg, c.Store, reg)
	if err != nil {
		return nil, err
	}
	c.Manager, err = turns.New(turns.Config{
		Budgets:              budgets,
		Store:                turnStore,
		Audit:                c.Audit,
		Ownership:            owner,
		Sink:                 c.Hub,
		Ephemeral:            memory.New(memory.Config{}),
		Models:               modelRouter(cfg, log, c.Traces.Propagate()),
		Tools:                c.Tools.Build,
		ValidateDynamicTools: orchestrate.ValidateDynamicTools,
		ThreadUnloaded:       c.Tools.ThreadUnloaded,
		ChildTurn:            c.Tools.ChildTurn,
		ChildEnded:           c.Tools.ChildEnded,
		ThreadStarted: func(threadID string, config map[string]json.RawMessage, tell func(string, any)) {
			c.MCP.ThreadStarted(threadID, config, func(n api.McpServerStartupStatusUpdatedNotification) {
				tell(api.MethodMcpServerStartupStatusUpdated, n)
			})
		},
		UserShell: c.Tools,
		Defaults: turns.Defaults{
			Model:            cfg.Model,
			ModelProvider:    cfg.ModelProvider,
			ApprovalPolicy:   string(cfg.ApprovalPolicy),
			SandboxMode:      configview.Defaults(cfg).SandboxMode,
			ReasoningEffort:  string(cfg.ModelReasoningEffort),
			ReasoningSummary: cfg.ModelReasoningSummary,
			Verbosity:        cfg.ModelVerbosity,
			ServiceTier:      cfg.ServiceTier,
			ModelVerbosity:   modelVerbosity(cfg),
			Catalog:          catalog(cfg),
			ServiceTiers:     serviceTiers(cfg),
			Cwd:              c.Cwd,
			CLIVersion:       version,
			ContextWindow:    configview.ContextWindow(cfg),
			AutoCompactLimit: configview.AutoCompactLimit(cfg),
			CompactPrompt:    cfg.CompactPrompt,
			Features:         cfg.Features.Map(),
		},
		ShutdownGrace:   cfg.ShutdownGracePeriod,
		MaxRunningTurns: cfg.MaxRunningTurns,
		PendingEndsFile: pendingEndsFile,
		Observer:        turnsObserver(tel, c.Traces),
		Logger:          log,
	})
	if err != nil {
		return nil, err
	}
	stops[StopTurns] = c.Manager.Stop
	if c.Node != nil {
		// Settles the turns of dead daemons before this one serves.
		stops[StopLeases] = c.Node.Stop
		clEvents.Manager, clEvents.hub = c.Manager, c.Hub
		if err := c.Node.Start(ctx); err != nil {
			return nil, err
		}
		log.Info("thread leases", "node", c.Node.ID(), "lease_ttl", cfg.LeaseTTL)
	}
	if c.Events == nil {
		registerCounts(reg, c.Manager)
		return c, nil // no log, no webhooks (config refuses [[webhooks]] then)
	}
	// Webhooks: each [[webhooks]] entry is a consumer of the event log;
	// one daemon of the database delivers each.
	holder := embeddedHolder
	if c.Node != nil {
		holder = c.Node.ID()
	}
	// Subscriptions made over the HTTP API live in the store: every daemon
	// runs them, a principal's taking only its own threads' events.
	hooks, err := webhook.New(webhook.Config{
		Hooks: cfg.Webhooks, Log: c.Events, Hub: c.Hub, Store: c.Store, Holder: holder, Registerer: reg, Logger: log,
		OwnerOf: func(ctx context.Context, threadID string) (string, error) {
			res, err := c.Manager.ReadThread(ctx, api.ThreadReadParams{ThreadID: threadID})
			if err != nil {
				return "", err
			}
			if res.Thread.Originator == nil {
				return "", nil
			}
			return principal.NameOf(*res.Thread.Originator), nil
		},
	})
	if err != nil {
		return nil, err
	}
	c.Webhooks = hooks
	stops[StopWebhooks] = hooks.Stop
	if err := hooks.Start(ctx); err != nil {
		return nil, err
	}
	registerCounts(reg, c.Manager)
	return c, nil
}

// nodeName is the node id the audit log names this daemon by: the
// cluster node's id on Postgres, else node_id or the host name.
func nodeName(cfg *config.Config, node *cluster.Node) string {
	if node != nil {
		return node.ID()
	}
	if cfg.NodeID != "" {
		return cfg.NodeID
	}
	host, _ := os.Hostname()
	return host
}

// embeddedHolder names the daemon of an embedded store in the event
// consumers' leases: the only one, so a daemon restarted after a crash
// takes its leases back at once.
const embeddedHolder = "embedded"

// clusterEvents is what the cluster node tells this daemon: lost leases,
// recovered turns and forwarded turn requests go to the turns manager;
// forwarded answers to server requests go to the hub, which holds the
// pending requests. The node is built before both and calls it only once
// it runs, after they are set.
type clusterEvents struct {
	*turns.Manager
	hub *hub.Hub
}

// Command runs a request another daemon forwarded.
func (e *clusterEvents) Command(ctx context.Context, method string, params json.RawMessage) (any, error) {
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

// OpenStore opens the configured backend: Postgres when database_url is
// set, otherwise the embedded store inside data_dir (created on first run).
func OpenStore(ctx context.Context, cfg *config.Config, migrate bool, observe store.ObserveFunc, log *slog.Logger) (store.Store, string, error) {
	if cfg.DatabaseURL != "" {
		st, err := postgres.Open(ctx, postgres.Config{URL: cfg.DatabaseURL, Migrate: migrate, Observe: observe})
		return st, "postgres", err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, "", fmt.Errorf("create data dir: %w", err)
	}
	path := filepath.Join(cfg.DataDir, "appserver.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, Migrate: migrate, Observe: observe, Logger: log})
	return st, "embedded:" + path, err
}

// modelRouter maps [model_providers] to the model clients' router;
// propagate (nil when traces are off) writes the trace context into their
// requests' headers.
func modelRouter(cfg *config.Config, log *slog.Logger, propagate func(context.Context, http.Header)) *model.Router {
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
	return model.NewRouter(model.RouterConfig{Providers: providers, Logger: log, Propagate: propagate})
}

// serviceTiers are, per model of the catalog, the ids of its service tiers.
func serviceTiers(cfg *config.Config) map[string][]string {
	out := map[string][]string{}
	for id, m := range cfg.Catalog() {
		for _, st := range m.ServiceTiers {
			out[id] = append(out[id], st.ID)
		}
	}
	return out
}

// catalog are the models of the catalog.
func catalog(cfg *config.Config) map[string]bool {
	out := make(map[string]bool, len(cfg.Catalog()))
	for id := range cfg.Catalog() {
		out[id] = true
	}
	return out
}

// modelVerbosity are the catalog's models that take a verbosity, with
// their default verbosity.
func modelVerbosity(cfg *config.Config) map[string]string {
	out := map[string]string{}
	for id, m := range cfg.Catalog() {
		if m.SupportVerbosity {
			out[id] = m.DefaultVerbosity
		}
	}
	return out
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
// data_dir/rules and the login-shell snapshots in data_dir/shell-snapshots
// (hidden from commands but for that directory, shown read-only); the
// skills namespace is offered only when [skills] configures roots or
// remotes.
func newTools(cfg *config.Config, doors Doors, guard *fsguard.Guard, auditLog *audit.Log, log *slog.Logger, broker *dynamic.Broker, cat *skills.Catalog, mcpServers *mcp.Manager) (*orchestrate.Service, error) {
	if !skillsConfig(cfg).Configured() {
		cat = nil
	}
	refusal := ""
	if doors.TCP {
		refusal = NetworkRefusal(cfg)
	}
	return orchestrate.New(orchestrate.Config{
		RulesDir:       filepath.Join(cfg.DataDir, "rules"),
		RulesFile:      policy.DefaultRulesFile(cfg.DataDir),
		SandboxBackend: cfg.SandboxBackend,
		SandboxPool:    sandboxPool(cfg),
		Guard:          guard,
		Audit:          auditLog,
		SnapshotDir:    filepath.Join(cfg.DataDir, "shell-snapshots"),
		NetworkRefused: refusal,
		WebSearch:      cfg.WebSearch,
		MultiAgent: agents.Config{
			Enabled: cfg.Features.MultiAgent, MaxDepth: cfg.Agents.MaxDepth,
			MaxPerThread: cfg.Agents.MaxThreads, MaxTotal: cfg.Agents.MaxTotal, MaxPerPrincipal: cfg.Agents.MaxPerPrincipal,
		},
		Providers: cfg.ModelProviders,
		Models:    cfg.Catalog(),
		MCP:       mcpServers,
		Logger:    log,
	}, broker, cat)
}

// sandboxPool is the configuration's bound on pooled sandboxes; a size
// of 0 turns pooling off.
func sandboxPool(cfg *config.Config) sandbox.PoolOptions {
	size := cfg.SandboxPoolSize
	if size == 0 {
		size = -1
	}
	return sandbox.PoolOptions{Size: size, IdleTimeout: cfg.SandboxPoolIdleTimeout}
}

// newGuard is the rule of what the daemon's own tools may touch, built once:
// its masked paths are the daemon's own state (the data directory, with
// the store, the exec-policy rules and the user config overlay; the
// config file; the token, shared-secret and TLS key files; the unix
// control socket, which trusts its peer without a token). Sandboxed
// commands are hidden the same list (the tools' sandbox takes it from the
// guard), and the tools the daemon runs itself never read or write it.
func newGuard(cfg *config.Config, configFile string) (*fsguard.Guard, error) {
	return fsguard.New(fsguard.Config{Masked: []string{
		cfg.DataDir, configFile, cfg.WSTokenFile, cfg.WSSharedSecretFile, cfg.TLSKeyFile, cfg.ControlSocket(),
	}})
}

// Authenticator checks that a network listen address may go without
// authentication (loopback only) and builds the authenticator of every
// door from ws_auth (the operator's credential) and the principals'
// tokens; nil when there is neither. The control socket and stdio need
// no credential: only the daemon's user reaches them, as with the
// reference.
func Authenticator(cfg *config.Config) (*auth.Authenticator, error) {
	if cfg.ListenAddr().IsValid() {
		if err := auth.RequireForAddress(auth.Mode(cfg.WSAuth), cfg.ListenHost()); err != nil {
			return nil, err
		}
	}
	principals := make(map[string]string, len(cfg.HTTPAPI.Principals))
	for name, p := range cfg.HTTPAPI.Principals {
		principals[name] = p.TokenSHA256
	}
	if cfg.WSAuth == config.WSAuthNone {
		if len(principals) == 0 {
			return nil, nil
		}
		return auth.New(auth.Config{Principals: principals})
	}
	ac := auth.Config{
		Principals:       principals,
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

// Principals builds the principals' rules from [http_api]: their ceiling
// and workspace roots, kept clear of the daemon's own files (the data
// directory, configFile, the token and secret files).
func Principals(cfg *config.Config, configFile string) (*principal.Rules, error) {
	roots := make(map[string][]string, len(cfg.HTTPAPI.Principals))
	for name, p := range cfg.HTTPAPI.Principals {
		roots[name] = p.WorkspaceRoots
	}
	workspaces := cfg.HTTPAPI.PrincipalWorkspaces
	if workspaces == "" && cfg.DataDir != "" {
		// Beside the data directory, not in it: sandboxed commands never
		// see the data directory.
		workspaces = filepath.Clean(cfg.DataDir) + "-workspaces"
	}
	return principal.New(principal.Config{
		Roots: roots,
		Ceiling: principal.Ceiling{
			MaxSandbox:               api.SandboxMode(cfg.HTTPAPI.PrincipalMaxSandbox),
			MaxApproval:              api.ApprovalPolicy(cfg.HTTPAPI.PrincipalMaxApproval),
			AllowNeverWithFullAccess: cfg.HTTPAPI.PrincipalMaxApproval == config.ApprovalNever,
		},
		WorkspacesDir: workspaces,
		Reserved:      absPaths(cfg.DataDir, configFile, cfg.WSTokenFile, cfg.WSSharedSecretFile),
	})
}

// absPaths makes the given paths absolute (from the daemon's directory),
// skipping empty ones.
func absPaths(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil {
			out = append(out, abs)
		}
	}
	return out
}

// listenWait bounds how long a daemon on Postgres waits at start for its
// LISTEN connection (pgnotify), which retries meanwhile.
const listenWait = 30 * time.Second

// waitListening waits until n's LISTEN is in effect.
func waitListening(ctx context.Context, n *pgnotify.Notifier, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	select {
	case <-n.Listening():
		return nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("postgres notifier: no LISTEN connection after %v", wait)
		}
		return ctx.Err()
	}
}
