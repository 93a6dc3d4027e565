package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/config"
)

// ItemEmitter publishes the mcpToolCall items of a turn (the turns layer
// implements it: item/started, then the item committed and
// item/completed). Neither method may block on a slow client.
type ItemEmitter interface {
	// ItemStarted announces the item in its inProgress state.
	ItemStarted(ctx context.Context, turnID string, item api.ThreadItem)
	// ItemCompleted persists and announces the item in its final state.
	ItemCompleted(ctx context.Context, turnID string, item api.ThreadItem)
}

// Asker sends a server request to the clients of a thread and waits for
// the first answer (through the hub: every subscriber gets it).
type Asker interface {
	// Ask returns the client's result, or an error when nobody could
	// answer, the client answered with an error or ctx ended.
	Ask(ctx context.Context, method string, params any) (json.RawMessage, error)
}

// Turn is what one turn lends its MCP tools.
type Turn struct {
	// ThreadID and TurnID identify the turn.
	ThreadID, TurnID string
	// Items publishes the mcpToolCall items; nil publishes none.
	Items ItemEmitter
	// Asker asks the thread's clients (approvals, server elicitations);
	// nil declines whatever would be asked.
	Asker Asker
	// Progress announces a server's progress report on a call
	// (item/mcpToolCall/progress); nil announces none.
	Progress func(api.McpToolCallProgressNotification)
	// NeverAsk is true under the approval policy "never": a call that
	// needs an approval fails without asking, and servers' elicitations
	// are declined.
	NeverAsk bool
	// DeferTools leaves the MCP tools out of the request and offers
	// tool_search in their place, which answers with the matching tools
	// in their mcp__<server> namespaces (for a model whose catalog
	// entry supports the search tool, as codex does).
	DeferTools bool
	// PlainTools offers each tool as the plain function
	// mcp__<server>__<tool> rather than in its server's namespace, for a
	// provider that has no namespaces (Chat Completions).
	PlainTools bool
	// Disabled names the servers the thread's config turns off
	// (mcp_servers.<name>.enabled = false): their tools are not offered,
	// and with every server off neither are the resource tools.
	Disabled map[string]bool
}

// errRejected is the model's text for an MCP call whose approval was
// declined or not answered.
var errRejected = errors.New("user rejected MCP tool call")

// errApprovalNever is the model's text for an MCP call that needed an
// approval under the policy never (the reference's words).
var errApprovalNever = errors.New("MCP tool call requires approval, but approval policy is never")

// CallTool calls a tool of a server within its tool_timeout_sec and
// returns the result as items show it. t, when set, receives the server's
// elicitations and progress during the call; callID names the call there.
// The error is one a model or client can read: the server is unknown, down
// or timed out, the tool is disabled, or the call failed. outcome is the
// metrics label.
func (m *Manager) CallTool(ctx context.Context, t *Turn, callID, serverName, tool string, args json.RawMessage) (res api.McpServerToolCallResult, outcome string, err error) {
	s, ok := m.server(serverName)
	if !ok {
		return res, OutcomeFailed, apperr.New(apperr.NotFound, "unknown MCP server '%s'", serverName)
	}
	if !toolEnabled(s.cfg, tool) {
		return res, OutcomeFailed, apperr.New(apperr.Invalid, "tool '%s' is disabled for MCP server '%s'", tool, serverName)
	}
	c, err := s.session()
	if err != nil {
		m.metrics.observeCall(serverName, OutcomeFailed, 0)
		return res, OutcomeFailed, apperr.New(apperr.Unavailable, "%s", err.Error())
	}
	timeout := seconds(s.cfg.ToolTimeoutSec, config.DefaultMCPToolTimeoutSec)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	params := &mcpsdk.CallToolParams{Name: tool}
	if a := bytes.TrimSpace(args); len(a) > 0 && !bytes.Equal(a, []byte("null")) {
		params.Arguments = json.RawMessage(a)
	}
	if t != nil {
		defer s.track(&inflight{turn: t, callID: callID})()
		if callID != "" {
			params.SetProgressToken(callID)
		}
	}
	start := m.now()
	out, err := c.sess.CallTool(cctx, params)
	elapsed := m.now().Sub(start)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return res, OutcomeFailed, ctx.Err()
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		m.metrics.observeCall(serverName, OutcomeTimeout, elapsed)
		return res, OutcomeTimeout, apperr.New(apperr.Unavailable,
			"tool call failed: MCP server '%s' did not answer %s within %s (tool_timeout_sec)", serverName, tool, timeout)
	default:
		var wire *jsonrpc.Error
		if !errors.As(err, &wire) {
			// Not an answer of the server: its connection failed.
			c.markLost()
		}
		m.metrics.observeCall(serverName, OutcomeFailed, elapsed)
		return res, OutcomeFailed, apperr.New(apperr.Unavailable, "tool call failed: %v", err)
	}
	res, err = wireResult(out)
	if err != nil {
		m.metrics.observeCall(serverName, OutcomeFailed, elapsed)
		return res, OutcomeFailed, apperr.Wrap(apperr.Internal, err, "tool call failed: undecodable result")
	}
	outcome = OutcomeOK
	if out.IsError {
		outcome = OutcomeToolError
	}
	m.metrics.observeCall(serverName, outcome, elapsed)
	return res, outcome, nil
}

// wireResult converts the SDK's result to the protocol's shape.
func wireResult(r *mcpsdk.CallToolResult) (api.McpServerToolCallResult, error) {
	out := api.McpServerToolCallResult{Content: make(api.List[json.RawMessage], 0, len(r.Content))}
	for _, c := range r.Content {
		raw, err := json.Marshal(c)
		if err != nil {
			return out, err
		}
		out.Content = append(out.Content, raw)
	}
	if r.StructuredContent != nil {
		raw, err := json.Marshal(r.StructuredContent)
		if err != nil {
			return out, err
		}
		out.StructuredContent = raw
	}
	if r.IsError {
		t := true
		out.IsError = &t
	}
	if len(r.Meta) > 0 {
		raw, err := json.Marshal(r.Meta)
		if err != nil {
			return out, err
		}
		out.Meta = raw
	}
	return out, nil
}

// elicit forwards an elicitation of the server to the clients of the
// thread whose call is running on it (the most recent one): MCP elicits
// during a call, and only a thread's clients can answer. With no call
// running, or under the policy never, it is declined.
func (s *server) elicit(ctx context.Context, req *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
	s.mu.Lock()
	var f *inflight
	if n := len(s.inflight); n > 0 {
		f = s.inflight[n-1]
	}
	s.mu.Unlock()
	if f == nil || f.turn.Asker == nil || f.turn.NeverAsk {
		return &mcpsdk.ElicitResult{Action: string(api.ElicitationDecline)}, nil
	}
	p := req.Params
	params := api.McpServerElicitationRequestParams{
		ThreadID: f.turn.ThreadID, ServerName: s.name, Mode: p.Mode, Message: p.Message,
		URL: p.URL, ElicitationID: p.ElicitationID,
	}
	if f.turn.TurnID != "" {
		params.TurnID = &f.turn.TurnID
	}
	if params.Mode == "" {
		params.Mode = "form"
		if p.URL != "" {
			params.Mode = "url"
		}
	}
	if p.RequestedSchema != nil {
		raw, err := json.Marshal(p.RequestedSchema)
		if err != nil {
			return nil, err
		}
		params.RequestedSchema = raw
	} else if params.Mode == "form" {
		params.RequestedSchema = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	if len(p.Meta) > 0 {
		params.Meta, _ = json.Marshal(p.Meta)
	}
	ans, err := askElicitation(ctx, f.turn.Asker, params)
	if err != nil {
		s.m.log.Info("MCP elicitation not answered; declining", "server", s.name, "err", err)
		return &mcpsdk.ElicitResult{Action: string(api.ElicitationDecline)}, nil
	}
	out := &mcpsdk.ElicitResult{Action: string(ans.Action)}
	if ans.Action == api.ElicitationAccept && len(ans.Content) > 0 && !bytes.Equal(ans.Content, []byte("null")) {
		if err := json.Unmarshal(ans.Content, &out.Content); err != nil {
			return nil, fmt.Errorf("the client's elicitation content is not an object: %w", err)
		}
	}
	return out, nil
}

// askElicitation sends mcpServer/elicitation/request and decodes the
// answer.
func askElicitation(ctx context.Context, a Asker, params api.McpServerElicitationRequestParams) (api.McpServerElicitationRequestResult, error) {
	var ans api.McpServerElicitationRequestResult
	raw, err := a.Ask(ctx, api.MethodMcpServerElicitationRequest, params)
	if err != nil {
		return ans, err
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		return ans, fmt.Errorf("undecodable elicitation answer: %w", err)
	}
	switch ans.Action {
	case api.ElicitationAccept, api.ElicitationDecline, api.ElicitationCancel:
		return ans, nil
	}
	return ans, fmt.Errorf("elicitation answer: unknown action %q", ans.Action)
}

// progress forwards a progress notification of a running call as
// item/mcpToolCall/progress.
func (s *server) progress(_ context.Context, req *mcpsdk.ProgressNotificationClientRequest) {
	token, _ := req.Params.ProgressToken.(string)
	s.mu.Lock()
	var f *inflight
	for _, x := range s.inflight {
		if x.callID == token {
			f = x
		}
	}
	s.mu.Unlock()
	if f == nil || f.turn.Progress == nil {
		return
	}
	msg := req.Params.Message
	if msg == "" {
		if req.Params.Total > 0 {
			msg = fmt.Sprintf("%g/%g", req.Params.Progress, req.Params.Total)
		} else {
			msg = fmt.Sprintf("%g", req.Params.Progress)
		}
	}
	f.turn.Progress(api.McpToolCallProgressNotification{
		ThreadID: f.turn.ThreadID, TurnID: f.turn.TurnID, ItemID: f.callID, Message: msg,
	})
}

// durationMs is d in whole milliseconds, for items.
func durationMs(d time.Duration) *int64 {
	ms := d.Milliseconds()
	return &ms
}
