package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/appserver/appserver/internal/daemon"
	"github.com/appserver/appserver/internal/httpapi"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/mcpserver"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/turns"
)

// startMCP mounts the MCP endpoint at /mcp on the server's listener,
// behind the HTTP API's authentication: the operator's credential, or a
// principal's token, whose sessions see only the principal's threads.
func startMCP(log *slog.Logger, srv *server.Server, mgr *turns.Manager, hb *hub.Hub, httpAPI *httpapi.API) (*mcpserver.Server, error) {
	m, err := mcpserver.New(mcpserver.Config{
		Manager: mgr, Hub: hb, Version: appVersion(),
		Logger: log.With("component", "mcp"),
	})
	if err != nil {
		return nil, err
	}
	h := m.HTTPHandler(func(r *http.Request) mcpserver.Identity { return httpAPI.PrincipalOf(r) })
	srv.Mount("/mcp", httpAPI.Authenticate(h))
	return m, nil
}

const mcpUsage = `usage: appserver mcp [flags]

Serves the codex and codex-reply MCP tools on stdin and stdout, for an MCP
host that starts appserver as a process, with the configuration and store
of serve. Logs go to stderr.

flags:
`

// runMCP is `appserver mcp`: one MCP session on stdin and stdout, with the
// configuration and store of serve. Logs go to stderr, since stdout
// carries the protocol.
func runMCP(ctx context.Context, args []string, stdin io.ReadCloser, stdout, stderr io.Writer) error {
	cf := newConfigFlags("mcp")
	cfg, warnings, err := cf.load(args, mcpUsage, stdout)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	for _, w := range warnings {
		log.Warn("config", "warning", w.String())
	}
	var stops daemon.Stops
	defer stops.Run()
	c, err := daemon.NewCore(ctx, cfg, cf.path(), appVersion(), log, &stops)
	if err != nil {
		return err
	}
	// Unlike serve, mcp does not settle the turns a previous run left in
	// progress: a daemon sharing the store may be running them.
	m, err := mcpserver.New(mcpserver.Config{
		Manager: c.Manager, Hub: c.Hub, Version: appVersion(),
		Logger: log.With("component", "mcp"),
	})
	if err != nil {
		return err
	}
	stops[daemon.StopMCPSessions] = m.Stop
	// When the session ends, the shutdown of serve follows: turns still
	// running (none, normally) get the grace period, the hub fails what is
	// pending, and so on to the store.
	if err := m.ServeStdio(ctx, stdin, nopWriteCloser{stdout}); err != nil {
		return fmt.Errorf("mcp session: %w", err)
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
