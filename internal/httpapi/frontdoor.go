package httpapi

import (
	"net/http"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
)

// Principal is who a request admitted by Authenticate acts for, as other
// front doors mounted behind it (the MCP endpoint) see it: the operator
// (who sees every thread and has no ceiling) or a named principal (who
// sees the threads it created, under the API's Ceiling).
type Principal struct {
	p       principal
	ceiling Ceiling
}

// Authenticate admits requests to another front door the way the API
// admits its own: 503 while draining, a problem+json 401 for a missing or
// wrong credential; next then gets the request with its principal, which
// PrincipalOf reads.
func (a *API) Authenticate(next http.Handler) http.Handler { return a.guard(next) }

// PrincipalOf returns the principal of a request admitted by Authenticate.
func (a *API) PrincipalOf(r *http.Request) Principal {
	return Principal{p: principalOf(r), ceiling: a.cfg.Ceiling}
}

// ClientName is the originator of the threads the principal creates; ""
// for the operator, whose threads carry the front door's own name.
func (p Principal) ClientName() string {
	if p.p == "" {
		return ""
	}
	return p.p.originator()
}

// Sees reports whether the principal may see and continue a thread.
func (p Principal) Sees(th api.Thread) bool { return p.p.sees(th) }

// Bound checks a new thread's sandbox mode and approval policy against the
// principal's ceiling and fills in the unset ones (see Ceiling); the
// operator's come back unchanged.
func (p Principal) Bound(sandbox *api.SandboxMode, approval *api.AskForApproval) (*api.SandboxMode, *api.AskForApproval, error) {
	if p.p == "" {
		return sandbox, approval, nil
	}
	s, a, prob := p.ceiling.apply(sandbox, approval)
	if prob != nil {
		return nil, nil, apperr.New(apperr.Invalid, "%s", prob.detail)
	}
	return s, a, nil
}
