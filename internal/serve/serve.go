package serve

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/config/configview"
	"github.com/appserver/appserver/internal/console"
	"github.com/appserver/appserver/internal/daemon"
	"github.com/appserver/appserver/internal/feedback"
	"github.com/appserver/appserver/internal/frontdoor"
	"github.com/appserver/appserver/internal/gctune"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/reqlog"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/server/rpcws"
	"github.com/appserver/appserver/internal/tlscert"
	"github.com/appserver/appserver/internal/turns"
)

// Process is what a command gets of the process that runs it.
type Process struct {
	// Version is the daemon's version, as `appserver version` prints it.
	Version string
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
}

// UsageError marks an error in the command line, which exits with status
// 2.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

// ParseFlags parses a command's flags. -h and --help print the command's
// usage and flags to stdout, as users expect, and return flag.ErrHelp,
// which the caller turns into success; a bad flag is a UsageError naming
// it.
func ParseFlags(fs *flag.FlagSet, args []string, usage string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return err
	}
	if err != nil {
		return UsageError{fmt.Sprintf("%v (run \"appserver %s -h\" for the flags)", err, fs.Name())}
	}
	return nil
}

const serveUsage = `usage: appserver serve [flags]

Runs the daemon until SIGINT or SIGTERM (SIGHUP reloads the TLS
certificate), on the transport --listen names:
  ws://IP:PORT, wss://IP:PORT  the websocket JSON-RPC protocol, the HTTP
                               API and /mcp on one listener (TLS for wss)
  unix://PATH, unix://         the JSON-RPC websocket on a control socket
                               (mode 0600; bare unix:// puts it in
                               data_dir/app-server-control/)
  stdio://                     one JSON-RPC session, a JSON message per
                               line on stdin and stdout; logs go to stderr
                               and the daemon exits when stdin closes
Every flag sets the config key of the same name (dashes for underscores),
over the config file and the APPSERVER_* environment.

flags:
`

const appServerUsage = `usage: appserver app-server [flags]

Serves one JSON-RPC session on stdin and stdout, a JSON message per line,
as codex app-server does by default: appserver serve with --listen
stdio:// unless --listen names another transport. Logs go to stderr; the
daemon exits when stdin closes.

flags:
`

const migrateUsage = `usage: appserver migrate [flags]

Applies the store's schema migrations and exits.

flags:
`

// Repeated collects a repeatable flag.
type Repeated []string

func (r *Repeated) String() string     { return strings.Join(*r, ",") }
func (r *Repeated) Set(v string) error { *r = append(*r, v); return nil }

// configFlags declares the flags shared by serve and migrate; each one maps
// to the config key of the same name (dashes for underscores).
type configFlags struct {
	fs        *flag.FlagSet
	file      string
	overrides Repeated
	origins   Repeated
	// sources are what load read, for reloading and to check config
	// writes.
	sources config.Sources
	// flagDefaults are flag values (by config key) used when the command
	// line does not give the flag.
	flagDefaults map[string]string
}

// flagKeys are the config keys exposed as dedicated flags.
var flagKeys = []struct{ key, help string }{
	{"listen", "listen URL: ws://IP:PORT, wss://IP:PORT for TLS, unix://PATH or unix:// (control socket), stdio://"},
	{"tls_cert_file", "absolute path of the PEM certificate chain served with wss:// (re-read on SIGHUP)"},
	{"tls_key_file", "absolute path of the PEM private key of --tls-cert-file"},
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

func newConfigFlags(name string) *configFlags {
	cf := &configFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
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

// load parses args (printing the help to stdout for -h) and loads the
// configuration they select.
func (cf *configFlags) load(args []string, usage string, stdout io.Writer) (*config.Config, []config.Warning, error) {
	if err := ParseFlags(cf.fs, args, usage, stdout); err != nil {
		return nil, nil, err
	}
	if cf.fs.NArg() > 0 {
		return nil, nil, UsageError{fmt.Sprintf("unexpected argument %q", cf.fs.Arg(0))}
	}
	set := map[string]string{}
	cf.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "config", "c", "allowed-origin":
			return
		}
		set[strings.ReplaceAll(f.Name, "-", "_")] = f.Value.String()
	})
	for k, v := range cf.flagDefaults {
		if _, ok := set[k]; !ok {
			set[k] = v
		}
	}
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

// reloadMCPServers reads the configuration again, from the same sources
// and the current environment, for config/mcpServer/reload.
func (cf *configFlags) reloadMCPServers() (map[string]config.MCPServer, error) {
	src := cf.sources
	src.Env = os.Environ()
	cfg, _, err := config.Load(src)
	if err != nil {
		return nil, err
	}
	return cfg.MCPServers, nil
}

// newLogger is the daemon's logger: every line logged with the context of
// a request's work names its request id.
func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == config.LogFormatJSON {
		opts.ReplaceAttr = durationText
		return slog.New(reqlog.NewHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(reqlog.NewHandler(slog.NewTextHandler(w, opts)))
}

// durationText writes a duration as the text format does ("1.5s"): the
// JSON handler would write a count of nanoseconds.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// Migrate is `appserver migrate`: it applies the store's migrations and
// returns.
func Migrate(ctx context.Context, p Process, args []string) error {
	stdout, stderr := p.Stdout, p.Stderr
	cf := newConfigFlags("migrate")
	cfg, warnings, err := cf.load(args, migrateUsage, stdout)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	for _, w := range warnings {
		log.Warn("config", "warning", w.String())
	}
	st, where, err := daemon.OpenStore(ctx, cfg, true, nil, log)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "migrations applied (%s)\n", where)
	return st.Close()
}

// AppServer is `appserver app-server`: serve on stdio:// unless --listen
// names another transport, as the reference's app-server does.
func AppServer(ctx context.Context, p Process, args []string) error {
	return serve(ctx, p, "app-server", appServerUsage, map[string]string{"listen": "stdio://"}, args)
}

// Serve is `appserver serve`: the daemon on the transport --listen names,
// until ctx ends (on stdio, or until stdin ends). A listener's address
// goes to stdout in a line ListenAddr reads.
func Serve(ctx context.Context, p Process, args []string) error {
	return serve(ctx, p, "serve", serveUsage, nil, args)
}

// serve builds the daemon, serves until ctx ends (or, on stdio, until
// stdin ends) and shuts down. Every service is complete when its
// constructor returns and is stopped once, in the order of daemon.Stops:
// it puts its stop in stops as soon as it runs, so a failure on the way
// up stops what was started in the same order. flagDefaults are flag
// values the command line did not give.
func serve(ctx context.Context, p Process, name, usage string, flagDefaults map[string]string, args []string) (err error) {
	stdin, stdout, stderr := p.Stdin, p.Stdout, p.Stderr
	cf := newConfigFlags(name)
	cf.flagDefaults = flagDefaults
	cfg, warnings, err := cf.load(args, usage, stdout)
	if err != nil {
		return err
	}
	// The recent lines feedback/save reports may attach.
	logs := feedback.NewLogs(0)
	log := slog.New(logs.Handler(newLogger(cfg, stderr).Handler()))
	for _, w := range warnings {
		log.Warn("config", "warning", w.String())
	}
	listen := cfg.ListenURL()

	authn, err := daemon.Authenticator(cfg)
	if err != nil {
		return err
	}
	principals, err := daemon.Principals(cfg, cf.path())
	if err != nil {
		return err
	}
	execPolicy, err := policy.ParseSandboxMode(string(cfg.SandboxMode))
	if err != nil {
		return err
	}

	// SIGHUP reloads the TLS certificate (tlscert); without TLS there is
	// nothing to reload, and `systemctl reload` must not kill the daemon:
	// it says so in the log. A caught signal, unlike an ignored one, is
	// not inherited by the commands the agent runs. Caught until the
	// shutdown below (stops.Run) has ended: a reload during it must not
	// end the process halfway.
	hup, hupExited := make(chan os.Signal, 1), make(chan struct{})
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer close(hupExited)
		for range hup {
			if !cfg.ListenTLS() {
				log.Info("SIGHUP: no TLS certificate to reload; nothing else is reloaded")
			}
		}
	}()
	defer func() {
		signal.Stop(hup) // no signal is sent on hup once it returns
		close(hup)
		<-hupExited
	}()

	var stops daemon.Stops
	defer stops.Run()
	// Keep the collector from running every few MB while the live heap is
	// small (the tail latency of tool round trips), and give memory back
	// to the OS once a spike is over (see internal/gctune).
	floor, returner := gctune.Start(uint64(cfg.GCHeapFloorMiB)<<20), gctune.NewReturner(gctune.ReturnerConfig{})
	returner.Start()
	stops[daemon.StopGC] = func() { returner.Stop(); floor.Stop() }

	coreCfg := cfg
	if listen.Scheme == config.ListenStdio {
		// The stdio client is the daemon's only one: when it leaves, or
		// the daemon is told to stop, running turns are interrupted at
		// once instead of given the grace period, as the reference ends
		// its stdio session at once.
		c := *cfg
		c.ShutdownGracePeriod = 0
		coreCfg = &c
	}
	// Only a TCP listener is reachable over the loopback that sandboxed
	// commands with network access share; the control socket is hidden
	// from them and stdio is no listener.
	doors := daemon.Doors{TCP: listen.Scheme == config.ListenWS || listen.Scheme == config.ListenWSS}
	c, err := daemon.NewCore(ctx, coreCfg, doors, cf.path(), p.Version, log, &stops)
	if err != nil {
		return err
	}
	metrics, st, hb, cat, tools, mgr := c.Metrics, c.Store, c.Hub, c.Catalog, c.Tools, c.Manager
	if err := mgr.Recover(ctx); err != nil {
		return fmt.Errorf("recover turns of a previous run: %w", err)
	}
	// Written settings reach new threads at once: everyone's, or a
	// principal's own.
	cw, userWarnings := configview.NewWriter(cfg, cf.sources, func(principal string, n *config.Config) {
		d := configview.Defaults(n)
		mgr.UpdateDefaults(principal, turns.LiveDefaults{Model: d.Model, ModelProvider: d.ModelProvider,
			ApprovalPolicy: d.ApprovalPolicy, SandboxMode: d.SandboxMode, Features: d.Features,
			ReasoningEffort: d.ReasoningEffort, ReasoningSummary: d.ReasoningSummary,
			Verbosity: d.Verbosity, ServiceTier: d.ServiceTier})
	})
	for _, w := range userWarnings {
		log.Warn("config", "warning", w.String())
	}
	// Tickets and session cookies live in the store, so that every daemon
	// of a shared database takes them.
	browser, err := auth.NewBrowser(auth.BrowserConfig{
		Store: st, TicketTTL: cfg.AuthTicketTTL, SessionTTL: cfg.AuthSessionTTL, Logger: log,
	})
	if err != nil {
		return err
	}
	// The drain state comes first: the sessions and the HTTP API read it,
	// the front door serves it on /readyz.
	drain := new(frontdoor.Drain)
	srv, err := server.New(server.Config{
		Auth:            authn,
		Browser:         browser,
		PingInterval:    cfg.WSPingInterval,
		PongTimeout:     cfg.WSPongTimeout,
		Principals:      principals,
		Draining:        drain.Draining,
		Logger:          log,
		Metrics:         metrics,
		InboundBytes:    int64(cfg.WSMaxInboundInflightMiB) << 20,
		OutboundBytes:   int64(cfg.WSMaxOutboundQueuedMiB) << 20,
		IngressCapacity: cfg.MaxPendingRequests,
		Hub:             hb,
		Threads:         mgr,
		Cwd:             c.Cwd,
		CommandExec:     &server.CommandExecConfig{Policy: execPolicy, Env: tools.Env(), Sandbox: tools.Sandbox()},
		Processes:       &server.ProcessConfig{Env: tools.Env(), Sandbox: tools.Sandbox()},
		Skills:          cat,
		MCP:             &server.MCPConfig{Manager: c.MCP, Reload: cf.reloadMCPServers},
		ConfigWriter:    cw,
		Audit:           c.Audit,
		SkillSwitches:   cw,
		Features:        cw,
		Providers:       cw,
		Terminals:       tools,
		Files:           c.Files,
		Feedback:        &server.FeedbackConfig{Guard: c.Guard, Logs: logs},
		Tracer:          c.Traces.Sessions(),
		Info: server.Info{
			Version:  p.Version,
			Home:     cfg.DataDir,
			Models:   configview.Models(cfg),
			Config:   func(principal string) api.ConfigReadResult { return cw.Read(principal, cf.path()) },
			Warnings: configview.Warnings(warnings),
		},
	})
	if err != nil {
		return err
	}
	closeConns := func() {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGracePeriod)
		defer cancel()
		if serr := srv.CloseConnections(sctx); err == nil {
			err = serr
		}
	}
	stops[daemon.StopConns] = closeConns
	if err := c.Watcher.Start(ctx); err != nil {
		return err
	}
	if listen.Scheme == config.ListenStdio {
		return serveStdio(ctx, log, p.Version, drain, srv, stdin, stdout)
	}

	door := frontdoor.Config{
		AllowedOrigins: cfg.AllowedOrigins,
		Store:          st,
		Registry:       c.Registry,
		Drain:          drain,
		Upgrade:        srv.Handler(),
		Local:          srv.LocalHandler(),
		Tracing:        c.Traces.HTTP(),
		Logger:         log,
	}
	var ln net.Listener
	var addr string
	if listen.Scheme == config.ListenUnix {
		// The control socket serves the JSON-RPC websocket only, as the
		// reference's does.
		path := cfg.ControlSocket()
		if ln, err = frontdoor.ListenUnix(path, log); err != nil {
			return err
		}
		addr = "unix://" + path
	} else {
		httpAPI, err := newHTTPAPI(log, drain, mgr, mgr, hb, st, authn, browser, principals, c.Registry, c.MCP, c.Webhooks, c.Audit)
		if err != nil {
			return err
		}
		if err := httpAPI.Start(ctx); err != nil {
			return err
		}
		stops[daemon.StopHTTP] = httpAPI.Stop
		mcpSrv, mcpHandler, err := newMCP(log, p.Version, mgr, hb, httpAPI)
		if err != nil {
			return err
		}
		stops[daemon.StopMCPSessions] = mcpSrv.Stop
		door.Mounts = []frontdoor.Mount{{Pattern: "/v1", Handler: httpAPI.Handler()}, {Pattern: "/mcp", Handler: mcpHandler}}
		if cfg.WebConsole {
			door.Upgrade = console.Handler(door.Upgrade)
		}
		if ln, addr, err = listenTCP(ctx, cfg, log, &stops); err != nil {
			return err
		}
	}
	fd, err := frontdoor.New(door)
	if err != nil {
		_ = ln.Close()
		return err
	}
	stops[daemon.StopConns] = func() {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGracePeriod)
		defer cancel()
		if serr := fd.Shutdown(sctx); err == nil {
			err = serr
		}
		closeConns()
	}
	log.Info(listeningMsg, "addr", addr, "store", c.Where, "version", p.Version, "auth", string(cfg.WSAuth))
	announce(stdout, cfg.LogFormat, addr)
	return fd.Serve(ctx, ln)
}

// listenTCP opens the network listener of a ws:// or wss:// listen URL
// and returns it with its address as a URL. For wss:// it serves TLS and
// https:// on the one listener, the certificate re-read from its files on
// SIGHUP (whose stop goes in stops).
func listenTCP(ctx context.Context, cfg *config.Config, log *slog.Logger, stops *daemon.Stops) (net.Listener, string, error) {
	ln, err := net.Listen("tcp", cfg.ListenAddr().String())
	if err != nil {
		return nil, "", fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	if !cfg.ListenTLS() {
		return ln, "ws://" + ln.Addr().String(), nil
	}
	certs, err := tlscert.New(tlscert.Config{CertFile: cfg.TLSCertFile, KeyFile: cfg.TLSKeyFile, Logger: log})
	if err != nil {
		_ = ln.Close()
		return nil, "", err
	}
	if err := certs.Start(ctx); err != nil {
		_ = ln.Close()
		return nil, "", err
	}
	stops[daemon.StopCerts] = certs.Stop
	ln = tls.NewListener(ln, certs.TLSConfig())
	return ln, "wss://" + ln.Addr().String(), nil
}

// serveStdio serves one session on stdin and stdout until stdin ends or
// ctx does; the caller's stops then shut the daemon down (the session,
// if still open, hears its turns end, then closes). Nothing but the
// session's frames goes to stdout.
func serveStdio(ctx context.Context, log *slog.Logger, version string, drain *frontdoor.Drain, srv *server.Server, stdin io.Reader, stdout io.Writer) error {
	// Whoever started the process is the operator, as with the reference.
	done := srv.ServeConn(rpcws.Lines(stdioInput(stdin), stdout, 0), "stdio", principal.Operator())
	log.Info("appserver serving on stdio", "version", version)
	select {
	case <-done:
		log.Info("stdin closed; shutting down")
	case <-ctx.Done():
		log.Info("shutting down")
	}
	drain.Start()
	return nil
}

// announce tells whoever started the daemon (a script, a test, a service
// manager) the address it listens on, on stdout whatever the log level: a
// plain line, or under log_format json a JSON record like the log's, so
// that a pipeline reading JSON never meets a line of text.
func announce(stdout io.Writer, format config.LogFormat, addr string) {
	if format == config.LogFormatJSON {
		slog.New(slog.NewJSONHandler(stdout, nil)).Info(listeningMsg, "addr", addr)
		return
	}
	fmt.Fprintf(stdout, "%s on %s\n", listeningMsg, addr)
}

// listeningMsg starts the line (or is the msg of the record) announce
// writes.
const listeningMsg = "appserver listening"

// ListenAddr reads the address from the line Serve announces it with on
// stdout: "appserver listening on ADDR", or under log_format json a
// record with msg "appserver listening" and addr.
func ListenAddr(line string) (string, bool) {
	if addr, ok := strings.CutPrefix(line, listeningMsg+" on "); ok {
		return addr, true
	}
	var rec struct{ Msg, Addr string }
	if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == listeningMsg && rec.Addr != "" {
		return rec.Addr, true
	}
	return "", false
}
