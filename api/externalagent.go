package api

// ExternalAgentConfigDetectParams are the params of
// externalAgentConfig/detect (docs/protocol.md §4.38).
type ExternalAgentConfigDetectParams struct {
	// Cwds are the project directories to look in, absolute; each is
	// taken up to the repository that holds it.
	Cwds []string `json:"cwds,omitempty"`
	// IncludeHome looks in the user's home as well.
	IncludeHome bool `json:"includeHome,omitempty"`
	// MaxSessionAgeDays and MaxSessions bound the sessions found; appserver
	// finds none.
	MaxSessionAgeDays *uint32 `json:"maxSessionAgeDays,omitempty"`
	MaxSessions       *uint32 `json:"maxSessions,omitempty"`
	// MigrationSource and Source name the other agent; appserver reads
	// neither.
	MigrationSource *string `json:"migrationSource,omitempty"`
	Source          *string `json:"source,omitempty"`
}

// The externalAgentConfig methods and notifications appserver serves.
const (
	MethodExternalAgentConfigDetect = "externalAgentConfig/detect"
	MethodExternalAgentConfigImport = "externalAgentConfig/import"
	// NotificationExternalAgentConfigImportProgress follows each item
	// imported, with the results so far.
	NotificationExternalAgentConfigImportProgress = "externalAgentConfig/import/progress"
	// NotificationExternalAgentConfigImportCompleted ends an import.
	NotificationExternalAgentConfigImportCompleted = "externalAgentConfig/import/completed"
)

// ExternalAgentConfigMigrationItemType is what an item migrates.
type ExternalAgentConfigMigrationItemType string

// The values of ExternalAgentConfigMigrationItemType appserver detects.
const (
	MigrationAgentsMd ExternalAgentConfigMigrationItemType = "AGENTS_MD"
)

// ExternalAgentConfigMigrationItem is one thing detect found to import.
type ExternalAgentConfigMigrationItem struct {
	ItemType    ExternalAgentConfigMigrationItemType `json:"itemType"`
	Description string                               `json:"description"`
	// Cwd is the repository the item belongs to; null for the home's.
	Cwd *string `json:"cwd"`
	// Details name what a multi-part item holds; null for AGENTS_MD.
	Details *MigrationDetails `json:"details"`
}

// MigrationDetails are the parts of a multi-part migration item.
type MigrationDetails struct {
	Commands   List[NamedMigration]   `json:"commands"`
	Hooks      List[NamedMigration]   `json:"hooks"`
	McpServers List[NamedMigration]   `json:"mcpServers"`
	Memory     []string               `json:"memory,omitempty"`
	Plugins    List[PluginsMigration] `json:"plugins"`
	Sessions   List[SessionMigration] `json:"sessions"`
	Skills     List[NamedMigration]   `json:"skills"`
	Subagents  List[NamedMigration]   `json:"subagents"`
}

// NamedMigration is a part of a migration known by its name (a command,
// hook, MCP server, skill or sub-agent).
type NamedMigration struct {
	Name string `json:"name"`
}

// PluginsMigration names the plugins of one marketplace to migrate.
type PluginsMigration struct {
	MarketplaceName string       `json:"marketplaceName"`
	PluginNames     List[string] `json:"pluginNames"`
}

// SessionMigration is one session of the other agent to migrate.
type SessionMigration struct {
	Cwd   string  `json:"cwd"`
	Path  string  `json:"path"`
	Title *string `json:"title"`
}

// ExternalAgentDetectedConnectorCandidate is a connector detect found.
type ExternalAgentDetectedConnectorCandidate struct {
	Name         string `json:"name"`
	SessionCount uint32 `json:"sessionCount"`
	// Source is "remoteMcpServersConfig" or "sessionToolUse".
	Source string `json:"source"`
}

// ExternalAgentConfigDetectResult is the result of
// externalAgentConfig/detect.
type ExternalAgentConfigDetectResult struct {
	Items      List[ExternalAgentConfigMigrationItem]        `json:"items"`
	Connectors List[ExternalAgentDetectedConnectorCandidate] `json:"connectors"`
}

// ExternalAgentConfigImportParams are the params of
// externalAgentConfig/import: items as detect answered them.
type ExternalAgentConfigImportParams struct {
	MigrationItems  []ExternalAgentConfigMigrationItem `json:"migrationItems"`
	MigrationSource *string                            `json:"migrationSource,omitempty"`
	ProviderID      *string                            `json:"providerId,omitempty"`
	Source          *string                            `json:"source,omitempty"`
}

// ExternalAgentConfigImportResult is the result of
// externalAgentConfig/import; the outcome follows in
// externalAgentConfig/import/progress and …/completed.
type ExternalAgentConfigImportResult struct {
	ImportID string `json:"importId"`
}

// ExternalAgentConfigImportNotification is the params of
// externalAgentConfig/import/progress and externalAgentConfig/import/completed.
type ExternalAgentConfigImportNotification struct {
	ImportID        string                                    `json:"importId"`
	ItemTypeResults List[ExternalAgentConfigImportTypeResult] `json:"itemTypeResults"`
}

// ExternalAgentConfigImportTypeResult is the outcome of the items of one type.
type ExternalAgentConfigImportTypeResult struct {
	ItemType  ExternalAgentConfigMigrationItemType           `json:"itemType"`
	Successes List[ExternalAgentConfigImportItemTypeSuccess] `json:"successes"`
	Failures  List[ExternalAgentConfigImportItemTypeFailure] `json:"failures"`
}

// ExternalAgentConfigImportItemTypeSuccess is one thing imported.
type ExternalAgentConfigImportItemTypeSuccess struct {
	ItemType ExternalAgentConfigMigrationItemType `json:"itemType"`
	Cwd      *string                              `json:"cwd"`
	Source   *string                              `json:"source"`
	Target   *string                              `json:"target"`
	Title    *string                              `json:"title"`
}

// ExternalAgentConfigImportItemTypeFailure is one thing not imported.
type ExternalAgentConfigImportItemTypeFailure struct {
	ItemType     ExternalAgentConfigMigrationItemType `json:"itemType"`
	Cwd          *string                              `json:"cwd"`
	Source       *string                              `json:"source"`
	FailureStage string                               `json:"failureStage"`
	Message      string                               `json:"message"`
	ErrorType    *string                              `json:"errorType"`
	SubErrorType *string                              `json:"subErrorType"`
}
