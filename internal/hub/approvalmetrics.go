package hub

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns"
)

// ApprovalMetrics receives the approval measurements of a Hub. Its methods
// must not block.
type ApprovalMetrics interface {
	// ApprovalPending adds delta to the approvals waiting for an answer.
	ApprovalPending(delta int)
	// ApprovalDecided counts one settled approval by kind ("approval",
	// "elicitation") and decision: the client's decision (accept,
	// acceptForSession, acceptWithExecpolicyAmendment,
	// applyNetworkPolicyAmendment, decline, cancel), "other" for a value
	// outside those, "no_client" when nobody answered in time, "canceled"
	// when the turn ended first, "error" when the client answered with an
	// error.
	ApprovalDecided(kind, decision string)
}

type nopApprovalMetrics struct{}

func (nopApprovalMetrics) ApprovalPending(int)            {}
func (nopApprovalMetrics) ApprovalDecided(string, string) {}

// decisionOf is the decision label of an approval answered with result or
// failed with err. Clients choose the value, so it is kept to the known
// set: a label's values must stay few.
func decisionOf(result json.RawMessage, err error) string {
	switch {
	case errors.Is(err, turns.ErrNoClient):
		return "no_client"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	case err != nil:
		return "error"
	}
	var answer struct {
		// Decision answers a command or file change approval.
		Decision api.CommandExecutionApprovalDecision `json:"decision"`
		// Action answers an MCP elicitation.
		Action api.McpServerElicitationAction `json:"action"`
	}
	if json.Unmarshal(result, &answer) != nil {
		return "other"
	}
	d := answer.Decision.Decision
	if d == "" {
		d = string(answer.Action)
	}
	switch d {
	case api.DecisionAccept, api.DecisionAcceptForSession, api.DecisionDecline, api.DecisionCancel,
		api.DecisionAcceptWithExecpolicyAmendment, api.DecisionApplyNetworkPolicyAmendment:
		return d
	}
	return "other"
}
