package server

import (
	"context"

	"github.com/google/uuid"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/clientfs"
)

// migrationItemTypes are the item types of the schema, in its order.
var migrationItemTypes = []string{"AGENTS_MD", "CONFIG", "SKILLS", "PLUGINS", "MCP_SERVER_CONFIG", "SUBAGENTS", "HOOKS",
	"COMMANDS", "MEMORY", "SESSIONS"}

// registerExternalAgent installs externalAgentConfig/detect and
// externalAgentConfig/import over the connection's file access
// (docs/protocol.md §4.38): every path goes through fsguard, a
// principal's held to its roots.
func (s *Server) registerExternalAgent(f *files) {
	s.Handle(api.MethodExternalAgentConfigDetect, connMethod(f, nil, func(ctx context.Context, _ *Call, c clientfs.Conn, p api.ExternalAgentConfigDetectParams) (any, error) {
		return f.svc.DetectExternalAgent(ctx, c.Access, p)
	}))
	s.Handle(api.MethodExternalAgentConfigImport, connMethod(f, []string{"migrationItems"}, func(ctx context.Context, call *Call, c clientfs.Conn, p api.ExternalAgentConfigImportParams) (any, error) {
		for _, it := range p.MigrationItems {
			if err := oneOfVariants(string(it.ItemType), migrationItemTypes...); err != nil {
				return nil, err
			}
			if it.ItemType == "MEMORY" {
				return nil, InvalidRequest("external agent memory import is disabled")
			}
		}
		id := uuid.NewString()
		items := p.MigrationItems
		if len(items) > 0 {
			// The outcome follows the answer, as the reference sends it.
			call.After(func() {
				ctx := context.WithoutCancel(ctx)
				res := f.svc.ImportExternalAgent(ctx, c.Access, items, func(so api.List[api.ExternalAgentConfigImportTypeResult]) {
					c.Notify(api.NotificationExternalAgentConfigImportProgress, api.ExternalAgentConfigImportNotification{ImportID: id, ItemTypeResults: so})
				})
				c.Notify(api.NotificationExternalAgentConfigImportCompleted, api.ExternalAgentConfigImportNotification{ImportID: id, ItemTypeResults: res})
			})
		}
		return api.ExternalAgentConfigImportResult{ImportID: id}, nil
	}))
}
