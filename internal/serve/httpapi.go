package serve

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/frontdoor"
	"github.com/appserver/appserver/internal/httpapi"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/mcp"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/webhook"
)

// webhookAPI is the HTTP API's webhooks: kept in the store, run by the
// sender.
type webhookAPI struct {
	store.Store
	*webhook.Sender
}

// newHTTPAPI builds the HTTP/JSON API, which the front door mounts at /v1
// (behind the same origin guard, with the websocket's credentials, the
// principals' tokens and the browser credentials); serve starts it.
func newHTTPAPI(log *slog.Logger, drain *frontdoor.Drain, threads httpapi.Threads, budgets httpapi.Budgets, hb *hub.Hub, st store.Store,
	authn *auth.Authenticator, browser *auth.Browser, principals *principal.Rules, reg prometheus.Registerer, servers *mcp.Manager,
	hooks *webhook.Sender, auditLog *audit.Log) (*httpapi.API, error) {
	var hooksAPI httpapi.Webhooks // none without the event log (501)
	if hooks != nil {
		hooksAPI = webhookAPI{Store: st, Sender: hooks}
	}
	return httpapi.New(httpapi.Config{
		Threads:    threads,
		Hub:        hb,
		Keys:       st,
		Auth:       authn,
		Browser:    browser,
		Principals: principals,
		Draining:   drain.Draining,
		MCP:        servers,
		Budgets:    budgets,
		Webhooks:   hooksAPI,
		Audit:      st,
		Recorder:   auditLog,
		Registerer: reg,
		Logger:     log.With("component", "httpapi"),
	})
}
