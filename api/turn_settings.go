package api

// TurnSettingsUpdateParams are the params of turn/settings/update
// (experimental): settings for the rest of the running turn, each null
// field left as it is.
type TurnSettingsUpdateParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// TurnID is the running turn; required.
	TurnID string `json:"turnId"`
	// Model changes the model of the turn's next requests, or null.
	Model *string `json:"model,omitempty"`
	// Effort changes the reasoning effort, or null.
	Effort *ReasoningEffort `json:"effort,omitempty"`
	// Summary changes the reasoning summary style, or null.
	Summary *ReasoningSummary `json:"summary,omitempty"`
	// ServiceTier is accepted and ignored: appserver sends no tier.
	ServiceTier Nullable[string] `json:"serviceTier,omitzero"`
	// ApprovalsReviewer is accepted and ignored: approvals go to the user.
	ApprovalsReviewer *ApprovalsReviewer `json:"approvalsReviewer,omitempty"`
}

// TurnSettingsUpdateStatus is the outcome of turn/settings/update.
type TurnSettingsUpdateStatus string

// The outcomes of turn/settings/update.
const (
	// TurnSettingsApplied: the turn's next model request uses the settings.
	TurnSettingsApplied TurnSettingsUpdateStatus = "applied"
	// TurnSettingsTargetUnavailable: the turn is not running (any more).
	TurnSettingsTargetUnavailable TurnSettingsUpdateStatus = "targetUnavailable"
)

// TurnSettingsUpdateResult is the result of turn/settings/update.
type TurnSettingsUpdateResult struct {
	// Status is the outcome.
	Status TurnSettingsUpdateStatus `json:"status"`
}
