package turns

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/budget"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/store"
)

// turnBudget is a turn's view of the budgets (Config.Budgets): its limits,
// what it spent, and the last known period spending of its thread's
// principal. Turn goroutine only.
type turnBudget struct {
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

// newTurnBudget is the budget of a turn about to start on t; nil without
// budgets. t.mu must be held.
func (t *thread) newTurnBudgetLocked() *turnBudget {
	b := t.m.cfg.Budgets
	if b == nil {
		return nil
	}
	// Validated when the thread's config was set; a stored value this
	// daemon cannot read tightens nothing.
	own, _ := budget.ParseOverrides(t.meta.Config)
	return &turnBudget{
		b:         b,
		principal: principal.NameOf(deref(t.meta.Originator)),
		turn:      b.TurnLimits(own.Turn),
		thread:    b.ThreadLimits(own.Thread),
	}
}

// threadSpendLocked is what the thread spent over its life; t.mu must be
// held.
func (t *thread) threadSpendLocked() budget.Spend {
	s := budget.Spend{CostMicros: t.meta.BudgetCostMicros}
	if t.meta.TokenTotal != nil {
		s.Tokens = t.meta.TokenTotal.TotalTokens
	}
	return s
}

// chargeBudget counts a response's usage against the turn's, the
// thread's and the principal's budgets. The thread's cost joins its meta,
// committed with the usage (recordUsageAsync); the principal's period
// spending is added to in the store now, so that other daemons see it.
func (r *turnRun) chargeBudget(u model.Usage) error {
	tb := r.budget
	if tb == nil {
		return nil
	}
	s := budget.Spend{Tokens: u.TotalTokens, CostMicros: tb.b.Cost(r.at.settings.model, budget.Usage{
		Input: u.InputTokens, CachedInput: u.CachedInputTokens, Output: u.OutputTokens, Total: u.TotalTokens,
	})}
	tb.spent = tb.spent.Plus(s)
	r.t.mu.Lock()
	r.t.meta.BudgetCostMicros += s.CostMicros
	r.t.mu.Unlock()
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
func (r *turnRun) checkBudget() error {
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
	r.t.mu.Lock()
	threadSpent := r.t.threadSpendLocked()
	r.t.mu.Unlock()
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
	if err := r.commits.settle(); err != nil {
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
func (r *turnRun) askToContinue(e *budget.ExceededError) bool {
	turnID := r.at.id
	meta, _ := json.Marshal(map[string]string{"appserver_approval_kind": budgetApprovalKind, "scope": string(e.Scope)})
	res, release, err := r.Request(r.at.ctx, ClientRequest{
		Method: api.MethodMcpServerElicitationRequest,
		Params: api.McpServerElicitationRequestParams{
			ThreadID: r.t.id, TurnID: &turnID, ServerName: "appserver", Mode: "form",
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
		r.t.m.log.InfoContext(r.obs, "budget approval not answered", "thread", r.t.id, "turn", turnID, "err", err)
		return false
	}
	var ans api.McpServerElicitationRequestResult
	return json.Unmarshal(res, &ans) == nil && ans.Action == api.ElicitationAccept
}

// budgetStatus is what the budgets allow the thread and use, for
// thread/tokenUsage/updated; nil without budgets. Turn goroutine only.
func (r *turnRun) budgetStatus() *api.BudgetStatus {
	tb := r.budget
	if tb == nil {
		return nil
	}
	r.t.mu.Lock()
	threadSpent := r.t.threadSpendLocked()
	r.t.mu.Unlock()
	turn := budgetUse(tb.spent, tb.turn)
	return &api.BudgetStatus{Turn: &turn, Thread: budgetUse(threadSpent, tb.thread), Principal: periodUse(tb.principal, tb.period)}
}

// budgetUse renders one budget.
func budgetUse(spent budget.Spend, lim budget.Limits) api.BudgetUse {
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
func periodUse(name string, p budget.PeriodStatus) api.BudgetPeriodUse {
	return api.BudgetPeriodUse{BudgetUse: budgetUse(p.Spent, p.Limits), Principal: name, PeriodStart: p.Start.Unix(), PeriodEnd: p.End.Unix()}
}

// budgetTurnError is the turn error of a turn stopped at a limit.
func budgetTurnError(err error) (*api.TurnError, bool) {
	var e *budget.ExceededError
	if !errors.As(err, &e) {
		return nil, false
	}
	return &api.TurnError{Message: e.Error(), CodexErrorInfo: &api.CodexErrorInfo{Code: e.ErrorInfo()}}, true
}

// errNoBudgets refuses the budget methods of a daemon without budgets.
var errNoBudgets = apperr.New(apperr.NotFound, "no budgets are configured")

// ThreadBudget returns what the budgets allow a thread and what it used
// (GET /v1/threads/{id}/budget); the turn's budget is absent. The caller
// must see the thread.
func (m *Manager) ThreadBudget(ctx context.Context, c Caller, threadID string) (api.BudgetStatus, error) {
	b := m.cfg.Budgets
	if b == nil {
		return api.BudgetStatus{}, errNoBudgets
	}
	t, err := m.threadFor(ctx, threadID, "thread not found: %s")
	if err != nil {
		return api.BudgetStatus{}, err
	}
	defer t.unpin()
	t.mu.Lock()
	orig := t.meta.Originator
	own, _ := budget.ParseOverrides(t.meta.Config)
	spent := t.threadSpendLocked()
	t.mu.Unlock()
	if !c.Principal.SeesOriginator(orig) {
		return api.BudgetStatus{}, apperr.New(apperr.NotFound, "thread not found: %s", threadID)
	}
	name := principal.NameOf(deref(orig))
	period, err := b.Status(ctx, name)
	if err != nil {
		return api.BudgetStatus{}, err
	}
	return api.BudgetStatus{Thread: budgetUse(spent, b.ThreadLimits(own.Thread)), Principal: periodUse(name, period)}, nil
}

// PrincipalBudget returns the caller's budget in the current period (GET
// /v1/budget).
func (m *Manager) PrincipalBudget(ctx context.Context, c Caller) (api.BudgetPeriodUse, error) {
	b := m.cfg.Budgets
	if b == nil {
		return api.BudgetPeriodUse{}, errNoBudgets
	}
	period, err := b.Status(ctx, c.Principal.Name())
	if err != nil {
		return api.BudgetPeriodUse{}, err
	}
	return periodUse(c.Principal.Name(), period), nil
}

// SetThreadBudget sets a thread's own limits (PUT
// /v1/threads/{id}/budget), kept in its config as thread/start's config
// keys would be; they tighten the configured limits, never loosen them.
// The caller must see the thread; the next turn uses them.
func (m *Manager) SetThreadBudget(ctx context.Context, c Caller, threadID string, p api.HTTPBudgetLimits) (api.BudgetStatus, error) {
	if m.cfg.Budgets == nil {
		return api.BudgetStatus{}, errNoBudgets
	}
	set := map[string]json.RawMessage{}
	put := func(key string, v any) error {
		raw, err := json.Marshal(v)
		if err != nil {
			return apperr.New(apperr.Invalid, "Invalid request: %s: %v", key, err)
		}
		set[key] = raw
		return nil
	}
	for _, l := range []struct {
		lim            *api.HTTPBudgetLimit
		tokens, amount string
	}{{p.Turn, budget.KeyTurnTokens, budget.KeyTurnCost}, {p.Thread, budget.KeyThreadTokens, budget.KeyThreadCost}} {
		if l.lim == nil {
			continue
		}
		if l.lim.MaxTokens != nil {
			if err := put(l.tokens, *l.lim.MaxTokens); err != nil {
				return api.BudgetStatus{}, err
			}
		}
		if l.lim.MaxCost != nil {
			if err := put(l.amount, *l.lim.MaxCost); err != nil {
				return api.BudgetStatus{}, err
			}
		}
	}
	if _, err := budget.ParseOverrides(set); err != nil {
		return api.BudgetStatus{}, err
	}
	t, err := m.threadFor(ctx, threadID, "thread not found: %s")
	if err != nil {
		return api.BudgetStatus{}, err
	}
	defer t.unpin()
	if !c.Principal.SeesOriginator(t.originator()) {
		return api.BudgetStatus{}, apperr.New(apperr.NotFound, "thread not found: %s", threadID)
	}
	if len(set) > 0 {
		now := m.now()
		t.metaMu.Lock()
		t.mu.Lock()
		cfg := make(map[string]json.RawMessage, len(t.meta.Config)+len(set))
		for k, v := range t.meta.Config {
			cfg[k] = v
		}
		for k, v := range set {
			cfg[k] = v
		}
		t.meta.Config = cfg
		t.rec.UpdatedAt = now
		patch := store.ThreadPatch{ID: t.id, Meta: t.metaJSONLocked(), UpdatedAt: &now}
		t.mu.Unlock()
		err := t.write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{patch}})
		t.metaMu.Unlock()
		if err != nil {
			return api.BudgetStatus{}, err
		}
	}
	return m.ThreadBudget(ctx, c, threadID)
}
