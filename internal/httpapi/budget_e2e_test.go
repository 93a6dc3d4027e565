package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/store/pgtest"
)

// A principal's thread over HTTP: its own limit set by PUT, turns charged
// at the configured prices until the limit stops one, what is left read
// back per thread and per principal (never another principal's), and the
// budgets' metrics.
func TestBudgetOverHTTP(t *testing.T) {
	step := `{"text":"ok","usage":{"input_tokens":500,"output_tokens":100,"total_tokens":600}}`
	p := apptest.StartPrincipals(t, `{"steps":[`+strings.Repeat(step+",", 9)+step+`]}`,
		"-c", "budgets.principal.max_tokens=5000",
		"-c", "budgets.thread.max_tokens=100000",
		"-c", `budgets.prices."fake-model"={input=2, output=10}`)
	d := p.D

	resp := d.Do(t, http.MethodPost, "/v1/threads", apptest.CIToken, map[string]any{})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var th api.HTTPThread
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&th))
	budgetPath := "/v1/threads/" + th.Thread.ID + "/budget"

	resp = d.Do(t, http.MethodPut, budgetPath, apptest.CIToken, map[string]any{"thread": map[string]any{"maxTokens": 1000}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var set api.BudgetStatus
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&set))
	require.Equal(t, int64(1000), *set.Thread.MaxTokens)
	resp = d.Do(t, http.MethodPut, budgetPath, apptest.CIToken, map[string]any{"turn": map[string]any{"maxTokens": -1}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	turn := func() api.HTTPTurn {
		t.Helper()
		resp := d.Do(t, http.MethodPost, "/v1/threads/"+th.Thread.ID+"/turns?wait=true", apptest.CIToken,
			map[string]any{"input": []map[string]any{{"type": "text", "text": "go"}}})
		require.Less(t, resp.StatusCode, 300)
		var tr api.HTTPTurn
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&tr))
		return tr
	}
	require.Equal(t, api.TurnCompleted, turn().Status)
	require.Equal(t, api.TurnCompleted, turn().Status)
	stopped := turn()
	require.Equal(t, api.TurnFailed, stopped.Status)
	require.Equal(t, "budget exceeded: thread token limit 1000 reached (1200 used)", stopped.Error.Message)
	require.Equal(t, api.ErrSessionBudgetExceeded, stopped.Error.CodexErrorInfo.Code)

	got := apptest.GetJSON[api.BudgetStatus](t, d, budgetPath, apptest.CIToken)
	require.Equal(t, int64(1200), got.Thread.UsedTokens)
	require.Equal(t, int64(0), *got.Thread.RemainingTokens)
	// 2 × (500 × 2 + 100 × 10) millionths.
	require.InDelta(t, 0.004, got.Thread.UsedCost, 1e-9)
	require.Equal(t, "ci", got.Principal.Principal)
	require.Equal(t, int64(3800), *got.Principal.RemainingTokens)

	mine := apptest.GetJSON[api.BudgetPeriodUse](t, d, "/v1/budget", apptest.CIToken)
	require.Equal(t, int64(1200), mine.UsedTokens)
	require.Equal(t, int64(5000), *mine.MaxTokens)
	bobs := apptest.GetJSON[api.BudgetPeriodUse](t, d, "/v1/budget", apptest.BobToken)
	require.Equal(t, "bob", bobs.Principal)
	require.Zero(t, bobs.UsedTokens)
	require.Equal(t, http.StatusNotFound, d.Do(t, http.MethodGet, budgetPath, apptest.BobToken, nil).StatusCode)
	require.Equal(t, http.StatusNotFound, d.Do(t, http.MethodPut, budgetPath, apptest.BobToken, map[string]any{}).StatusCode)

	m := apptest.Metrics(t, d.URL("/metrics"))
	require.Equal(t, 1200.0, m[`appserver_budget_spent_tokens_total{principal="ci"}`])
	require.InDelta(t, 0.004, m[`appserver_budget_spent_cost_total{principal="ci"}`], 1e-9)
	require.Equal(t, 1.0, m[`appserver_budget_exceeded_total{outcome="failed",scope="thread"}`])
}

// Without [budgets] the endpoints say so.
func TestBudgetEndpointsWithoutBudgets(t *testing.T) {
	p := apptest.StartPrincipals(t, `{"steps":[]}`)
	require.Equal(t, http.StatusNotFound, p.D.Do(t, http.MethodGet, "/v1/budget", apptest.CIToken, nil).StatusCode)
}

// Two daemons on one Postgres database share a principal's period
// budget: once the turns run on either have spent it, a turn on the
// other fails before its first model request.
func TestPrincipalBudgetSharedByTwoDaemons(t *testing.T) {
	url := pgtest.URL(t)
	step := `{"text":"ok","usage":{"input_tokens":500,"output_tokens":100,"total_tokens":600}}`
	fake := apptest.StartFake(t, `{"steps":[`+strings.Repeat(step+",", 5)+step+`]}`)
	start := func(node string) *apptest.Daemon {
		args := append([]string{"--database-url", url, "--migrate", "--data-dir", t.TempDir(), "-c", `node_id="` + node + `"`,
			"-c", "budgets.principal.max_tokens=1000"}, apptest.FakeArgs(fake, "responses")...)
		return apptest.Start(t, append(args, apptest.AuthArgs()...)...)
	}
	a, b := start("a"), start("b")
	turn := func(d *apptest.Daemon) api.HTTPTurn {
		t.Helper()
		resp := d.Do(t, http.MethodPost, "/v1/threads", apptest.CIToken, map[string]any{})
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		var th api.HTTPThread
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&th))
		resp = d.Do(t, http.MethodPost, "/v1/threads/"+th.Thread.ID+"/turns?wait=true", apptest.CIToken,
			map[string]any{"input": []map[string]any{{"type": "text", "text": "go"}}})
		require.Less(t, resp.StatusCode, 300)
		var tr api.HTTPTurn
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&tr))
		return tr
	}
	require.Equal(t, api.TurnCompleted, turn(a).Status)
	require.Equal(t, api.TurnCompleted, turn(b).Status, "600 of 1000 spent before it")
	stopped := turn(a)
	require.Equal(t, api.TurnFailed, stopped.Status)
	require.Equal(t, "budget exceeded: period principal token limit 1000 reached (1200 used)", stopped.Error.Message)
	require.Equal(t, api.ErrUsageLimitExceeded, stopped.Error.CodexErrorInfo.Code)
	require.Len(t, fake.Requests(), 2, "no request once the budget was spent")
	for _, d := range []*apptest.Daemon{a, b} {
		got := apptest.GetJSON[api.BudgetPeriodUse](t, d, "/v1/budget", apptest.CIToken)
		require.Equal(t, int64(1200), got.UsedTokens)
	}
}
