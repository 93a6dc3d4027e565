package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/config/configview"
	"github.com/appserver/appserver/internal/daemon"
	"github.com/appserver/appserver/internal/execclient"
	"github.com/appserver/appserver/internal/gctune"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/tlscert"
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

// execError is an error of `appserver exec`'s turn, whose exit status says
// what went wrong (execclient.ExitCode).
type execError struct{ err error }

func (e execError) Error() string { return e.err.Error() }
func (e execError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var u usageError
	var e execError
	switch {
	case errors.As(err, &u):
		return 2
	case errors.As(err, &e):
		return execclient.ExitCode(e.err)
	}
	return 1
}

// parseFlags parses a command's flags. -h and --help print the command's
// usage and flags to stdout, as users expect, and return flag.ErrHelp,
// which run turns into success; a bad flag is a usage error naming it.
func parseFlags(fs *flag.FlagSet, args []string, usage string, stdout io.Writer) error {
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
		return usageError{fmt.Sprintf("%v (run \"appserver %s -h\" for the flags)", err, fs.Name())}
	}
	return nil
}

const usage = `usage: appserver [command] [flags]

commands:
  serve     run the daemon (default)
  migrate   apply database migrations and exit
  exec      run one turn on a running daemon over its HTTP API (for CI jobs)
  mcp       serve the codex and codex-reply MCP tools on stdin/stdout (for MCP hosts)
  mockmodel run the scripted fake model server (offline integration work)
  version   print the version and exit (also --version)

Run "appserver <command> -h" for the flags of a command.
`

const serveUsage = `usage: appserver serve [flags]

Runs the daemon: the websocket JSON-RPC protocol and the HTTP API on one
listener, until SIGINT or SIGTERM (SIGHUP reloads the TLS certificate).
Every flag sets the config key of the same name (dashes for underscores),
over the config file and the APPSERVER_* environment.

flags:
`

const migrateUsage = `usage: appserver migrate [flags]

Applies the store's schema migrations and exits.

flags:
`

// run is the whole program, callable in-process by tests: it parses args,
// runs the chosen command until ctx is cancelled and returns its error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if err := runCommand(ctx, args, stdout, stderr); !errors.Is(err, flag.ErrHelp) {
		return err
	}
	return nil // the command printed its help
}

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			cmd, args = "help", args[1:]
		case "-version", "--version":
			cmd, args = "version", args[1:]
		default:
			if !strings.HasPrefix(args[0], "-") {
				cmd, args = args[0], args[1:]
			}
		}
	}
	switch cmd {
	case "serve":
		return runServe(ctx, args, stdout, stderr)
	case "migrate":
		return runMigrate(ctx, args, stdout, stderr)
	case "exec":
		return runExec(ctx, args, stdout, stderr)
	case "mcp":
		return runMCP(ctx, args, os.Stdin, stdout, stderr)
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
	// sources are what load read, for reloading and to check config
	// writes.
	sources config.Sources
}

// flagKeys are the config keys exposed as dedicated flags.
var flagKeys = []struct{ key, help string }{
	{"listen", "listen address, ws://IP:PORT, or wss://IP:PORT for TLS"},
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
	if err := parseFlags(cf.fs, args, usage, stdout); err != nil {
		return nil, nil, err
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

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == config.LogFormatJSON {
		opts.ReplaceAttr = durationText
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// durationText writes a duration as the text format does ("1.5s"): the
// JSON handler would write a count of nanoseconds.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cf := newConfigFlags("migrate")
	cfg, warnings, err := cf.load(args, migrateUsage, stdout)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	for _, w := range warnings {
		log.Warn("config", "warning", w.String())
	}
	st, where, err := daemon.OpenStore(ctx, cfg, true, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "migrations applied (%s)\n", where)
	return st.Close()
}

// runServe builds the daemon, serves until ctx ends and shuts down. Every
// service is complete when its constructor returns and is stopped once, in
// the order above: it puts its stop in stops as soon as it runs, so a
// failure on the way up stops what was started in the same order.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	cf := newConfigFlags("serve")
	cfg, warnings, err := cf.load(args, serveUsage, stdout)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	for _, w := range warnings {
		log.Warn("config", "warning", w.String())
	}

	authn, err := daemon.Authenticator(cfg)
	if err != nil {
		return err
	}
	execPolicy, err := policy.ParseSandboxMode(string(cfg.SandboxMode))
	if err != nil {
		return err
	}

	var stops daemon.Stops
	defer stops.Run()
	// Keep the collector from running every few MB while the live heap is
	// small (the tail latency of tool round trips), and give memory back
	// to the OS once a spike is over (see internal/gctune).
	floor, returner := gctune.Start(uint64(cfg.GCHeapFloorMiB)<<20), gctune.NewReturner(gctune.ReturnerConfig{})
	returner.Start()
	stops[daemon.StopGC] = func() { returner.Stop(); floor.Stop() }

	c, err := daemon.NewCore(ctx, cfg, cf.path(), appVersion(), log, &stops)
	if err != nil {
		return err
	}
	metrics, st, hb, cat, tools, mgr := c.Metrics, c.Store, c.Hub, c.Catalog, c.Tools, c.Manager
	if err := mgr.Recover(ctx); err != nil {
		return fmt.Errorf("recover turns of a previous run: %w", err)
	}
	// Written settings reach new threads at once.
	cw := configview.NewWriter(cfg, cf.sources, func(n *config.Config) {
		mgr.UpdateDefaults(turns.LiveDefaults{Model: n.Model, ModelProvider: n.ModelProvider,
			ApprovalPolicy: string(n.ApprovalPolicy), SandboxMode: string(n.SandboxMode)})
	})
	srv, err := server.New(server.Config{
		AllowedOrigins: cfg.AllowedOrigins,
		Auth:           authn,
		Store:          st,
		Logger:         log,
		Metrics:        metrics,
		InboundBytes:   int64(cfg.WSMaxInboundInflightMiB) << 20,
		OutboundBytes:  int64(cfg.WSMaxOutboundQueuedMiB) << 20,
		Hub:            hb,
		Threads:        mgr,
		Cwd:            c.Cwd,
		CommandExec:    &server.CommandExecConfig{Policy: execPolicy, Env: tools.Env(), Sandbox: tools.Sandbox()},
		Skills:         cat,
		MCP:            &server.MCPConfig{Manager: c.MCP, Reload: cf.reloadMCPServers},
		ConfigWriter:   cw,
		Terminals:      tools,
		Info: server.Info{
			Version:   appVersion(),
			Home:      cfg.DataDir,
			Models:    configview.Models(cfg),
			Config:    func() api.ConfigReadResult { return configview.Read(cw.Current(), cf.path()) },
			Warnings:  configview.Warnings(warnings),
			Providers: configview.Providers(cfg),
		},
	})
	if err != nil {
		return err
	}
	stops[daemon.StopConns] = func() {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGracePeriod)
		defer cancel()
		if serr := srv.Shutdown(sctx); err == nil {
			err = serr
		}
	}
	httpAPI, err := newHTTPAPI(cfg, log, srv, mgr, hb, st, authn, metrics, c.MCP)
	if err != nil {
		return err
	}
	if err := httpAPI.Start(ctx); err != nil {
		return err
	}
	stops[daemon.StopHTTP] = httpAPI.Stop
	mcpSrv, err := startMCP(log, srv, mgr, hb, httpAPI)
	if err != nil {
		return err
	}
	stops[daemon.StopMCPSessions] = mcpSrv.Stop
	if err := c.Watcher.Start(ctx); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.ListenAddr().String())
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	addr := "ws://" + ln.Addr().String()
	// SIGHUP reloads the TLS certificate (below); without TLS there is
	// nothing to reload, and `systemctl reload` must not kill the daemon.
	// A caught signal, unlike an ignored one, is not inherited by the
	// commands the agent runs; what this channel misses is dropped.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if cfg.ListenTLS() {
		// wss:// and https:// on the one listener, the certificate
		// re-read from its files on SIGHUP.
		certs, err := tlscert.New(tlscert.Config{CertFile: cfg.TLSCertFile, KeyFile: cfg.TLSKeyFile, Logger: log})
		if err != nil {
			_ = ln.Close()
			return err
		}
		if err := certs.Start(ctx); err != nil {
			_ = ln.Close()
			return err
		}
		stops[daemon.StopCerts] = certs.Stop
		ln = tls.NewListener(ln, certs.TLSConfig())
		addr = "wss://" + ln.Addr().String()
	}
	log.Info(listeningMsg, "addr", addr, "store", c.Where, "version", appVersion(), "auth", string(cfg.WSAuth))
	announce(stdout, cfg.LogFormat, addr)
	return srv.Serve(ctx, ln)
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
