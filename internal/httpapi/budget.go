package httpapi

import (
	"context"
	"net/http"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns"
)

// Budgets are the budgets' reads and a thread's own limits (the turns
// manager).
type Budgets interface {
	ThreadBudget(ctx context.Context, c turns.Caller, threadID string) (api.BudgetStatus, error)
	SetThreadBudget(ctx context.Context, c turns.Caller, threadID string, p api.HTTPBudgetLimits) (api.BudgetStatus, error)
	PrincipalBudget(ctx context.Context, c turns.Caller) (api.BudgetPeriodUse, error)
}

// getThreadBudget serves GET /v1/threads/{id}/budget: what the thread's
// budgets allow and what it used.
func (a *API) getThreadBudget(w http.ResponseWriter, r *http.Request) *problem {
	return a.threadBudget(w, r, nil)
}

// putThreadBudget serves PUT /v1/threads/{id}/budget: the thread's own
// limits, which tighten the configured ones.
func (a *API) putThreadBudget(w http.ResponseWriter, r *http.Request) *problem {
	var body api.HTTPBudgetLimits
	if p := a.decodeBody(w, r, &body, false); p != nil {
		return p
	}
	return a.threadBudget(w, r, &body)
}

// threadBudget answers with the thread's budget after setting its limits
// when set is given.
func (a *API) threadBudget(w http.ResponseWriter, r *http.Request, set *api.HTTPBudgetLimits) *problem {
	if a.cfg.Budgets == nil {
		return notFound("no budgets are configured")
	}
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	who := principalOf(r)
	c := turns.Caller{Principal: who, ClientName: who.ClientName(Originator)}
	var res api.BudgetStatus
	var err error
	if set != nil {
		res, err = a.cfg.Budgets.SetThreadBudget(r.Context(), c, th.ID, *set)
	} else {
		res, err = a.cfg.Budgets.ThreadBudget(r.Context(), c, th.ID)
	}
	if err != nil {
		return a.fromError(r, err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// getBudget serves GET /v1/budget: the caller's budget in the current
// period.
func (a *API) getBudget(w http.ResponseWriter, r *http.Request) *problem {
	if a.cfg.Budgets == nil {
		return notFound("no budgets are configured")
	}
	res, err := a.cfg.Budgets.PrincipalBudget(r.Context(), turns.Caller{Principal: principalOf(r)})
	if err != nil {
		return a.fromError(r, err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
