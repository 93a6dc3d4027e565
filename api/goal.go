package api

// ThreadGoalStatus is the state of a thread's goal.
type ThreadGoalStatus string

// The goal states.
const (
	GoalActive        ThreadGoalStatus = "active"
	GoalPaused        ThreadGoalStatus = "paused"
	GoalBlocked       ThreadGoalStatus = "blocked"
	GoalUsageLimited  ThreadGoalStatus = "usageLimited"
	GoalBudgetLimited ThreadGoalStatus = "budgetLimited"
	GoalComplete      ThreadGoalStatus = "complete"
)

// ThreadGoal is the objective a thread works towards.
type ThreadGoal struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// Objective is what the goal is.
	Objective string `json:"objective"`
	// Status is its state.
	Status ThreadGoalStatus `json:"status"`
	// TokenBudget caps the tokens to spend on it, or null.
	TokenBudget *int64 `json:"tokenBudget"`
	// TokensUsed counts the thread's tokens since the goal was set.
	TokensUsed int64 `json:"tokensUsed"`
	// TimeUsedSeconds is the time the thread's turns ran while the goal
	// was active.
	TimeUsedSeconds int64 `json:"timeUsedSeconds"`
	// CreatedAt is when it was set (Unix seconds).
	CreatedAt int64 `json:"createdAt"`
	// UpdatedAt is when it last changed (Unix seconds).
	UpdatedAt int64 `json:"updatedAt"`
}

// ThreadGoalMutationOrigin says who changed a goal.
type ThreadGoalMutationOrigin string

// ThreadGoalSetParams are the params of thread/goal/set: create the goal,
// or change the given fields of the existing one.
type ThreadGoalSetParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// Objective is the goal; required to create one, null keeps it.
	Objective *string `json:"objective,omitempty"`
	// Status changes the state, or null (a new goal is active).
	Status *ThreadGoalStatus `json:"status,omitempty"`
	// TokenBudget sets the budget, or null to keep it.
	TokenBudget *int64 `json:"tokenBudget,omitempty"`
	// Origin is accepted and ignored.
	Origin *ThreadGoalMutationOrigin `json:"origin,omitempty"`
}

// ThreadGoalSetResult is the result of thread/goal/set.
type ThreadGoalSetResult struct {
	// Goal is the goal as it now is.
	Goal ThreadGoal `json:"goal"`
}

// ThreadGoalGetParams are the params of thread/goal/get.
type ThreadGoalGetParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
}

// ThreadGoalGetResult is the result of thread/goal/get.
type ThreadGoalGetResult struct {
	// Goal is the thread's goal, or null.
	Goal *ThreadGoal `json:"goal"`
}

// ThreadGoalClearParams are the params of thread/goal/clear.
type ThreadGoalClearParams struct {
	// ThreadID is the thread; required.
	ThreadID string `json:"threadId"`
	// Origin is accepted and ignored.
	Origin *ThreadGoalMutationOrigin `json:"origin,omitempty"`
}

// ThreadGoalClearResult is the result of thread/goal/clear.
type ThreadGoalClearResult struct {
	// Cleared is false when the thread had no goal.
	Cleared bool `json:"cleared"`
}

// ThreadGoalUpdatedNotification is thread/goal/updated.
type ThreadGoalUpdatedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the turn that changed it, or null.
	TurnID *string `json:"turnId"`
	// Goal is the goal as it now is.
	Goal ThreadGoal `json:"goal"`
}

// ThreadGoalClearedNotification is thread/goal/cleared.
type ThreadGoalClearedNotification struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
}
