package api

import "encoding/json"

// Methods and notifications of the account and server-information family
// a client without a ChatGPT login reaches (docs/protocol.md §4.39 to
// §4.42).
const (
	// MethodAccountLogout forgets the client's login.
	MethodAccountLogout = "account/logout"
	// MethodAccountRateLimitsRead returns the latest rate limits known.
	MethodAccountRateLimitsRead = "account/rateLimits/read"
	// MethodAccountUsageRead returns an OpenAI account's token usage
	// (refused: no client has one).
	MethodAccountUsageRead = "account/usage/read"
	// MethodModelProviderCapabilitiesRead says what the default provider supports.
	MethodModelProviderCapabilitiesRead = "modelProvider/capabilities/read"
	// MethodModelProviderDefaultSet chooses the provider of new threads.
	MethodModelProviderDefaultSet = "modelProvider/default/set"
	// MethodModelProviderConfigWrite creates or changes a provider.
	MethodModelProviderConfigWrite = "modelProvider/config/write"
	// MethodServerDiagnostics reports the server process and its gauges (experimental).
	MethodServerDiagnostics = "server/diagnostics"
	// MethodMemoryStatus reports the state of consolidated memories (experimental).
	MethodMemoryStatus = "memory/status"
	// MethodMemoryReset forgets consolidated memories (experimental).
	MethodMemoryReset = "memory/reset"
	// MethodFeedbackSave writes a feedback report as a zip file.
	MethodFeedbackSave = "feedback/save"
	// NotifyAccountUpdated reports a change of the client's login.
	NotifyAccountUpdated = "account/updated"
	// NotifyAccountRateLimitsUpdated reports new rate limits of a provider.
	NotifyAccountRateLimitsUpdated = "account/rateLimits/updated"
)

// AccountLogoutResult is the (empty) result of account/logout.
type AccountLogoutResult struct{}

// AccountUpdatedNotification reports the client's login after a change:
// appserver sends it after account/logout, with every field null.
type AccountUpdatedNotification struct {
	// AuthMode is how the client is signed in, or null.
	AuthMode *string `json:"authMode"`
	// PlanType is the ChatGPT plan, or null.
	PlanType *string `json:"planType"`
	// Reason says why the account changed, or null.
	Reason *string `json:"reason"`
}

// AccountRateLimitsReadResult is the result of account/rateLimits/read.
type AccountRateLimitsReadResult struct {
	// AccountID is the account of the snapshot, or null.
	AccountID *string `json:"accountId"`
	// OrdinaryUsageAllowed is the backend's permission for ordinary
	// usage, or null (unknown).
	OrdinaryUsageAllowed *bool `json:"ordinaryUsageAllowed"`
	// RateLimitResetCredits are the account's reset credits, or null.
	RateLimitResetCredits *RateLimitResetCreditsSummary `json:"rateLimitResetCredits"`
	// RateLimits is the snapshot of the caller's default provider.
	RateLimits RateLimitSnapshot `json:"rateLimits"`
	// RateLimitsByLimitID holds every snapshot known, by limit id, or null.
	RateLimitsByLimitID map[string]RateLimitSnapshot `json:"rateLimitsByLimitId"`
}

// RateLimitResetCreditsSummary counts an account's rate-limit reset
// credits (a ChatGPT plan's; appserver writes null).
type RateLimitResetCreditsSummary struct {
	// AvailableCount is the number of credits available.
	AvailableCount int64 `json:"availableCount"`
	// Credits are their details, or null.
	Credits []json.RawMessage `json:"credits"`
}

// RateLimitSnapshot is one set of rate limits: appserver's come from a
// model provider's rate-limit response headers.
type RateLimitSnapshot struct {
	// LimitID names the limit: appserver uses the provider id.
	LimitID *string `json:"limitId"`
	// LimitName is a display name of the limit, or null.
	LimitName *string `json:"limitName"`
	// NormalModelSlug is the model a quota alias describes, or null.
	NormalModelSlug *string `json:"normalModelSlug"`
	// Primary is the first window (requests, for OpenAI's headers), or null.
	Primary *RateLimitWindow `json:"primary"`
	// Secondary is the second window (tokens), or null.
	Secondary *RateLimitWindow `json:"secondary"`
	// Credits are the account's credits, or null.
	Credits *CreditsSnapshot `json:"credits"`
	// IndividualLimit is a spend-control limit, or null.
	IndividualLimit *SpendControlLimitSnapshot `json:"individualLimit"`
	// SpendControlReached is the backend's spend-control state, or null.
	SpendControlReached *bool `json:"spendControlReached"`
	// PlanType is the ChatGPT plan, or null.
	PlanType *string `json:"planType"`
	// RateLimitReachedType says which limit was reached, or null.
	RateLimitReachedType *string `json:"rateLimitReachedType"`
}

// RateLimitWindow is one window of a rate limit.
type RateLimitWindow struct {
	// UsedPercent is the share of the window used, 0 to 100.
	UsedPercent int32 `json:"usedPercent"`
	// WindowDurationMins is the window's length, or null when unknown.
	WindowDurationMins *int64 `json:"windowDurationMins"`
	// ResetsAt is when the window resets (Unix seconds), or null.
	ResetsAt *int64 `json:"resetsAt"`
}

// CreditsSnapshot is an account's credit balance.
type CreditsSnapshot struct {
	// HasCredits reports a positive balance.
	HasCredits bool `json:"hasCredits"`
	// Unlimited reports an unlimited balance.
	Unlimited bool `json:"unlimited"`
	// Balance is the balance as the backend writes it, or null.
	Balance *string `json:"balance"`
}

// SpendControlLimitSnapshot is a spend-control limit (a ChatGPT
// workspace's; appserver writes null).
type SpendControlLimitSnapshot struct {
	// Limit is the limit as the backend writes it.
	Limit string `json:"limit"`
	// Used is the amount used.
	Used string `json:"used"`
	// RemainingPercent is what is left, in percent.
	RemainingPercent int32 `json:"remainingPercent"`
	// ResetsAt is when the limit resets (Unix seconds).
	ResetsAt int64 `json:"resetsAt"`
}

// AccountRateLimitsUpdatedNotification carries a provider's rate limits
// after a model response that changed them.
type AccountRateLimitsUpdatedNotification struct {
	// RateLimits is the new snapshot.
	RateLimits RateLimitSnapshot `json:"rateLimits"`
}

// ModelProviderCapabilitiesReadResult is the result of
// modelProvider/capabilities/read: the hosted tools the caller's default
// provider can be offered.
type ModelProviderCapabilitiesReadResult struct {
	// ImageGeneration reports the hosted image_generation tool.
	ImageGeneration bool `json:"imageGeneration"`
	// WebSearch reports the hosted web_search tool.
	WebSearch bool `json:"webSearch"`
}

// ModelProviderDefaultSetParams are the params of modelProvider/default/set.
type ModelProviderDefaultSetParams struct {
	// ProviderID is a configured provider; required.
	ProviderID string `json:"providerId"`
}

// ModelProviderConfigWriteParams are the params of modelProvider/config/write.
type ModelProviderConfigWriteParams struct {
	// Settings is the patch; required.
	Settings ProviderSettingsPatch `json:"settings"`
}

// ProviderSettingsPatch changes one provider, tagged by Type
// ("customGateway", "bedrock" or "gcp"): an absent field keeps its value,
// null clears it.
type ProviderSettingsPatch struct {
	// Type selects the variant.
	Type string `json:"type"`
	// ProviderID names the provider; null or absent (customGateway) makes
	// a new one.
	ProviderID Nullable[string] `json:"providerId,omitzero"`
	// Name is the display name (customGateway).
	Name Nullable[string] `json:"name,omitzero"`
	// BaseURL is the endpoint (customGateway).
	BaseURL Nullable[string] `json:"baseUrl,omitzero"`
	// EnvKey names the variable holding the key (customGateway).
	EnvKey Nullable[string] `json:"envKey,omitzero"`
	// Profile is the AWS profile (bedrock).
	Profile Nullable[string] `json:"profile,omitzero"`
	// Region is the AWS region (bedrock).
	Region Nullable[string] `json:"region,omitzero"`
	// CredentialFile is a Google credential file (gcp).
	CredentialFile Nullable[string] `json:"credentialFile,omitzero"`
	// Location is the Vertex AI location (gcp).
	Location Nullable[string] `json:"location,omitzero"`
	// ProjectID is the Google Cloud project (gcp).
	ProjectID Nullable[string] `json:"projectId,omitzero"`
}

// ModelProviderConfigWriteResult is the result of modelProvider/config/write.
type ModelProviderConfigWriteResult struct {
	// Provider is the provider as written.
	Provider ModelProviderSummary `json:"provider"`
}

// ServerDiagnosticsParams are the (empty) params of server/diagnostics.
type ServerDiagnosticsParams struct{}

// ServerDiagnosticsResult is the result of server/diagnostics.
type ServerDiagnosticsResult struct {
	// Process describes the server process.
	Process ServerDiagnosticsProcess `json:"process"`
	// Gauges are the server's current counts.
	Gauges List[ServerDiagnosticsGauge] `json:"gauges"`
}

// ServerDiagnosticsProcess describes the server process.
type ServerDiagnosticsProcess struct {
	// ID is the process id.
	ID uint32 `json:"id"`
	// ResidentMemoryBytes is the resident set size, or null.
	ResidentMemoryBytes *uint64 `json:"residentMemoryBytes"`
	// PhysicalFootprintBytes is macOS's footprint: null on Linux.
	PhysicalFootprintBytes *uint64 `json:"physicalFootprintBytes"`
}

// ServerDiagnosticsGauge is one named count.
type ServerDiagnosticsGauge struct {
	// Name names the gauge, e.g. "app.requests.in_flight".
	Name string `json:"name"`
	// Value is its current value.
	Value uint64 `json:"value"`
}

// MemoryStatusParams are the params of memory/status.
type MemoryStatusParams struct {
	// MinConsolidatedThreads is the number of consolidated threads that
	// makes memories ready (1 to 4096, default 20), or null.
	MinConsolidatedThreads *uint32 `json:"minConsolidatedThreads,omitempty"`
}

// MemoryStatusResult is the result of memory/status.
type MemoryStatusResult struct {
	// V2ConsolidatedThreads counts the threads consolidated into memories.
	V2ConsolidatedThreads uint32 `json:"v2ConsolidatedThreads"`
	// V2Ready is the readiness of the memory store; appserver, which
	// consolidates none, answers true as the reference does while it has
	// none.
	V2Ready bool `json:"v2Ready"`
}

// MemoryResetResult is the (empty) result of memory/reset.
type MemoryResetResult struct{}

// FeedbackSaveParams are the params of feedback/save.
type FeedbackSaveParams struct {
	// Classification is the kind of feedback ("bug", "bad_result", ...);
	// required.
	Classification string `json:"classification"`
	// SavePath is the absolute path of the zip file to create, which must
	// not exist; required.
	SavePath string `json:"savePath"`
	// Reason is the user's text, or null.
	Reason *string `json:"reason,omitempty"`
	// ThreadID is the thread the feedback is about, or null.
	ThreadID *string `json:"threadId,omitempty"`
	// IncludeLogs adds the logs and the thread's transcript.
	IncludeLogs bool `json:"includeLogs,omitempty"`
	// ExtraLogFiles are more files to attach, or null.
	ExtraLogFiles []string `json:"extraLogFiles,omitempty"`
	// Tags are added to the report, or null.
	Tags map[string]string `json:"tags,omitempty"`
}

// FeedbackSaveResult is the result of feedback/save.
type FeedbackSaveResult struct {
	// SavedPath is the zip file written.
	SavedPath string `json:"savedPath"`
	// ThreadID is the thread of the report (a made-up id when none was
	// named).
	ThreadID string `json:"threadId"`
	// PromptHash identifies the thread's instructions, or null.
	PromptHash *string `json:"promptHash"`
}
