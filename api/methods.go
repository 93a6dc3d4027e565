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

// ClientMethods lists every client→server request method of the 0.169.0
// protocol (stable and experimental ClientRequest.json bundles).
var ClientMethods = map[string]MethodInfo{
	"account/bedrock/checkGovCloudRequirements": {Experimental: true, NullParams: false},
	"account/bedrock/discover":                  {Experimental: true, NullParams: false},
	"account/bedrock/setup":                     {Experimental: true, NullParams: false},
	"account/gatewayOAuth/cancel":               {Experimental: false, NullParams: true},
	"account/gatewayOAuth/login":                {Experimental: false, NullParams: true},
	"account/gatewayOAuth/read":                 {Experimental: false, NullParams: true},
	"account/gcp/setup":                         {Experimental: true, NullParams: false},
	"account/login/cancel":                      {Experimental: false, NullParams: false},
	"account/login/start":                       {Experimental: false, NullParams: false},
	"account/logout":                            {Experimental: false, NullParams: true},
	"account/rateLimitResetCredit/consume":      {Experimental: false, NullParams: false},
	"account/rateLimits/read":                   {Experimental: false, NullParams: true},
	"account/read":                              {Experimental: false, NullParams: false},
	"account/securitySetup/read":                {Experimental: false, NullParams: true},
	"account/sendAddCreditsNudgeEmail":          {Experimental: false, NullParams: false},
	"account/usage/read":                        {Experimental: false, NullParams: true},
	"account/workspaceMessages/read":            {Experimental: false, NullParams: true},
	"accountSession/list":                       {Experimental: true, NullParams: false},
	"accountSession/switch":                     {Experimental: true, NullParams: false},
	"app/installed":                             {Experimental: false, NullParams: false},
	"app/list":                                  {Experimental: false, NullParams: false},
	"app/read":                                  {Experimental: false, NullParams: false},
	"collaborationMode/list":                    {Experimental: true, NullParams: false},
	"command/exec":                              {Experimental: false, NullParams: false},
	"command/exec/resize":                       {Experimental: false, NullParams: false},
	"command/exec/terminate":                    {Experimental: false, NullParams: false},
	"command/exec/write":                        {Experimental: false, NullParams: false},
	"config/batchWrite":                         {Experimental: false, NullParams: false},
	"config/mcpServer/reload":                   {Experimental: false, NullParams: true},
	"config/read":                               {Experimental: false, NullParams: false},
	"config/value/write":                        {Experimental: false, NullParams: false},
	"configRequirements/read":                   {Experimental: false, NullParams: true},
	"environment/add":                           {Experimental: true, NullParams: false},
	"environment/info":                          {Experimental: true, NullParams: false},
	"environment/status":                        {Experimental: true, NullParams: false},
	"experimentalFeature/enablement/set":        {Experimental: false, NullParams: false},
	"experimentalFeature/list":                  {Experimental: false, NullParams: false},
	"externalAgentConfig/detect":                {Experimental: false, NullParams: false},
	"externalAgentConfig/import":                {Experimental: false, NullParams: false},
	"externalAgentConfig/import/readHistories":  {Experimental: false, NullParams: true},
	"externalAgentConfig/import/recordHistory":  {Experimental: false, NullParams: false},
	"feedback/save":                             {Experimental: false, NullParams: false},
	"feedback/upload":                           {Experimental: false, NullParams: false},
	"fs/copy":                                   {Experimental: false, NullParams: false},
	"fs/createDirectory":                        {Experimental: false, NullParams: false},
	"fs/getMetadata":                            {Experimental: false, NullParams: false},
	"fs/readDirectory":                          {Experimental: false, NullParams: false},
	"fs/readFile":                               {Experimental: false, NullParams: false},
	"fs/remove":                                 {Experimental: false, NullParams: false},
	"fs/unwatch":                                {Experimental: false, NullParams: false},
	"fs/watch":                                  {Experimental: false, NullParams: false},
	"fs/writeFile":                              {Experimental: false, NullParams: false},
	"fuzzyFileSearch":                           {Experimental: false, NullParams: false},
	"fuzzyFileSearch/sessionStart":              {Experimental: true, NullParams: false},
	"fuzzyFileSearch/sessionStop":               {Experimental: true, NullParams: false},
	"fuzzyFileSearch/sessionUpdate":             {Experimental: true, NullParams: false},
	"hooks/list":                                {Experimental: false, NullParams: false},
	"initialize":                                {Experimental: false, NullParams: false},
	"marketplace/add":                           {Experimental: false, NullParams: false},
	"marketplace/remove":                        {Experimental: false, NullParams: false},
	"marketplace/upgrade":                       {Experimental: false, NullParams: false},
	"mcpServer/event/stream/start":              {Experimental: true, NullParams: false},
	"mcpServer/event/stream/stop":               {Experimental: true, NullParams: false},
	"mcpServer/oauth/login":                     {Experimental: false, NullParams: false},
	"mcpServer/resource/read":                   {Experimental: false, NullParams: false},
	"mcpServer/tool/call":                       {Experimental: false, NullParams: false},
	"mcpServerStatus/list":                      {Experimental: false, NullParams: false},
	"memory/reset":                              {Experimental: true, NullParams: true},
	"memory/status":                             {Experimental: true, NullParams: false},
	"mock/experimentalMethod":                   {Experimental: true, NullParams: false},
	"model/list":                                {Experimental: false, NullParams: false},
	"modelProvider/capabilities/read":           {Experimental: false, NullParams: false},
	"modelProvider/config/write":                {Experimental: false, NullParams: false},
	"modelProvider/list":                        {Experimental: false, NullParams: false},
	"permissionProfile/list":                    {Experimental: false, NullParams: false},
	"plugin/install":                            {Experimental: false, NullParams: false},
	"plugin/installed":                          {Experimental: false, NullParams: false},
	"plugin/list":                               {Experimental: false, NullParams: false},
	"plugin/read":                               {Experimental: false, NullParams: false},
	"plugin/reconcile":                          {Experimental: false, NullParams: false},
	"plugin/search":                             {Experimental: true, NullParams: false},
	"plugin/share/checkout":                     {Experimental: false, NullParams: false},
	"plugin/share/delete":                       {Experimental: false, NullParams: false},
	"plugin/share/list":                         {Experimental: false, NullParams: false},
	"plugin/share/save":                         {Experimental: false, NullParams: false},
	"plugin/share/updateTargets":                {Experimental: false, NullParams: false},
	"plugin/skill/read":                         {Experimental: false, NullParams: false},
	"plugin/uninstall":                          {Experimental: false, NullParams: false},
	"process/kill":                              {Experimental: true, NullParams: false},
	"process/resizePty":                         {Experimental: true, NullParams: false},
	"process/spawn":                             {Experimental: true, NullParams: false},
	"process/writeStdin":                        {Experimental: true, NullParams: false},
	"project/create":                            {Experimental: true, NullParams: false},
	"project/delete":                            {Experimental: true, NullParams: false},
	"project/import":                            {Experimental: true, NullParams: false},
	"project/list":                              {Experimental: true, NullParams: false},
	"project/move":                              {Experimental: true, NullParams: false},
	"project/read":                              {Experimental: true, NullParams: false},
	"project/update":                            {Experimental: true, NullParams: false},
	"remoteControl/client/list":                 {Experimental: true, NullParams: false},
	"remoteControl/client/revoke":               {Experimental: true, NullParams: false},
	"remoteControl/disable":                     {Experimental: true, NullParams: true},
	"remoteControl/enable":                      {Experimental: true, NullParams: true},
	"remoteControl/pairing/start":               {Experimental: true, NullParams: false},
	"remoteControl/pairing/status":              {Experimental: true, NullParams: false},
	"remoteControl/status/read":                 {Experimental: true, NullParams: true},
	"review/start":                              {Experimental: false, NullParams: false},
	"rollout/compress":                          {Experimental: true, NullParams: true},
	"server/diagnostics":                        {Experimental: true, NullParams: false},
	"skills/config/write":                       {Experimental: false, NullParams: false},
	"skills/extraRoots/set":                     {Experimental: false, NullParams: false},
	"skills/list":                               {Experimental: false, NullParams: false},
	"thread/approveGuardianDeniedAction":        {Experimental: false, NullParams: false},
	"thread/archive":                            {Experimental: false, NullParams: false},
	"thread/attachment/add":                     {Experimental: false, NullParams: false},
	"thread/attachment/list":                    {Experimental: false, NullParams: false},
	"thread/attachment/remove":                  {Experimental: false, NullParams: false},
	"thread/attachmentOwner/list":               {Experimental: false, NullParams: false},
	"thread/backgroundTerminals/clean":          {Experimental: true, NullParams: false},
	"thread/backgroundTerminals/list":           {Experimental: true, NullParams: false},
	"thread/backgroundTerminals/terminate":      {Experimental: true, NullParams: false},
	"thread/compact/start":                      {Experimental: false, NullParams: false},
	"thread/decrement_elicitation":              {Experimental: true, NullParams: false},
	"thread/delete":                             {Experimental: false, NullParams: false},
	"thread/fork":                               {Experimental: false, NullParams: false},
	"thread/goal/clear":                         {Experimental: false, NullParams: false},
	"thread/goal/get":                           {Experimental: false, NullParams: false},
	"thread/goal/set":                           {Experimental: false, NullParams: false},
	"thread/guardianReview":                     {Experimental: true, NullParams: false},
	"thread/increment_elicitation":              {Experimental: true, NullParams: false},
	"thread/inject_items":                       {Experimental: false, NullParams: false},
	"thread/items/list":                         {Experimental: false, NullParams: false},
	"thread/items/read":                         {Experimental: true, NullParams: false},
	"thread/list":                               {Experimental: false, NullParams: false},
	"thread/loaded/list":                        {Experimental: false, NullParams: false},
	"thread/memory/read":                        {Experimental: true, NullParams: false},
	"thread/memoryMode/set":                     {Experimental: true, NullParams: false},
	"thread/metadata/update":                    {Experimental: false, NullParams: false},
	"thread/name/set":                           {Experimental: false, NullParams: false},
	"thread/prediction/request":                 {Experimental: true, NullParams: false},
	"thread/prepareApprovedPlan":                {Experimental: true, NullParams: false},
	"thread/queue/add":                          {Experimental: true, NullParams: false},
	"thread/queue/delete":                       {Experimental: true, NullParams: false},
	"thread/queue/list":                         {Experimental: true, NullParams: false},
	"thread/queue/reorder":                      {Experimental: true, NullParams: false},
	"thread/queue/start":                        {Experimental: true, NullParams: false},
	"thread/queue/update":                       {Experimental: true, NullParams: false},
	"thread/read":                               {Experimental: false, NullParams: false},
	"thread/readState/update":                   {Experimental: true, NullParams: false},
	"thread/realtime/appendAudio":               {Experimental: true, NullParams: false},
	"thread/realtime/appendSpeech":              {Experimental: true, NullParams: false},
	"thread/realtime/appendText":                {Experimental: true, NullParams: false},
	"thread/realtime/listVoices":                {Experimental: true, NullParams: false},
	"thread/realtime/start":                     {Experimental: true, NullParams: false},
	"thread/realtime/stop":                      {Experimental: true, NullParams: false},
	"thread/resume":                             {Experimental: false, NullParams: false},
	"thread/revert":                             {Experimental: false, NullParams: false},
	"thread/sample":                             {Experimental: true, NullParams: false},
	"thread/sample/cancel":                      {Experimental: true, NullParams: false},
	"thread/search":                             {Experimental: true, NullParams: false},
	"thread/searchOccurrences":                  {Experimental: true, NullParams: false},
	"thread/section/move":                       {Experimental: false, NullParams: false},
	"thread/settings/update":                    {Experimental: true, NullParams: false},
	"thread/shellCommand":                       {Experimental: false, NullParams: false},
	"thread/start":                              {Experimental: false, NullParams: false},
	"thread/timeline/list":                      {Experimental: true, NullParams: false},
	"thread/turns/list":                         {Experimental: false, NullParams: false},
	"thread/unarchive":                          {Experimental: false, NullParams: false},
	"thread/unsubscribe":                        {Experimental: false, NullParams: false},
	"threadSection/create":                      {Experimental: false, NullParams: false},
	"threadSection/delete":                      {Experimental: false, NullParams: false},
	"threadSection/list":                        {Experimental: false, NullParams: false},
	"threadSection/update":                      {Experimental: false, NullParams: false},
	"turn/interrupt":                            {Experimental: false, NullParams: false},
	"turn/settings/update":                      {Experimental: true, NullParams: false},
	"turn/start":                                {Experimental: false, NullParams: false},
	"turn/steer":                                {Experimental: false, NullParams: false},
	"userVerification/cancel":                   {Experimental: true, NullParams: false},
	"userVerification/delete":                   {Experimental: true, NullParams: false},
	"userVerification/enroll":                   {Experimental: true, NullParams: false},
	"userVerification/status":                   {Experimental: true, NullParams: false},
	"userVerification/verify":                   {Experimental: true, NullParams: false},
	"windowsSandbox/readiness":                  {Experimental: false, NullParams: true},
	"windowsSandbox/setupStart":                 {Experimental: false, NullParams: false},
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
