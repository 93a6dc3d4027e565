package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/gctune"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/server/rpcws"
	"github.com/appserver/appserver/internal/skills"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/postgres"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/tools/orchestrate"
	"github.com/appserver/appserver/internal/turns"
)

// version is set at build time with -ldflags "-X main.version=…"; otherwise
// the module version from the build info is used.
var version = ""

func appVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// usageError marks errors in the command line, which exit with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	return 1
}

const usage = `usage: appserver [command] [flags]

commands:
  serve     run the daemon (default)
  migrate   apply database migrations and exit
  exec      run one turn on a running daemon over its HTTP API (for CI jobs)
  mockmodel run the scripted fake model server (offline integration work)
  version   print the version and exit

Run "appserver <command> -h" for the flags of a command.
`

// run is the whole program, callable in-process by tests: it parses args,
// runs the chosen command until ctx is cancelled and returns its error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return runServe(ctx, args, stdout, stderr)
	case "migrate":
		return runMigrate(ctx, args, stdout, stderr)
	case "exec":
		return runExec(ctx, args, stdout, stderr)
	case "mockmodel":
		return fakemodel.Run(ctx, args, stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "appserver %s\n", appVersion())
		return nil
	case "help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return usageError{fmt.Sprintf("unknown command %q", cmd)}
	}
}

// repeated collects a repeatable flag.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// configFlags declares the flags shared by serve and migrate; each one maps
// to the config key of the same name (dashes for underscores).
type configFlags struct {
	fs        *flag.FlagSet
	file      string
	overrides repeated
	origins   repeated
	// sources are what load loaded, kept to validate config writes.
	sources config.Sources
}

// flagKeys are the config keys exposed as dedicated flags.
var flagKeys = []struct{ key, help string }{
	{"listen", "listen address, ws://IP:PORT"},
	{"database_url", "Postgres URL (postgres://…); empty uses the embedded store in --data-dir"},
	{"data_dir", "directory for local state and the embedded store"},
	{"log_format", "log format: text or json"},
	{"log_level", "log level: debug, info, warn, error"},
	{"shutdown_grace_period", "how long shutdown waits for connections and turns, e.g. 10s"},
	{"ws_auth", "websocket auth: capability-token or signed-bearer-token"},
	{"ws_token_file", "absolute path of the capability token file"},
	{"ws_token_sha256", "SHA-256 hex digest of the capability token"},
	{"ws_shared_secret_file", "absolute path of the HS256 shared secret file (≥ 32 bytes)"},
	{"ws_issuer", "expected JWT issuer"},
	{"ws_audience", "expected JWT audience"},
	{"ws_max_clock_skew_seconds", "JWT clock skew tolerance in seconds (default 30)"},
	{"model", "default model"},
	{"model_provider", "default model provider id"},
	{"approval_policy", "untrusted, on-failure, on-request or never"},
	{"sandbox_mode", "read-only, workspace-write or danger-full-access"},
}

func newConfigFlags(name string, stderr io.Writer) *configFlags {
	cf := &configFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	cf.fs.SetOutput(stderr)
	cf.fs.StringVar(&cf.file, "config", "", "TOML config file (default $APPSERVER_CONFIG)")
	cf.fs.Var(&cf.overrides, "c", "override a config value: -c key=value (TOML value, dotted key; repeatable)")
	cf.fs.Var(&cf.origins, "allowed-origin", "allow this exact Origin (repeatable)")
	cf.fs.Bool("migrate", false, "apply migrations at start-up (default: on for the embedded store)")
	for _, f := range flagKeys {
		cf.fs.String(strings.ReplaceAll(f.key, "_", "-"), "", f.help)
	}
	return cf
}

// path is the absolute path of the config file in use, or "".
func (cf *configFlags) path() string {
	p := cf.file
	if p == "" {
		p = os.Getenv(config.EnvConfigFile)
	}
	if p == "" {
		return ""
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

func (cf *configFlags) load(args []string) (*config.Config, []config.Warning, error) {
	if err := cf.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, err
		}
		return nil, nil, usageError{err.Error()}
	}
	if cf.fs.NArg() > 0 {
		return nil, nil, usageError{fmt.Sprintf("unexpected argument %q", cf.fs.Arg(0))}
	}
	set := map[string]string{}
	cf.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "config", "c", "allowed-origin":
			return
		}
		set[strings.ReplaceAll(f.Name, "-", "_")] = f.Value.String()
	})
	if len(cf.origins) > 0 {
		set["allowed_origins"] = strings.Join(cf.origins, ",")
	}
	cf.sources = config.Sources{
		File:      cf.file,
		Env:       os.Environ(),
		Flags:     set,
		Overrides: cf.overrides,
	}
	return config.Load(cf.sources)
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == config.LogFormatJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// openStore opens the configured backend: Postgres when database_url is
// set, otherwise the embedded store inside data_dir (created on first run).
func openStore(ctx context.Context, cfg *config.Config, migrate bool, observe store.ObserveFunc) (store.Store, string, error) {
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

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cf := newConfigFlags("migrate", stderr)
	cfg, warnings, err := cf.load(args)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	for _, w := range warnings {
		log.Warn("config", "warning", w.String())
	}
	st, where, err := openStore(ctx, cfg, true, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "migrations applied (%s)\n", where)
	return st.Close()
}

// The shutdown of runServe (docs/design.md §5), after Serve stopped taking
// work (/readyz 503, upgrades refused, requests get the draining error)
// while the connections stay open to hear the turns end.
const (
	stopTurns  = iota // running turns get the grace period, then are interrupted
	stopHub           // server requests still waiting fail
	stopTools         // exec sessions are killed and reaped; their items complete
	stopHTTP          // HTTP event streams end, after the turns' last events
	stopConns         // the listener and the websockets close (1001)
	stopSkills        // the skills watcher, then the catalog
	stopStore         // last: every writer has stopped
	stopGC            // the GC heap floor goes with the daemon
	numStops
)

// runServe builds the daemon, serves until ctx ends and shuts down. Every
// service is complete when its constructor returns and is stopped once, in
// the order above: it puts its stop in stops as soon as it runs, so a
// failure on the way up stops what was started in the same order.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	cf := newConfigFlags("serve", stderr)
	cfg, warnings, err := cf.load(args)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	for _, w := range warnings {
		log.Warn("config", "warning", w.String())
	}

	host := cfg.ListenHost()
	if err := auth.RequireForAddress(auth.Mode(cfg.WSAuth), host); err != nil {
		return err
	}
	var authn *auth.Authenticator
	if cfg.WSAuth != config.WSAuthNone {
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
		authn, err = auth.New(ac)
		if err != nil {
			return err
		}
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	execPolicy, err := policy.ParseSandboxMode(string(cfg.SandboxMode))
	if err != nil {
		return err
	}

	var stops [numStops]func()
	defer func() {
		for _, stop := range stops {
			if stop != nil {
				stop()
			}
		}
	}()
	// Keep the collector from running every few MB while the live heap is
	// small (the tail latency of tool round trips; see internal/gctune).
	stops[stopGC] = gctune.Start(uint64(cfg.GCHeapFloorMiB) << 20).Stop

	metrics := server.NewMetrics()
	backend, where, err := openStore(ctx, cfg, cfg.MigrateOnStart(), metrics.ObserveStoreOp)
	if err != nil {
		return err
	}
	// Items of many threads are committed together (group commit); the
	// committer owns the backend.
	st := store.NewGroupCommitter(backend, store.GroupCommitConfig{})
	stops[stopStore] = func() {
		if err := st.Close(); err != nil {
			log.Error("closing store", "err", err)
		}
	}
	// The hub: every client of a thread (websocket or HTTP) subscribes
	// there, notifications fan out from there, and it routes the server
	// requests (approvals and user input to every subscriber, dynamic tool
	// calls through its broker to one live client), one timeout rule per
	// kind.
	hb := hub.New(hub.Config{
		Approval:    hub.Timeouts{NoClient: cfg.ApprovalClientTimeout},
		UserInput:   hub.Timeouts{NoClient: cfg.ApprovalClientTimeout},
		ToolCall:    hub.Timeouts{NoClient: cfg.DynamicToolReconnectTimeout},
		Encode:      rpcws.EncodeNotification,
		ToolMetrics: metrics.DynamicMetrics(),
		Logger:      log,
	})
	stops[stopHub] = hb.Close
	// The skill catalog: the workspace's own skill folders always (for
	// skills/list), plus configured roots and remotes.
	cat, err := skills.New(skillsConfig(cfg), skills.Options{Logger: log})
	if err != nil {
		return err
	}
	watcher := cat.NewWatcher(skills.WatcherConfig{
		Logger:   log,
		OnChange: func() { hb.Broadcast("skills/changed", struct{}{}) },
	})
	stops[stopSkills] = func() { watcher.Stop(); cat.Close() }
	// Built-in tools: commands and patches under the thread's approval and
	// sandbox policies; approvals and user input reach the subscribed
	// clients through the hub.
	tools, err := newTools(cfg, cf.path(), log, hb.Broker(), cat)
	if err != nil {
		return err
	}
	stops[stopTools] = tools.Close
	mgr, err := turns.New(turns.Config{
		Store:                st,
		Notifier:             hb,
		Subscribers:          hb,
		Requests:             hb,
		Models:               modelRouter(cfg, log),
		Tools:                tools.Build,
		ValidateDynamicTools: orchestrate.ValidateDynamicTools,
		ThreadUnloaded:       tools.ThreadUnloaded,
		UserShell:            tools,
		Defaults: turns.Defaults{
			Model:          cfg.Model,
			ModelProvider:  cfg.ModelProvider,
			ApprovalPolicy: string(cfg.ApprovalPolicy),
			SandboxMode:    string(cfg.SandboxMode),
			Cwd:            cwd,
			CLIVersion:     appVersion(),
			ContextWindow:  contextWindow(cfg),
		},
		ShutdownGrace: cfg.ShutdownGracePeriod,
		Logger:        log,
	})
	if err != nil {
		return err
	}
	stops[stopTurns] = mgr.Stop
	if err := mgr.Recover(ctx); err != nil {
		return fmt.Errorf("recover turns of a previous run: %w", err)
	}
	srv, err := server.New(server.Config{
		AllowedOrigins: cfg.AllowedOrigins,
		Auth:           authn,
		Store:          st,
		Logger:         log,
		Metrics:        metrics,
		Hub:            hb,
		Threads:        mgr,
		Cwd:            cwd,
		CommandExec:    &server.CommandExecConfig{Policy: execPolicy, Env: tools.Env(), Sandbox: tools.Sandbox()},
		Skills:         cat,
		ConfigWriter:   &configWriter{dir: cfg.DataDir, sources: cf.sources},
		Info: server.Info{
			Version:   appVersion(),
			Home:      cfg.DataDir,
			Models:    apiModels(cfg),
			Config:    func() api.ConfigReadResult { return configView(cfg, cf.path()) },
			Warnings:  configWarnings(warnings),
			Providers: apiProviders(cfg),
		},
	})
	if err != nil {
		return err
	}
	stops[stopConns] = func() {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGracePeriod)
		defer cancel()
		if serr := srv.Shutdown(sctx); err == nil {
			err = serr
		}
	}
	httpAPI, err := newHTTPAPI(cfg, log, srv, mgr, hb, st, authn, metrics)
	if err != nil {
		return err
	}
	if err := httpAPI.Start(ctx); err != nil {
		return err
	}
	stops[stopHTTP] = httpAPI.Stop
	if err := watcher.Start(ctx); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.ListenAddr().String())
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	addr := "ws://" + ln.Addr().String()
	log.Info("appserver listening", "addr", addr, "store", where, "version", appVersion(), "auth", string(cfg.WSAuth))
	fmt.Fprintf(stdout, "appserver listening on %s\n", addr)
	return srv.Serve(ctx, ln)
}

func configWarnings(ws []config.Warning) []api.ConfigWarningNotification {
	out := make([]api.ConfigWarningNotification, 0, len(ws))
	for _, w := range ws {
		out = append(out, api.ConfigWarningNotification{Summary: w.String()})
	}
	return out
}

// apiModels turns the configured model list into model/list entries.
func apiModels(cfg *config.Config) []api.Model {
	infos := cfg.Models()
	out := make([]api.Model, 0, len(infos))
	for _, m := range infos {
		effort := string(m.DefaultReasoningEffort)
		if effort == "" {
			effort = "medium"
		}
		out = append(out, api.Model{
			ID:                     m.ID,
			Model:                  m.ID,
			DisplayName:            m.DisplayName,
			Description:            m.Description,
			Hidden:                 m.Hidden,
			DefaultReasoningEffort: effort,
			SupportedReasoningEfforts: api.List[api.ReasoningEffortOption]{
				{ReasoningEffort: "low", Description: "Fast responses with lighter reasoning"},
				{ReasoningEffort: "medium", Description: "Balances speed and reasoning depth"},
				{ReasoningEffort: "high", Description: "Greater reasoning depth for complex problems"},
			},
			InputModalities: api.List[api.InputModality]{api.InputText, api.InputImage},
			IsDefault:       m.IsDefault,
		})
	}
	return out
}

// configView answers config/read: the effective config (secrets masked)
// and, per key, the layer that set it.
func configView(cfg *config.Config, file string) api.ConfigReadResult {
	origins := map[string]api.ConfigLayerMetadata{}
	for key, layer := range cfg.Origins() {
		var src api.ConfigLayerSource
		switch layer {
		case config.LayerFile:
			src = api.ConfigLayerSource{Type: api.LayerUser, File: file}
		case config.LayerDefault:
			continue
		default:
			src = api.ConfigLayerSource{Type: api.LayerSessionFlags}
		}
		origins[key] = api.ConfigLayerMetadata{Name: src, Version: string(layer)}
	}
	return api.ConfigReadResult{Config: cfg.Redacted(), Origins: origins}
}
