package api

// Notification params of docs/protocol.md §5. Every notification frame also
// carries a top-level "emittedAtMs" next to "method" and "params"; that
// envelope belongs to the transport.

// ThreadStartedNotification announces a new thread (method thread/started).
type ThreadStartedNotification struct {
	// Thread is the new thread.
	Thread Thread `json:"thread"`
}

// ThreadStatusChangedNotification announces a status change (method thread/status/changed).
type ThreadStatusChangedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// Status is the new status.
	Status ThreadStatus `json:"status"`
}

// ThreadNameUpdatedNotification announces a rename (method thread/name/updated).
type ThreadNameUpdatedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// ThreadName is the new name; optional in the schema, always sent by 0.169.0.
	ThreadName *string `json:"threadName,omitempty"`
}

// ThreadIDNotification carries only a thread id (thread/archived, thread/unarchived, thread/closed).
type ThreadIDNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
}

// ThreadArchivedNotification is the params of thread/archived.
type ThreadArchivedNotification = ThreadIDNotification

// ThreadUnarchivedNotification is the params of thread/unarchived.
type ThreadUnarchivedNotification = ThreadIDNotification

// ThreadClosedNotification is the params of thread/closed.
type ThreadClosedNotification = ThreadIDNotification

// ThreadTokenUsageUpdatedNotification reports token usage (method thread/tokenUsage/updated).
type ThreadTokenUsageUpdatedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn of the model response.
	TurnID string `json:"turnId"`
	// TokenUsage is the usage.
	TokenUsage TokenUsage `json:"tokenUsage"`
	// Budget is appserver's extension: what is left of the budgets that
	// bound the thread; absent when no budget is configured.
	Budget *BudgetStatus `json:"budget,omitempty"`
}

// TurnStartedNotification announces a turn (method turn/started).
type TurnStartedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// Turn is the turn: inProgress, no items, startedAt set.
	Turn Turn `json:"turn"`
}

// TurnCompletedNotification announces the end of a turn (method turn/completed).
type TurnCompletedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// Turn is the finished turn.
	Turn Turn `json:"turn"`
}

// TurnPlanStepStatus is the state of a plan step.
type TurnPlanStepStatus string

// The plan step statuses.
const (
	PlanStepPending    TurnPlanStepStatus = "pending"
	PlanStepInProgress TurnPlanStepStatus = "inProgress"
	PlanStepCompleted  TurnPlanStepStatus = "completed"
)

// TurnPlanStep is one step of the agent's plan.
type TurnPlanStep struct {
	// Step is the step text.
	Step string `json:"step"`
	// Status is the step's state.
	Status TurnPlanStepStatus `json:"status"`
}

// TurnPlanUpdatedNotification carries the current plan (method turn/plan/updated).
type TurnPlanUpdatedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
	// Explanation explains the change, or null.
	Explanation *string `json:"explanation"`
	// Plan is the full plan.
	Plan List[TurnPlanStep] `json:"plan"`
}

// TurnDiffUpdatedNotification carries the turn's diff so far (method turn/diff/updated).
type TurnDiffUpdatedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
	// Diff is a unified, git-style diff.
	Diff string `json:"diff"`
}

// ItemStartedNotification announces an item (method item/started).
type ItemStartedNotification struct {
	// Item is the item in its initial state.
	Item ThreadItem `json:"item"`
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
	// StartedAtMs is when the item started (Unix ms).
	StartedAtMs int64 `json:"startedAtMs"`
}

// ItemCompletedNotification carries an item's final state (method item/completed).
type ItemCompletedNotification struct {
	// Item is the item in its final state.
	Item ThreadItem `json:"item"`
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
	// ContentTokenCount is the item's token count, or null (0.169.0 writes null).
	ContentTokenCount *uint64 `json:"contentTokenCount"`
	// CompletedAtMs is when the item completed (Unix ms).
	CompletedAtMs int64 `json:"completedAtMs"`
}

// ItemDeltaNotification streams text of an item: item/agentMessage/delta,
// item/plan/delta, item/commandExecution/outputDelta, item/fileChange/outputDelta.
type ItemDeltaNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
	// ItemID is the item.
	ItemID string `json:"itemId"`
	// Delta is the next chunk of text.
	Delta string `json:"delta"`
}

// AgentMessageDeltaNotification is the params of item/agentMessage/delta.
type AgentMessageDeltaNotification = ItemDeltaNotification

// PlanDeltaNotification is the params of item/plan/delta.
type PlanDeltaNotification = ItemDeltaNotification

// CommandExecutionOutputDeltaNotification is the params of item/commandExecution/outputDelta (plain text, not base64).
type CommandExecutionOutputDeltaNotification = ItemDeltaNotification

// FileChangeOutputDeltaNotification is the params of item/fileChange/outputDelta.
type FileChangeOutputDeltaNotification = ItemDeltaNotification

// ReasoningSummaryPartAddedNotification starts a summary section (method item/reasoning/summaryPartAdded).
type ReasoningSummaryPartAddedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
	// ItemID is the reasoning item.
	ItemID string `json:"itemId"`
	// SummaryIndex is the new section's index.
	SummaryIndex int64 `json:"summaryIndex"`
}

// ReasoningSummaryTextDeltaNotification streams summary text (method item/reasoning/summaryTextDelta).
type ReasoningSummaryTextDeltaNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
	// ItemID is the reasoning item.
	ItemID string `json:"itemId"`
	// Delta is the next chunk.
	Delta string `json:"delta"`
	// SummaryIndex is the section.
	SummaryIndex int64 `json:"summaryIndex"`
}

// ReasoningTextDeltaNotification streams raw reasoning (method item/reasoning/textDelta).
type ReasoningTextDeltaNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
	// ItemID is the reasoning item.
	ItemID string `json:"itemId"`
	// Delta is the next chunk.
	Delta string `json:"delta"`
	// ContentIndex is the content part.
	ContentIndex int64 `json:"contentIndex"`
}

// TerminalInteractionNotification reports stdin written to a command (method item/commandExecution/terminalInteraction).
type TerminalInteractionNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
	// ItemID is the command item.
	ItemID string `json:"itemId"`
	// ProcessID is the process.
	ProcessID string `json:"processId"`
	// Stdin is the text written.
	Stdin string `json:"stdin"`
}

// FileChangePatchUpdatedNotification carries updated changes (method item/fileChange/patchUpdated).
type FileChangePatchUpdatedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
	// ItemID is the file change item.
	ItemID string `json:"itemId"`
	// Changes are the current changes.
	Changes List[FileUpdateChange] `json:"changes"`
}

// McpToolCallProgressNotification reports MCP progress (method item/mcpToolCall/progress).
type McpToolCallProgressNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
	// ItemID is the MCP call item.
	ItemID string `json:"itemId"`
	// Message is the progress text.
	Message string `json:"message"`
}

// ServerRequestResolvedNotification announces a settled server request (method serverRequest/resolved).
type ServerRequestResolvedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// RequestID is the id of the settled server→client request.
	RequestID RequestID `json:"requestId"`
}

// ErrorNotification reports a turn error (method error).
type ErrorNotification struct {
	// Error describes the failure.
	Error TurnError `json:"error"`
	// WillRetry is true when a retry follows (informational).
	WillRetry bool `json:"willRetry"`
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
}

// WarningNotification reports a non-fatal problem (method warning).
type WarningNotification struct {
	// ThreadID is the thread, or null.
	ThreadID *string `json:"threadId"`
	// Message is the warning.
	Message string `json:"message"`
}

// ConfigWarningNotification reports a configuration problem (method configWarning).
type ConfigWarningNotification struct {
	// Summary is the warning.
	Summary string `json:"summary"`
	// Details add detail, or null.
	Details *string `json:"details"`
	// Path is the offending file, omitted when unknown.
	Path *string `json:"path,omitempty"`
	// Range is the offending span, omitted when unknown.
	Range *TextRange `json:"range,omitempty"`
}

// TextRange is a span in a text file.
type TextRange struct {
	// Start is the first position.
	Start TextPosition `json:"start"`
	// End is the last position.
	End TextPosition `json:"end"`
}

// TextPosition is a line/column position.
type TextPosition struct {
	// Line is the line number.
	Line uint64 `json:"line"`
	// Column is the column number.
	Column uint64 `json:"column"`
}

// DeprecationNoticeNotification reports use of a deprecated feature (method deprecationNotice).
type DeprecationNoticeNotification struct {
	// Summary is the notice.
	Summary string `json:"summary"`
	// Details add detail, or null.
	Details *string `json:"details"`
}

// ContextCompactedNotification is the deprecated compaction notice (method thread/compacted).
type ContextCompactedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
}

// ModelReroutedNotification reports a model switch (method model/rerouted).
type ModelReroutedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn.
	TurnID string `json:"turnId"`
	// FromModel is the requested model.
	FromModel string `json:"fromModel"`
	// ToModel is the model used.
	ToModel string `json:"toModel"`
	// Reason explains the switch.
	Reason string `json:"reason"`
}

// SkillsChangedNotification is the (empty) params of skills/changed.
type SkillsChangedNotification struct{}

// McpServerStartupStatusUpdatedNotification reports MCP start-up (method mcpServer/startupStatus/updated).
type McpServerStartupStatusUpdatedNotification struct {
	// ThreadID is the thread, or null.
	ThreadID *string `json:"threadId"`
	// Name is the server name.
	Name string `json:"name"`
	// EnvironmentID is the registration scope of the server, or null.
	EnvironmentID *string `json:"environmentId"`
	// Status is "starting", "ready", "failed" or "cancelled".
	Status string `json:"status"`
	// Error is the failure, or null.
	Error *string `json:"error"`
	// FailureReason classifies the failure, or null.
	FailureReason *string `json:"failureReason"`
}

// CommandExecOutputDeltaNotification streams command/exec output (method command/exec/outputDelta).
type CommandExecOutputDeltaNotification struct {
	// ProcessID is the client-chosen process id.
	ProcessID string `json:"processId"`
	// Stream is "stdout" or "stderr".
	Stream string `json:"stream"`
	// DeltaBase64 is the chunk, base64-encoded.
	DeltaBase64 string `json:"deltaBase64"`
	// CapReached is true on the last chunk of a stream cut by the cap.
	CapReached bool `json:"capReached"`
}
