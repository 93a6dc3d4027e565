package mcpserver

import (
	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/hub"
)

// The codex/event notification: the reference's core Event (an id and a
// msg tagged by type) with MCP _meta naming the tools/call request it
// belongs to and the thread.
const methodCodexEvent = "codex/event"

type eventParams struct {
	Meta eventMeta `json:"_meta"`
	ID   string    `json:"id"`
	Msg  any       `json:"msg"`
}

type eventMeta struct {
	RequestID any    `json:"requestId"`
	ThreadID  string `json:"threadId"`
}

// The msg bodies, in the reference's snake_case wire shape.
type (
	sessionConfiguredMsg struct {
		Type            string             `json:"type"` // session_configured
		SessionID       string             `json:"session_id"`
		ThreadID        string             `json:"thread_id"`
		Model           string             `json:"model"`
		ModelProvider   string             `json:"model_provider"`
		ApprovalPolicy  api.AskForApproval `json:"approval_policy"`
		SandboxPolicy   api.SandboxPolicy  `json:"sandbox_policy"`
		Cwd             string             `json:"cwd"`
		ReasoningEffort any                `json:"reasoning_effort"`
	}
	taskStartedMsg struct {
		Type               string `json:"type"` // task_started
		TurnID             string `json:"turn_id"`
		ModelContextWindow *int64 `json:"model_context_window"`
	}
	itemMsg struct {
		Type     string         `json:"type"` // item_started, item_completed
		ThreadID string         `json:"thread_id"`
		TurnID   string         `json:"turn_id"`
		Item     api.ThreadItem `json:"item"`
	}
	agentMessageDeltaMsg struct {
		Type  string `json:"type"` // agent_message_delta
		Delta string `json:"delta"`
	}
	agentMessageMsg struct {
		Type    string `json:"type"` // agent_message
		Message string `json:"message"`
	}
	tokenCountMsg struct {
		Type       string         `json:"type"` // token_count
		Info       tokenUsageInfo `json:"info"`
		RateLimits any            `json:"rate_limits"`
	}
	tokenUsageInfo struct {
		Total              tokenUsage `json:"total_token_usage"`
		Last               tokenUsage `json:"last_token_usage"`
		ModelContextWindow *int64     `json:"model_context_window"`
	}
	tokenUsage struct {
		InputTokens           int64 `json:"input_tokens"`
		CachedInputTokens     int64 `json:"cached_input_tokens"`
		OutputTokens          int64 `json:"output_tokens"`
		ReasoningOutputTokens int64 `json:"reasoning_output_tokens"`
		TotalTokens           int64 `json:"total_tokens"`
	}
	taskCompleteMsg struct {
		Type             string  `json:"type"` // task_complete
		TurnID           string  `json:"turn_id"`
		LastAgentMessage *string `json:"last_agent_message"`
	}
	turnAbortedMsg struct {
		Type   string `json:"type"` // turn_aborted
		TurnID string `json:"turn_id"`
		Reason string `json:"reason"`
	}
	errorMsg struct {
		Type    string `json:"type"` // error, stream_error
		Message string `json:"message"`
	}
	approvalRequestMsg struct {
		Type    string  `json:"type"` // exec_approval_request, apply_patch_approval_request
		CallID  string  `json:"call_id"`
		TurnID  string  `json:"turn_id"`
		Command *string `json:"command,omitempty"`
		Cwd     *string `json:"cwd,omitempty"`
		Reason  *string `json:"reason,omitempty"`
	}
)

func usageOf(b api.TokenUsageBreakdown) tokenUsage {
	return tokenUsage{
		InputTokens: b.InputTokens, CachedInputTokens: b.CachedInputTokens, OutputTokens: b.OutputTokens,
		ReasoningOutputTokens: b.ReasoningOutputTokens, TotalTokens: b.TotalTokens,
	}
}

// threadOf returns the thread and turn a notification belongs to, and
// whether the package maps it at all.
func threadOf(n *hub.Notification) (thread, turn string, ok bool) {
	switch p := n.Params.(type) {
	case api.TurnStartedNotification:
		return p.ThreadID, p.Turn.ID, true
	case api.TurnCompletedNotification:
		return p.ThreadID, p.Turn.ID, true
	case api.ItemStartedNotification:
		return p.ThreadID, p.TurnID, true
	case api.ItemCompletedNotification:
		return p.ThreadID, p.TurnID, true
	case api.ItemDeltaNotification:
		if n.Method == "item/agentMessage/delta" {
			return p.ThreadID, p.TurnID, true
		}
	case api.ThreadTokenUsageUpdatedNotification:
		return p.ThreadID, p.TurnID, true
	case api.ErrorNotification:
		return p.ThreadID, p.TurnID, true
	}
	return "", "", false
}

// msgsOf maps one of the notifications threadOf accepts onto the msgs of
// the reference's events (an agent message's completion is two: the item
// and the message).
func msgsOf(n *hub.Notification) []any {
	switch p := n.Params.(type) {
	case api.TurnStartedNotification:
		return []any{taskStartedMsg{Type: "task_started", TurnID: p.Turn.ID}}
	case api.ItemStartedNotification:
		return []any{itemMsg{Type: "item_started", ThreadID: p.ThreadID, TurnID: p.TurnID, Item: p.Item}}
	case api.ItemCompletedNotification:
		out := []any{itemMsg{Type: "item_completed", ThreadID: p.ThreadID, TurnID: p.TurnID, Item: p.Item}}
		if m, ok := p.Item.Body.(*api.AgentMessageItem); ok {
			out = append(out, agentMessageMsg{Type: "agent_message", Message: m.Text})
		}
		return out
	case api.ItemDeltaNotification:
		return []any{agentMessageDeltaMsg{Type: "agent_message_delta", Delta: p.Delta}}
	case api.ThreadTokenUsageUpdatedNotification:
		return []any{tokenCountMsg{Type: "token_count", Info: tokenUsageInfo{
			Total: usageOf(p.TokenUsage.Total), Last: usageOf(p.TokenUsage.Last), ModelContextWindow: p.TokenUsage.ModelContextWindow,
		}}}
	case api.ErrorNotification:
		typ := "error"
		if p.WillRetry {
			typ = "stream_error"
		}
		return []any{errorMsg{Type: typ, Message: p.Error.Message}}
	}
	return nil
}

// endMsg is the msg that ends a call's events: task_complete, turn_aborted
// or error, as the turn ended.
func endMsg(turn api.Turn, last *string) any {
	switch turn.Status {
	case api.TurnInterrupted:
		return turnAbortedMsg{Type: "turn_aborted", TurnID: turn.ID, Reason: "interrupted"}
	case api.TurnFailed:
		return errorMsg{Type: "error", Message: turnError(turn)}
	}
	return taskCompleteMsg{Type: "task_complete", TurnID: turn.ID, LastAgentMessage: last}
}

func turnError(turn api.Turn) string {
	if turn.Error != nil && turn.Error.Message != "" {
		return turn.Error.Message
	}
	return "the turn failed"
}
