package budget_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/budget"
	"github.com/appserver/appserver/internal/store/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A response's cost is each kind of token at its price per million:
// cached input at its own price, the rest of the input at the input price.
func TestPricesComputeCost(t *testing.T) {
	p := budget.Price{Input: 1.25, CachedInput: 0.125, Output: 10}
	// 1000 uncached × 1.25 + 4000 cached × 0.125 + 2000 × 10 = 21 750 µ.
	require.Equal(t, int64(21750), p.CostMicros(budget.Usage{Input: 5000, CachedInput: 4000, Output: 2000, Total: 7000}))
	require.Equal(t, "0.02175", budget.Amount(21750))
	require.Equal(t, int64(0), budget.Price{}.CostMicros(budget.Usage{Input: 5000, Output: 10}))
	// Cached tokens never exceed the input they are part of.
	require.Equal(t, int64(125), budget.Price{Input: 1, CachedInput: 0.125}.CostMicros(budget.Usage{Input: 1000, CachedInput: 5000}))
}

func TestCheck(t *testing.T) {
	lim := budget.Limits{Tokens: 100, CostMicros: 2_500_000}
	require.Nil(t, budget.Check(budget.ScopeTurn, budget.Spend{Tokens: 99, CostMicros: 2_499_999}, lim))
	e := budget.Check(budget.ScopeTurn, budget.Spend{Tokens: 120}, lim)
	require.EqualError(t, e, "budget exceeded: turn token limit 100 reached (120 used)")
	require.Equal(t, "sessionBudgetExceeded", e.ErrorInfo())
	e = budget.Check(budget.ScopePrincipal, budget.Spend{Tokens: 1, CostMicros: 2_600_000}, lim)
	require.EqualError(t, e, "budget exceeded: period principal cost limit 2.5 reached (2.6 used)")
	require.Equal(t, "usageLimitExceeded", e.ErrorInfo())
	require.Nil(t, budget.Check(budget.ScopeThread, budget.Spend{Tokens: 1 << 40}, budget.Limits{}), "zero limits bound nothing")
}

func TestTighter(t *testing.T) {
	cfg := budget.Limits{Tokens: 1000}
	require.Equal(t, budget.Limits{Tokens: 500, CostMicros: 7}, cfg.Tighter(budget.Limits{Tokens: 500, CostMicros: 7}))
	require.Equal(t, budget.Limits{Tokens: 1000}, cfg.Tighter(budget.Limits{Tokens: 5000}), "a thread never loosens a limit")
}

func TestPeriodBounds(t *testing.T) {
	at := time.Date(2026, 12, 2, 7, 30, 0, 0, time.UTC)
	s, e := budget.Period{}.Bounds(at)
	require.Equal(t, time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), s)
	require.Equal(t, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), e)
	s, e = budget.Period{Month: true}.Bounds(at)
	require.Equal(t, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), s)
	require.Equal(t, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), e)
	s, e = budget.Period{Every: 6 * time.Hour}.Bounds(at)
	require.Equal(t, time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC), s)
	require.Equal(t, time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), e)
}

func TestParseOverrides(t *testing.T) {
	o, err := budget.ParseOverrides(map[string]json.RawMessage{
		"budgets.turn.max_tokens": json.RawMessage(`5000`), "budgets.thread.max_cost": json.RawMessage(`1.5`), "model": json.RawMessage(`"x"`),
	})
	require.NoError(t, err)
	require.Equal(t, budget.Overrides{Turn: budget.Limits{Tokens: 5000}, Thread: budget.Limits{CostMicros: 1_500_000}}, o)
	for _, bad := range []map[string]json.RawMessage{
		{"budgets.turn.max_tokens": json.RawMessage(`-1`)},
		{"budgets.turn.max_tokens": json.RawMessage(`"many"`)},
		{"budgets.principal.max_tokens": json.RawMessage(`1`)},
	} {
		_, err := budget.ParseOverrides(bad)
		require.True(t, apperr.Is(err, apperr.Invalid), "%v: %v", bad, err)
	}
}

// The remaining gauges follow a principal's shared spending: a daemon's
// charge sets them from the total every daemon spent, and a read brings
// another daemon's up to date.
func TestRemainingGauges(t *testing.T) {
	ledger := memory.New(memory.Config{})
	t.Cleanup(func() { ledger.Close() })
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	cfg := budget.Config{Ledger: ledger, Principal: budget.Limits{Tokens: 1000, CostMicros: 2_000_000}}
	cfg.Registerer = regA
	a, err := budget.New(cfg)
	require.NoError(t, err)
	cfg.Registerer = regB
	b, err := budget.New(cfg)
	require.NoError(t, err)
	gauge := func(reg *prometheus.Registry, name string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.GetMetric() {
					if m.GetLabel()[0].GetValue() == "alice" {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
		t.Fatalf("no %s for alice", name)
		return 0
	}
	_, err = a.Charge(t.Context(), "alice", budget.Spend{Tokens: 300, CostMicros: 500_000})
	require.NoError(t, err)
	require.Equal(t, 700.0, gauge(regA, "appserver_budget_remaining_tokens"))
	require.Equal(t, 1.5, gauge(regA, "appserver_budget_remaining_cost"))
	_, err = b.Charge(t.Context(), "alice", budget.Spend{Tokens: 200, CostMicros: 2_000_000})
	require.NoError(t, err)
	require.Equal(t, 500.0, gauge(regB, "appserver_budget_remaining_tokens"))
	require.Equal(t, 0.0, gauge(regB, "appserver_budget_remaining_cost"), "an overspent budget has nothing left, not less")
	_, err = a.Status(t.Context(), "alice")
	require.NoError(t, err)
	require.Equal(t, 500.0, gauge(regA, "appserver_budget_remaining_tokens"))
}
