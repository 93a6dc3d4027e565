package api

import (
	"encoding/json"
	"fmt"
)

// ThreadHistoryMode is how a thread's history is served.
type ThreadHistoryMode string

// The history modes.
const (
	HistoryLegacy    ThreadHistoryMode = "legacy"
	HistoryPaginated ThreadHistoryMode = "paginated"
)

// Thread is a conversation (docs/protocol.md §3.1); every field is always written.
type Thread struct {
	// ID is the thread's UUIDv7.
	ID string `json:"id"`
	// Environments are the thread's execution environments, or null (experimental).
	Environments []ThreadEnvironment `json:"environments"`
	// Extra is reserved, or null (experimental).
	Extra *ThreadExtra `json:"extra"`
	// SessionID equals ID for a root thread.
	SessionID string `json:"sessionId"`
	// ForkedFromID is the source of a fork, or null.
	ForkedFromID *string `json:"forkedFromId"`
	// AttachedToThreadID is the owning thread, or null (experimental).
	AttachedToThreadID *string `json:"attachedToThreadId"`
	// ParentThreadID is set for sub-agents, else null.
	ParentThreadID *string `json:"parentThreadId"`
	// Preview is the first user message text, "" before one.
	Preview string `json:"preview"`
	// Ephemeral threads live in memory only and have a null Path.
	Ephemeral bool `json:"ephemeral"`
	// Section is the thread's section, or null.
	Section *ThreadSection `json:"section"`
	// SectionEnteredAt is when the thread entered its section (Unix seconds), or null.
	SectionEnteredAt *int64 `json:"sectionEnteredAt"`
	// ProjectID is the thread's project, or null.
	ProjectID *string `json:"projectId"`
	// HistoryMode is "legacy" or "paginated" (new threads).
	HistoryMode ThreadHistoryMode `json:"historyMode"`
	// ModelProvider is the provider id.
	ModelProvider string `json:"modelProvider"`
	// Model is the model slug, or null.
	Model *string `json:"model"`
	// ReasoningEffort is the effort level, or null.
	ReasoningEffort *ReasoningEffort `json:"reasoningEffort"`
	// CreatedAt is the creation time (Unix seconds).
	CreatedAt int64 `json:"createdAt"`
	// UpdatedAt is the last update time (Unix seconds).
	UpdatedAt int64 `json:"updatedAt"`
	// RecencyAt is the last activity time (Unix seconds), or null.
	RecencyAt *int64 `json:"recencyAt"`
	// Status is the thread's load/run status.
	Status ThreadStatus `json:"status"`
	// Path is the storage location, or null (unstable).
	Path *string `json:"path"`
	// Cwd is the absolute working directory.
	Cwd string `json:"cwd"`
	// CliVersion is the version of the server that created the thread.
	CliVersion string `json:"cliVersion"`
	// Originator is the client name of the creator, or null.
	Originator *string `json:"originator"`
	// Source is how the thread was created.
	Source SessionSource `json:"source"`
	// CanAcceptDirectInput tells whether the thread takes user input, or null (experimental).
	CanAcceptDirectInput *bool `json:"canAcceptDirectInput"`
	// ThreadSource is a free-form analytics tag, or null.
	ThreadSource *string `json:"threadSource"`
	// AgentNickname is set for sub-agents, else null.
	AgentNickname *string `json:"agentNickname"`
	// AgentRole is set for sub-agents, else null.
	AgentRole *string `json:"agentRole"`
	// GitInfo describes the cwd's repository, or null.
	GitInfo *GitInfo `json:"gitInfo"`
	// Name is the user-given name, or null.
	Name *string `json:"name"`
	// DaybreakEnabled is experimental, or null.
	DaybreakEnabled *bool `json:"daybreakEnabled"`
	// Turns are filled only by resume, fork and read with includeTurns; [] elsewhere.
	Turns List[Turn] `json:"turns"`
}

// ThreadExtra is the reserved, currently empty extra-data object.
type ThreadExtra struct{}

// ThreadEnvironment is one execution environment of a thread.
type ThreadEnvironment struct {
	// EnvironmentID is e.g. "local".
	EnvironmentID string `json:"environmentId"`
	// Cwd is the environment's working directory.
	Cwd string `json:"cwd"`
	// RuntimeWorkspaceRoots are the environment's workspace roots.
	RuntimeWorkspaceRoots List[string] `json:"runtimeWorkspaceRoots"`
}

// ThreadSection is a user-defined thread group.
type ThreadSection struct {
	// ID is the section id.
	ID string `json:"id"`
	// Name is the display name.
	Name string `json:"name"`
	// Appearance styles the section, or null.
	Appearance *ThreadSectionAppearance `json:"appearance"`
}

// ThreadSectionAppearance styles a section.
type ThreadSectionAppearance struct {
	// Icon is an icon name, or null.
	Icon *string `json:"icon"`
	// Color is a color name, or null.
	Color *string `json:"color"`
}

// GitInfo describes the repository of a thread's cwd.
type GitInfo struct {
	// Sha is the HEAD commit, or null.
	Sha *string `json:"sha"`
	// Branch is the current branch, or null.
	Branch *string `json:"branch"`
	// OriginURL is the origin remote, or null.
	OriginURL *string `json:"originUrl"`
}

// SessionSource is how a thread was created: a plain name ("cli", "vscode",
// "exec", "appServer", "unknown"), {"custom": s}, or {"subAgent": …}.
type SessionSource struct {
	// Name is the plain form; used when Custom and SubAgent are unset.
	Name string
	// Custom is the {"custom": …} form.
	Custom *string
	// SubAgent is the {"subAgent": …} payload, kept verbatim.
	SubAgent json.RawMessage
}

// MarshalJSON writes the plain string or the single-key object.
func (s SessionSource) MarshalJSON() ([]byte, error) {
	switch {
	case s.Custom != nil:
		return json.Marshal(map[string]string{"custom": *s.Custom})
	case s.SubAgent != nil:
		return json.Marshal(map[string]json.RawMessage{"subAgent": s.SubAgent})
	default:
		return json.Marshal(s.Name)
	}
}

// UnmarshalJSON decodes any form.
func (s *SessionSource) UnmarshalJSON(b []byte) error {
	*s = SessionSource{}
	if !isObject(b) {
		return json.Unmarshal(b, &s.Name)
	}
	k, v, err := singleKey(b)
	if err != nil {
		return err
	}
	switch k {
	case "custom":
		s.Custom = new(string)
		return json.Unmarshal(v, s.Custom)
	case "subAgent":
		s.SubAgent = v
		return nil
	default:
		return fmt.Errorf("unknown variant `%s`, expected `custom` or `subAgent`", k)
	}
}

// ThreadStatusType is the discriminator of ThreadStatus.
type ThreadStatusType string

// The thread statuses.
const (
	ThreadNotLoaded   ThreadStatusType = "notLoaded"
	ThreadIdle        ThreadStatusType = "idle"
	ThreadActive      ThreadStatusType = "active"
	ThreadSystemError ThreadStatusType = "systemError"
)

// ThreadActiveFlag qualifies an active thread.
type ThreadActiveFlag string

// The active flags.
const (
	FlagWaitingOnApproval  ThreadActiveFlag = "waitingOnApproval"
	FlagWaitingOnUserInput ThreadActiveFlag = "waitingOnUserInput"
)

// ThreadStatus is a thread's status, tagged by type; ActiveFlags is written
// (as an array, never null) only for "active".
type ThreadStatus struct {
	// Type selects the status.
	Type ThreadStatusType
	// ActiveFlags qualify an active thread.
	ActiveFlags []ThreadActiveFlag
}

// MarshalJSON writes activeFlags only for active.
func (s ThreadStatus) MarshalJSON() ([]byte, error) {
	if s.Type == ThreadActive {
		return json.Marshal(struct {
			Type        ThreadStatusType       `json:"type"`
			ActiveFlags List[ThreadActiveFlag] `json:"activeFlags"`
		}{s.Type, s.ActiveFlags})
	}
	return json.Marshal(struct {
		Type ThreadStatusType `json:"type"`
	}{s.Type})
}

// UnmarshalJSON decodes any status.
func (s *ThreadStatus) UnmarshalJSON(b []byte) error {
	var w struct {
		Type        ThreadStatusType   `json:"type"`
		ActiveFlags []ThreadActiveFlag `json:"activeFlags"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = ThreadStatus(w)
	return nil
}

// TurnStatus is the state of a turn.
type TurnStatus string

// The turn statuses.
const (
	TurnInProgress  TurnStatus = "inProgress"
	TurnCompleted   TurnStatus = "completed"
	TurnInterrupted TurnStatus = "interrupted"
	TurnFailed      TurnStatus = "failed"
)

// TurnItemsView says how complete Turn.Items is.
type TurnItemsView string

// The items views.
const (
	ItemsNotLoaded TurnItemsView = "notLoaded"
	ItemsSummary   TurnItemsView = "summary"
	ItemsFull      TurnItemsView = "full"
)

// Turn is one user request and the agent's work on it (docs/protocol.md §3.3).
type Turn struct {
	// ID is the turn's UUIDv7.
	ID string `json:"id"`
	// RootTurnID equals ID for user-started turns, or null.
	RootTurnID *string `json:"rootTurnId"`
	// Items are the turn's items, as complete as ItemsView says.
	Items List[ThreadItem] `json:"items"`
	// ItemsView says how complete Items is.
	ItemsView TurnItemsView `json:"itemsView"`
	// Status is the turn's state.
	Status TurnStatus `json:"status"`
	// Error is set when the turn failed, else null.
	Error *TurnError `json:"error"`
	// StartedAt is the start time (Unix seconds), null in the turn/start response.
	StartedAt *int64 `json:"startedAt"`
	// CompletedAt is the end time (Unix seconds), or null.
	CompletedAt *int64 `json:"completedAt"`
	// DurationMs is the run time, or null.
	DurationMs *int64 `json:"durationMs"`
}

// TurnError describes why a turn failed; codex writes all four keys.
type TurnError struct {
	// Message is the human-readable error.
	Message string `json:"message"`
	// CodexErrorInfo classifies the error, or null.
	CodexErrorInfo *CodexErrorInfo `json:"codexErrorInfo"`
	// AdditionalDetails adds detail, or null.
	AdditionalDetails *string `json:"additionalDetails"`
	// Misalignment describes a misalignment policy violation, or null (kept verbatim).
	Misalignment json.RawMessage `json:"misalignment"`
}

// The CodexErrorInfo codes.
const (
	ErrContextWindowExceeded          = "contextWindowExceeded"
	ErrSessionBudgetExceeded          = "sessionBudgetExceeded"
	ErrUsageLimitExceeded             = "usageLimitExceeded"
	ErrRateLimitExceeded              = "rateLimitExceeded"
	ErrFlexUnavailable                = "flexUnavailable"
	ErrServerOverloaded               = "serverOverloaded"
	ErrModelNotFound                  = "modelNotFound"
	ErrPolicyCapacityUnavailable      = "policyCapacityUnavailable"
	ErrCyberPolicy                    = "cyberPolicy"
	ErrMisalignmentPolicyViolation    = "misalignmentPolicyViolation"
	ErrTooManyDenials                 = "tooManyDenials"
	ErrInternalServerError            = "internalServerError"
	ErrUnauthorized                   = "unauthorized"
	ErrBadRequest                     = "badRequest"
	ErrThreadRollbackFailed           = "threadRollbackFailed"
	ErrSandboxError                   = "sandboxError"
	ErrInferenceHookDenied            = "inferenceHookDenied"
	ErrOther                          = "other"
	ErrHTTPConnectionFailed           = "httpConnectionFailed"
	ErrResponseStreamConnectionFailed = "responseStreamConnectionFailed"
	ErrResponseStreamDisconnected     = "responseStreamDisconnected"
	ErrResponseTooManyFailedAttempts  = "responseTooManyFailedAttempts"
	ErrActiveTurnNotSteerable         = "activeTurnNotSteerable"
)

// CodexErrorInfo classifies a turn error: a plain code string, or a
// single-key object for the HTTP variants ({"<code>": {"httpStatusCode": n|null}})
// and activeTurnNotSteerable ({"activeTurnNotSteerable": {"turnKind": …}}).
// Unknown object forms are kept verbatim in Raw.
type CodexErrorInfo struct {
	// Code is one of the Err* constants (or an unknown code).
	Code string
	// HTTPStatusCode is the upstream status of the HTTP variants, or nil.
	HTTPStatusCode *int
	// TurnKind is "review" or "compact" for activeTurnNotSteerable.
	TurnKind string
	// Raw holds an unrecognised object form verbatim; it wins when set.
	Raw json.RawMessage
}

// isHTTPErrorCode reports whether code is one of the HTTP object variants.
func isHTTPErrorCode(code string) bool {
	switch code {
	case ErrHTTPConnectionFailed, ErrResponseStreamConnectionFailed,
		ErrResponseStreamDisconnected, ErrResponseTooManyFailedAttempts:
		return true
	}
	return false
}

// MarshalJSON writes the string or object form.
func (e CodexErrorInfo) MarshalJSON() ([]byte, error) {
	switch {
	case e.Raw != nil:
		return e.Raw, nil
	case isHTTPErrorCode(e.Code):
		return json.Marshal(map[string]any{e.Code: struct {
			HTTPStatusCode *int `json:"httpStatusCode"`
		}{e.HTTPStatusCode}})
	case e.Code == ErrActiveTurnNotSteerable:
		return json.Marshal(map[string]any{e.Code: struct {
			TurnKind string `json:"turnKind"`
		}{e.TurnKind}})
	default:
		return json.Marshal(e.Code)
	}
}

// UnmarshalJSON decodes the string or object form.
func (e *CodexErrorInfo) UnmarshalJSON(b []byte) error {
	*e = CodexErrorInfo{}
	if !isObject(b) {
		return json.Unmarshal(b, &e.Code)
	}
	k, v, err := singleKey(b)
	if err != nil {
		e.Raw = append(json.RawMessage(nil), b...)
		return nil
	}
	e.Code = k
	switch {
	case isHTTPErrorCode(k):
		var w struct {
			HTTPStatusCode *int `json:"httpStatusCode"`
		}
		if err := json.Unmarshal(v, &w); err != nil {
			return err
		}
		e.HTTPStatusCode = w.HTTPStatusCode
	case k == ErrActiveTurnNotSteerable:
		var w struct {
			TurnKind string `json:"turnKind"`
		}
		if err := json.Unmarshal(v, &w); err != nil {
			return err
		}
		e.TurnKind = w.TurnKind
	default:
		e.Raw = append(json.RawMessage(nil), b...)
	}
	return nil
}

// ThreadReadState is a thread's unread marker (experimental).
type ThreadReadState struct {
	// FirstUnread is the first unread position, or null.
	FirstUnread *ThreadUnreadPosition `json:"firstUnread"`
	// Revision changes whenever the state changes.
	Revision string `json:"revision"`
}

// ThreadUnreadPosition is {"type":"threadStart"} or {"type":"turn","turnId":…}.
type ThreadUnreadPosition struct {
	// Type is "threadStart" or "turn".
	Type string `json:"type"`
	// TurnID is set for "turn".
	TurnID string `json:"turnId,omitempty"`
}

// TokenUsage is the token usage of a thread.
type TokenUsage struct {
	// Total is cumulative over the thread.
	Total TokenUsageBreakdown `json:"total"`
	// Last is the most recent model response.
	Last TokenUsageBreakdown `json:"last"`
	// ModelContextWindow is the model's context window, or null.
	ModelContextWindow *int64 `json:"modelContextWindow"`
}

// TokenUsageBreakdown counts tokens of one or more model responses.
type TokenUsageBreakdown struct {
	// TotalTokens is input plus output.
	TotalTokens int64 `json:"totalTokens"`
	// InputTokens counts prompt tokens.
	InputTokens int64 `json:"inputTokens"`
	// CachedInputTokens counts prompt tokens served from cache.
	CachedInputTokens int64 `json:"cachedInputTokens"`
	// CacheWriteInputTokens counts prompt tokens written to cache.
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
	// OutputTokens counts completion tokens.
	OutputTokens int64 `json:"outputTokens"`
	// ReasoningOutputTokens counts reasoning tokens within OutputTokens.
	ReasoningOutputTokens int64 `json:"reasoningOutputTokens"`
}
