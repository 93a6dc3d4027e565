package main

import (
	"log/slog"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/httpapi"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/mcp"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// newHTTPAPI builds the HTTP/JSON API and mounts it at /v1 on the server's
// listener (behind the same origin guard, with the websocket's credentials
// plus the configured principals); runServe starts it.
func newHTTPAPI(cfg *config.Config, log *slog.Logger, srv *server.Server, mgr *turns.Manager,
	hb *hub.Hub, st store.Store, authn *auth.Authenticator, metrics *server.Metrics, servers *mcp.Manager) (*httpapi.API, error) {
	principals := make(map[string]string, len(cfg.HTTPAPI.Principals))
	for name, p := range cfg.HTTPAPI.Principals {
		principals[name] = p.TokenSHA256
	}
	a, err := httpapi.New(httpapi.Config{
		Manager:    mgr,
		Hub:        hb,
		Store:      st,
		Auth:       authn,
		Principals: principals,
		Ceiling: httpapi.Ceiling{
			MaxSandbox:               api.SandboxMode(cfg.HTTPAPI.PrincipalMaxSandbox),
			MaxApproval:              api.ApprovalPolicy(cfg.HTTPAPI.PrincipalMaxApproval),
			AllowNeverWithFullAccess: cfg.HTTPAPI.PrincipalMaxApproval == config.ApprovalNever,
			DefaultSandbox:           api.SandboxMode(cfg.SandboxMode),
			DefaultApproval:          api.ApprovalPolicy(cfg.ApprovalPolicy),
		},
		Draining:   srv.Draining,
		MCP:        servers,
		Registerer: metrics.Registry,
		Logger:     log.With("component", "httpapi"),
	})
	if err != nil {
		return nil, err
	}
	srv.Mount("/v1", a.Handler())
	return a, nil
}
