package api

import (
	"encoding/json"
	"fmt"
)

// CommandExecutionApprovalKind says what a command approval is about.
type CommandExecutionApprovalKind string

// The command approval kinds.
const (
	ApprovalKindCommand      CommandExecutionApprovalKind = "command"
	ApprovalKindHumanCommand CommandExecutionApprovalKind = "humanCommand"
	ApprovalKindWriteStdin   CommandExecutionApprovalKind = "writeStdin"
)

// CommandExecutionRequestApprovalParams are the params of the server request
// item/commandExecution/requestApproval (docs/protocol.md §7.1). Optional keys are
// omitted when nil, as 0.169.0 does.
type CommandExecutionRequestApprovalParams struct {
	// Kind says what is being approved.
	Kind CommandExecutionApprovalKind `json:"kind"`
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
	// ItemID is the commandExecution item.
	ItemID string `json:"itemId"`
	// StartedAtMs is when the item started (Unix ms).
	StartedAtMs int64 `json:"startedAtMs"`
	// ApprovalID identifies a sub-command callback, omitted when unset.
	ApprovalID *string `json:"approvalId,omitempty"`
	// EnvironmentID is the execution environment, e.g. "local", or null.
	EnvironmentID *string `json:"environmentId"`
	// Reason is the model's justification, omitted when unset.
	Reason *string `json:"reason,omitempty"`
	// NetworkApprovalContext describes a network-only prompt, omitted when unset.
	NetworkApprovalContext *NetworkApprovalContext `json:"networkApprovalContext,omitempty"`
	// Command is the full shell invocation, omitted when unset.
	Command *string `json:"command,omitempty"`
	// Cwd is the working directory, omitted when unset.
	Cwd *string `json:"cwd,omitempty"`
	// CommandActions classify the command, omitted when unset.
	CommandActions []CommandAction `json:"commandActions,omitempty"`
	// AdditionalPermissions (experimental) are written verbatim when set.
	AdditionalPermissions json.RawMessage `json:"additionalPermissions,omitempty"`
	// ProposedExecpolicyAmendment is a command prefix to allow from now on, omitted when unset.
	ProposedExecpolicyAmendment []string `json:"proposedExecpolicyAmendment,omitempty"`
	// ProposedNetworkPolicyAmendments are host rules to add, omitted when unset.
	ProposedNetworkPolicyAmendments []NetworkPolicyAmendment `json:"proposedNetworkPolicyAmendments,omitempty"`
	// AvailableDecisions are the ordered choices to offer (experimental), omitted when unset.
	AvailableDecisions []CommandExecutionApprovalDecision `json:"availableDecisions,omitempty"`
}

// NetworkApprovalContext describes the network access being approved.
type NetworkApprovalContext struct {
	// Host is the destination host.
	Host string `json:"host"`
	// Protocol is "http", "https", "socks5Tcp" or "socks5Udp".
	Protocol string `json:"protocol"`
}

// NetworkPolicyRuleAction is a network rule's effect.
type NetworkPolicyRuleAction string

// The network rule actions.
const (
	NetworkAllow NetworkPolicyRuleAction = "allow"
	NetworkDeny  NetworkPolicyRuleAction = "deny"
)

// NetworkPolicyAmendment is a host rule.
type NetworkPolicyAmendment struct {
	// Host is the host.
	Host string `json:"host"`
	// Action is allow or deny.
	Action NetworkPolicyRuleAction `json:"action"`
}

// The simple approval decisions (shared by command and file change approvals).
const (
	DecisionAccept           = "accept"
	DecisionAcceptForSession = "acceptForSession"
	DecisionDecline          = "decline"
	DecisionCancel           = "cancel"
	// DecisionAcceptWithExecpolicyAmendment is the object form carrying ExecpolicyAmendment.
	DecisionAcceptWithExecpolicyAmendment = "acceptWithExecpolicyAmendment"
	// DecisionApplyNetworkPolicyAmendment is the object form carrying NetworkPolicyAmendment.
	DecisionApplyNetworkPolicyAmendment = "applyNetworkPolicyAmendment"
)

// CommandExecutionApprovalDecision is a command approval decision: one of
// the strings accept, acceptForSession, decline, cancel, or the objects
// {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": [...]}} and
// {"applyNetworkPolicyAmendment": {"network_policy_amendment": {host, action}}}.
type CommandExecutionApprovalDecision struct {
	// Decision is one of the Decision* constants.
	Decision string
	// ExecpolicyAmendment is the command prefix of acceptWithExecpolicyAmendment.
	ExecpolicyAmendment []string
	// NetworkPolicyAmendment is the rule of applyNetworkPolicyAmendment.
	NetworkPolicyAmendment *NetworkPolicyAmendment
}

// MarshalJSON writes the string or object form.
func (d CommandExecutionApprovalDecision) MarshalJSON() ([]byte, error) {
	switch d.Decision {
	case DecisionAcceptWithExecpolicyAmendment:
		return json.Marshal(map[string]any{d.Decision: struct {
			ExecpolicyAmendment List[string] `json:"execpolicy_amendment"`
		}{d.ExecpolicyAmendment}})
	case DecisionApplyNetworkPolicyAmendment:
		a := NetworkPolicyAmendment{}
		if d.NetworkPolicyAmendment != nil {
			a = *d.NetworkPolicyAmendment
		}
		return json.Marshal(map[string]any{d.Decision: struct {
			NetworkPolicyAmendment NetworkPolicyAmendment `json:"network_policy_amendment"`
		}{a}})
	default:
		return json.Marshal(d.Decision)
	}
}

// UnmarshalJSON decodes the string or object form; unknown decisions are errors.
func (d *CommandExecutionApprovalDecision) UnmarshalJSON(b []byte) error {
	*d = CommandExecutionApprovalDecision{}
	if !isObject(b) {
		if err := json.Unmarshal(b, &d.Decision); err != nil {
			return err
		}
		switch d.Decision {
		case DecisionAccept, DecisionAcceptForSession, DecisionDecline, DecisionCancel:
			return nil
		}
		return fmt.Errorf("unknown variant `%s`", d.Decision)
	}
	k, v, err := singleKey(b)
	if err != nil {
		return err
	}
	d.Decision = k
	switch k {
	case DecisionAcceptWithExecpolicyAmendment:
		var w struct {
			ExecpolicyAmendment *[]string `json:"execpolicy_amendment"`
		}
		if err := json.Unmarshal(v, &w); err != nil {
			return err
		}
		if w.ExecpolicyAmendment == nil {
			return fmt.Errorf("missing field `execpolicy_amendment`")
		}
		d.ExecpolicyAmendment = *w.ExecpolicyAmendment
	case DecisionApplyNetworkPolicyAmendment:
		var w struct {
			NetworkPolicyAmendment *NetworkPolicyAmendment `json:"network_policy_amendment"`
		}
		if err := json.Unmarshal(v, &w); err != nil {
			return err
		}
		if w.NetworkPolicyAmendment == nil {
			return fmt.Errorf("missing field `network_policy_amendment`")
		}
		d.NetworkPolicyAmendment = w.NetworkPolicyAmendment
	default:
		return fmt.Errorf("unknown variant `%s`", k)
	}
	return nil
}

// CommandExecutionRequestApprovalResult is the client's answer to a command approval.
type CommandExecutionRequestApprovalResult struct {
	// Decision is the client's decision.
	Decision CommandExecutionApprovalDecision `json:"decision"`
}

// FileChangeRequestApprovalParams are the params of the server request
// item/fileChange/requestApproval (docs/protocol.md §7.2).
type FileChangeRequestApprovalParams struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
	// ItemID is the fileChange item.
	ItemID string `json:"itemId"`
	// StartedAtMs is when the item started (Unix ms).
	StartedAtMs int64 `json:"startedAtMs"`
	// Reason is the model's justification, omitted when unset.
	Reason *string `json:"reason,omitempty"`
	// GrantRoot asks for session-wide write access under this root, omitted when unset.
	GrantRoot *string `json:"grantRoot,omitempty"`
}

// FileChangeApprovalDecision is accept, acceptForSession, decline or cancel.
type FileChangeApprovalDecision string

// FileChangeRequestApprovalResult is the client's answer to a file change approval.
type FileChangeRequestApprovalResult struct {
	// Decision is the client's decision.
	Decision FileChangeApprovalDecision `json:"decision"`
}

// ToolRequestUserInputParams are the params of the server request
// item/tool/requestUserInput (docs/protocol.md §7.3).
type ToolRequestUserInputParams struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
	// ItemID is the tool call id.
	ItemID string `json:"itemId"`
	// Questions are the questions to ask.
	Questions List[ToolRequestUserInputQuestion] `json:"questions"`
	// IsBlocking tells whether the turn waits for the answer.
	IsBlocking bool `json:"isBlocking"`
	// AutoResolutionMs resolves automatically after this delay, or null.
	AutoResolutionMs *uint64 `json:"autoResolutionMs"`
}

// ToolRequestUserInputQuestion is one question.
type ToolRequestUserInputQuestion struct {
	// ID identifies the question in the answer map.
	ID string `json:"id"`
	// Header is a short heading.
	Header string `json:"header"`
	// Question is the question text.
	Question string `json:"question"`
	// IsOther allows a free-form answer.
	IsOther bool `json:"isOther"`
	// IsSecret hides the answer.
	IsSecret bool `json:"isSecret"`
	// Options are the choices, or null.
	Options []ToolRequestUserInputOption `json:"options"`
}

// ToolRequestUserInputOption is one choice.
type ToolRequestUserInputOption struct {
	// Label is the choice.
	Label string `json:"label"`
	// Description explains it.
	Description string `json:"description"`
}

// ToolRequestUserInputResult is the client's answer to item/tool/requestUserInput.
type ToolRequestUserInputResult struct {
	// Answers maps question id to answers.
	Answers Map[ToolRequestUserInputAnswer] `json:"answers"`
}

// ToolRequestUserInputAnswer are the answers to one question.
type ToolRequestUserInputAnswer struct {
	// Answers are the chosen or typed answers.
	Answers List[string] `json:"answers"`
}

// DynamicToolCallParams are the params of the server request item/tool/call (docs/protocol.md §7.4).
type DynamicToolCallParams struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
	// CallID is the model's call id (= the dynamicToolCall item id).
	CallID string `json:"callId"`
	// Namespace is the tool's namespace, or null.
	Namespace *string `json:"namespace"`
	// Tool is the tool name.
	Tool string `json:"tool"`
	// Arguments are the parsed arguments (any JSON; nil is null).
	Arguments json.RawMessage `json:"arguments"`
}

// DynamicToolCallResult is the client's answer to item/tool/call; both fields are required.
type DynamicToolCallResult struct {
	// ContentItems are the tool output.
	ContentItems List[DynamicToolCallOutputContentItem] `json:"contentItems"`
	// Success tells whether the call succeeded.
	Success bool `json:"success"`
}

// McpServerElicitationRequestParams are the params of the server request
// mcpServer/elicitation/request: an MCP server's elicitation/create, or a
// tool-call approval (_meta.codex_approval_kind "mcp_tool_call"), flattened
// with the thread it belongs to.
type McpServerElicitationRequestParams struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn the elicitation was observed in, or null.
	TurnID *string `json:"turnId"`
	// ServerName is the MCP server.
	ServerName string `json:"serverName"`
	// Mode is "form" or "url".
	Mode string `json:"mode"`
	// Message is what to show the user.
	Message string `json:"message"`
	// RequestedSchema is the form's schema (form mode), omitted otherwise.
	RequestedSchema json.RawMessage `json:"requestedSchema,omitempty"`
	// URL is the page to open (url mode), omitted otherwise.
	URL string `json:"url,omitempty"`
	// ElicitationID identifies a url-mode elicitation, omitted otherwise.
	ElicitationID string `json:"elicitationId,omitempty"`
	// Meta is the request's _meta, omitted when unset.
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// McpServerElicitationAction is the user's answer to an elicitation.
type McpServerElicitationAction string

// The elicitation actions.
const (
	ElicitationAccept  McpServerElicitationAction = "accept"
	ElicitationDecline McpServerElicitationAction = "decline"
	ElicitationCancel  McpServerElicitationAction = "cancel"
)

// McpServerElicitationRequestResult is the client's answer to
// mcpServer/elicitation/request.
type McpServerElicitationRequestResult struct {
	// Action is accept, decline or cancel; required.
	Action McpServerElicitationAction `json:"action"`
	// Content is the form's data when accepted, or null.
	Content json.RawMessage `json:"content,omitempty"`
	// Meta is client metadata, or null.
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// DynamicToolSpecType is the discriminator of DynamicToolSpec.
type DynamicToolSpecType string

// The dynamic tool spec kinds.
const (
	DynamicToolFunction  DynamicToolSpecType = "function"
	DynamicToolNamespace DynamicToolSpecType = "namespace"
)

// DynamicToolSpec registers a client tool (docs/protocol.md §7.5): a function
// {type, name, description, inputSchema, deferLoading?} or a namespace
// {type, name, description, tools: function specs}. A missing type decodes
// as "" and should be treated as a function, as 0.169.0 does.
type DynamicToolSpec struct {
	// Type is "function" or "namespace".
	Type DynamicToolSpecType
	// Name is the tool or namespace name.
	Name string
	// Description describes the tool or namespace.
	Description string
	// InputSchema is the function's JSON Schema.
	InputSchema json.RawMessage
	// DeferLoading keeps a function callable but out of the model's ordinary tool list.
	DeferLoading *bool
	// Tools are a namespace's functions.
	Tools []DynamicToolSpec
}

// MarshalJSON writes the keys of the selected variant.
func (s DynamicToolSpec) MarshalJSON() ([]byte, error) {
	if s.Type == DynamicToolNamespace {
		return json.Marshal(struct {
			Type        DynamicToolSpecType   `json:"type"`
			Name        string                `json:"name"`
			Description string                `json:"description"`
			Tools       List[DynamicToolSpec] `json:"tools"`
		}{s.Type, s.Name, s.Description, s.Tools})
	}
	typ := s.Type
	if typ == "" {
		typ = DynamicToolFunction
	}
	return json.Marshal(struct {
		Type         DynamicToolSpecType `json:"type"`
		Name         string              `json:"name"`
		Description  string              `json:"description"`
		InputSchema  json.RawMessage     `json:"inputSchema"`
		DeferLoading *bool               `json:"deferLoading,omitempty"`
	}{typ, s.Name, s.Description, s.InputSchema, s.DeferLoading})
}

// UnmarshalJSON decodes either variant.
func (s *DynamicToolSpec) UnmarshalJSON(b []byte) error {
	var w struct {
		Type         DynamicToolSpecType `json:"type"`
		Name         string              `json:"name"`
		Description  string              `json:"description"`
		InputSchema  json.RawMessage     `json:"inputSchema"`
		DeferLoading *bool               `json:"deferLoading"`
		Tools        []DynamicToolSpec   `json:"tools"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = DynamicToolSpec(w)
	return nil
}
