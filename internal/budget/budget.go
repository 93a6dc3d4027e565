package budget

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// Limits bound one scope; a zero field is no limit.
type Limits struct {
	// Tokens bounds the models' reported total tokens.
	Tokens int64
	// CostMicros bounds the cost, in millionths of the prices' currency.
	CostMicros int64
}

// IsZero reports whether l bounds nothing.
func (l Limits) IsZero() bool { return l.Tokens == 0 && l.CostMicros == 0 }

// Tighter returns, field by field, the smaller of l and o where either
// sets one.
func (l Limits) Tighter(o Limits) Limits {
	pick := func(a, b int64) int64 {
		switch {
		case a == 0:
			return b
		case b == 0:
			return a
		}
		return min(a, b)
	}
	return Limits{Tokens: pick(l.Tokens, o.Tokens), CostMicros: pick(l.CostMicros, o.CostMicros)}
}

// Spend is what was used: tokens and cost.
type Spend struct {
	Tokens     int64
	CostMicros int64
}

// Plus returns s with o added.
func (s Spend) Plus(o Spend) Spend {
	return Spend{Tokens: s.Tokens + o.Tokens, CostMicros: s.CostMicros + o.CostMicros}
}

// Usage is a model response's token usage as the model reports it.
type Usage struct {
	Input, CachedInput, Output, Total int64
}

// Price is a model's price per million tokens.
type Price struct {
	Input, CachedInput, Output float64
}

// CostMicros is the cost of u at p, in millionths of the currency: a
// price per million tokens times a token count is exactly that.
func (p Price) CostMicros(u Usage) int64 {
	cached := min(max(u.CachedInput, 0), max(u.Input, 0))
	uncached := max(u.Input, 0) - cached
	c := float64(uncached)*p.Input + float64(cached)*p.CachedInput + float64(max(u.Output, 0))*p.Output
	return int64(math.Round(c))
}

// Period is the length of a principal's budget period: calendar months,
// or a fixed length aligned on the Unix epoch (a day from midnight UTC).
type Period struct {
	// Month selects calendar months (UTC); otherwise Every is the length.
	Month bool
	// Every is the length; 0 means a day.
	Every time.Duration
}

// Bounds returns the start and end of the period holding t.
func (p Period) Bounds(t time.Time) (start, end time.Time) {
	t = t.UTC()
	if p.Month {
		start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	}
	every := p.Every
	if every <= 0 {
		every = 24 * time.Hour
	}
	start = time.UnixMicro(t.UnixMicro() - t.UnixMicro()%every.Microseconds()).UTC()
	return start, start.Add(every)
}

// Scope names what a limit bounds.
type Scope string

// The scopes.
const (
	ScopeTurn      Scope = "turn"
	ScopeThread    Scope = "thread"
	ScopePrincipal Scope = "principal"
)

// ExceededError is why a turn stops at a limit.
type ExceededError struct {
	// Scope is the budget spent.
	Scope Scope
	// Cost is set when the cost limit was reached, else the token limit.
	Cost bool
	// Limit and Used are tokens, or cost in millionths.
	Limit, Used int64
	// Declined is set when the client was asked to go on and did not
	// agree.
	Declined bool
}

// Error is the turn error's message.
func (e *ExceededError) Error() string {
	what := fmt.Sprintf("%s token limit %d reached (%d used)", e.Scope, e.Limit, e.Used)
	if e.Scope == ScopePrincipal {
		what = "period " + what
	}
	if e.Cost {
		what = fmt.Sprintf("%s cost limit %s reached (%s used)", e.Scope, Amount(e.Limit), Amount(e.Used))
		if e.Scope == ScopePrincipal {
			what = "period " + what
		}
	}
	if e.Declined {
		what += "; going on was declined"
	}
	return "budget exceeded: " + what
}

// ErrorInfo is the codexErrorInfo code of the turn error: a principal's
// period budget is a usage limit, a turn's or thread's a session budget.
func (e *ExceededError) ErrorInfo() string {
	if e.Scope == ScopePrincipal {
		return "usageLimitExceeded"
	}
	return "sessionBudgetExceeded"
}

// Amount renders a cost in millionths as a decimal amount.
func Amount(micros int64) string {
	s := fmt.Sprintf("%.6f", float64(micros)/1e6)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// Check returns the error of the first limit of lim that spent reaches,
// nil when none.
func Check(scope Scope, spent Spend, lim Limits) *ExceededError {
	switch {
	case lim.Tokens > 0 && spent.Tokens >= lim.Tokens:
		return &ExceededError{Scope: scope, Limit: lim.Tokens, Used: spent.Tokens}
	case lim.CostMicros > 0 && spent.CostMicros >= lim.CostMicros:
		return &ExceededError{Scope: scope, Cost: true, Limit: lim.CostMicros, Used: spent.CostMicros}
	}
	return nil
}

// Ledger keeps the principals' period spending: the store.
type Ledger interface {
	AddBudgetSpend(ctx context.Context, principal string, periodStart time.Time, add store.BudgetSpend) (store.BudgetSpend, error)
	GetBudgetSpend(ctx context.Context, principal string, periodStart time.Time) (store.BudgetSpend, error)
}

// Config configures the Budgets; every field's zero value is stated.
type Config struct {
	// Turn, Thread and Principal are the limits of each turn, each thread
	// and each principal per period; zero bounds nothing.
	Turn, Thread, Principal Limits
	// Principals replace Principal for the principals they name.
	Principals map[string]Limits
	// Period is the principals' budget period; zero is a day.
	Period Period
	// Ask makes a turn at a limit ask its client whether to go on
	// instead of failing.
	Ask bool
	// Prices are by model id; a model without one costs nothing.
	Prices map[string]Price
	// Ledger keeps the principals' spending; required.
	Ledger Ledger
	// Registerer takes the budgets' metrics; nil registers none.
	Registerer prometheus.Registerer
	Now        func() time.Time
}

// Budgets is the budgets of one daemon. It is safe for concurrent use.
type Budgets struct {
	cfg      Config
	spent    *prometheus.CounterVec
	cost     *prometheus.CounterVec
	exceeded *prometheus.CounterVec
	// remaining are what is left of a principal's period budget, as of
	// this daemon's last charge or read of the shared spending.
	remainingTokens, remainingCost *prometheus.GaugeVec
}

// New returns the Budgets of cfg.
func New(cfg Config) (*Budgets, error) {
	if cfg.Ledger == nil {
		return nil, apperr.New(apperr.Invalid, "budget: a ledger is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	f := promauto.With(reg)
	return &Budgets{
		cfg: cfg,
		spent: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_budget_spent_tokens_total",
			Help: "Tokens the models reported, counted against the budgets, by principal (\"\" for the operator).",
		}, []string{"principal"}),
		cost: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_budget_spent_cost_total",
			Help: "Cost of the models' responses at the configured prices, in the prices' currency, by principal (\"\" for the operator).",
		}, []string{"principal"}),
		exceeded: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_budget_exceeded_total",
			Help: "Turns that reached a budget limit, by scope (turn, thread, principal) and outcome (failed, asked).",
		}, []string{"scope", "outcome"}),
		remainingTokens: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "appserver_budget_remaining_tokens",
			Help: "Tokens left of a principal's period budget (shared by every daemon of the database), as of this daemon's last charge or read; only for principals with a token limit.",
		}, []string{"principal"}),
		remainingCost: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "appserver_budget_remaining_cost",
			Help: "Cost left of a principal's period budget (shared by every daemon of the database), in the prices' currency, as of this daemon's last charge or read; only for principals with a cost limit.",
		}, []string{"principal"}),
	}, nil
}

// observe sets the remaining gauges of a principal from its period's
// status.
func (b *Budgets) observe(principal string, st PeriodStatus) {
	if st.Limits.Tokens > 0 {
		b.remainingTokens.WithLabelValues(principal).Set(float64(max(st.Limits.Tokens-st.Spent.Tokens, 0)))
	}
	if st.Limits.CostMicros > 0 {
		b.remainingCost.WithLabelValues(principal).Set(float64(max(st.Limits.CostMicros-st.Spent.CostMicros, 0)) / 1e6)
	}
}

// Ask reports whether a turn at a limit asks its client to go on.
func (b *Budgets) Ask() bool { return b.cfg.Ask }

// Cost is the cost of a response of model with usage u.
func (b *Budgets) Cost(model string, u Usage) int64 {
	return b.cfg.Prices[model].CostMicros(u)
}

// TurnLimits are the limits of a turn of a thread whose config tightens
// them with own.
func (b *Budgets) TurnLimits(own Limits) Limits { return b.cfg.Turn.Tighter(own) }

// ThreadLimits are the limits of a thread whose config tightens them with
// own.
func (b *Budgets) ThreadLimits(own Limits) Limits { return b.cfg.Thread.Tighter(own) }

// PrincipalLimits are the period limits of a principal; the operator
// ("") has none.
func (b *Budgets) PrincipalLimits(principal string) Limits {
	if principal == "" {
		return Limits{}
	}
	if l, ok := b.cfg.Principals[principal]; ok {
		return l
	}
	return b.cfg.Principal
}

// PeriodStatus is a principal's budget in the current period.
type PeriodStatus struct {
	Start, End time.Time
	Spent      Spend
	Limits     Limits
}

// Charge adds s to principal's spending in the current period and returns
// the period's status after it.
func (b *Budgets) Charge(ctx context.Context, principal string, s Spend) (PeriodStatus, error) {
	start, end := b.cfg.Period.Bounds(b.cfg.Now())
	sum, err := b.cfg.Ledger.AddBudgetSpend(ctx, principal, start, store.BudgetSpend{Tokens: s.Tokens, CostMicros: s.CostMicros})
	if err != nil {
		return PeriodStatus{}, fmt.Errorf("charge the budget of %q: %w", principal, err)
	}
	b.spent.WithLabelValues(principal).Add(float64(s.Tokens))
	b.cost.WithLabelValues(principal).Add(float64(s.CostMicros) / 1e6)
	st := PeriodStatus{Start: start, End: end, Spent: Spend(sum), Limits: b.PrincipalLimits(principal)}
	b.observe(principal, st)
	return st, nil
}

// Status returns principal's budget in the current period.
func (b *Budgets) Status(ctx context.Context, principal string) (PeriodStatus, error) {
	start, end := b.cfg.Period.Bounds(b.cfg.Now())
	sum, err := b.cfg.Ledger.GetBudgetSpend(ctx, principal, start)
	if err != nil {
		return PeriodStatus{}, fmt.Errorf("read the budget of %q: %w", principal, err)
	}
	st := PeriodStatus{Start: start, End: end, Spent: Spend(sum), Limits: b.PrincipalLimits(principal)}
	b.observe(principal, st)
	return st, nil
}

// Exceeded counts a turn that reached a limit; asked says whether its
// client was asked to go on.
func (b *Budgets) Exceeded(e *ExceededError, asked bool) {
	outcome := "failed"
	if asked {
		outcome = "asked"
	}
	b.exceeded.WithLabelValues(string(e.Scope), outcome).Inc()
}

// The keys of a thread's config (thread/start's config, flattened) that
// tighten its limits.
const (
	KeyTurnTokens   = "budgets.turn.max_tokens"
	KeyTurnCost     = "budgets.turn.max_cost"
	KeyThreadTokens = "budgets.thread.max_tokens"
	KeyThreadCost   = "budgets.thread.max_cost"
)

// Overrides are the limits a thread's own config sets.
type Overrides struct {
	Turn, Thread Limits
}

// ParseOverrides reads the budget keys of a thread's flattened config; a
// key under "budgets." that is not one of them, or a value that is not a
// non-negative number, is Invalid.
func ParseOverrides(cfg map[string]json.RawMessage) (Overrides, error) {
	var o Overrides
	for k, v := range cfg {
		if !strings.HasPrefix(k, "budgets.") {
			continue
		}
		var n float64
		if err := json.Unmarshal(v, &n); err != nil || n < 0 || math.IsInf(n, 0) || n > math.MaxInt64/1e6 {
			return Overrides{}, apperr.New(apperr.Invalid, "Invalid request: config.%s must be a number not below 0", k)
		}
		switch k {
		case KeyTurnTokens:
			o.Turn.Tokens = int64(n)
		case KeyTurnCost:
			o.Turn.CostMicros = MicrosOf(n)
		case KeyThreadTokens:
			o.Thread.Tokens = int64(n)
		case KeyThreadCost:
			o.Thread.CostMicros = MicrosOf(n)
		default:
			return Overrides{}, apperr.New(apperr.Invalid, "Invalid request: config.%s is not a budget a thread may set (%s, %s, %s, %s)", k, KeyTurnTokens, KeyTurnCost, KeyThreadTokens, KeyThreadCost)
		}
	}
	return o, nil
}

// MicrosOf converts an amount to millionths.
func MicrosOf(amount float64) int64 { return int64(math.Round(amount * 1e6)) }
