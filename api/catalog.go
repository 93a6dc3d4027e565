package api

// ModelListParams are the params of model/list.
type ModelListParams struct {
	// Cursor is an opaque paging cursor from a previous nextCursor, or null.
	Cursor *string `json:"cursor,omitempty"`
	// Limit is the page size, or null for the server default.
	Limit *uint32 `json:"limit,omitempty"`
	// IncludeHidden also lists hidden models.
	IncludeHidden *bool `json:"includeHidden,omitempty"`
	// ModelProvider restricts the listing to one provider, or null.
	ModelProvider *string `json:"modelProvider,omitempty"`
}

// ModelListResult is the result of model/list.
type ModelListResult struct {
	// Data is the page of models.
	Data List[Model] `json:"data"`
	// NextCursor continues the listing, or null on the last page.
	NextCursor *string `json:"nextCursor"`
}

// InputModality is a kind of model input.
type InputModality string

// The input modalities.
const (
	InputText  InputModality = "text"
	InputImage InputModality = "image"
	InputAudio InputModality = "audio"
)

// Model describes one selectable model (docs/protocol.md §4.15).
type Model struct {
	// ID is the model's identifier.
	ID string `json:"id"`
	// Model is the model slug sent to the provider.
	Model string `json:"model"`
	// Upgrade is the slug of a suggested successor, or null.
	Upgrade *string `json:"upgrade"`
	// UpgradeInfo describes the suggested upgrade, or null.
	UpgradeInfo *ModelUpgradeInfo `json:"upgradeInfo"`
	// AvailabilityNux is a one-time availability message, or null.
	AvailabilityNux *ModelAvailabilityNux `json:"availabilityNux"`
	// DisplayName is the human-readable name.
	DisplayName string `json:"displayName"`
	// Description is a one-line description.
	Description string `json:"description"`
	// ModelSpecialty is a specialty tag, or null.
	ModelSpecialty *string `json:"modelSpecialty"`
	// Hidden keeps the model out of default pickers.
	Hidden bool `json:"hidden"`
	// SupportedReasoningEfforts are the selectable effort levels.
	SupportedReasoningEfforts List[ReasoningEffortOption] `json:"supportedReasoningEfforts"`
	// DefaultReasoningEffort is the effort used when none is chosen.
	DefaultReasoningEffort ReasoningEffort `json:"defaultReasoningEffort"`
	// InputModalities are the accepted input kinds.
	InputModalities List[InputModality] `json:"inputModalities"`
	// SupportsPersonality tells whether personalities apply.
	SupportsPersonality bool `json:"supportsPersonality"`
	// MultiAgentVersion is "disabled", "v1", "v2", or null.
	MultiAgentVersion *string `json:"multiAgentVersion"`
	// AdditionalSpeedTiers are extra speed tiers, e.g. "fast".
	AdditionalSpeedTiers List[string] `json:"additionalSpeedTiers"`
	// ServiceTiers are the selectable service tiers.
	ServiceTiers List[ModelServiceTier] `json:"serviceTiers"`
	// DefaultServiceTier is the default tier id, or null.
	DefaultServiceTier *string `json:"defaultServiceTier"`
	// AvailableAccessPrograms are explicit access programs, or null.
	AvailableAccessPrograms *ModelAccessPrograms `json:"availableAccessPrograms"`
	// IsDefault marks the default model.
	IsDefault bool `json:"isDefault"`
}

// ModelUpgradeInfo describes a suggested model upgrade.
type ModelUpgradeInfo struct {
	// Model is the successor's slug.
	Model string `json:"model"`
	// UpgradeCopy is marketing copy, or null.
	UpgradeCopy *string `json:"upgradeCopy"`
	// ModelLink is a link to details, or null.
	ModelLink *string `json:"modelLink"`
	// MigrationMarkdown explains the migration, or null.
	MigrationMarkdown *string `json:"migrationMarkdown"`
	// RetirementAt is when the old model retires (Unix seconds), or null.
	RetirementAt *int64 `json:"retirementAt"`
}

// ModelAvailabilityNux is a one-time availability message.
type ModelAvailabilityNux struct {
	// Message is the text to show.
	Message string `json:"message"`
}

// ReasoningEffortOption is one selectable effort level.
type ReasoningEffortOption struct {
	// ReasoningEffort is the level.
	ReasoningEffort ReasoningEffort `json:"reasoningEffort"`
	// Description explains the level.
	Description string `json:"description"`
}

// ModelServiceTier is one selectable service tier.
type ModelServiceTier struct {
	// ID is the tier id sent as serviceTier.
	ID string `json:"id"`
	// Name is the display name.
	Name string `json:"name"`
	// Description explains the tier.
	Description string `json:"description"`
}

// ModelAccessPrograms lists explicit access programs of a model.
type ModelAccessPrograms struct {
	// Cyber are the accepted cyber access programs.
	Cyber List[string] `json:"cyber"`
}

// HooksListParams are the params of hooks/list.
type HooksListParams struct {
	// Cwds are the directories to list hooks for; omitted means the server cwd.
	Cwds []string `json:"cwds,omitempty"`
	// ThreadID resolves hooks as seen by a thread, or null.
	ThreadID *string `json:"threadId,omitempty"`
}

// HooksListResult is the result of hooks/list.
type HooksListResult struct {
	// Data has one entry per directory.
	Data List[HooksListEntry] `json:"data"`
}

// HooksListEntry lists the hooks that apply in one directory.
type HooksListEntry struct {
	// Cwd is the directory.
	Cwd string `json:"cwd"`
	// Hooks are the hooks that apply.
	Hooks List[HookMetadata] `json:"hooks"`
	// Warnings are non-fatal problems.
	Warnings List[string] `json:"warnings"`
	// Errors are hook files that failed to load.
	Errors List[HookErrorInfo] `json:"errors"`
}

// HookMetadata describes one hook; the handler fields depend on HandlerType
// ("command": Command and Async; "mcpTool": Server and Tool; "prompt", "agent": none).
type HookMetadata struct {
	// Key identifies the hook.
	Key string `json:"key"`
	// EventName is the lifecycle event, e.g. "preToolUse".
	EventName string `json:"eventName"`
	// Matcher filters events, or null.
	Matcher *string `json:"matcher"`
	// TimeoutSec bounds the hook's run time.
	TimeoutSec uint64 `json:"timeoutSec"`
	// StatusMessage is shown while the hook runs, or null.
	StatusMessage *string `json:"statusMessage"`
	// AdditionalContextLimit caps injected context, or null.
	AdditionalContextLimit *uint64 `json:"additionalContextLimit"`
	// SourcePath is the file that defined the hook.
	SourcePath string `json:"sourcePath"`
	// Source is where the hook came from, e.g. "user".
	Source string `json:"source"`
	// PluginID is the defining plugin, or null.
	PluginID *string `json:"pluginId"`
	// EnvironmentID is the environment, or null.
	EnvironmentID *string `json:"environmentId"`
	// DisplayOrder orders hooks in UIs.
	DisplayOrder int64 `json:"displayOrder"`
	// Enabled tells whether the hook runs.
	Enabled bool `json:"enabled"`
	// IsManaged marks administrator-managed hooks.
	IsManaged bool `json:"isManaged"`
	// CurrentHash is the hook definition's hash.
	CurrentHash string `json:"currentHash"`
	// TrustStatus is "managed", "untrusted", "trusted" or "modified".
	TrustStatus string `json:"trustStatus"`
	// HandlerType is "command", "mcpTool", "prompt" or "agent".
	HandlerType string `json:"handlerType"`
	// Command is the command of a command hook.
	Command *string `json:"command,omitempty"`
	// Async tells whether a command hook runs asynchronously.
	Async *bool `json:"async,omitempty"`
	// Server is the MCP server of an mcpTool hook.
	Server *string `json:"server,omitempty"`
	// Tool is the MCP tool of an mcpTool hook.
	Tool *string `json:"tool,omitempty"`
}

// HookErrorInfo is a hook file that failed to load.
type HookErrorInfo struct {
	// Path is the file.
	Path string `json:"path"`
	// Message is the error.
	Message string `json:"message"`
}

// CollaborationModeListParams are the (empty) params of collaborationMode/list.
type CollaborationModeListParams struct{}

// CollaborationModeListResult is the result of collaborationMode/list.
type CollaborationModeListResult struct {
	// Data are the presets.
	Data List[CollaborationModeMask] `json:"data"`
}

// CollaborationModeMask is one collaboration mode preset (snake_case reasoning_effort).
type CollaborationModeMask struct {
	// Name is the display name, e.g. "Plan".
	Name string `json:"name"`
	// Mode is the mode kind, or null.
	Mode *ModeKind `json:"mode"`
	// Model is the preset model, or null.
	Model *string `json:"model"`
	// ReasoningEffort is the preset effort, or null.
	ReasoningEffort *ReasoningEffort `json:"reasoning_effort"`
}

// ThreadLoadedListParams are the params of thread/loaded/list.
type ThreadLoadedListParams struct {
	// Cursor is an opaque paging cursor, or null.
	Cursor *string `json:"cursor,omitempty"`
	// Limit is the page size, or null.
	Limit *uint32 `json:"limit,omitempty"`
}

// ThreadLoadedListResult is the result of thread/loaded/list.
type ThreadLoadedListResult struct {
	// Data are the ids of loaded threads.
	Data List[string] `json:"data"`
	// NextCursor continues the listing, or null.
	NextCursor *string `json:"nextCursor"`
}
