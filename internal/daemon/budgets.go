package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/appserver/appserver/internal/budget"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/store"
)

// newBudgets builds the budgets of the [budgets] table (validated by the
// configuration) over the store, which keeps the principals' period
// spending for every daemon of the database. Without limits or prices
// it is nil: nothing is counted.
func newBudgets(cfg *config.Config, st store.Store, reg prometheus.Registerer) (*budget.Budgets, error) {
	b := cfg.Budgets
	none := config.BudgetLimits{}
	if b.Turn == none && b.Thread == none && b.Principal == none && len(b.Principals) == 0 && len(b.Prices) == 0 {
		return nil, nil
	}
	month, every, err := b.PeriodSpec()
	if err != nil {
		return nil, err
	}
	limits := func(l config.BudgetLimits) budget.Limits {
		return budget.Limits{Tokens: int64(l.MaxTokens), CostMicros: budget.MicrosOf(l.MaxCost)}
	}
	principals := make(map[string]budget.Limits, len(b.Principals))
	for name, l := range b.Principals {
		principals[name] = limits(l)
	}
	prices := make(map[string]budget.Price, len(b.Prices))
	for id, p := range b.Prices {
		cached := p.Input
		if p.CachedInput != nil {
			cached = *p.CachedInput
		}
		prices[id] = budget.Price{Input: p.Input, CachedInput: cached, Output: p.Output}
	}
	return budget.New(budget.Config{
		Turn: limits(b.Turn), Thread: limits(b.Thread), Principal: limits(b.Principal), Principals: principals,
		Period: budget.Period{Month: month, Every: every}, Ask: b.OnExceeded == config.BudgetAsk,
		Prices: prices, Ledger: st, Registerer: reg,
	})
}
