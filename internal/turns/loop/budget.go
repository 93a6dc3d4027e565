package loop

import (
	"encoding/json"
	"errors"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/budget"
	"github.com/appserver/appserver/internal/model"
)

// Budget is a turn's view of the budgets: its limits,
// what it spent, and the last known period spending of its thread's
// principal. Turn goroutine only.
type Budget struct {
	b         *budget.Budgets
	principal string
	turn      budget.Limits
	thread    budget.Limits
	spent     budget.Spend
	period    budget.PeriodStatus
	loaded    bool // period has been read or charged
	// approved is set once the client agreed to go on past a limit: the
	// turn is not stopped again.
	approved bool
}

// chargeBudget counts a response's usage against the turn's, the
// thread's and the principal's budgets. The thread's cost joins its meta,
// committed with the usage (recordUsageAsync); the principal's period
// spending is added to in the store now, so that other daemons see it.
func (r *Run) chargeBudget(u model.Usage) error {
	tb := r.budget
	if tb == nil {
		return nil
	}
	s := budget.Spend{Tokens: u.TotalTokens, CostMicros: tb.b.Cost(r.at.Settings.Model, budget.Usage{
		Input: u.InputTokens, CachedInput: u.CachedInputTokens, Output: u.OutputTokens, Total: u.TotalTokens,
	})}
	tb.spent = tb.spent.Plus(s)
	r.t.AddCost(s.CostMicros)
	period, err := tb.b.Charge(r.persistCtx(), tb.principal, s)
	if err != nil {
		return err
	}
	tb.period, tb.loaded = period, true
	return nil
}

// checkBudget is called before each model request: once a budget is
// spent, the turn makes no further request. It fails with a
// *budget.ExceededError, or with Config.Budgets' Ask asks the thread's
// client whether to go on.
func (r *Run) checkBudget() error {
	tb := r.budget
	if tb == nil || tb.approved {
		return nil
	}
	if !tb.loaded {
		period, err := tb.b.Status(r.persistCtx(), tb.principal)
		if err != nil {
			return err
		}
		tb.period, tb.loaded = period, true
	}
	threadSpent := r.t.Spent()
	e := budget.Check(budget.ScopeTurn, tb.spent, tb.turn)
	if e == nil {
		e = budget.Check(budget.ScopeThread, threadSpent, tb.thread)
	}
	if e == nil {
		e = budget.Check(budget.ScopePrincipal, tb.period.Spent, tb.period.Limits)
	}
	if e == nil {
		return nil
	}
	tb.b.Exceeded(e, tb.b.Ask())
	if !tb.b.Ask() {
		return e
	}
	// Asking announces the waiting flag: the round's commit goes first.
	if err := r.settle(); err != nil {
		return err
	}
	if r.askToContinue(e) {
		tb.approved = true
		return nil
	}
	e.Declined = true
	return e
}

// budgetApprovalKind marks the elicitation that asks to go on past a
// budget (its _meta's appserver_approval_kind).
const budgetApprovalKind = "budget"

// askToContinue asks the thread's clients, as an approval, whether the
// turn may go on past e; only an accept says yes.
func (r *Run) askToContinue(e *budget.ExceededError) bool {
	turnID := r.at.ID
	meta, _ := json.Marshal(map[string]string{"appserver_approval_kind": budgetApprovalKind, "scope": string(e.Scope)})
	res, release, err := r.Request(r.at.Ctx, ClientRequest{
		Method: api.MethodMcpServerElicitationRequest,
		Params: api.McpServerElicitationRequestParams{
			ThreadID: r.threadID, TurnID: &turnID, ServerName: "appserver", Mode: "form",
			Message:         e.Error() + ". Continue this turn?",
			RequestedSchema: json.RawMessage(`{"type":"object","properties":{}}`),
			Meta:            meta,
		},
		Flag: api.FlagWaitingOnApproval,
	})
	if release != nil {
		release()
	}
	if err != nil {
		r.d.Logger.InfoContext(r.obs, "budget approval not answered", "thread", r.threadID, "turn", turnID, "err", err)
		return false
	}
	var ans api.McpServerElicitationRequestResult
	return json.Unmarshal(res, &ans) == nil && ans.Action == api.ElicitationAccept
}

// NewBudget is the budget of a turn of principal's thread: b's limits,
// the turn's and the thread's (tightened by the thread's own).
func NewBudget(b *budget.Budgets, principal string, turn, thread budget.Limits) *Budget {
	return &Budget{b: b, principal: principal, turn: turn, thread: thread}
}

// budgetStatus is what the budgets allow the thread and use, for
// thread/tokenUsage/updated; nil without budgets. Turn goroutine only.
func (r *Run) budgetStatus() *api.BudgetStatus {
	tb := r.budget
	if tb == nil {
		return nil
	}
	threadSpent := r.t.Spent()
	turn := BudgetUse(tb.spent, tb.turn)
	return &api.BudgetStatus{Turn: &turn, Thread: BudgetUse(threadSpent, tb.thread), Principal: PeriodUse(tb.principal, tb.period)}
}

// budgetUse renders one budget.
func BudgetUse(spent budget.Spend, lim budget.Limits) api.BudgetUse {
	u := api.BudgetUse{UsedTokens: spent.Tokens, UsedCost: float64(spent.CostMicros) / 1e6}
	if lim.Tokens > 0 {
		maxTokens, left := lim.Tokens, max(lim.Tokens-spent.Tokens, 0)
		u.MaxTokens, u.RemainingTokens = &maxTokens, &left
	}
	if lim.CostMicros > 0 {
		maxCost, left := float64(lim.CostMicros)/1e6, float64(max(lim.CostMicros-spent.CostMicros, 0))/1e6
		u.MaxCost, u.RemainingCost = &maxCost, &left
	}
	return u
}

// periodUse renders a principal's period budget.
func PeriodUse(name string, p budget.PeriodStatus) api.BudgetPeriodUse {
	return api.BudgetPeriodUse{BudgetUse: BudgetUse(p.Spent, p.Limits), Principal: name, PeriodStart: p.Start.Unix(), PeriodEnd: p.End.Unix()}
}

// budgetTurnError is the turn error of a turn stopped at a limit.
func budgetTurnError(err error) (*api.TurnError, bool) {
	var e *budget.ExceededError
	if !errors.As(err, &e) {
		return nil, false
	}
	return &api.TurnError{Message: e.Error(), CodexErrorInfo: &api.CodexErrorInfo{Code: e.ErrorInfo()}}, true
}
