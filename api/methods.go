package api

// MethodInfo describes one client→server request method of the protocol.
type MethodInfo struct {
	// Experimental is true when the method only exists in the --experimental
	// schema bundle, i.e. it requires capabilities.experimentalApi.
	Experimental bool
	// NullParams is true when the params member is not required: its schema
	// type is null (e.g. configRequirements/read) or a nullable object
	// (e.g. account/rateLimits/read), so a missing or null params is legal.
	NullParams bool
}

// LegacyClientMethods are v1 request names that 0.169.0 still decodes and
// lists in its unknown-method error, although ClientRequest.json omits them.
var LegacyClientMethods = []string{
	"getAuthStatus",
	"getConversationSummary",
	"gitDiffToRemote",
}

// Client→server request methods that appserver implements (docs/protocol.md §4, §9.1).
const (
	// MethodInitialize opens the session and negotiates capabilities.
	MethodInitialize = "initialize"
	// MethodThreadStart creates a thread and subscribes the caller.
	MethodThreadStart = "thread/start"
	// MethodThreadResume loads a stored thread and subscribes the caller.
	MethodThreadResume = "thread/resume"
	// MethodThreadFork copies a thread into a new one.
	MethodThreadFork = "thread/fork"
	// MethodThreadArchive hides a thread from the default listing.
	MethodThreadArchive = "thread/archive"
	// MethodThreadUnarchive restores an archived thread.
	MethodThreadUnarchive = "thread/unarchive"
	// MethodThreadList pages through stored threads.
	MethodThreadList = "thread/list"
	// MethodThreadLoadedList lists the ids of threads loaded in memory.
	MethodThreadLoadedList = "thread/loaded/list"
	// MethodThreadRead returns one thread, optionally with its turns.
	MethodThreadRead = "thread/read"
	// MethodThreadTurnsList pages through the turns of a thread.
	MethodThreadTurnsList = "thread/turns/list"
	// MethodThreadItemsList pages through the items of a thread.
	MethodThreadItemsList = "thread/items/list"
	// MethodThreadNameSet renames a thread.
	MethodThreadNameSet = "thread/name/set"
	// MethodThreadUnsubscribe stops thread events for the caller.
	MethodThreadUnsubscribe = "thread/unsubscribe"
	// MethodThreadShellCommand runs a user's shell command in a turn of its own.
	MethodThreadShellCommand = "thread/shellCommand"
	// MethodTurnStart starts a turn (or steers the active one).
	MethodTurnStart = "turn/start"
	// MethodTurnSteer adds input to the active turn.
	MethodTurnSteer = "turn/steer"
	// MethodTurnInterrupt stops the active turn.
	MethodTurnInterrupt = "turn/interrupt"
	// MethodModelList lists the models clients may pick.
	MethodModelList = "model/list"
	// MethodSkillsList lists skills per working directory.
	MethodSkillsList = "skills/list"
	// MethodSkillsExtraRootsSet sets the client's extra skill roots.
	MethodSkillsExtraRootsSet = "skills/extraRoots/set"
	// MethodSkillsConfigWrite turns a skill on or off.
	MethodSkillsConfigWrite = "skills/config/write"
	// MethodMcpServerStatusList lists configured MCP servers.
	MethodMcpServerStatusList = "mcpServerStatus/list"
	// MethodMcpServerToolCall calls an MCP tool directly.
	MethodMcpServerToolCall = "mcpServer/tool/call"
	// MethodMcpServerResourceRead reads a resource of an MCP server.
	MethodMcpServerResourceRead = "mcpServer/resource/read"
	// MethodConfigMcpServerReload reloads the [mcp_servers] configuration.
	MethodConfigMcpServerReload = "config/mcpServer/reload"
	// MethodCommandExec runs a one-off process outside any thread.
	MethodCommandExec = "command/exec"
	// MethodCommandExecWrite writes to (or closes) a command/exec stdin.
	MethodCommandExecWrite = "command/exec/write"
	// MethodCommandExecResize resizes a command/exec terminal.
	MethodCommandExecResize = "command/exec/resize"
	// MethodCommandExecTerminate kills a command/exec process.
	MethodCommandExecTerminate = "command/exec/terminate"
	// MethodConfigRead returns the effective configuration.
	MethodConfigRead = "config/read"
	// MethodConfigRequirementsRead returns managed configuration requirements.
	MethodConfigRequirementsRead = "configRequirements/read"
	// MethodAccountRead returns the signed-in account, if any.
	MethodAccountRead = "account/read"
	// MethodHooksList lists lifecycle hooks per working directory.
	MethodHooksList = "hooks/list"
	// MethodCollaborationModeList lists collaboration mode presets (experimental).
	MethodCollaborationModeList = "collaborationMode/list"
)

// Client→server notification methods.
const (
	// MethodInitialized is sent by the client after the initialize response.
	MethodInitialized = "initialized"
)

// Server→client notification methods (docs/protocol.md §4.19, §5).
const (
	// MethodThreadStarted announces a new thread to every connection.
	MethodThreadStarted = "thread/started"
	// MethodThreadStatusChanged announces a thread status change to every connection.
	MethodThreadStatusChanged = "thread/status/changed"
	// MethodThreadNameUpdated announces a rename to every connection.
	MethodThreadNameUpdated = "thread/name/updated"
	// MethodThreadArchived announces that a thread was archived.
	MethodThreadArchived = "thread/archived"
	// MethodThreadUnarchived announces that a thread was unarchived.
	MethodThreadUnarchived = "thread/unarchived"
	// MethodThreadQueueChanged tells a thread's subscribers that its queue changed.
	MethodThreadQueueChanged = "thread/queue/changed"
	// MethodThreadClosed announces that a thread was unloaded.
	MethodThreadClosed = "thread/closed"
	// MethodThreadTokenUsageUpdated reports token usage after each model response.
	MethodThreadTokenUsageUpdated = "thread/tokenUsage/updated"
	// MethodTurnStarted announces a new turn to subscribers.
	MethodTurnStarted = "turn/started"
	// MethodTurnCompleted announces the end of a turn to subscribers.
	MethodTurnCompleted = "turn/completed"
	// MethodTurnPlanUpdated carries the agent's current plan.
	MethodTurnPlanUpdated = "turn/plan/updated"
	// MethodTurnDiffUpdated carries the aggregated diff of a turn.
	MethodTurnDiffUpdated = "turn/diff/updated"
	// MethodItemStarted announces a new item.
	MethodItemStarted = "item/started"
	// MethodItemCompleted carries the final state of an item.
	MethodItemCompleted = "item/completed"
	// MethodAgentMessageDelta streams agent message text.
	MethodAgentMessageDelta = "item/agentMessage/delta"
	// MethodPlanDelta streams plan-mode text.
	MethodPlanDelta = "item/plan/delta"
	// MethodReasoningSummaryPartAdded starts a new reasoning summary section.
	MethodReasoningSummaryPartAdded = "item/reasoning/summaryPartAdded"
	// MethodReasoningSummaryTextDelta streams reasoning summary text.
	MethodReasoningSummaryTextDelta = "item/reasoning/summaryTextDelta"
	// MethodReasoningTextDelta streams raw reasoning text.
	MethodReasoningTextDelta = "item/reasoning/textDelta"
	// MethodCommandExecutionOutputDelta streams command output.
	MethodCommandExecutionOutputDelta = "item/commandExecution/outputDelta"
	// MethodCommandExecutionTerminalInteraction reports stdin written to a command.
	MethodCommandExecutionTerminalInteraction = "item/commandExecution/terminalInteraction"
	// MethodFileChangeOutputDelta streams apply_patch tool output.
	MethodFileChangeOutputDelta = "item/fileChange/outputDelta"
	// MethodFileChangePatchUpdated carries updated file changes of an item.
	MethodFileChangePatchUpdated = "item/fileChange/patchUpdated"
	// MethodMcpToolCallProgress reports MCP tool call progress.
	MethodMcpToolCallProgress = "item/mcpToolCall/progress"
	// MethodServerRequestResolved announces that a server request was settled.
	MethodServerRequestResolved = "serverRequest/resolved"
	// MethodError reports a turn error.
	MethodError = "error"
	// MethodWarning reports a non-fatal warning.
	MethodWarning = "warning"
	// MethodConfigWarning reports a configuration problem after initialize.
	MethodConfigWarning = "configWarning"
	// MethodDeprecationNotice reports use of a deprecated feature.
	MethodDeprecationNotice = "deprecationNotice"
	// MethodThreadCompacted is the deprecated context compaction notice.
	MethodThreadCompacted = "thread/compacted"
	// MethodModelRerouted reports that a turn switched models.
	MethodModelRerouted = "model/rerouted"
	// MethodSkillsChanged reports that the skill catalog changed.
	MethodSkillsChanged = "skills/changed"
	// MethodMcpServerStartupStatusUpdated reports MCP server start-up progress.
	MethodMcpServerStartupStatusUpdated = "mcpServer/startupStatus/updated"
	// MethodCommandExecOutputDelta streams command/exec output.
	MethodCommandExecOutputDelta = "command/exec/outputDelta"
)

// Server→client request methods (docs/protocol.md §7).
const (
	// MethodCommandExecutionRequestApproval asks the client to approve a command.
	MethodCommandExecutionRequestApproval = "item/commandExecution/requestApproval"
	// MethodFileChangeRequestApproval asks the client to approve a file change.
	MethodFileChangeRequestApproval = "item/fileChange/requestApproval"
	// MethodToolRequestUserInput asks the user questions on behalf of the model.
	MethodToolRequestUserInput = "item/tool/requestUserInput"
	// MethodItemToolCall forwards a dynamic tool call to the registering client.
	MethodItemToolCall = "item/tool/call"
	// MethodMcpServerElicitationRequest relays an MCP elicitation (not sent by appserver).
	MethodMcpServerElicitationRequest = "mcpServer/elicitation/request"
	// MethodPermissionsRequestApproval asks for extra permissions (not sent by appserver).
	MethodPermissionsRequestApproval = "item/permissions/requestApproval"
	// MethodChatgptAuthTokensRefresh asks for fresh ChatGPT tokens (not sent by appserver).
	MethodChatgptAuthTokensRefresh = "account/chatgptAuthTokens/refresh"
	// MethodAttestationGenerate asks for an attestation (not sent by appserver).
	MethodAttestationGenerate = "attestation/generate"
	// MethodCurrentTimeRead asks for the client's time (experimental; not sent by appserver).
	MethodCurrentTimeRead = "currentTime/read"
	// MethodApplyPatchApproval is the legacy v1 patch approval (not sent by appserver).
	MethodApplyPatchApproval = "applyPatchApproval"
	// MethodExecCommandApproval is the legacy v1 command approval (not sent by appserver).
	MethodExecCommandApproval = "execCommandApproval"
)
