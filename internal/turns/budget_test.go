package turns_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/budget"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/memory"
	"github.com/appserver/appserver/internal/store/pgtest"
	"github.com/appserver/appserver/internal/store/postgres"
	"github.com/appserver/appserver/internal/turns"
)

// toolRounds is a script of n responses that each call the noop tool and
// report 600 tokens (500 in, 100 out), then a final answer.
func toolRounds(n int) string {
	step := `{"tool_calls":[{"name":"noop","arguments":{}}],"usage":{"input_tokens":500,"output_tokens":100,"total_tokens":600}}`
	steps := make([]string, 0, n+1)
	for range n {
		steps = append(steps, step)
	}
	steps = append(steps, `{"text":"done","usage":{"input_tokens":500,"output_tokens":100,"total_tokens":600}}`)
	return `{"steps":[` + strings.Join(steps, ",") + `]}`
}

// budgetNotes records every notification (as noteLog) and the budget of
// every thread/tokenUsage/updated.
type budgetNotes struct {
	*noteLog
	mu     sync.Mutex
	usages []*api.BudgetStatus
}

func (n *budgetNotes) record(method string, params any) {
	if u, ok := params.(api.ThreadTokenUsageUpdatedNotification); ok {
		n.mu.Lock()
		n.usages = append(n.usages, u.Budget)
		n.mu.Unlock()
	}
}

func (n *budgetNotes) Broadcast(method string, params any) {
	n.record(method, params)
	n.noteLog.Broadcast(method, params)
}

func (n *budgetNotes) Send(to []turns.ConnID, method string, params any) {
	n.record(method, params)
	n.noteLog.Send(to, method, params)
}

func (n *budgetNotes) lastBudget(t *testing.T) *api.BudgetStatus {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	require.NotEmpty(t, n.usages, "no thread/tokenUsage/updated")
	return n.usages[len(n.usages)-1]
}

// answerer answers every server request with action and keeps them.
type answerer struct {
	action api.McpServerElicitationAction
	mu     sync.Mutex
	got    []turns.ServerRequest
}

func (a *answerer) Request(_ context.Context, req turns.ServerRequest) (json.RawMessage, api.RequestID, bool, error) {
	a.mu.Lock()
	a.got = append(a.got, req)
	a.mu.Unlock()
	res, _ := json.Marshal(api.McpServerElicitationRequestResult{Action: a.action})
	return res, api.RequestID{}, false, nil
}

// budgetManagerNotes is a manager over st and client with budgets cfg
// (its Ledger st unless set), answering server requests with ask when
// set, and what it announces.
func budgetManagerNotes(t *testing.T, st store.Store, client model.Client, cfg budget.Config, ask *answerer) (*turns.Manager, *budgetNotes) {
	t.Helper()
	if cfg.Ledger == nil {
		cfg.Ledger = st
	}
	b, err := budget.New(cfg)
	require.NoError(t, err)
	notes := &budgetNotes{noteLog: &noteLog{ch: make(chan string, 4096)}}
	sink := sinkFor(notes)
	if ask != nil {
		sink = sink.asking(ask)
	}
	m, err := turns.New(turns.Config{
		Store: st, Sink: sink, Ephemeral: memory.New(memory.Config{}), Models: oneProvider{client}, Budgets: b,
		Tools: func(turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			return noArgTools(false, map[string]registry.Handler{"noop": noopTool{}})
		},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	return m, notes
}

// runTurn starts a thread for who (with config) unless thread is set,
// runs one turn on it and returns the thread and the ended turn.
func runTurn(t *testing.T, m *turns.Manager, notes *budgetNotes, who principal.Principal, thread string, config map[string]json.RawMessage) (string, api.Turn) {
	t.Helper()
	ctx := context.Background()
	caller := turns.Caller{Conn: 1, Principal: who, ClientName: who.ClientName("test")}
	if thread == "" {
		th, after, err := m.StartThread(ctx, caller, api.ThreadStartParams{Config: config})
		require.NoError(t, err)
		after()
		thread = th.Thread.ID
	}
	_, after, err := m.StartTurn(ctx, caller, api.TurnStartParams{ThreadID: thread, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "go"}}})
	require.NoError(t, err)
	after()
	notes.wait(t, "turn/completed")
	return thread, notes.lastEnded(t)
}

// At its token limit a turn makes no further model request and ends
// failed, with the documented message and codexErrorInfo; what is left is
// in thread/tokenUsage/updated.
func TestTurnStopsAtItsBudget(t *testing.T) {
	st, fake, client := storeAndModel(t, toolRounds(5))
	reg := prometheus.NewRegistry()
	m, notes := budgetManagerNotes(t, st, client, budget.Config{Turn: budget.Limits{Tokens: 1000}, Registerer: reg}, nil)
	_, turn := runTurn(t, m, notes, principal.Operator(), "", nil)

	require.Equal(t, api.TurnFailed, turn.Status)
	require.NotNil(t, turn.Error)
	require.Equal(t, "budget exceeded: turn token limit 1000 reached (1200 used)", turn.Error.Message)
	require.Equal(t, api.ErrSessionBudgetExceeded, turn.Error.CodexErrorInfo.Code)
	require.Len(t, fake.Requests(), 2, "no request after the limit was reached")

	b := notes.lastBudget(t)
	require.NotNil(t, b)
	require.Equal(t, int64(1200), b.Turn.UsedTokens)
	require.Equal(t, int64(0), *b.Turn.RemainingTokens)
	require.Equal(t, int64(1000), *b.Turn.MaxTokens)
	require.Nil(t, b.Thread.MaxTokens, "no thread limit")
	require.Equal(t, 1.0, metricValue(t, reg, "appserver_budget_exceeded_total", map[string]string{"scope": "turn", "outcome": "failed"}))
	require.Equal(t, 1200.0, metricValue(t, reg, "appserver_budget_spent_tokens_total", map[string]string{"principal": ""}))
}

// A thread's config tightens the configured limits, never loosens them;
// a bad value is refused at thread/start.
func TestThreadConfigTightensItsBudget(t *testing.T) {
	st, fake, client := storeAndModel(t, toolRounds(5))
	m, notes := budgetManagerNotes(t, st, client, budget.Config{Turn: budget.Limits{Tokens: 100000}}, nil)
	_, turn := runTurn(t, m, notes, principal.Operator(), "", map[string]json.RawMessage{"budgets": json.RawMessage(`{"turn":{"max_tokens":500}}`)})
	require.Equal(t, api.TurnFailed, turn.Status)
	require.Equal(t, "budget exceeded: turn token limit 500 reached (600 used)", turn.Error.Message)
	require.Len(t, fake.Requests(), 1)

	_, _, err := m.StartThread(context.Background(), turns.Caller{Conn: 1}, api.ThreadStartParams{Config: map[string]json.RawMessage{"budgets.turn.max_tokens": json.RawMessage(`-5`)}})
	require.True(t, apperr.Is(err, apperr.Invalid), "%v", err)
	require.ErrorContains(t, err, "config.budgets.turn.max_tokens must be a number not below 0")
}

// With on_exceeded = "ask", the client is asked at the limit: accept lets
// the turn go on to its end, decline ends it failed.
func TestBudgetAsksToContinue(t *testing.T) {
	for _, tt := range []struct {
		action   api.McpServerElicitationAction
		status   api.TurnStatus
		requests int
	}{
		{api.ElicitationAccept, api.TurnCompleted, 4},
		{api.ElicitationDecline, api.TurnFailed, 2},
	} {
		t.Run(string(tt.action), func(t *testing.T) {
			st, fake, client := storeAndModel(t, toolRounds(3))
			ask := &answerer{action: tt.action}
			m, notes := budgetManagerNotes(t, st, client, budget.Config{Turn: budget.Limits{Tokens: 1000}, Ask: true}, ask)
			_, turn := runTurn(t, m, notes, principal.Operator(), "", nil)
			require.Equal(t, tt.status, turn.Status, "%+v", turn.Error)
			require.Len(t, fake.Requests(), tt.requests)
			ask.mu.Lock()
			require.Len(t, ask.got, 1, "asked once")
			req := ask.got[0]
			ask.mu.Unlock()
			require.Equal(t, api.MethodMcpServerElicitationRequest, req.Method)
			p := req.Params.(api.McpServerElicitationRequestParams)
			require.Equal(t, "appserver", p.ServerName)
			require.Contains(t, p.Message, "budget exceeded: turn token limit 1000 reached (1200 used)")
			require.JSONEq(t, `{"appserver_approval_kind":"budget","scope":"turn"}`, string(p.Meta))
			if tt.status == api.TurnFailed {
				require.Equal(t, "budget exceeded: turn token limit 1000 reached (1200 used); going on was declined", turn.Error.Message)
			}
		})
	}
}

// Costs follow the configured prices and count against a cost limit.
func TestBudgetCostLimit(t *testing.T) {
	st, fake, client := storeAndModel(t, toolRounds(5))
	// 500 in × 2 + 100 out × 10 = 2000 µ per response.
	m, notes := budgetManagerNotes(t, st, client, budget.Config{
		Thread: budget.Limits{CostMicros: 5000},
		Prices: map[string]budget.Price{"fake": {Input: 2, CachedInput: 2, Output: 10}},
	}, nil)
	thread, turn := runTurn(t, m, notes, principal.Operator(), "", nil)
	require.Equal(t, api.TurnFailed, turn.Status)
	require.Equal(t, "budget exceeded: thread cost limit 0.005 reached (0.006 used)", turn.Error.Message)
	require.Len(t, fake.Requests(), 3)
	b, err := m.ThreadBudget(context.Background(), turns.Caller{}, thread)
	require.NoError(t, err)
	require.InDelta(t, 0.006, b.Thread.UsedCost, 1e-9)
	require.InDelta(t, 0.0, *b.Thread.RemainingCost, 1e-9)

	// The thread's spending is kept with it: its next turn fails before
	// any request.
	_, turn = runTurn(t, m, notes, principal.Operator(), thread, nil)
	require.Equal(t, api.TurnFailed, turn.Status)
	require.Len(t, fake.Requests(), 3)
}

// Two daemons on one Postgres database share a principal's period
// budget: what one spends, the other sees before its next request.
func TestPrincipalBudgetSharedAcrossDaemons(t *testing.T) {
	url := pgtest.URL(t)
	open := func() store.Store {
		st, err := postgres.Open(context.Background(), postgres.Config{URL: url, Migrate: true})
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}
	rules, err := principal.New(principal.Config{Roots: map[string][]string{"alice": nil, "bob": nil}, WorkspacesDir: t.TempDir()})
	require.NoError(t, err)
	alice, _ := rules.Get("alice")
	bob, _ := rules.Get("bob")
	cfg := budget.Config{Principal: budget.Limits{Tokens: 1000}}
	daemon := func() (*turns.Manager, *budgetNotes, *fakemodel.Server) {
		s, err := fakemodel.ParseScript([]byte(`{"steps":[],"exhausted_text":"ok"}`))
		require.NoError(t, err)
		fake, err := fakemodel.Start(s)
		require.NoError(t, err)
		t.Cleanup(fake.Close)
		// Every answer reports 600 tokens.
		require.NoError(t, fake.SetScript(fakemodel.Script{Steps: []fakemodel.Step{{Text: "ok", Times: 100, Usage: &fakemodel.Usage{InputTokens: 500, OutputTokens: 100, TotalTokens: 600}}}}))
		client, err := model.New(model.ProviderConfig{BaseURL: fake.URL(), MaxRetries: -1}, nil)
		require.NoError(t, err)
		m, notes := budgetManagerNotes(t, open(), client, cfg, nil)
		return m, notes, fake
	}
	a, aNotes, aFake := daemon()
	b, bNotes, bFake := daemon()

	_, turn := runTurn(t, a, aNotes, alice, "", nil)
	require.Equal(t, api.TurnCompleted, turn.Status)
	_, turn = runTurn(t, b, bNotes, alice, "", nil)
	require.Equal(t, api.TurnCompleted, turn.Status, "600 of 1000 spent before it")
	require.Equal(t, int64(1200), bNotes.lastBudget(t).Principal.UsedTokens)

	// Daemon a sees what b spent: alice's next turn there fails before
	// its first request; bob's budget is his own.
	_, turn = runTurn(t, a, aNotes, alice, "", nil)
	require.Equal(t, api.TurnFailed, turn.Status)
	require.Equal(t, "budget exceeded: period principal token limit 1000 reached (1200 used)", turn.Error.Message)
	require.Equal(t, api.ErrUsageLimitExceeded, turn.Error.CodexErrorInfo.Code)
	require.Len(t, aFake.Requests(), 1)
	require.Len(t, bFake.Requests(), 1)
	_, turn = runTurn(t, a, aNotes, bob, "", nil)
	require.Equal(t, api.TurnCompleted, turn.Status)

	got, err := a.PrincipalBudget(context.Background(), turns.Caller{Principal: alice})
	require.NoError(t, err)
	require.Equal(t, "alice", got.Principal)
	require.Equal(t, int64(1200), got.UsedTokens)
	require.Equal(t, int64(0), *got.RemainingTokens)
}

// metricValue is the value of the counter name with labels in reg.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}
