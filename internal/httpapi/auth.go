package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/reqlog"
)

// Originator is the client name the HTTP API creates the operator's
// threads under; a principal's threads carry principal.OriginatorPrefix
// and its name, whichever door created them.
const Originator = "appserver-http"

type principalKey struct{}

// withPrincipal returns ctx carrying who a request acts for, for the API
// and, as its actor, for the audit log (the client is the HTTP API and
// the request's id).
func withPrincipal(ctx context.Context, p principal.Principal) context.Context {
	ctx = audit.WithActor(ctx, audit.Actor{Principal: p.Name(), Client: "http#" + reqlog.ID(ctx)})
	return context.WithValue(ctx, principalKey{}, p)
}

// principalOf is who a request admitted by guard acts for.
func principalOf(r *http.Request) principal.Principal {
	p, _ := r.Context().Value(principalKey{}).(principal.Principal)
	return p
}

// identify authenticates a request at door as the websocket does (a
// principal's token, ticket or session cookie, else the operator's
// credential; auth.Identify), with one rule of the API's own: without an
// operator credential, principals' tokens are the only way in, or anyone
// could skip the token and see every thread.
func (a *API) identify(r *http.Request, door auth.Door) (principal.Principal, *problem) {
	given := len(r.Header.Values("Authorization")) > 0
	name, f := auth.Identify(r.Context(), a.cfg.Auth, a.cfg.Browser, r, door)
	if f != nil {
		// The authenticator words its reasons for websockets.
		msg := strings.Replace(f.Message, "websocket ", "", 1)
		switch f.Status {
		case http.StatusForbidden:
			return principal.Principal{}, forbidden("%s", msg)
		case http.StatusServiceUnavailable:
			return principal.Principal{}, unavailable("%s", msg)
		case http.StatusInternalServerError:
			return principal.Principal{}, newProblem(http.StatusInternalServerError, api.ProblemInternal, "%s", msg)
		}
		return principal.Principal{}, unauthorized(msg, given)
	}
	if name != "" {
		p, ok := a.cfg.Principals.Get(name)
		if !ok {
			return principal.Principal{}, unauthorized("invalid bearer token", true)
		}
		return p, nil
	}
	if a.cfg.Auth.HasPrincipals() && !a.cfg.Auth.Enabled() {
		return principal.Principal{}, unauthorized("missing bearer token", false)
	}
	return principal.Operator(), nil
}

func unauthorized(detail string, tokenGiven bool) *problem {
	p := newProblem(http.StatusUnauthorized, api.ProblemUnauthorized, "%s", detail)
	challenge := `Bearer realm="appserver"`
	if tokenGiven {
		challenge += `, error="invalid_token"`
	}
	p.header = http.Header{"Www-Authenticate": {challenge}}
	return p
}
