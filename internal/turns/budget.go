package turns

import (
	"context"
	"encoding/json"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/budget"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/loop"
)

// newTurnBudgetLocked is the budget of a turn about to start on t; nil
// without budgets. t.mu must be held.
func (t *thread) newTurnBudgetLocked() *loop.Budget {
	b := t.m.cfg.Budgets
	if b == nil {
		return nil
	}
	// Validated when the thread's config was set; a stored value this
	// daemon cannot read tightens nothing.
	own, _ := budget.ParseOverrides(t.meta.Config)
	return loop.NewBudget(b, principal.NameOf(deref(t.meta.Originator)), b.TurnLimits(own.Turn), b.ThreadLimits(own.Thread))
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
	return api.BudgetStatus{Thread: loop.BudgetUse(spent, b.ThreadLimits(own.Thread)), Principal: loop.PeriodUse(name, period)}, nil
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
	return loop.PeriodUse(c.Principal.Name(), period), nil
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
