package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A [budgets] table is read whole, and a bad one is refused with the key
// and what is wrong with it.
func TestBudgets(t *testing.T) {
	file := writeConfig(t, `
[budgets]
period = "month"
on_exceeded = "ask"
turn = { max_tokens = 1000 }
thread = { max_cost = 2.5 }
principal = { max_tokens = 100000, max_cost = 10 }
principals.alice = { max_cost = 1 }
prices."gpt-5" = { input = 1.25, cached_input = 0.125, output = 10 }
`)
	cfg, _ := mustLoad(t, Sources{File: file})
	b := cfg.Budgets
	require.Equal(t, BudgetAsk, b.OnExceeded)
	require.Equal(t, BudgetLimits{MaxTokens: 1000}, b.Turn)
	require.Equal(t, BudgetLimits{MaxCost: 2.5}, b.Thread)
	require.Equal(t, BudgetLimits{MaxTokens: 100000, MaxCost: 10}, b.Principal)
	require.Equal(t, map[string]BudgetLimits{"alice": {MaxCost: 1}}, b.Principals)
	require.Equal(t, 1.25, b.Prices["gpt-5"].Input)
	require.Equal(t, 0.125, *b.Prices["gpt-5"].CachedInput)
	month, _, err := b.PeriodSpec()
	require.NoError(t, err)
	require.True(t, month)

	six, _ := mustLoad(t, Sources{Overrides: []string{`budgets.period="6h"`}})
	_, every, err := six.Budgets.PeriodSpec()
	require.NoError(t, err)
	require.Equal(t, 6*time.Hour, every)

	for _, tt := range []struct{ override, want string }{
		{`budgets.period="week"`, `-c budgets.period="week": expected "day", "month" or a duration such as "6h", got "week"`},
		{`budgets.period="10s"`, `-c budgets.period="10s": a period must be at least a minute, got 10s`},
		{`budgets.on_exceeded="warn"`, `-c budgets.on_exceeded="warn": expected "fail" or "ask", got "warn"`},
		{`budgets.turn.max_tokens=-1`, `-c budgets.turn.max_tokens=-1: must not be negative, got -1`},
		{`budgets.principals.bob.max_cost=-0.5`, `-c budgets.principals.bob.max_cost=-0.5: must be a finite amount not below 0, got -0.5`},
		{`budgets.prices.m.output=-3`, `-c budgets.prices.m.output=-3: a price per million tokens must be finite and not below 0, got -3`},
		{`budgets.turn.max_tokens="lots"`, ``},
	} {
		t.Run(tt.override, func(t *testing.T) {
			got := loadError(t, Sources{Overrides: []string{tt.override}})
			if tt.want != "" {
				require.Equal(t, tt.want, got)
			}
		})
	}
}
