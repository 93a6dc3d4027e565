package orchestrate

import (
	"context"
	"encoding/json"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/mcp"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/turns"
)

// mcpTurn is what a turn lends its MCP tools: its items, its clients (for
// tool approvals and the servers' elicitations) and whether its approval
// policy lets anyone be asked.
func (s *Service) mcpTurn(tc turns.ToolContext) *mcp.Turn {
	tt := s.newTurnTools(tc)
	never := tt.approval.Mode == policy.Never ||
		(tt.approval.Mode == policy.Granular && !tt.approval.Granular.McpElicitations)
	t := &mcp.Turn{ThreadID: tc.ThreadID, TurnID: tc.TurnID, Notify: tc.Notify, NeverAsk: never}
	if tc.Items != nil {
		t.Items = tc.Items
	}
	if tc.Client != nil {
		t.Asker = mcpAsker{tc.Client}
	}
	return t
}

// mcpAsker sends mcpServer/elicitation/request with the waitingOnApproval
// flag raised while it is pending.
type mcpAsker struct{ c turns.ClientRequests }

// Ask implements mcp.Asker.
func (a mcpAsker) Ask(ctx context.Context, method string, params any) (json.RawMessage, error) {
	res, release, err := a.c.Request(ctx, turns.ClientRequest{Method: method, Params: params, Flag: api.FlagWaitingOnApproval})
	if release != nil {
		release()
	}
	return res, err
}
