package serve

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
)

// newMCP builds the MCP server and its endpoint, which the front door
// mounts at /mcp behind the HTTP API's authentication: the operator's
// credential, or a principal's token, whose sessions see only the
// principal's threads.
func newMCP(log *slog.Logger, version string, threads mcpserver.Threads, hb *hub.Hub, httpAPI *httpapi.API) (*mcpserver.Server, http.Handler, error) {
	m, err := mcpserver.New(mcpserver.Config{
		Threads: threads, Hub: hb, Version: version,
		Logger: log.With("component", "mcp"),
	})
	if err != nil {
		return nil, nil, err
	}
	h := m.HTTPHandler(httpAPI.PrincipalOf)
	return m, httpAPI.Authenticate(h), nil
}

const mcpUsage = `usage: appserver mcp [flags]

Serves the codex and codex-reply MCP tools on stdin and stdout, for an MCP
host that starts appserver as a process, with the configuration and store
of serve. Logs go to stderr.

flags:
`

// MCP is `appserver mcp`: one MCP session on stdin and stdout, with the
// configuration and store of serve. Logs go to stderr, since stdout
// carries the protocol.
func MCP(ctx context.Context, p Process, args []string) error {
	stdout, stderr := p.Stdout, p.Stderr
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
	c, err := daemon.NewCore(ctx, cfg, daemon.Doors{}, cf.path(), p.Version, log, &stops)
	if err != nil {
		return err
	}
	// Unlike serve, mcp does not settle the turns a previous run left in
	// progress: a daemon sharing the store may be running them.
	m, err := mcpserver.New(mcpserver.Config{
		Threads: c.Manager, Hub: c.Hub, Version: p.Version,
		Logger: log.With("component", "mcp"),
	})
	if err != nil {
		return err
	}
	stops[daemon.StopMCPSessions] = m.Stop
	// When the session ends, the shutdown of serve follows: turns still
	// running (none, normally) get the grace period, the hub fails what is
	// pending, and so on to the store.
	stdin, ok := p.Stdin.(io.ReadCloser)
	if !ok {
		stdin = io.NopCloser(p.Stdin)
	}
	if err := m.ServeStdio(ctx, stdin, nopWriteCloser{stdout}); err != nil {
		return fmt.Errorf("mcp session: %w", err)
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
