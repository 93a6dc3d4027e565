package api

import "reflect"

// wire names the Go types of one method: the params and, for a request,
// the result. A nil Params is a method without params; an ignored Params
// is a method whose handler reads none of them, and an ignored Result a
// method always refused, and says why.
type wire struct {
	Params, Result any
}

// ignored stands for the params of a handler that reads none, or the
// result of one that never answers one, with why.
type ignored string

// wireTypes maps each method appserver serves or sends to its Go types,
// for TestWireTypesMatchSchema. A method leaves api.Unserved, gets its
// handler (or its sender) and gets its row here together; the test says
// what of the schema the types lack.
var wireTypes = map[string]wire{
	// Client requests.
	"initialize":              {InitializeParams{}, InitializeResult{}},
	"account/logout":          {nil, AccountLogoutResult{}},
	"account/rateLimits/read": {ignored("reset credits and Luna Reserve are a ChatGPT plan's: a provider's limits have neither"), AccountRateLimitsReadResult{}},
	"account/read":            {AccountReadParams{}, AccountReadResult{}},
	"account/usage/read":      {ignored("always refused"), ignored("an OpenAI account's token usage: refused as the reference refuses an API-key user")},
	"account/bedrock/checkGovCloudRequirements": {ignored("no Bedrock accounts: the answer is the same for any"), GovCloudRequirementsResult{}},
	"collaborationMode/list":                    {CollaborationModeListParams{}, CollaborationModeListResult{}},
	"command/exec":                              {CommandExecParams{}, CommandExecResult{}},
	"command/exec/resize":                       {CommandExecResizeParams{}, CommandExecResizeResult{}},
	"command/exec/terminate":                    {CommandExecTerminateParams{}, CommandExecTerminateResult{}},
	"command/exec/write":                        {CommandExecWriteParams{}, CommandExecWriteResult{}},
	"config/batchWrite":                         {ConfigBatchWriteParams{}, ConfigWriteResult{}},
	"experimentalFeature/enablement/set":        {ExperimentalFeatureEnablementSetParams{}, ExperimentalFeatureEnablementSetResult{}},
	"externalAgentConfig/detect":                {ExternalAgentConfigDetectParams{}, ExternalAgentConfigDetectResult{}},
	"externalAgentConfig/import":                {ExternalAgentConfigImportParams{}, ExternalAgentConfigImportResult{}},
	"experimentalFeature/list":                  {ExperimentalFeatureListParams{}, ExperimentalFeatureListResult{}},
	"config/mcpServer/reload":                   {nil, McpServerRefreshResult{}},
	"config/read":                               {ConfigReadParams{}, ConfigReadResult{}},
	"config/value/write":                        {ConfigValueWriteParams{}, ConfigWriteResult{}},
	"configRequirements/read":                   {nil, ConfigRequirementsReadResult{}},
	"fs/copy":                                   {FsCopyParams{}, FsCopyResult{}},
	"fs/createDirectory":                        {FsCreateDirectoryParams{}, FsCreateDirectoryResult{}},
	"fs/getMetadata":                            {FsGetMetadataParams{}, FsGetMetadataResult{}},
	"fs/readDirectory":                          {FsReadDirectoryParams{}, FsReadDirectoryResult{}},
	"fs/readFile":                               {FsReadFileParams{}, FsReadFileResult{}},
	"fs/remove":                                 {FsRemoveParams{}, FsRemoveResult{}},
	"fs/unwatch":                                {FsUnwatchParams{}, FsUnwatchResult{}},
	"fs/watch":                                  {FsWatchParams{}, FsWatchResult{}},
	"fs/writeFile":                              {FsWriteFileParams{}, FsWriteFileResult{}},
	"fuzzyFileSearch":                           {FuzzyFileSearchParams{}, FuzzyFileSearchResponse{}},
	"fuzzyFileSearch/sessionStart":              {FuzzyFileSearchSessionStartParams{}, FuzzyFileSearchSessionStartResult{}},
	"fuzzyFileSearch/sessionStop":               {FuzzyFileSearchSessionStopParams{}, FuzzyFileSearchSessionStopResult{}},
	"fuzzyFileSearch/sessionUpdate":             {FuzzyFileSearchSessionUpdateParams{}, FuzzyFileSearchSessionUpdateResult{}},
	"hooks/list":                                {HooksListParams{}, HooksListResult{}},
	"feedback/save":                             {FeedbackSaveParams{}, FeedbackSaveResult{}},
	"memory/reset":                              {nil, MemoryResetResult{}},
	"memory/status":                             {MemoryStatusParams{}, MemoryStatusResult{}},
	"modelProvider/capabilities/read":           {ignored("no params"), ModelProviderCapabilitiesReadResult{}},
	"modelProvider/config/write":                {ModelProviderConfigWriteParams{}, ModelProviderConfigWriteResult{}},
	"modelProvider/default/set":                 {ModelProviderDefaultSetParams{}, ConfigWriteResult{}},
	"server/diagnostics":                        {ignored("no params"), ServerDiagnosticsResult{}},
	"mcpServer/resource/read":                   {McpResourceReadParams{}, McpResourceReadResult{}},
	"mcpServer/tool/call":                       {McpServerToolCallParams{}, McpServerToolCallResult{}},
	"mcpServerStatus/list":                      {McpServerStatusListParams{}, McpServerStatusListResult{}},
	"model/list":                                {ModelListParams{}, ModelListResult{}},
	"modelProvider/list":                        {ignored("lists every configured provider whatever the filters"), ModelProviderListResult{}},
	"permissionProfile/list":                    {PermissionProfileListParams{}, PermissionProfileListResult{}},
	"plugin/install":                            {PluginInstallParams{}, PluginInstallResult{}},
	"plugin/installed":                          {PluginInstalledParams{}, PluginInstalledResult{}},
	"plugin/list":                               {PluginListParams{}, PluginListResult{}},
	"plugin/read":                               {PluginReadParams{}, PluginReadResult{}},
	"plugin/reconcile":                          {PluginReconcileParams{}, PluginReconcileResult{}},
	"plugin/search":                             {PluginSearchParams{}, PluginSearchResult{}},
	"plugin/share/checkout":                     {PluginShareCheckoutParams{}, PluginShareCheckoutResult{}},
	"plugin/share/delete":                       {PluginShareDeleteParams{}, PluginShareDeleteResult{}},
	"plugin/share/list":                         {PluginShareListParams{}, PluginShareListResult{}},
	"plugin/share/save":                         {PluginShareSaveParams{}, PluginShareSaveResult{}},
	"plugin/share/updateTargets":                {PluginShareUpdateTargetsParams{}, PluginShareUpdateTargetsResult{}},
	"plugin/skill/read":                         {PluginSkillReadParams{}, PluginSkillReadResult{}},
	"plugin/uninstall":                          {PluginUninstallParams{}, PluginUninstallResult{}},
	"process/kill":                              {ProcessKillParams{}, ProcessKillResult{}},
	"process/resizePty":                         {ProcessResizePtyParams{}, ProcessResizePtyResult{}},
	"process/spawn":                             {ProcessSpawnParams{}, ProcessSpawnResult{}},
	"process/writeStdin":                        {ProcessWriteStdinParams{}, ProcessWriteStdinResult{}},
	"review/start":                              {ReviewStartParams{}, ReviewStartResult{}},
	"skills/config/write":                       {SkillsConfigWriteParams{}, SkillsConfigWriteResult{}},
	"skills/extraRoots/set":                     {SkillsExtraRootsSetParams{}, SkillsExtraRootsSetResult{}},
	"skills/list":                               {SkillsListParams{}, SkillsListResult{}},
	"thread/archive":                            {ThreadArchiveParams{}, ThreadArchiveResult{}},
	"thread/backgroundTerminals/clean":          {ThreadBackgroundTerminalsCleanParams{}, ThreadBackgroundTerminalsCleanResult{}},
	"thread/backgroundTerminals/list":           {ThreadBackgroundTerminalsListParams{}, ThreadBackgroundTerminalsListResult{}},
	"thread/backgroundTerminals/terminate":      {ThreadBackgroundTerminalsTerminateParams{}, ThreadBackgroundTerminalsTerminateResult{}},
	"thread/compact/start":                      {ThreadCompactStartParams{}, ThreadCompactStartResult{}},
	"thread/inject_items":                       {ThreadInjectItemsParams{}, ThreadInjectItemsResult{}},
	"thread/delete":                             {ThreadDeleteParams{}, ThreadDeleteResult{}},
	"thread/fork":                               {ThreadForkParams{}, ThreadForkResult{}},
	"thread/goal/clear":                         {ThreadGoalClearParams{}, ThreadGoalClearResult{}},
	"thread/goal/get":                           {ThreadGoalGetParams{}, ThreadGoalGetResult{}},
	"thread/goal/set":                           {ThreadGoalSetParams{}, ThreadGoalSetResult{}},
	"thread/readState/update":                   {ThreadReadStateUpdateParams{}, ThreadReadStateUpdateResult{}},
	"thread/revert":                             {ThreadRevertParams{}, ThreadRevertResult{}},
	"thread/items/read":                         {ThreadItemsReadParams{}, ThreadItemsReadResult{}},
	"thread/searchOccurrences":                  {ThreadSearchOccurrencesParams{}, ThreadSearchOccurrencesResult{}},
	"thread/items/list":                         {ThreadItemsListParams{}, ThreadItemsListResult{}},
	"thread/list":                               {ThreadListParams{}, ThreadListResult{}},
	"thread/loaded/list":                        {ThreadLoadedListParams{}, ThreadLoadedListResult{}},
	"thread/metadata/update":                    {ThreadMetadataUpdateParams{}, ThreadMetadataUpdateResult{}},
	"thread/name/set":                           {ThreadNameSetParams{}, ThreadNameSetResult{}},
	"thread/read":                               {ThreadReadParams{}, ThreadReadResult{}},
	"thread/resume":                             {ThreadResumeParams{}, ThreadResumeResult{}},
	"thread/search/cancel":                      {ThreadSearchCancelParams{}, ThreadSearchCancelResult{}},
	"thread/search/stream":                      {ThreadSearchParams{}, ThreadSearchResult{}},
	"thread/search/stream/cancel":               {ThreadSearchCancelParams{}, ThreadSearchCancelResult{}},
	"thread/search":                             {ThreadSearchParams{}, ThreadSearchResult{}},
	"thread/settings/update":                    {ThreadSettingsUpdateParams{}, ThreadSettingsUpdateResult{}},
	"thread/shellCommand":                       {ThreadShellCommandParams{}, ThreadShellCommandResult{}},
	"thread/start":                              {ThreadStartParams{}, ThreadStartResult{}},
	"thread/turns/list":                         {ThreadTurnsListParams{}, ThreadTurnsListResult{}},
	"thread/unarchive":                          {ThreadUnarchiveParams{}, ThreadUnarchiveResult{}},
	"thread/unsubscribe":                        {ThreadUnsubscribeParams{}, ThreadUnsubscribeResult{}},
	"turn/interrupt":                            {TurnInterruptParams{}, TurnInterruptResult{}},
	"thread/queue/add":                          {ThreadQueueAddParams{}, ThreadQueueAddResult{}},
	"thread/queue/list":                         {ThreadQueueListParams{}, ThreadQueueListResult{}},
	"thread/queue/update":                       {ThreadQueueUpdateParams{}, ThreadQueueUpdateResult{}},
	"thread/queue/delete":                       {ThreadQueueDeleteParams{}, ThreadQueueDeleteResult{}},
	"thread/queue/reorder":                      {ThreadQueueReorderParams{}, ThreadQueueReorderResult{}},
	"thread/queue/start":                        {ThreadQueueStartParams{}, ThreadQueueStartResult{}},
	"turn/settings/update":                      {TurnSettingsUpdateParams{}, TurnSettingsUpdateResult{}},
	"turn/start":                                {TurnStartParams{}, TurnStartResult{}},
	"turn/steer":                                {TurnSteerParams{}, TurnSteerResult{}},

	// Server notifications.
	"account/rateLimits/updated":                {AccountRateLimitsUpdatedNotification{}, nil},
	"account/updated":                           {AccountUpdatedNotification{}, nil},
	"command/exec/outputDelta":                  {CommandExecOutputDeltaNotification{}, nil},
	"configWarning":                             {ConfigWarningNotification{}, nil},
	"fs/changed":                                {FsChangedNotification{}, nil},
	"externalAgentConfig/import/completed":      {ExternalAgentConfigImportNotification{}, nil},
	"externalAgentConfig/import/progress":       {ExternalAgentConfigImportNotification{}, nil},
	"fuzzyFileSearch/sessionCompleted":          {FuzzyFileSearchSessionCompletedNotification{}, nil},
	"fuzzyFileSearch/sessionUpdated":            {FuzzyFileSearchSessionUpdatedNotification{}, nil},
	"error":                                     {ErrorNotification{}, nil},
	"item/agentMessage/delta":                   {AgentMessageDeltaNotification{}, nil},
	"item/commandExecution/outputDelta":         {CommandExecutionOutputDeltaNotification{}, nil},
	"item/commandExecution/terminalInteraction": {TerminalInteractionNotification{}, nil},
	"item/completed":                            {ItemCompletedNotification{}, nil},
	"item/mcpToolCall/progress":                 {McpToolCallProgressNotification{}, nil},
	"item/reasoning/summaryPartAdded":           {ReasoningSummaryPartAddedNotification{}, nil},
	"item/reasoning/summaryTextDelta":           {ReasoningSummaryTextDeltaNotification{}, nil},
	"item/reasoning/textDelta":                  {ReasoningTextDeltaNotification{}, nil},
	"item/started":                              {ItemStartedNotification{}, nil},
	"mcpServer/startupStatus/updated":           {McpServerStartupStatusUpdatedNotification{}, nil},
	"process/exited":                            {ProcessExitedNotification{}, nil},
	"process/outputDelta":                       {ProcessOutputDeltaNotification{}, nil},
	"serverRequest/resolved":                    {ServerRequestResolvedNotification{}, nil},
	"skills/changed":                            {SkillsChangedNotification{}, nil},
	"thread/archived":                           {ThreadArchivedNotification{}, nil},
	"thread/closed":                             {ThreadClosedNotification{}, nil},
	"thread/deleted":                            {ThreadDeletedNotification{}, nil},
	"thread/goal/cleared":                       {ThreadGoalClearedNotification{}, nil},
	"thread/queue/changed":                      {ThreadQueueChangedNotification{}, nil},
	"thread/goal/updated":                       {ThreadGoalUpdatedNotification{}, nil},
	"thread/name/updated":                       {ThreadNameUpdatedNotification{}, nil},
	"thread/settings/updated":                   {ThreadSettingsUpdatedNotification{}, nil},
	"thread/started":                            {ThreadStartedNotification{}, nil},
	"thread/readState/changed":                  {ThreadReadStateChangedNotification{}, nil},
	"thread/reverted":                           {ThreadRevertedNotification{}, nil},
	"thread/search/partial":                     {ThreadSearchPartialNotification{}, nil},
	"thread/status/changed":                     {ThreadStatusChangedNotification{}, nil},
	"thread/tokenUsage/updated":                 {ThreadTokenUsageUpdatedNotification{}, nil},
	"thread/unarchived":                         {ThreadUnarchivedNotification{}, nil},
	"turn/completed":                            {TurnCompletedNotification{}, nil},
	"turn/diff/updated":                         {TurnDiffUpdatedNotification{}, nil},
	"turn/plan/updated":                         {TurnPlanUpdatedNotification{}, nil},
	"turn/started":                              {TurnStartedNotification{}, nil},
	"warning":                                   {WarningNotification{}, nil},

	// Server requests.
	"item/commandExecution/requestApproval": {CommandExecutionRequestApprovalParams{}, CommandExecutionRequestApprovalResult{}},
	"item/fileChange/requestApproval":       {FileChangeRequestApprovalParams{}, FileChangeRequestApprovalResult{}},
	"item/tool/call":                        {DynamicToolCallParams{}, DynamicToolCallResult{}},
	"item/tool/requestUserInput":            {ToolRequestUserInputParams{}, ToolRequestUserInputResult{}},
	"mcpServer/elicitation/request":         {McpServerElicitationRequestParams{}, McpServerElicitationRequestResult{}},
}

// typeOf is the reflect type of a wire row's value, nil for nil.
func typeOf(v any) reflect.Type {
	if v == nil {
		return nil
	}
	return reflect.TypeOf(v)
}

// wireExtensions are the fields of our types the schema does not have, as
// "GoType.jsonName" → why.
var wireExtensions = map[string]string{
	"InitializeCapabilities.eventSeq":       "appserver's extension: numbered notifications for resuming (docs/protocol.md §2.3)",
	"ThreadResumeParams.afterSeq":           "appserver's extension: replay of the event log after a sequence number",
	"SkillsListParams.perCwdExtraUserRoots": "0.169.0's param, dropped by 0.171.0; still read for 0.169.0 clients",

	// Budgets (docs/configuration.md#budgets-1).
	"ThreadTokenUsageUpdatedNotification.budget": "appserver's extension: what is left of the thread's budgets",
}

// toolStatusShared is why api.ToolStatus holds more values than one item
// kind's schema allows.
const toolStatusShared = "api.ToolStatus is shared by the tool items; each is written only with its own " +
	"statuses (declined: commands and file changes; interrupted: collabAgentToolCall)"

// wireKnownDifferences are the properties of the schema our types lack or
// shape otherwise, as "Definition.property" → why; the check skips them.
// "not modelled" means appserver neither reads nor writes the property.
var wireKnownDifferences = map[string]string{
	"AgentMessageThreadItem.moderation":    "OpenAI's moderation (hosted product): never set, always written null; the type keeps the 0.169.0 shape",
	"CollabAgentToolCallThreadItem.status": toolStatusShared,
	"CommandExecutionThreadItem.status":    toolStatusShared,
	"DynamicToolCallThreadItem.status":     toolStatusShared,
	"FileChangeThreadItem.status":          toolStatusShared,
	"McpToolCallThreadItem.status":         toolStatusShared,

	// Remote execution environments are not built: no environmentId is
	// read or written.
	"ListMcpServerStatusParams.environmentId":          "remote environments not built",
	"ListMcpServerStatusResponse.data[].environmentId": "remote environments not built",
	"McpResourceReadParams.environmentId":              "remote environments not built",
	"McpServerElicitationRequestParams.environmentId":  "remote environments not built",
	"McpServerStatusUpdatedNotification.environmentId": "remote environments not built",
	"McpServerToolCallParams.environmentId":            "remote environments not built",
	"McpToolCallThreadItem.environmentId":              "remote environments not built",
	"ThreadSettingsUpdateParams.environments":          "remote environments not built",
	"TurnSettingsUpdateParams.environments":            "remote environments not built",

	"McpResourceReadParams._meta":          "not modelled: the read sends no _meta to the server",
	"McpResourceReadParams.connectorId":    "apps and connectors (hosted product) not served",
	"McpResourceReadParams.originCallId":   "not modelled: reads are not tied to a tool call",
	"McpResourceReadParams.target":         "not modelled: 0.171.0's alternative to server+uri",
	"McpResourceReadResponse.originCallId": "not modelled: reads are not tied to a tool call",

	"McpServerElicitationRequestParams.challenge":   "not modelled: 0.171.0's variant with a challenge is never sent",
	"McpServerElicitationRequestParams.description": "not modelled: 0.171.0's variant with a challenge is never sent",
	"McpServerElicitationRequestParams.title":       "not modelled: 0.171.0's variant with a challenge is never sent",

	"GetAccountRateLimitsResponse.rateLimitUpsell": "not modelled: a ChatGPT plan's banner, never written (absent leaves the client's UI as it is)",

	"ModelProviderConfigWriteResponse.provider.settings.credentialFile": "Bedrock and Vertex provider settings not built",
	"ModelProviderConfigWriteResponse.provider.settings.location":       "Bedrock and Vertex provider settings not built",
	"ModelProviderConfigWriteResponse.provider.settings.profile":        "Bedrock and Vertex provider settings not built",
	"ModelProviderConfigWriteResponse.provider.settings.projectId":      "Bedrock and Vertex provider settings not built",
	"ModelProviderConfigWriteResponse.provider.settings.region":         "Bedrock and Vertex provider settings not built",

	"ThreadForkParams.attachToSource":                   "not built: forks are never attached to their source",
	"ThreadForkParams.deferGoalContinuation":            "not built",
	"ThreadForkParams.experimentalDisablePredictionMcp": "predictions not built",
	"ThreadForkParams.experimentalPredictionMode":       "predictions not built",
	"ThreadListParams.includedThreadIds":                "not built: 0.171.0's filter by ids is ignored",

	"ThreadSettingsUpdateParams.collaborationMode": "not built: only the settings of docs/protocol.md §4.27 are updated",
	"ThreadSettingsUpdateParams.disabledPluginIds": "plugins (hosted product) not served",
	"ThreadSettingsUpdateParams.multiAgentMode":    "not built: only the settings of docs/protocol.md §4.27 are updated",
	"ThreadSettingsUpdateParams.personality":       "not built: only the settings of docs/protocol.md §4.27 are updated",
	"ThreadSettingsUpdateParams.serviceTier":       "not built: only the settings of docs/protocol.md §4.27 are updated",
	"ThreadSettingsUpdateParams.summary":           "not built: only the settings of docs/protocol.md §4.27 are updated",
}
