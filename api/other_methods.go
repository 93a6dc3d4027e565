package api

import "encoding/json"

// SkillsListParams are the params of skills/list (docs/protocol.md §4.16).
type SkillsListParams struct {
	// Cwds are the directories to list skills for; omitted means the server cwd.
	Cwds []string `json:"cwds,omitempty"`
	// ForceReload rescans skill roots.
	ForceReload *bool `json:"forceReload,omitempty"`
	// PerCwdExtraUserRoots is accepted and ignored (not in the 0.169.0 stable schema).
	PerCwdExtraUserRoots json.RawMessage `json:"perCwdExtraUserRoots,omitempty"`
}

// SkillsExtraRootsSetParams are the params of skills/extraRoots/set
// (docs/protocol.md §4.16): the skill roots skills/list searches besides
// the configured ones, replacing those set before.
type SkillsExtraRootsSetParams struct {
	// ExtraRoots are absolute directories; empty clears them.
	ExtraRoots []AbsolutePath `json:"extraRoots"`
}

// SkillsExtraRootsSetResult is the (empty) result of skills/extraRoots/set.
type SkillsExtraRootsSetResult struct{}

// SkillsConfigWriteParams are the params of skills/config/write: turn one
// skill on or off, named by exactly one of Path and Name.
type SkillsConfigWriteParams struct {
	// Enabled is the skill's new state.
	Enabled bool `json:"enabled"`
	// Name selects every skill of that name.
	Name *string `json:"name,omitempty"`
	// Path selects the skill whose SKILL.md is there.
	Path *AbsolutePath `json:"path,omitempty"`
}

// SkillsConfigWriteResult is the result of skills/config/write.
type SkillsConfigWriteResult struct {
	// EffectiveEnabled is the state the write left the selector in.
	EffectiveEnabled bool `json:"effectiveEnabled"`
}

// SkillsListResult is the result of skills/list.
type SkillsListResult struct {
	// Data has one entry per requested directory.
	Data List[SkillsListEntry] `json:"data"`
}

// SkillsListEntry lists the skills available in one directory.
type SkillsListEntry struct {
	// Cwd is the directory.
	Cwd string `json:"cwd"`
	// Skills are the available skills.
	Skills List[SkillMetadata] `json:"skills"`
	// Errors are skill files that failed to load.
	Errors List[SkillErrorInfo] `json:"errors"`
}

// SkillScope is where a skill comes from.
type SkillScope string

// The skill scopes.
const (
	SkillScopeUser   SkillScope = "user"
	SkillScopeRepo   SkillScope = "repo"
	SkillScopeSystem SkillScope = "system"
	SkillScopeAdmin  SkillScope = "admin"
)

// SkillMetadata describes one skill.
type SkillMetadata struct {
	// Name is the skill name.
	Name string `json:"name"`
	// Description says when to use the skill.
	Description string `json:"description"`
	// ShortDescription is a one-liner, omitted when unset.
	ShortDescription *string `json:"shortDescription,omitempty"`
	// Interface holds display metadata, omitted when unset.
	Interface *SkillInterface `json:"interface,omitempty"`
	// Dependencies are required tools, omitted when unset.
	Dependencies *SkillDependencies `json:"dependencies,omitempty"`
	// Path is the SKILL.md path.
	Path string `json:"path"`
	// Scope is where the skill comes from.
	Scope SkillScope `json:"scope"`
	// Enabled tells whether the skill is offered.
	Enabled bool `json:"enabled"`
	// PluginID is the providing plugin, or null.
	PluginID *string `json:"pluginId"`
}

// SkillInterface holds display metadata of a skill; 0.169.0 writes every key (null when unset).
type SkillInterface struct {
	// DisplayName is the display name, or null.
	DisplayName *string `json:"displayName"`
	// ShortDescription is a one-liner, or null.
	ShortDescription *string `json:"shortDescription"`
	// IconSmall is a local icon path, or null.
	IconSmall *string `json:"iconSmall"`
	// IconLarge is a local icon path, or null.
	IconLarge *string `json:"iconLarge"`
	// IconSmallURL is a remote icon, or null.
	IconSmallURL *string `json:"iconSmallUrl"`
	// IconLargeURL is a remote icon, or null.
	IconLargeURL *string `json:"iconLargeUrl"`
	// BrandColor is a color, or null.
	BrandColor *string `json:"brandColor"`
	// DefaultPrompt is a suggested prompt, or null.
	DefaultPrompt *string `json:"defaultPrompt"`
}

// SkillDependencies are the tools a skill needs.
type SkillDependencies struct {
	// Tools are the needed tools.
	Tools List[SkillToolDependency] `json:"tools"`
}

// SkillToolDependency is one tool a skill needs.
type SkillToolDependency struct {
	// Type is the dependency kind.
	Type string `json:"type"`
	// Value identifies the tool.
	Value string `json:"value"`
	// Description explains the need, omitted when unset.
	Description *string `json:"description,omitempty"`
	// Transport is an MCP transport, omitted when unset.
	Transport *string `json:"transport,omitempty"`
	// Command is an MCP command, omitted when unset.
	Command *string `json:"command,omitempty"`
	// URL is an MCP URL, omitted when unset.
	URL *string `json:"url,omitempty"`
}

// SkillErrorInfo is a skill file that failed to load.
type SkillErrorInfo struct {
	// Path is the file.
	Path string `json:"path"`
	// Message is the error.
	Message string `json:"message"`
}

// McpServerStatusListParams are the params of mcpServerStatus/list (docs/protocol.md §4.17).
type McpServerStatusListParams struct {
	// Cursor is an opaque paging cursor, or null.
	Cursor *string `json:"cursor,omitempty"`
	// Limit is the page size, or null.
	Limit *uint32 `json:"limit,omitempty"`
	// Detail is "full" (default) or "toolsAndAuthOnly", or null.
	Detail *string `json:"detail,omitempty"`
	// ThreadID resolves servers as seen by a thread, or null.
	ThreadID *string `json:"threadId,omitempty"`
	// ServerName restricts the listing to one server, or null.
	ServerName *string `json:"serverName,omitempty"`
}

// McpServerStatusListResult is the result of mcpServerStatus/list.
type McpServerStatusListResult struct {
	// Data are the servers.
	Data List[McpServerStatus] `json:"data"`
	// NextCursor continues the listing, or null.
	NextCursor *string `json:"nextCursor"`
}

// McpServerStatus describes one configured MCP server; MCP-defined objects are kept verbatim.
type McpServerStatus struct {
	// Name is the server name.
	Name string `json:"name"`
	// RuntimeStatus is e.g. "connected", or null.
	RuntimeStatus *string `json:"runtimeStatus"`
	// PluginID is the providing plugin, or null.
	PluginID *string `json:"pluginId"`
	// HTTPOrigin is the server's origin, or null.
	HTTPOrigin *string `json:"httpOrigin"`
	// ServerInfo is the MCP implementation info, or null.
	ServerInfo json.RawMessage `json:"serverInfo"`
	// ServerCapabilities are the MCP capabilities, or null.
	ServerCapabilities json.RawMessage `json:"serverCapabilities"`
	// ToolListMeta is the tools/list _meta, or null.
	ToolListMeta json.RawMessage `json:"toolListMeta"`
	// Tools maps tool name to MCP Tool.
	Tools Map[json.RawMessage] `json:"tools"`
	// ToolsError is the tools/list failure, or null.
	ToolsError *string `json:"toolsError"`
	// Resources are MCP resources.
	Resources List[json.RawMessage] `json:"resources"`
	// ResourceTemplates are MCP resource templates.
	ResourceTemplates List[json.RawMessage] `json:"resourceTemplates"`
	// AuthStatus is "unknown", "unsupported", "notLoggedIn", "bearerToken" or "oAuth".
	AuthStatus string `json:"authStatus"`
}

// McpServerToolCallParams are the params of mcpServer/tool/call (docs/protocol.md §4.18).
type McpServerToolCallParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// Server is the MCP server; required.
	Server string `json:"server"`
	// Tool is the tool; required.
	Tool string `json:"tool"`
	// Arguments are the tool arguments, omitted when unset.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Meta is the _meta object, omitted when unset.
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// McpServerToolCallResult is an MCP CallToolResult.
type McpServerToolCallResult struct {
	// Content are the MCP content blocks.
	Content List[json.RawMessage] `json:"content"`
	// StructuredContent is structured output, omitted when unset.
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	// IsError marks a tool-level error, omitted when unset.
	IsError *bool `json:"isError,omitempty"`
	// Meta is the _meta object, omitted when unset.
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// McpResourceReadParams are the params of mcpServer/resource/read.
type McpResourceReadParams struct {
	// ThreadID is the thread, or null.
	ThreadID *string `json:"threadId,omitempty"`
	// Server is the MCP server; required.
	Server string `json:"server"`
	// URI is the resource; required.
	URI string `json:"uri"`
}

// McpResourceReadResult is the result of mcpServer/resource/read.
type McpResourceReadResult struct {
	// Contents are the MCP resource contents (text or blob blocks).
	Contents List[json.RawMessage] `json:"contents"`
}

// McpServerRefreshResult is the (empty) result of config/mcpServer/reload.
type McpServerRefreshResult struct{}

// CommandExecParams are the params of command/exec (docs/protocol.md §4.19).
type CommandExecParams struct {
	// Command is argv; required and non-empty.
	Command []string `json:"command"`
	// ProcessID is a client-chosen, connection-scoped id, or null.
	ProcessID *string `json:"processId,omitempty"`
	// Tty runs under a pseudo-terminal (implies both streams).
	Tty *bool `json:"tty,omitempty"`
	// StreamStdin accepts command/exec/write.
	StreamStdin *bool `json:"streamStdin,omitempty"`
	// StreamStdoutStderr streams output as command/exec/outputDelta.
	StreamStdoutStderr *bool `json:"streamStdoutStderr,omitempty"`
	// OutputBytesCap caps each stream (default 1 MiB), or null.
	OutputBytesCap *uint64 `json:"outputBytesCap,omitempty"`
	// DisableOutputCap lifts the cap; exclusive with OutputBytesCap.
	DisableOutputCap *bool `json:"disableOutputCap,omitempty"`
	// DisableTimeout lifts the timeout; exclusive with TimeoutMs.
	DisableTimeout *bool `json:"disableTimeout,omitempty"`
	// TimeoutMs bounds the run time, or null for the default.
	TimeoutMs *int64 `json:"timeoutMs,omitempty"`
	// Cwd is the working directory, or null.
	Cwd *string `json:"cwd,omitempty"`
	// Env adds (string) or unsets (null) variables, or null.
	Env map[string]*string `json:"env,omitempty"`
	// Size is the terminal size for tty, or null.
	Size *CommandExecTerminalSize `json:"size,omitempty"`
	// SandboxPolicy sandboxes the process, or null.
	SandboxPolicy *SandboxPolicy `json:"sandboxPolicy,omitempty"`
	// PermissionProfile (experimental) is accepted and ignored.
	PermissionProfile *string `json:"permissionProfile,omitempty"`
}

// CommandExecTerminalSize is a terminal size.
type CommandExecTerminalSize struct {
	// Rows is the height.
	Rows uint16 `json:"rows"`
	// Cols is the width.
	Cols uint16 `json:"cols"`
}

// CommandExecWriteParams are the params of command/exec/write: stdin bytes
// for a running command/exec session, closing stdin, or both.
type CommandExecWriteParams struct {
	// ProcessID is the processId of the original command/exec request.
	ProcessID string `json:"processId"`
	// DeltaBase64 is the base64-encoded bytes to write, or null.
	DeltaBase64 *string `json:"deltaBase64,omitempty"`
	// CloseStdin closes stdin after writing DeltaBase64.
	CloseStdin *bool `json:"closeStdin,omitempty"`
}

// CommandExecWriteResult is the (empty) result of command/exec/write.
type CommandExecWriteResult struct{}

// CommandExecResizeParams are the params of command/exec/resize.
type CommandExecResizeParams struct {
	// ProcessID is the processId of the original command/exec request.
	ProcessID string `json:"processId"`
	// Size is the new terminal size.
	Size CommandExecTerminalSize `json:"size"`
}

// CommandExecResizeResult is the (empty) result of command/exec/resize.
type CommandExecResizeResult struct{}

// CommandExecTerminateParams are the params of command/exec/terminate.
type CommandExecTerminateParams struct {
	// ProcessID is the processId of the original command/exec request.
	ProcessID string `json:"processId"`
}

// CommandExecTerminateResult is the (empty) result of command/exec/terminate.
type CommandExecTerminateResult struct{}

// CommandExecResult is the result of command/exec, sent after the process exits.
type CommandExecResult struct {
	// ExitCode is the exit status.
	ExitCode int32 `json:"exitCode"`
	// Stdout is the buffered (non-streamed) stdout.
	Stdout string `json:"stdout"`
	// Stderr is the buffered (non-streamed) stderr.
	Stderr string `json:"stderr"`
}

// PermissionProfileListParams are the params of permissionProfile/list.
type PermissionProfileListParams struct {
	// Cursor is a previous page's nextCursor, or null.
	Cursor *string `json:"cursor,omitempty"`
	// Cwd resolves project config layers, or null.
	Cwd *string `json:"cwd,omitempty"`
	// Limit is the page size, or null for every profile.
	Limit *uint32 `json:"limit,omitempty"`
}

// PermissionProfileSummary is one permission profile a client may select.
type PermissionProfileSummary struct {
	// ID names the profile (":read-only", ":workspace", ...).
	ID string `json:"id"`
	// Description is shown by clients, or null.
	Description *string `json:"description"`
	// Allowed reports whether the requirements allow selecting it.
	Allowed bool `json:"allowed"`
}

// PermissionProfileListResult is the result of permissionProfile/list.
type PermissionProfileListResult struct {
	// Data are the profiles.
	Data List[PermissionProfileSummary] `json:"data"`
	// NextCursor continues the listing, or null at its end.
	NextCursor *string `json:"nextCursor"`
}

// ModelProviderSummary is one configured model provider (modelProvider/list).
type ModelProviderSummary struct {
	// ID is the provider's config id.
	ID string `json:"id"`
	// Name is its display name.
	Name string `json:"name"`
	// CanEdit reports whether a client may edit it; appserver's config is
	// the operator's, so false.
	CanEdit bool `json:"canEdit"`
	// BaseURL is the endpoint, or null when it is not shown.
	BaseURL *string `json:"baseUrl"`
	// Settings describe the provider's kind and authentication.
	Settings ProviderSettings `json:"settings"`
}

// ProviderSettings are a provider's kind ("openai" or "customGateway") and,
// for a gateway, its authentication.
type ProviderSettings struct {
	// Type is "openai" or "customGateway".
	Type string `json:"type"`
	// Auth is the gateway's authentication (customGateway only).
	Auth *GatewayAuth `json:"auth,omitempty"`
}

// GatewayAuth is a custom gateway's authentication: mode "none" or
// "environmentVariable" with the variable's name.
type GatewayAuth struct {
	// Mode is "none" or "environmentVariable".
	Mode string `json:"mode"`
	// EnvKey names the variable holding the key (environmentVariable).
	EnvKey string `json:"envKey,omitempty"`
}

// ModelProviderListResult is the result of modelProvider/list.
type ModelProviderListResult struct {
	// Data are the configured providers.
	Data List[ModelProviderSummary] `json:"data"`
	// DefaultProviderID is the provider new threads use.
	DefaultProviderID string `json:"defaultProviderId"`
	// CanChangeDefault reports whether a client may change the default.
	CanChangeDefault bool `json:"canChangeDefault"`
}

// GovCloudRequirementsResult is the result of
// account/bedrock/checkGovCloudRequirements.
type GovCloudRequirementsResult struct {
	// IsGovCloud reports a GovCloud Bedrock account.
	IsGovCloud bool `json:"isGovCloud"`
	// ShouldWarn asks the client to warn the user.
	ShouldWarn bool `json:"shouldWarn"`
}

// ConfigEdit is one change of config/value/write or config/batchWrite.
type ConfigEdit struct {
	// KeyPath is the dotted key; required.
	KeyPath string `json:"keyPath"`
	// Value is the new value; null removes the key.
	Value json.RawMessage `json:"value"`
	// MergeStrategy is "replace" or "upsert" (merge into a table).
	MergeStrategy string `json:"mergeStrategy"`
}

// ConfigValueWriteParams are the params of config/value/write.
type ConfigValueWriteParams struct {
	ConfigEdit
	// FilePath names the file to write; appserver writes only its
	// per-user overlay, so it must be null or that file.
	FilePath *string `json:"filePath,omitempty"`
	// ExpectedVersion, when set, must be the file's current version.
	ExpectedVersion *string `json:"expectedVersion,omitempty"`
}

// ConfigBatchWriteParams are the params of config/batchWrite.
type ConfigBatchWriteParams struct {
	// Edits are applied in order, all or none; required.
	Edits []ConfigEdit `json:"edits"`
	// FilePath is as in ConfigValueWriteParams.
	FilePath *string `json:"filePath,omitempty"`
	// ExpectedVersion is as in ConfigValueWriteParams.
	ExpectedVersion *string `json:"expectedVersion,omitempty"`
	// ReloadUserConfig asks for loaded threads to pick the change up; new
	// values apply to threads started after a restart.
	ReloadUserConfig bool `json:"reloadUserConfig,omitempty"`
}

// ConfigWriteResult is the result of config/value/write and
// config/batchWrite.
type ConfigWriteResult struct {
	// Status is "ok" ("okOverridden" when a later layer hides the value).
	Status string `json:"status"`
	// Version is the written file's version ("sha256:<hex>").
	Version string `json:"version"`
	// FilePath is the file written.
	FilePath string `json:"filePath"`
	// OverriddenMetadata says which layer hides the value, or null.
	OverriddenMetadata json.RawMessage `json:"overriddenMetadata"`
}

// ConfigWriteErrorCode classifies a refused config write; it is sent in
// the JSON-RPC error's data as ConfigWriteErrorData.
type ConfigWriteErrorCode string

// The config write error codes of the reference.
const (
	// ConfigLayerReadonly: the write targets something clients may not
	// write (another file than the user config, or a key only the
	// server's operator sets).
	ConfigLayerReadonly ConfigWriteErrorCode = "configLayerReadonly"
	// ConfigVersionConflict: expectedVersion is not the file's version.
	ConfigVersionConflict ConfigWriteErrorCode = "configVersionConflict"
	// ConfigValidationError: a key path or value is invalid.
	ConfigValidationError ConfigWriteErrorCode = "configValidationError"
	// ConfigSchemaUnknownKey: the key is not a configuration key.
	ConfigSchemaUnknownKey ConfigWriteErrorCode = "configSchemaUnknownKey"
	// ConfigPathNotFound: the write names something that is not
	// configured (modelProvider/config/write's unknown provider).
	ConfigPathNotFound ConfigWriteErrorCode = "configPathNotFound"
)

// ConfigWriteErrorData is the data of the JSON-RPC error answering a
// refused config/value/write or config/batchWrite.
type ConfigWriteErrorData struct {
	// ConfigWriteErrorCode says why the write was refused.
	ConfigWriteErrorCode ConfigWriteErrorCode `json:"config_write_error_code"`
}

// ExperimentalFeatureStage is a feature flag's lifecycle stage.
type ExperimentalFeatureStage string

// The values of ExperimentalFeatureStage.
const (
	FeatureBeta             ExperimentalFeatureStage = "beta"
	FeatureUnderDevelopment ExperimentalFeatureStage = "underDevelopment"
	FeatureStable           ExperimentalFeatureStage = "stable"
	FeatureDeprecated       ExperimentalFeatureStage = "deprecated"
	FeatureRemoved          ExperimentalFeatureStage = "removed"
)

// ExperimentalFeature is one feature flag of experimentalFeature/list.
type ExperimentalFeature struct {
	// Name is the flag's key under [features].
	Name string `json:"name"`
	// Stage is its lifecycle stage.
	Stage ExperimentalFeatureStage `json:"stage"`
	// DisplayName, Description and Announcement are what the TUI's
	// /experimental shows of a beta flag; null for the others.
	DisplayName  *string `json:"displayName"`
	Description  *string `json:"description"`
	Announcement *string `json:"announcement"`
	// Enabled is the flag's state in the caller's configuration (or the
	// thread's, when one is named).
	Enabled bool `json:"enabled"`
	// DefaultEnabled is the flag's default.
	DefaultEnabled bool `json:"defaultEnabled"`
}

// ExperimentalFeatureListParams are the params of experimentalFeature/list.
type ExperimentalFeatureListParams struct {
	// Cursor is the offset of the page, as a previous page's nextCursor.
	Cursor *string `json:"cursor,omitempty"`
	// Limit bounds the page (0 counts as 1); none lists all.
	Limit *uint32 `json:"limit,omitempty"`
	// ThreadID computes enablement for that thread's config.
	ThreadID *string `json:"threadId,omitempty"`
}

// ExperimentalFeatureListResult is the result of experimentalFeature/list.
type ExperimentalFeatureListResult struct {
	// Data are the flags of the page.
	Data List[ExperimentalFeature] `json:"data"`
	// NextCursor is the next page's offset; null after the last.
	NextCursor *string `json:"nextCursor"`
}

// ExperimentalFeatureEnablementSetParams are the params of
// experimentalFeature/enablement/set.
type ExperimentalFeatureEnablementSetParams struct {
	// Enablement maps flag names to their new state; required, empty is a
	// no-op.
	Enablement map[string]bool `json:"enablement"`
}

// ExperimentalFeatureEnablementSetResult is the result of
// experimentalFeature/enablement/set: the flags it changed.
type ExperimentalFeatureEnablementSetResult struct {
	// Enablement maps the flags set to their new state.
	Enablement Map[bool] `json:"enablement"`
}
