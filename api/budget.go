package api

// BudgetStatus is what the budgets that bound a thread allow and what is
// used of them: appserver's extension, the `budget` field of
// thread/tokenUsage/updated and the body of GET /v1/threads/{id}/budget.
type BudgetStatus struct {
	// Turn is the running turn's budget, absent between turns.
	Turn *BudgetUse `json:"turn,omitempty"`
	// Thread is the thread's budget over its life.
	Thread BudgetUse `json:"thread"`
	// Principal is the budget of the thread's principal in the current
	// period.
	Principal BudgetPeriodUse `json:"principal"`
}

// BudgetUse is one budget: its limits (null for none), what is used and
// what is left (null without a limit). Costs are in the configured
// prices' currency.
type BudgetUse struct {
	UsedTokens      int64    `json:"usedTokens"`
	UsedCost        float64  `json:"usedCost"`
	MaxTokens       *int64   `json:"maxTokens"`
	MaxCost         *float64 `json:"maxCost"`
	RemainingTokens *int64   `json:"remainingTokens"`
	RemainingCost   *float64 `json:"remainingCost"`
}

// BudgetPeriodUse is a principal's budget in the current period (GET
// /v1/budget).
type BudgetPeriodUse struct {
	BudgetUse
	// Principal names it, "" for the operator.
	Principal string `json:"principal"`
	// PeriodStart and PeriodEnd bound the period (Unix seconds).
	PeriodStart int64 `json:"periodStart"`
	PeriodEnd   int64 `json:"periodEnd"`
}

// HTTPBudgetLimits are a thread's own limits (PUT
// /v1/threads/{id}/budget): they tighten the configured ones, never
// loosen them; null or absent leaves a limit as it is.
type HTTPBudgetLimits struct {
	Turn   *HTTPBudgetLimit `json:"turn,omitempty"`
	Thread *HTTPBudgetLimit `json:"thread,omitempty"`
}

// HTTPBudgetLimit is the limits of one scope.
type HTTPBudgetLimit struct {
	MaxTokens *int64   `json:"maxTokens,omitempty"`
	MaxCost   *float64 `json:"maxCost,omitempty"`
}
