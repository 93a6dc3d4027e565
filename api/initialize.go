package api

import "encoding/json"

// InitializeParams are the params of initialize.
type InitializeParams struct {
	// ClientInfo identifies the client; required.
	ClientInfo ClientInfo `json:"clientInfo"`
	// Capabilities are the client's opt-ins, or null.
	Capabilities *InitializeCapabilities `json:"capabilities,omitempty"`
}

// ClientInfo identifies a client; Name must be a valid HTTP header value.
type ClientInfo struct {
	// Name is the client's identifier, e.g. "codex-tui".
	Name string `json:"name"`
	// Title is a display name, or null.
	Title *string `json:"title"`
	// Version is the client's version.
	Version string `json:"version"`
}

// InitializeCapabilities are the client's capability opt-ins (all optional).
type InitializeCapabilities struct {
	// ExperimentalAPI unlocks experimental methods and fields.
	ExperimentalAPI bool `json:"experimentalApi,omitempty"`
	// OptOutNotificationMethods are exact notification methods never to send.
	OptOutNotificationMethods []string `json:"optOutNotificationMethods,omitempty"`
	// EventSeq (appserver's own, with experimentalApi) adds "seq", the
	// position in the thread's event log, to every thread notification, for
	// resuming with thread/resume afterSeq.
	EventSeq bool `json:"eventSeq,omitempty"`
	// RequestAttestation opts into attestation/generate requests (ignored).
	RequestAttestation bool `json:"requestAttestation,omitempty"`
	// RequiredHumanApproval asks for humanCommand approvals (accepted, ignored).
	RequiredHumanApproval *bool `json:"requiredHumanApproval,omitempty"`
	// ExplicitGatewayOauth selects explicit gateway login (ignored).
	ExplicitGatewayOauth *bool `json:"explicitGatewayOauth,omitempty"`
	// McpServerOpenaiFormElicitation is the legacy MCP form opt-in (ignored).
	McpServerOpenaiFormElicitation *bool `json:"mcpServerOpenaiFormElicitation,omitempty"`
	// Extensions are MCP extension settings (ignored).
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
}

// InitializeResult is the result of initialize.
type InitializeResult struct {
	// UserAgent is an opaque server identification string.
	UserAgent string `json:"userAgent"`
	// CodexHome is the absolute path of the server's home directory.
	CodexHome string `json:"codexHome"`
	// PlatformFamily is "unix" or "windows".
	PlatformFamily string `json:"platformFamily"`
	// PlatformOs is "linux", "macos" or "windows".
	PlatformOs string `json:"platformOs"`
}

// AccountReadParams are the params of account/read.
type AccountReadParams struct {
	// RefreshToken asks the server to refresh credentials first.
	RefreshToken *bool `json:"refreshToken,omitempty"`
}

// AccountReadResult is the result of account/read.
type AccountReadResult struct {
	// Account is the signed-in account, or null.
	Account *Account `json:"account"`
	// UserID is the ChatGPT user id, or null.
	UserID *string `json:"userId"`
	// RequiresOpenaiAuth tells the client whether it must sign in.
	RequiresOpenaiAuth bool `json:"requiresOpenaiAuth"`
	// WorkspaceRouting is ChatGPT workspace routing, or null (written by 0.169.0).
	WorkspaceRouting *WorkspaceRouting `json:"workspaceRouting"`
}

// AccountType is the discriminator of Account.
type AccountType string

// The account kinds.
const (
	AccountAPIKey        AccountType = "apiKey"
	AccountChatgpt       AccountType = "chatgpt"
	AccountAmazonBedrock AccountType = "amazonBedrock"
	AccountGcp           AccountType = "gcp"
)

// Account is the signed-in account, tagged by type.
type Account struct {
	// Type selects the variant.
	Type AccountType
	// Email is the chatgpt account's email, or null.
	Email *string
	// PlanType is the chatgpt plan, e.g. "plus".
	PlanType string
	// WorkspaceName is the chatgpt workspace name, or null.
	WorkspaceName *string
	// UsesCodexManagedCredentials is set for amazonBedrock.
	UsesCodexManagedCredentials bool
}

// MarshalJSON writes the keys of the selected variant.
func (a Account) MarshalJSON() ([]byte, error) {
	switch a.Type {
	case AccountChatgpt:
		return json.Marshal(struct {
			Type          AccountType `json:"type"`
			Email         *string     `json:"email"`
			PlanType      string      `json:"planType"`
			WorkspaceName *string     `json:"workspaceName"`
		}{a.Type, a.Email, a.PlanType, a.WorkspaceName})
	case AccountAmazonBedrock:
		return json.Marshal(struct {
			Type                        AccountType `json:"type"`
			UsesCodexManagedCredentials bool        `json:"usesCodexManagedCredentials"`
		}{a.Type, a.UsesCodexManagedCredentials})
	default:
		return json.Marshal(struct {
			Type AccountType `json:"type"`
		}{a.Type})
	}
}

// UnmarshalJSON decodes any variant.
func (a *Account) UnmarshalJSON(b []byte) error {
	var w struct {
		Type                        AccountType `json:"type"`
		Email                       *string     `json:"email"`
		PlanType                    string      `json:"planType"`
		WorkspaceName               *string     `json:"workspaceName"`
		UsesCodexManagedCredentials bool        `json:"usesCodexManagedCredentials"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*a = Account(w)
	return nil
}

// WorkspaceRouting routes ChatGPT requests to a workspace backend.
type WorkspaceRouting struct {
	// ChatgptAccountID is the workspace account id.
	ChatgptAccountID string `json:"chatgptAccountId"`
	// BackendOrigin is the backend base URL.
	BackendOrigin string `json:"backendOrigin"`
	// AccountRoutingOverride is "NO_CONSTRAINT", "us" or "us_cr".
	AccountRoutingOverride string `json:"accountRoutingOverride"`
}

// ConfigRequirementsReadResult is the result of configRequirements/read (no params).
type ConfigRequirementsReadResult struct {
	// SupportsIndependentSpeedModes is true when speed tiers are gated separately; 0.169.0 says true.
	SupportsIndependentSpeedModes *bool `json:"supportsIndependentSpeedModes"`
	// Requirements are the managed requirements, or null when none are configured.
	Requirements map[string]json.RawMessage `json:"requirements"`
}
