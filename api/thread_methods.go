package api

import (
	"encoding/json"
	"fmt"
)

// ThreadStartSource says why a thread was started.
type ThreadStartSource string

// The thread start sources.
const (
	StartSourceStartup ThreadStartSource = "startup"
	StartSourceClear   ThreadStartSource = "clear"
)

// ThreadStartParams are the params of thread/start (docs/protocol.md §4.2).
type ThreadStartParams struct {
	// Model overrides the model, or null.
	Model *string `json:"model,omitempty"`
	// ModelProvider overrides the provider, or null.
	ModelProvider *string `json:"modelProvider,omitempty"`
	// ServiceTier sets (value), resets (null) or keeps (absent) the service tier.
	ServiceTier Nullable[string] `json:"serviceTier,omitzero"`
	// Cwd is the working directory, or null for the server's.
	Cwd *string `json:"cwd,omitempty"`
	// ApprovalPolicy overrides the approval policy, or null.
	ApprovalPolicy *AskForApproval `json:"approvalPolicy,omitempty"`
	// ApprovalsReviewer overrides the reviewer, or null.
	ApprovalsReviewer *ApprovalsReviewer `json:"approvalsReviewer,omitempty"`
	// Sandbox is the sandbox mode (string form), or null.
	Sandbox *SandboxMode `json:"sandbox,omitempty"`
	// Config holds dotted config overrides, or null.
	Config map[string]json.RawMessage `json:"config,omitempty"`
	// ServiceName is a metrics tag, or null.
	ServiceName *string `json:"serviceName,omitempty"`
	// BaseInstructions replace the base instructions, or null.
	BaseInstructions *string `json:"baseInstructions,omitempty"`
	// DeveloperInstructions add developer instructions, or null.
	DeveloperInstructions *string `json:"developerInstructions,omitempty"`
	// Personality is deprecated, or null.
	Personality *Personality `json:"personality,omitempty"`
	// Ephemeral keeps the thread in memory only, or null.
	Ephemeral *bool `json:"ephemeral,omitempty"`
	// SessionStartSource says why the thread starts, or null.
	SessionStartSource *ThreadStartSource `json:"sessionStartSource,omitempty"`
	// ThreadSource is a free-form analytics tag, or null.
	ThreadSource *string `json:"threadSource,omitempty"`
	// DynamicTools registers client tools (experimental), or null.
	DynamicTools []DynamicToolSpec `json:"dynamicTools,omitempty"`
	// HistoryMode selects the history mode (experimental), or null.
	HistoryMode *ThreadHistoryMode `json:"historyMode,omitempty"`
	// Environments (experimental) are accepted and ignored.
	Environments json.RawMessage `json:"environments,omitempty"`
	// Permissions (experimental) names a built-in permission profile
	// (":read-only", ":workspace", ":danger-full-access") whose sandbox
	// the thread takes; not with the sandbox. Unknown ids are refused.
	Permissions *string `json:"permissions,omitempty"`
	// RuntimeWorkspaceRoots (experimental) are accepted and ignored (a
	// principal's must still lie inside its workspace roots).
	RuntimeWorkspaceRoots []string `json:"runtimeWorkspaceRoots,omitempty"`
	// MultiAgentMode (experimental) is accepted and ignored.
	MultiAgentMode json.RawMessage `json:"multiAgentMode,omitempty"`
	// ProjectID (experimental) is accepted and ignored.
	ProjectID *string `json:"projectId,omitempty"`
	// SelectedCapabilityRoots (experimental) are accepted and ignored.
	SelectedCapabilityRoots json.RawMessage `json:"selectedCapabilityRoots,omitempty"`
	// DaybreakEnabled (experimental) is accepted and ignored.
	DaybreakEnabled *bool `json:"daybreakEnabled,omitempty"`
	// ExperimentalRawEvents (experimental) is accepted and ignored.
	ExperimentalRawEvents *bool `json:"experimentalRawEvents,omitempty"`
	// AllowProviderModelFallback (experimental) is accepted and ignored.
	AllowProviderModelFallback *bool `json:"allowProviderModelFallback,omitempty"`
	// MockExperimentalField (experimental) is accepted and ignored.
	MockExperimentalField *string `json:"mockExperimentalField,omitempty"`
}

// ThreadStartResult is the result of thread/start.
type ThreadStartResult struct {
	// Thread is the new thread (status idle, no turns).
	Thread Thread `json:"thread"`
	// Model is the effective model.
	Model string `json:"model"`
	// ModelProvider is the effective provider.
	ModelProvider string `json:"modelProvider"`
	// ServiceTier is the effective tier, or null.
	ServiceTier *string `json:"serviceTier"`
	// DisabledPluginIDs are disabled plugins.
	DisabledPluginIDs List[string] `json:"disabledPluginIds"`
	// Cwd is the effective working directory.
	Cwd string `json:"cwd"`
	// RuntimeWorkspaceRoots are the workspace roots (experimental; codex writes them).
	RuntimeWorkspaceRoots List[string] `json:"runtimeWorkspaceRoots"`
	// InstructionSources are the instruction files in effect.
	InstructionSources List[string] `json:"instructionSources"`
	// ApprovalPolicy is the effective approval policy.
	ApprovalPolicy AskForApproval `json:"approvalPolicy"`
	// ApprovalsReviewer is the effective reviewer.
	ApprovalsReviewer ApprovalsReviewer `json:"approvalsReviewer"`
	// Sandbox is the effective sandbox policy (object form).
	Sandbox SandboxPolicy `json:"sandbox"`
	// ActivePermissionProfile is the permission profile (experimental), or null.
	ActivePermissionProfile *ActivePermissionProfile `json:"activePermissionProfile"`
	// ReasoningEffort is the effective effort, or null.
	ReasoningEffort *ReasoningEffort `json:"reasoningEffort"`
	// MultiAgentMode (experimental) is written verbatim when set, e.g. "explicitRequestOnly".
	MultiAgentMode json.RawMessage `json:"multiAgentMode,omitempty"`
}

// ActivePermissionProfile is the permission profile in effect (experimental).
type ActivePermissionProfile struct {
	// ID is the profile id, e.g. ":read-only".
	ID string `json:"id"`
	// Extends is the parent profile, or null.
	Extends *string `json:"extends"`
}

// ThreadResumeParams are the params of thread/resume (docs/protocol.md §4.3).
type ThreadResumeParams struct {
	// ThreadID is the thread to resume; required.
	ThreadID string `json:"threadId"`
	// Model overrides the model, or null.
	Model *string `json:"model,omitempty"`
	// ModelProvider overrides the provider, or null.
	ModelProvider *string `json:"modelProvider,omitempty"`
	// ServiceTier sets, resets or keeps the service tier.
	ServiceTier Nullable[string] `json:"serviceTier,omitzero"`
	// Cwd overrides the working directory, or null.
	Cwd *string `json:"cwd,omitempty"`
	// ApprovalPolicy overrides the approval policy, or null.
	ApprovalPolicy *AskForApproval `json:"approvalPolicy,omitempty"`
	// ApprovalsReviewer overrides the reviewer, or null.
	ApprovalsReviewer *ApprovalsReviewer `json:"approvalsReviewer,omitempty"`
	// Sandbox overrides the sandbox mode, or null.
	Sandbox *SandboxMode `json:"sandbox,omitempty"`
	// Config holds dotted config overrides, or null.
	Config map[string]json.RawMessage `json:"config,omitempty"`
	// BaseInstructions replace the base instructions, or null.
	BaseInstructions *string `json:"baseInstructions,omitempty"`
	// DeveloperInstructions add developer instructions, or null.
	DeveloperInstructions *string `json:"developerInstructions,omitempty"`
	// Personality is deprecated, or null.
	Personality *Personality `json:"personality,omitempty"`
	// ExcludeTurns leaves thread.turns empty.
	ExcludeTurns *bool `json:"excludeTurns,omitempty"`
	// History (experimental) is accepted and ignored.
	History json.RawMessage `json:"history,omitempty"`
	// Path (experimental) is accepted and ignored.
	Path *string `json:"path,omitempty"`
	// InitialTurnsPage (experimental) is accepted and ignored.
	InitialTurnsPage json.RawMessage `json:"initialTurnsPage,omitempty"`
	// Permissions (experimental) names a built-in permission profile
	// (":read-only", ":workspace", ":danger-full-access") whose sandbox
	// the thread takes; not with the sandbox. Unknown ids are refused.
	Permissions *string `json:"permissions,omitempty"`
	// RuntimeWorkspaceRoots (experimental) are accepted and ignored (a
	// principal's must still lie inside its workspace roots).
	RuntimeWorkspaceRoots []string `json:"runtimeWorkspaceRoots,omitempty"`
	// AfterSeq (experimental, appserver's own) resumes the thread's
	// notifications: after the answer the connection gets every
	// notification of the thread's event log with a "seq" greater than
	// this one (see InitializeCapabilities.EventSeq), then the live ones,
	// none twice.
	AfterSeq *int64 `json:"afterSeq,omitempty"`
}

// ThreadResumeResult is the result of thread/resume.
type ThreadResumeResult struct {
	// Thread is the resumed thread, turns filled unless excludeTurns.
	Thread Thread `json:"thread"`
	// Model is the effective model.
	Model string `json:"model"`
	// ModelProvider is the effective provider.
	ModelProvider string `json:"modelProvider"`
	// ServiceTier is the effective tier, or null.
	ServiceTier *string `json:"serviceTier"`
	// DisabledPluginIDs are disabled plugins.
	DisabledPluginIDs List[string] `json:"disabledPluginIds"`
	// Cwd is the effective working directory.
	Cwd string `json:"cwd"`
	// RuntimeWorkspaceRoots are the workspace roots.
	RuntimeWorkspaceRoots List[string] `json:"runtimeWorkspaceRoots"`
	// InstructionSources are the instruction files in effect.
	InstructionSources List[string] `json:"instructionSources"`
	// ApprovalPolicy is the effective approval policy.
	ApprovalPolicy AskForApproval `json:"approvalPolicy"`
	// ApprovalsReviewer is the effective reviewer.
	ApprovalsReviewer ApprovalsReviewer `json:"approvalsReviewer"`
	// Sandbox is the effective sandbox policy.
	Sandbox SandboxPolicy `json:"sandbox"`
	// ActivePermissionProfile is the permission profile, or null.
	ActivePermissionProfile *ActivePermissionProfile `json:"activePermissionProfile"`
	// ReasoningEffort is the effective effort, or null.
	ReasoningEffort *ReasoningEffort `json:"reasoningEffort"`
	// CollaborationMode is the thread's collaboration mode, or null.
	CollaborationMode *CollaborationMode `json:"collaborationMode"`
	// MultiAgentMode (experimental) is written verbatim when set.
	MultiAgentMode json.RawMessage `json:"multiAgentMode,omitempty"`
	// InitialTurnsPage is the first turns page when requested, or null.
	InitialTurnsPage *TurnsPage `json:"initialTurnsPage"`
	// TurnsBackwardsCursor pages turns backwards, or null.
	TurnsBackwardsCursor *string `json:"turnsBackwardsCursor"`
	// ItemsBackwardsCursor pages items backwards, or null.
	ItemsBackwardsCursor *string `json:"itemsBackwardsCursor"`
}

// TurnsPage is a page of turns.
type TurnsPage struct {
	// Data are the turns.
	Data List[Turn] `json:"data"`
	// NextCursor continues the listing, or null.
	NextCursor *string `json:"nextCursor"`
	// BackwardsCursor pages the other way, or null.
	BackwardsCursor *string `json:"backwardsCursor"`
}

// ThreadForkParams are the params of thread/fork (docs/protocol.md §4.4).
type ThreadForkParams struct {
	// ThreadID is the source thread; required.
	ThreadID string `json:"threadId"`
	// LastTurnID forks through this turn (inclusive), or null for all.
	LastTurnID *string `json:"lastTurnId,omitempty"`
	// Model overrides the model, or null.
	Model *string `json:"model,omitempty"`
	// ModelProvider overrides the provider, or null.
	ModelProvider *string `json:"modelProvider,omitempty"`
	// ServiceTier sets, resets or keeps the service tier.
	ServiceTier Nullable[string] `json:"serviceTier,omitzero"`
	// Cwd overrides the working directory, or null.
	Cwd *string `json:"cwd,omitempty"`
	// ApprovalPolicy overrides the approval policy, or null.
	ApprovalPolicy *AskForApproval `json:"approvalPolicy,omitempty"`
	// ApprovalsReviewer overrides the reviewer, or null.
	ApprovalsReviewer *ApprovalsReviewer `json:"approvalsReviewer,omitempty"`
	// Sandbox overrides the sandbox mode, or null.
	Sandbox *SandboxMode `json:"sandbox,omitempty"`
	// Config holds dotted config overrides, or null.
	Config map[string]json.RawMessage `json:"config,omitempty"`
	// BaseInstructions replace the base instructions, or null.
	BaseInstructions *string `json:"baseInstructions,omitempty"`
	// DeveloperInstructions add developer instructions, or null.
	DeveloperInstructions *string `json:"developerInstructions,omitempty"`
	// Ephemeral keeps the fork in memory only.
	Ephemeral *bool `json:"ephemeral,omitempty"`
	// ThreadSource is a free-form analytics tag, or null.
	ThreadSource *string `json:"threadSource,omitempty"`
	// ExcludeTurns leaves thread.turns empty.
	ExcludeTurns *bool `json:"excludeTurns,omitempty"`
	// BeforeTurnID (experimental) is accepted and ignored.
	BeforeTurnID *string `json:"beforeTurnId,omitempty"`
	// Path (experimental) is accepted and ignored.
	Path *string `json:"path,omitempty"`
	// Permissions (experimental) names a built-in permission profile
	// (":read-only", ":workspace", ":danger-full-access") whose sandbox
	// the thread takes; not with the sandbox. Unknown ids are refused.
	Permissions *string `json:"permissions,omitempty"`
	// RuntimeWorkspaceRoots (experimental) are accepted and ignored (a
	// principal's must still lie inside its workspace roots).
	RuntimeWorkspaceRoots []string `json:"runtimeWorkspaceRoots,omitempty"`
}

// ThreadForkResult is the result of thread/fork; same shape as ThreadStartResult.
type ThreadForkResult = ThreadStartResult

// ThreadArchiveParams are the params of thread/archive.
type ThreadArchiveParams struct {
	// ThreadID is the thread to archive; required.
	ThreadID string `json:"threadId"`
}

// ThreadArchiveResult is the (empty) result of thread/archive.
type ThreadArchiveResult struct{}

// ThreadUnarchiveParams are the params of thread/unarchive.
type ThreadUnarchiveParams struct {
	// ThreadID is the thread to unarchive; required.
	ThreadID string `json:"threadId"`
}

// ThreadUnarchiveResult is the result of thread/unarchive.
type ThreadUnarchiveResult struct {
	// Thread is the restored thread (status notLoaded).
	Thread Thread `json:"thread"`
}

// ThreadListParams are the params of thread/list (docs/protocol.md §4.6).
type ThreadListParams struct {
	// Cursor is an opaque paging cursor, or null.
	Cursor *string `json:"cursor,omitempty"`
	// Limit is the page size, or null.
	Limit *uint32 `json:"limit,omitempty"`
	// SortKey orders the listing (default created_at), or null.
	SortKey *ThreadSortKey `json:"sortKey,omitempty"`
	// SortDirection orders the listing (default desc), or null.
	SortDirection *SortDirection `json:"sortDirection,omitempty"`
	// Archived selects archived threads only when true.
	Archived *bool `json:"archived,omitempty"`
	// Cwd filters by working directory (a string or a list), or null.
	Cwd StringList `json:"cwd,omitempty"`
	// ModelProviders filters by provider, or null.
	ModelProviders []string `json:"modelProviders,omitempty"`
	// SourceKinds keeps the threads of these kinds; empty lists all but sub-agents.
	SourceKinds []ThreadSourceKind `json:"sourceKinds,omitempty"`
	// SearchTerm matches titles, or null.
	SearchTerm *string `json:"searchTerm,omitempty"`
	// ExcludedThreadIDs are left out (at most 100), or null.
	ExcludedThreadIDs []string `json:"excludedThreadIds,omitempty"`
	// IncludedThreadIDs, when not null, keeps only these threads (at most
	// 100; an empty list keeps none).
	IncludedThreadIDs *[]string `json:"includedThreadIds,omitempty"`
	// SectionID filters by section: absent = all, null = unsectioned.
	SectionID Nullable[string] `json:"sectionId,omitzero"`
	// CurrentAccountOnly limits to the current account.
	CurrentAccountOnly *bool `json:"currentAccountOnly,omitempty"`
	// UseStateDBOnly skips the rollout scan.
	UseStateDBOnly *bool `json:"useStateDbOnly,omitempty"`
	// Originators filters by creator; a non-empty list is rejected.
	Originators []string `json:"originators,omitempty"`
	// ParentThreadID (experimental) keeps the threads that thread spawned.
	ParentThreadID *string `json:"parentThreadId,omitempty"`
	// AncestorThreadID (experimental) keeps the thread's descendants.
	AncestorThreadID *string `json:"ancestorThreadId,omitempty"`
	// AttachedToThreadID (experimental) is accepted and ignored.
	AttachedToThreadID *string `json:"attachedToThreadId,omitempty"`
	// IncludeAttachedThreads (experimental) is accepted and ignored.
	IncludeAttachedThreads *bool `json:"includeAttachedThreads,omitempty"`
	// ProjectID (experimental) is accepted and ignored.
	ProjectID *string `json:"projectId,omitempty"`
}

// StringList is a param that may be a single string or an array of strings;
// it always marshals as an array.
type StringList []string

// UnmarshalJSON accepts a string, an array of strings, or null.
func (s *StringList) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		*s = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = StringList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("expected a string or an array of strings")
	}
	*s = many
	return nil
}

// ThreadListResult is the result of thread/list.
type ThreadListResult struct {
	// Data are the threads (turns always []).
	Data List[Thread] `json:"data"`
	// ReadStates maps thread id to read state (experimental), or null.
	ReadStates map[string]ThreadReadState `json:"readStates"`
	// NextCursor continues the listing, or null on the last page.
	NextCursor *string `json:"nextCursor"`
	// BackwardsCursor pages the other way, or null.
	BackwardsCursor *string `json:"backwardsCursor"`
}

// ThreadReadParams are the params of thread/read.
type ThreadReadParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// IncludeTurns fills thread.turns.
	IncludeTurns *bool `json:"includeTurns,omitempty"`
}

// ThreadReadResult is the result of thread/read.
type ThreadReadResult struct {
	// Thread is the thread.
	Thread Thread `json:"thread"`
	// ReadState is the unread marker (experimental), or null.
	ReadState *ThreadReadState `json:"readState"`
}

// ThreadTurnsListParams are the params of thread/turns/list.
type ThreadTurnsListParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// Cursor is an opaque paging cursor, or null.
	Cursor *string `json:"cursor,omitempty"`
	// Limit is the page size, or null.
	Limit *uint32 `json:"limit,omitempty"`
	// SortDirection orders turns (default desc), or null.
	SortDirection *SortDirection `json:"sortDirection,omitempty"`
	// ItemsView selects how complete each turn's items are (default summary), or null.
	ItemsView *TurnItemsView `json:"itemsView,omitempty"`
}

// ThreadTurnsListResult is the result of thread/turns/list.
type ThreadTurnsListResult = TurnsPage

// ThreadItemsListParams are the params of thread/items/list.
type ThreadItemsListParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// TurnID restricts the listing to one turn, or null.
	TurnID *string `json:"turnId,omitempty"`
	// Cursor is an opaque cursor or an item anchor, or null.
	Cursor *ThreadItemsListCursor `json:"cursor,omitempty"`
	// Limit is the page size, or null.
	Limit *uint32 `json:"limit,omitempty"`
	// SortDirection orders items (default asc), or null.
	SortDirection *SortDirection `json:"sortDirection,omitempty"`
	// DeferOutput is accepted and ignored.
	DeferOutput json.RawMessage `json:"deferOutput,omitempty"`
}

// ThreadItemsListCursor is an opaque cursor string or the anchor
// {"type":"item","itemId":…} (which needs turnId); AnchorItemID wins when set.
type ThreadItemsListCursor struct {
	// Opaque is a cursor from a previous listing.
	Opaque string
	// AnchorItemID anchors the listing at an item.
	AnchorItemID string
}

// MarshalJSON writes the string or the anchor object.
func (c ThreadItemsListCursor) MarshalJSON() ([]byte, error) {
	if c.AnchorItemID != "" {
		return json.Marshal(struct {
			Type   string `json:"type"`
			ItemID string `json:"itemId"`
		}{"item", c.AnchorItemID})
	}
	return json.Marshal(c.Opaque)
}

// UnmarshalJSON accepts the string or the anchor object.
func (c *ThreadItemsListCursor) UnmarshalJSON(b []byte) error {
	*c = ThreadItemsListCursor{}
	if !isObject(b) {
		return json.Unmarshal(b, &c.Opaque)
	}
	var w struct {
		Type   string `json:"type"`
		ItemID string `json:"itemId"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Type != "item" {
		return fmt.Errorf("unknown variant `%s`, expected `item`", w.Type)
	}
	c.AnchorItemID = w.ItemID
	return nil
}

// ThreadItemsListResult is the result of thread/items/list.
type ThreadItemsListResult struct {
	// Data are the items with their turn and times.
	Data List[ThreadItemEntry] `json:"data"`
	// NextCursor continues the listing, or null.
	NextCursor *string `json:"nextCursor"`
	// BackwardsCursor pages the other way, or null.
	BackwardsCursor *string `json:"backwardsCursor"`
}

// ThreadItemEntry is one item of thread/items/list.
type ThreadItemEntry struct {
	// TurnID is the item's turn.
	TurnID string `json:"turnId"`
	// Item is the item.
	Item ThreadItem `json:"item"`
	// OutputDeferred tells that output was left out, omitted when unset.
	OutputDeferred *bool `json:"outputDeferred,omitempty"`
	// StartedAtMs is when the item started, or null.
	StartedAtMs *int64 `json:"startedAtMs"`
	// CompletedAtMs is when the item completed, or null.
	CompletedAtMs *int64 `json:"completedAtMs"`
}

// ThreadNameSetParams are the params of thread/name/set.
type ThreadNameSetParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// Name is the new name; required.
	Name string `json:"name"`
}

// ThreadNameSetResult is the (empty) result of thread/name/set.
type ThreadNameSetResult struct{}

// ThreadUnsubscribeParams are the params of thread/unsubscribe.
type ThreadUnsubscribeParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
}

// ThreadUnsubscribeStatus is the outcome of thread/unsubscribe.
type ThreadUnsubscribeStatus string

// The unsubscribe outcomes.
const (
	Unsubscribed  ThreadUnsubscribeStatus = "unsubscribed"
	NotSubscribed ThreadUnsubscribeStatus = "notSubscribed"
	NotLoaded     ThreadUnsubscribeStatus = "notLoaded"
)

// ThreadUnsubscribeResult is the result of thread/unsubscribe.
type ThreadUnsubscribeResult struct {
	// Status is the outcome.
	Status ThreadUnsubscribeStatus `json:"status"`
}

// TurnStartParams are the params of turn/start (docs/protocol.md §4.12).
type TurnStartParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// Input is the user input; required (may be empty).
	Input List[UserInput] `json:"input"`
	// Cwd changes the working directory for this and later turns, or null.
	Cwd *string `json:"cwd,omitempty"`
	// ApprovalPolicy changes the approval policy (persists), or null.
	ApprovalPolicy *AskForApproval `json:"approvalPolicy,omitempty"`
	// ApprovalsReviewer changes the reviewer (persists), or null.
	ApprovalsReviewer *ApprovalsReviewer `json:"approvalsReviewer,omitempty"`
	// SandboxPolicy changes the sandbox (object form; persists), or null.
	SandboxPolicy *SandboxPolicy `json:"sandboxPolicy,omitempty"`
	// Model changes the model (persists), or null.
	Model *string `json:"model,omitempty"`
	// ServiceTier sets, resets or keeps the service tier (persists).
	ServiceTier Nullable[string] `json:"serviceTier,omitzero"`
	// ServiceTierForTurn overrides the tier for this turn only, or null.
	ServiceTierForTurn *string `json:"serviceTierForTurn,omitempty"`
	// Effort sets the reasoning effort, or null.
	Effort *ReasoningEffort `json:"effort,omitempty"`
	// Summary sets the reasoning summary style, or null.
	Summary *ReasoningSummary `json:"summary,omitempty"`
	// Personality is deprecated, or null.
	Personality *Personality `json:"personality,omitempty"`
	// OutputSchema constrains the final message of this turn (a JSON Schema); "null" counts as absent.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// ClientUserMessageID surfaces as userMessage.clientId, or null.
	ClientUserMessageID *string `json:"clientUserMessageId,omitempty"`
	// DisabledPluginIDs disables plugins, or null.
	DisabledPluginIDs []string `json:"disabledPluginIds,omitempty"`
	// TurnTrigger is an analytics tag, or null.
	TurnTrigger *string `json:"turnTrigger,omitempty"`
	// ParentTurnID links a follow-up turn, or null.
	ParentTurnID *string `json:"parentTurnId,omitempty"`
	// RootTurnID links a follow-up turn, or null.
	RootTurnID *string `json:"rootTurnId,omitempty"`
	// ToolOutput is accepted and ignored.
	ToolOutput json.RawMessage `json:"toolOutput,omitempty"`
	// CollaborationMode sets the collaboration mode (experimental), or null.
	CollaborationMode *CollaborationMode `json:"collaborationMode,omitempty"`
	// AdditionalContext (experimental) is accepted and ignored.
	AdditionalContext json.RawMessage `json:"additionalContext,omitempty"`
	// Environments (experimental) are accepted and ignored.
	Environments json.RawMessage `json:"environments,omitempty"`
	// Permissions (experimental) names a built-in permission profile
	// (":read-only", ":workspace", ":danger-full-access") whose sandbox
	// the thread takes; not with the sandbox. Unknown ids are refused.
	Permissions *string `json:"permissions,omitempty"`
	// RuntimeWorkspaceRoots (experimental) are accepted and ignored (a
	// principal's must still lie inside its workspace roots).
	RuntimeWorkspaceRoots []string `json:"runtimeWorkspaceRoots,omitempty"`
	// MultiAgentMode (experimental) is accepted and ignored.
	MultiAgentMode json.RawMessage `json:"multiAgentMode,omitempty"`
	// CyberAccessProgram (experimental) is accepted and ignored.
	CyberAccessProgram *string `json:"cyberAccessProgram,omitempty"`
	// ResponsesapiClientMetadata (experimental) is accepted and ignored.
	ResponsesapiClientMetadata map[string]string `json:"responsesapiClientMetadata,omitempty"`
	// ResponsesapiClientMetadataPatch (experimental) is accepted and ignored.
	ResponsesapiClientMetadataPatch map[string]string `json:"responsesapiClientMetadataPatch,omitempty"`
}

// TurnStartResult is the result of turn/start.
type TurnStartResult struct {
	// Turn is the new (or already active) turn: inProgress, no items, startedAt null.
	Turn Turn `json:"turn"`
}

// TurnSteerParams are the params of turn/steer.
type TurnSteerParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// Input is the extra input; required.
	Input List[UserInput] `json:"input"`
	// ExpectedTurnID must match the active turn; required.
	ExpectedTurnID string `json:"expectedTurnId"`
	// ClientUserMessageID surfaces as userMessage.clientId, or null.
	ClientUserMessageID *string `json:"clientUserMessageId,omitempty"`
	// AdditionalContext (experimental) is accepted and ignored.
	AdditionalContext json.RawMessage `json:"additionalContext,omitempty"`
	// ResponsesapiClientMetadata (experimental) is accepted and ignored.
	ResponsesapiClientMetadata map[string]string `json:"responsesapiClientMetadata,omitempty"`
	// ResponsesapiClientMetadataPatch (experimental) is accepted and ignored.
	ResponsesapiClientMetadataPatch map[string]string `json:"responsesapiClientMetadataPatch,omitempty"`
}

// TurnSteerResult is the result of turn/steer.
type TurnSteerResult struct {
	// TurnID is the active turn.
	TurnID string `json:"turnId"`
}

// TurnInterruptParams are the params of turn/interrupt.
type TurnInterruptParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// TurnID is the turn to interrupt; required.
	TurnID string `json:"turnId"`
}

// TurnInterruptResult is the (empty) result of turn/interrupt.
type TurnInterruptResult struct{}

// ThreadShellCommandParams are the params of thread/shellCommand: a
// command the user typed (`!cmd` in the TUI), run in the thread's cwd.
type ThreadShellCommandParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// Command is a shell script, run by the user's shell unsandboxed;
	// required.
	Command string `json:"command"`
	// TimeoutMs bounds the run (milliseconds, ≥ 0); null is one hour.
	TimeoutMs *int64 `json:"timeoutMs,omitempty"`
}

// ThreadShellCommandResult is the (empty) result of thread/shellCommand;
// the command runs in a turn of its own, announced after it.
type ThreadShellCommandResult struct{}

// ThreadSettingsUpdateParams are the params of thread/settings/update
// (experimental): settings for the thread's next turns, each absent field
// left as it is.
type ThreadSettingsUpdateParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// Cwd changes the working directory, or null.
	Cwd *string `json:"cwd,omitempty"`
	// ApprovalPolicy changes the approval policy, or null.
	ApprovalPolicy *AskForApproval `json:"approvalPolicy,omitempty"`
	// ApprovalsReviewer is accepted and ignored: approvals go to the user.
	ApprovalsReviewer *ApprovalsReviewer `json:"approvalsReviewer,omitempty"`
	// SandboxPolicy changes the sandbox, or null.
	SandboxPolicy *SandboxPolicy `json:"sandboxPolicy,omitempty"`
	// Permissions selects a built-in permission profile (":read-only",
	// ":workspace", ":danger-full-access"), or null; not with SandboxPolicy.
	Permissions *string `json:"permissions,omitempty"`
	// Model changes the model, or null.
	Model *string `json:"model,omitempty"`
	// Effort changes the reasoning effort, or null.
	Effort *ReasoningEffort `json:"effort,omitempty"`
	// Summary changes the reasoning summary style, or null.
	Summary *ReasoningSummary `json:"summary,omitempty"`
	// ServiceTier changes the service tier; an explicit null resets it to
	// the default tier, an absent key keeps it.
	ServiceTier Nullable[string] `json:"serviceTier,omitzero"`
	// CollaborationMode is accepted and ignored (experimental).
	CollaborationMode *CollaborationMode `json:"collaborationMode,omitempty"`
	// Personality is accepted and ignored (deprecated).
	Personality *Personality `json:"personality,omitempty"`
	// MultiAgentMode is accepted and ignored (deprecated).
	MultiAgentMode json.RawMessage `json:"multiAgentMode,omitempty"`
	// Environments is accepted and ignored: a thread has one local
	// environment, its cwd.
	Environments json.RawMessage `json:"environments,omitempty"`
	// DisabledPluginIDs is accepted and ignored: this server has no
	// plugins.
	DisabledPluginIDs []string `json:"disabledPluginIds,omitempty"`
}

// ThreadSettingsUpdateResult is the (empty) result of thread/settings/update.
type ThreadSettingsUpdateResult struct{}

// ThreadSettings are a thread's settings for its next turns, as
// thread/settings/updated reports them.
type ThreadSettings struct {
	// DisabledPluginIDs are the thread's disabled plugins (always empty).
	DisabledPluginIDs List[string] `json:"disabledPluginIds"`
	// Cwd is the working directory.
	Cwd string `json:"cwd"`
	// Environments are the thread's environments, the local one first.
	Environments List[ThreadEnvironment] `json:"environments"`
	// ApprovalPolicy is the approval policy.
	ApprovalPolicy AskForApproval `json:"approvalPolicy"`
	// ApprovalsReviewer is who reviews approval requests.
	ApprovalsReviewer ApprovalsReviewer `json:"approvalsReviewer"`
	// SandboxPolicy is the sandbox.
	SandboxPolicy SandboxPolicy `json:"sandboxPolicy"`
	// ActivePermissionProfile is the permission profile that chose the
	// sandbox, or null.
	ActivePermissionProfile *ActivePermissionProfile `json:"activePermissionProfile"`
	// Model is the model.
	Model string `json:"model"`
	// ModelProvider is the model provider.
	ModelProvider string `json:"modelProvider"`
	// ServiceTier is the service tier, or null.
	ServiceTier *string `json:"serviceTier"`
	// Effort is the reasoning effort, or null.
	Effort *ReasoningEffort `json:"effort"`
	// Summary is the reasoning summary style, or null.
	Summary *ReasoningSummary `json:"summary"`
	// CollaborationMode is the collaboration mode.
	CollaborationMode CollaborationMode `json:"collaborationMode"`
	// MultiAgentMode is always "explicitRequestOnly" (deprecated).
	MultiAgentMode string `json:"multiAgentMode"`
	// Personality is the saved personality, or null (deprecated).
	Personality *Personality `json:"personality"`
}

// ThreadSettingsUpdatedNotification is thread/settings/updated: a
// thread's settings changed (by thread/settings/update or turn/start).
type ThreadSettingsUpdatedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// ThreadSettings are its settings now.
	ThreadSettings ThreadSettings `json:"threadSettings"`
}

// ThreadCompactStartParams are the params of thread/compact/start: compact
// the thread's context in a turn of its own.
type ThreadCompactStartParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
}

// ThreadCompactStartResult is the (empty) result of thread/compact/start;
// the compaction runs as a turn after it.
type ThreadCompactStartResult struct{}

// ThreadInjectItemsParams are the params of thread/inject_items: raw
// Responses API items to add to the thread's model history without
// starting a turn.
type ThreadInjectItemsParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// Items are the Responses API items, in order; required, not empty.
	Items []json.RawMessage `json:"items"`
}

// ThreadInjectItemsResult is the (empty) result of thread/inject_items.
type ThreadInjectItemsResult struct{}
