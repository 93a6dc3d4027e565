package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/auth"
)

// Originator is the client name the HTTP API creates threads under: a
// thread created with the operator's credentials has Originator, one
// created by principal P has Originator + "/" + P. It is what the thread's
// "originator" field shows and what principals are matched against.
const Originator = "appserver-http"

// principal is who a request acts for. The zero value is the operator (the
// websocket's credentials, or no auth on loopback), who sees every thread;
// a named principal sees only the threads it created.
type principal string

// originator is the thread originator of threads this principal creates.
func (p principal) originator() string {
	if p == "" {
		return Originator
	}
	return Originator + "/" + string(p)
}

// sees reports whether the principal may see a thread.
func (p principal) sees(th api.Thread) bool {
	return p == "" || (th.Originator != nil && *th.Originator == p.originator())
}

type principalKey struct{}

func withPrincipal(ctx context.Context, p principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

func principalOf(r *http.Request) principal {
	p, _ := r.Context().Value(principalKey{}).(principal)
	return p
}

// principalName is what a principal may be called: a TOML bare key.
var principalName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// principalToken is one configured principal.
type principalToken struct {
	name   string
	digest [sha256.Size]byte
}

// authenticator decides who a request is: a principal whose token digest
// matches, else whoever the websocket's authenticator admits.
type authenticator struct {
	shared     *auth.Authenticator // nil or disabled: no shared credential
	principals []principalToken
}

func newAuthenticator(shared *auth.Authenticator, principals map[string]string) (*authenticator, error) {
	a := &authenticator{shared: shared}
	names := make([]string, 0, len(principals))
	for name := range principals {
		names = append(names, name)
	}
	sort.Strings(names)
	seen := map[[sha256.Size]byte]string{}
	for _, name := range names {
		if !principalName.MatchString(name) {
			return nil, fmt.Errorf("http api principal %q: names are 1-64 characters from [A-Za-z0-9_-]", name)
		}
		d, err := hex.DecodeString(strings.TrimSpace(principals[name]))
		if err != nil || len(d) != sha256.Size {
			return nil, fmt.Errorf("http api principal %q: token_sha256 must be 64 hexadecimal characters", name)
		}
		var pt principalToken
		pt.name = name
		copy(pt.digest[:], d)
		if other, dup := seen[pt.digest]; dup {
			return nil, fmt.Errorf("http api principals %q and %q have the same token", other, name)
		}
		seen[pt.digest] = name
		a.principals = append(a.principals, pt)
	}
	return a, nil
}

// identify authenticates a request.
func (a *authenticator) identify(r *http.Request) (principal, *problem) {
	values := r.Header.Values("Authorization")
	if len(a.principals) > 0 && len(values) > 0 {
		if token, ok := bearer(values[0]); ok {
			digest := sha256.Sum256([]byte(token))
			match := ""
			// Compare with every digest so the time taken says nothing
			// about which principal, if any, matched.
			for _, pt := range a.principals {
				if subtle.ConstantTimeCompare(digest[:], pt.digest[:]) == 1 {
					match = pt.name
				}
			}
			if match != "" {
				return principal(match), nil
			}
		}
	}
	if a.shared != nil && a.shared.Enabled() {
		if f := a.shared.Check(r); f != nil {
			// The shared authenticator words its reasons for websockets.
			return "", unauthorized(strings.Replace(f.Message, "websocket ", "", 1), len(values) > 0)
		}
		return "", nil
	}
	if len(a.principals) > 0 {
		// Without a shared credential, principals are the only way in:
		// otherwise anyone could skip the token and see every thread.
		if len(values) == 0 {
			return "", unauthorized("missing bearer token", false)
		}
		return "", unauthorized("invalid bearer token", true)
	}
	return "", nil
}

// bearer extracts the token of "Bearer <token>" (scheme in any case).
func bearer(v string) (string, bool) {
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
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
