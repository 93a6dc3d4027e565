package orchestrate

import (
	"context"
	"encoding/json"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/mcp"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/turns"
)

// mcpTurn is what a turn lends its MCP tools: its items, its clients (for
// tool approvals and the servers' elicitations) and whether its approval
// policy lets anyone be asked, and the servers the thread turned off.
func (s *Service) mcpTurn(tc turns.ToolContext, sw switches) *mcp.Turn {
	tt := s.newTurnTools(tc)
	never := tt.approval.Mode == policy.Never ||
		(tt.approval.Mode == policy.Granular && !tt.approval.Granular.McpElicitations)
	t := &mcp.Turn{ThreadID: tc.ThreadID, TurnID: tc.TurnID, NeverAsk: never, DeferTools: s.deferMCPTools(tc),
		PlainTools: s.cfg.Providers[tc.Provider].WireAPI == config.WireAPIChat, Disabled: sw.mcpOff}
	if tc.Sink != nil {
		t.Items = mcpItems{tc.Sink, tt}
		t.Progress = func(n api.McpToolCallProgressNotification) { tc.Sink.Emit(context.Background(), mcpProgress{n}) }
	}
	if tc.Client != nil {
		t.Asker = mcpAsker{tc.Client}
	}
	return t
}

// deferMCPTools reports whether the turn's MCP tools are found through
// tool_search rather than sent in full: the model's catalog entry says it
// supports the search tool, and its provider speaks the Responses API
// (Chat Completions has neither tool_search nor namespaces, so codex does
// not defer there).
func (s *Service) deferMCPTools(tc turns.ToolContext) bool {
	return s.cfg.Models[tc.Model].SupportsSearchTool && s.cfg.Providers[tc.Provider].WireAPI != config.WireAPIChat
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

// mcpItems lends the turn's sink to the MCP tools, which name their turn
// (the sink's own) and a context the sink does not need; a completed call
// is recorded in the audit log.
type mcpItems struct {
	s  turns.ToolSink
	tt *turnTools
}

func (m mcpItems) ItemStarted(_ context.Context, _ string, it api.ThreadItem) {
	m.s.ItemStarted(it)
}

func (m mcpItems) ItemCompleted(ctx context.Context, _ string, it api.ThreadItem) {
	m.s.ItemCompleted(it)
	if c, ok := it.Body.(*api.McpToolCallItem); ok {
		m.tt.auditCall(ctx, mcpAudit{
			Tool: "mcp", CallID: c.ID, Server: c.Server, Name: c.Tool, Arguments: c.Arguments,
			ApprovalPolicy: m.tt.tc.ApprovalPolicy, Status: c.Status,
		})
	}
}

// mcpAudit is the detail of an MCP tool call's tool_call entry; its
// approval, when the server's tool needed one, is an approval entry of
// the same item id.
type mcpAudit struct {
	Tool           string             `json:"tool"`
	CallID         string             `json:"callId"`
	Server         string             `json:"server"`
	Name           string             `json:"name"`
	Arguments      json.RawMessage    `json:"arguments"`
	ApprovalPolicy api.AskForApproval `json:"approvalPolicy"`
	Status         api.ToolStatus     `json:"status"`
}

// mcpProgress is a server's progress report as a tool event.
type mcpProgress struct {
	api.McpToolCallProgressNotification
}

// Method implements registry.Event.
func (mcpProgress) Method() string { return api.MethodMcpToolCallProgress }

// Params implements registry.Event.
func (p mcpProgress) Params(threadID, turnID string) any {
	n := p.McpToolCallProgressNotification
	n.ThreadID, n.TurnID = threadID, turnID
	return n
}
