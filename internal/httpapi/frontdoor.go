package httpapi

import (
	"net/http"

	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/principal"
)

// Authenticate admits requests to another front door the way the API
// admits its own, by the Authorization header alone (auth.BearerDoor): 503
// while draining, a problem+json 401 for a missing or wrong credential;
// next then gets the request with its principal, which PrincipalOf reads.
func (a *API) Authenticate(next http.Handler) http.Handler { return a.guard(auth.BearerDoor)(next) }

// PrincipalOf returns the principal of a request admitted by Authenticate:
// the operator (who sees every thread and has no ceiling) or a named
// principal (who sees the threads it created, within its ceiling and
// workspace roots).
func (a *API) PrincipalOf(r *http.Request) principal.Principal { return principalOf(r) }
