package httpapi

import (
	"net/http"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/auth"
)

// The credentials a browser presents where it cannot send an
// Authorization header (auth.Browser), issued for the bearer token of the
// request that asks for them and bound to its Origin.

// noBrowser answers when the API was built without browser credentials.
func noBrowser() *problem {
	return newProblem(http.StatusNotImplemented, api.ProblemNotImplemented, "this daemon issues no browser credentials")
}

// issueTicket answers POST /v1/auth/ticket.
func (a *API) issueTicket(w http.ResponseWriter, r *http.Request) *problem {
	if a.cfg.Browser == nil {
		return noBrowser()
	}
	if p := a.decodeBody(w, r, &struct{}{}, true); p != nil {
		return p
	}
	g, err := a.cfg.Browser.IssueTicket(r.Context(), principalOf(r).Name(), r.Header.Get("Origin"))
	if err != nil {
		return a.fromError(r, err)
	}
	writeJSON(w, http.StatusOK, api.HTTPTicket{Ticket: g.Secret, ExpiresIn: int64(g.TTL / time.Second)})
	return nil
}

// startSession answers POST /v1/auth/session: the session cookie.
func (a *API) startSession(w http.ResponseWriter, r *http.Request) *problem {
	if a.cfg.Browser == nil {
		return noBrowser()
	}
	if p := a.decodeBody(w, r, &struct{}{}, true); p != nil {
		return p
	}
	g, err := a.cfg.Browser.StartSession(r.Context(), principalOf(r).Name(), r.Header.Get("Origin"))
	if err != nil {
		return a.fromError(r, err)
	}
	http.SetCookie(w, g.Cookie(r.TLS != nil))
	writeJSON(w, http.StatusOK, api.HTTPSession{ExpiresIn: int64(g.TTL / time.Second)})
	return nil
}

// endSession answers DELETE /v1/auth/session: the cookie's session ends
// and the browser is told to forget the cookie.
func (a *API) endSession(w http.ResponseWriter, r *http.Request) *problem {
	if a.cfg.Browser == nil {
		return noBrowser()
	}
	if c, err := r.Cookie(auth.SessionCookie); err == nil {
		if err := a.cfg.Browser.EndSession(r.Context(), c.Value); err != nil {
			return a.fromError(r, err)
		}
	}
	http.SetCookie(w, auth.ClearedSessionCookie(r.TLS != nil))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
	return nil
}
