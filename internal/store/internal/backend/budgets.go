package backend

import (
	"context"
	"time"

	"github.com/appserver/appserver/internal/store"
)

// Budgets implements the budget spending of store.Store (migration 00010)
// once for both SQL backends: one row per principal and period, added to
// by a single upsert so that concurrent daemons never lose an addition.
type Budgets struct {
	db      ConsumerDB
	d       Dialect
	observe store.ObserveFunc
	usable  func() error

	add, get string
}

// NewBudgets returns the budget spending of a store in dialect d over db;
// observe and usable are as NewReader's.
func NewBudgets(d Dialect, db ConsumerDB, observe store.ObserveFunc, usable func() error) Budgets {
	p := d.Param
	return Budgets{
		db: db, d: d, observe: observe, usable: usable,
		add: "INSERT INTO budget_spend (principal, period_start, tokens, cost_micros) VALUES (" + p(1) + ", " + p(2) + ", " + p(3) + ", " + p(4) + ")" +
			" ON CONFLICT (principal, period_start) DO UPDATE SET tokens = budget_spend.tokens + excluded.tokens," +
			" cost_micros = budget_spend.cost_micros + excluded.cost_micros RETURNING tokens, cost_micros",
		get: "SELECT tokens, cost_micros FROM budget_spend WHERE principal = " + p(1) + " AND period_start = " + p(2),
	}
}

// AddBudgetSpend implements store.Store.AddBudgetSpend.
func (b Budgets) AddBudgetSpend(ctx context.Context, principal string, periodStart time.Time, add store.BudgetSpend) (out store.BudgetSpend, err error) {
	defer func(start time.Time) { Observe(b.observe, store.OpBudgetSpend, start, err) }(time.Now())
	if err := b.usable(); err != nil {
		return out, err
	}
	if err := b.db.QueryRow(ctx, b.add, principal, b.d.TimeArg(Time(periodStart)), add.Tokens, add.CostMicros).Scan(&out.Tokens, &out.CostMicros); err != nil {
		return store.BudgetSpend{}, b.db.StorageErr(err)
	}
	return out, nil
}

// GetBudgetSpend implements store.Store.GetBudgetSpend.
func (b Budgets) GetBudgetSpend(ctx context.Context, principal string, periodStart time.Time) (out store.BudgetSpend, err error) {
	defer func(start time.Time) { Observe(b.observe, store.OpBudgetSpend, start, err) }(time.Now())
	if err := b.usable(); err != nil {
		return out, err
	}
	err = b.db.QueryRow(ctx, b.get, principal, b.d.TimeArg(Time(periodStart))).Scan(&out.Tokens, &out.CostMicros)
	switch {
	case b.db.NoRows(err):
		return store.BudgetSpend{}, nil
	case err != nil:
		return store.BudgetSpend{}, b.db.StorageErr(err)
	}
	return out, nil
}
