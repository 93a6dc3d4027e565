package api

import (
	"encoding/json"
	"fmt"
)

// ApprovalPolicy is the string form of AskForApproval.
type ApprovalPolicy string

// The string approval policies.
const (
	ApprovalUntrusted ApprovalPolicy = "untrusted"
	ApprovalOnRequest ApprovalPolicy = "on-request"
	ApprovalNever     ApprovalPolicy = "never"
)

// AskForApproval is a string policy ("untrusted", "on-request", "never") or
// the object {"granular": {...}}; Granular, when set, wins over Policy.
type AskForApproval struct {
	// Policy is the string form; ignored when Granular is set.
	Policy ApprovalPolicy
	// Granular is the object form.
	Granular *GranularApproval
}

// GranularApproval configures approvals per category (snake_case on the wire).
type GranularApproval struct {
	// SandboxApproval asks before escalating out of the sandbox.
	SandboxApproval bool `json:"sandbox_approval"`
	// Rules asks when exec-policy rules require it.
	Rules bool `json:"rules"`
	// SkillApproval asks before running skill scripts (default false on input).
	SkillApproval bool `json:"skill_approval"`
	// RequestPermissions asks for permission requests (default false on input).
	RequestPermissions bool `json:"request_permissions"`
	// McpElicitations asks for MCP elicitations.
	McpElicitations bool `json:"mcp_elicitations"`
}

// MarshalJSON writes the string or the granular object.
func (a AskForApproval) MarshalJSON() ([]byte, error) {
	if a.Granular != nil {
		return json.Marshal(struct {
			Granular *GranularApproval `json:"granular"`
		}{a.Granular})
	}
	return json.Marshal(a.Policy)
}

// UnmarshalJSON accepts the string or the granular object.
func (a *AskForApproval) UnmarshalJSON(b []byte) error {
	*a = AskForApproval{}
	if !isObject(b) {
		return json.Unmarshal(b, &a.Policy)
	}
	k, v, err := singleKey(b)
	if err != nil {
		return err
	}
	if k != "granular" {
		return fmt.Errorf("unknown variant `%s`, expected `granular`", k)
	}
	a.Granular = new(GranularApproval)
	return json.Unmarshal(v, a.Granular)
}

// SandboxMode is the thread-level string form of the sandbox setting.
type SandboxMode string

// The sandbox modes.
const (
	SandboxReadOnly         SandboxMode = "read-only"
	SandboxWorkspaceWrite   SandboxMode = "workspace-write"
	SandboxDangerFullAccess SandboxMode = "danger-full-access"
)

// SandboxPolicyType is the discriminator of SandboxPolicy.
type SandboxPolicyType string

// The sandbox policy variants.
const (
	SandboxPolicyDangerFullAccess SandboxPolicyType = "dangerFullAccess"
	SandboxPolicyReadOnly         SandboxPolicyType = "readOnly"
	SandboxPolicyExternalSandbox  SandboxPolicyType = "externalSandbox"
	SandboxPolicyWorkspaceWrite   SandboxPolicyType = "workspaceWrite"
)

// NetworkAccess is the network setting of an external sandbox.
type NetworkAccess string

// The external sandbox network settings.
const (
	NetworkRestricted NetworkAccess = "restricted"
	NetworkEnabled    NetworkAccess = "enabled"
)

// SandboxPolicy is the object form of the sandbox setting, tagged by type.
// MarshalJSON writes every field of the selected variant (as codex does in
// responses); UnmarshalJSON applies the schema defaults for missing fields.
type SandboxPolicy struct {
	// Type selects the variant.
	Type SandboxPolicyType
	// NetworkAccess is the readOnly / workspaceWrite network switch.
	NetworkAccess bool
	// ExternalNetworkAccess is the externalSandbox network setting (default "restricted").
	ExternalNetworkAccess NetworkAccess
	// WritableRoots are extra writable roots of workspaceWrite.
	WritableRoots []string
	// ExcludeTmpdirEnvVar drops $TMPDIR from the writable roots (workspaceWrite).
	ExcludeTmpdirEnvVar bool
	// ExcludeSlashTmp drops /tmp from the writable roots (workspaceWrite).
	ExcludeSlashTmp bool
}

// MarshalJSON writes the keys of the selected variant.
func (p SandboxPolicy) MarshalJSON() ([]byte, error) {
	switch p.Type {
	case SandboxPolicyReadOnly:
		return json.Marshal(struct {
			Type          SandboxPolicyType `json:"type"`
			NetworkAccess bool              `json:"networkAccess"`
		}{p.Type, p.NetworkAccess})
	case SandboxPolicyExternalSandbox:
		na := p.ExternalNetworkAccess
		if na == "" {
			na = NetworkRestricted
		}
		return json.Marshal(struct {
			Type          SandboxPolicyType `json:"type"`
			NetworkAccess NetworkAccess     `json:"networkAccess"`
		}{p.Type, na})
	case SandboxPolicyWorkspaceWrite:
		return json.Marshal(struct {
			Type                SandboxPolicyType `json:"type"`
			WritableRoots       List[string]      `json:"writableRoots"`
			NetworkAccess       bool              `json:"networkAccess"`
			ExcludeTmpdirEnvVar bool              `json:"excludeTmpdirEnvVar"`
			ExcludeSlashTmp     bool              `json:"excludeSlashTmp"`
		}{p.Type, p.WritableRoots, p.NetworkAccess, p.ExcludeTmpdirEnvVar, p.ExcludeSlashTmp})
	default:
		return json.Marshal(struct {
			Type SandboxPolicyType `json:"type"`
		}{p.Type})
	}
}

// UnmarshalJSON decodes any variant.
func (p *SandboxPolicy) UnmarshalJSON(b []byte) error {
	var w struct {
		Type                SandboxPolicyType `json:"type"`
		NetworkAccess       json.RawMessage   `json:"networkAccess"`
		WritableRoots       []string          `json:"writableRoots"`
		ExcludeTmpdirEnvVar bool              `json:"excludeTmpdirEnvVar"`
		ExcludeSlashTmp     bool              `json:"excludeSlashTmp"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = SandboxPolicy{Type: w.Type, WritableRoots: w.WritableRoots,
		ExcludeTmpdirEnvVar: w.ExcludeTmpdirEnvVar, ExcludeSlashTmp: w.ExcludeSlashTmp}
	hasNet := len(w.NetworkAccess) > 0 && !isNull(w.NetworkAccess)
	switch w.Type {
	case SandboxPolicyExternalSandbox:
		p.ExternalNetworkAccess = NetworkRestricted
		if hasNet {
			return json.Unmarshal(w.NetworkAccess, &p.ExternalNetworkAccess)
		}
	case SandboxPolicyReadOnly, SandboxPolicyWorkspaceWrite:
		if hasNet {
			return json.Unmarshal(w.NetworkAccess, &p.NetworkAccess)
		}
	case SandboxPolicyDangerFullAccess:
	default:
		return fmt.Errorf("unknown variant `%s`, expected one of `dangerFullAccess`, `readOnly`, `externalSandbox`, `workspaceWrite`", w.Type)
	}
	return nil
}

// ApprovalsReviewer selects who reviews approval requests.
type ApprovalsReviewer string

// The approval reviewers.
const (
	ReviewerUser             ApprovalsReviewer = "user"
	ReviewerAutoReview       ApprovalsReviewer = "auto_review"
	ReviewerGuardianSubagent ApprovalsReviewer = "guardian_subagent"
)

// Personality is the deprecated response-style preset.
type Personality string

// The personalities.
const (
	PersonalityNone      Personality = "none"
	PersonalityFriendly  Personality = "friendly"
	PersonalityPragmatic Personality = "pragmatic"
)

// ReasoningEffort is a free-form effort level advertised per model (low, medium, high, …).
type ReasoningEffort = string

// ReasoningSummary selects the reasoning summary style.
type ReasoningSummary string

// The reasoning summary styles.
const (
	ReasoningSummaryAuto     ReasoningSummary = "auto"
	ReasoningSummaryConcise  ReasoningSummary = "concise"
	ReasoningSummaryDetailed ReasoningSummary = "detailed"
	ReasoningSummaryNone     ReasoningSummary = "none"
)

// SortDirection orders paged listings.
type SortDirection string

// The sort directions.
const (
	SortAsc  SortDirection = "asc"
	SortDesc SortDirection = "desc"
)

// ThreadSortKey selects the thread/list ordering (snake_case on the wire).
type ThreadSortKey string

// The thread sort keys.
const (
	ThreadSortCreatedAt       ThreadSortKey = "created_at"
	ThreadSortUpdatedAt       ThreadSortKey = "updated_at"
	ThreadSortRecencyAt       ThreadSortKey = "recency_at"
	ThreadSortSectionPosition ThreadSortKey = "section_position"
)

// ThreadSourceKind filters thread/list by how threads were created.
type ThreadSourceKind string

// The thread source kinds.
const (
	SourceKindCli                 ThreadSourceKind = "cli"
	SourceKindVscode              ThreadSourceKind = "vscode"
	SourceKindExec                ThreadSourceKind = "exec"
	SourceKindAppServer           ThreadSourceKind = "appServer"
	SourceKindSubAgent            ThreadSourceKind = "subAgent"
	SourceKindSubAgentReview      ThreadSourceKind = "subAgentReview"
	SourceKindSubAgentCompact     ThreadSourceKind = "subAgentCompact"
	SourceKindSubAgentThreadSpawn ThreadSourceKind = "subAgentThreadSpawn"
	SourceKindSubAgentOther       ThreadSourceKind = "subAgentOther"
	SourceKindUnknown             ThreadSourceKind = "unknown"
)

// ModeKind is a collaboration mode.
type ModeKind string

// The collaboration modes.
const (
	ModePlan    ModeKind = "plan"
	ModeDefault ModeKind = "default"
)

// CollaborationMode is the (experimental) collaboration mode of a turn.
type CollaborationMode struct {
	// Mode is plan or default.
	Mode ModeKind `json:"mode"`
	// Settings are the mode's model settings.
	Settings CollaborationSettings `json:"settings"`
}

// CollaborationSettings are the settings of a collaboration mode (snake_case keys).
type CollaborationSettings struct {
	// Model is the model slug.
	Model string `json:"model"`
	// ReasoningEffort is the effort level, or null.
	ReasoningEffort *ReasoningEffort `json:"reasoning_effort"`
	// DeveloperInstructions are extra instructions, or null.
	DeveloperInstructions *string `json:"developer_instructions"`
}
