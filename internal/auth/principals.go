package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/appserver/appserver/internal/apperr"
)

// principalName is what a principal may be called: a TOML bare key.
var principalName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// principalToken is one configured principal's token digest.
type principalToken struct {
	name   string
	digest [sha256.Size]byte
}

func (a *Authenticator) addPrincipals(principals map[string]string) error {
	names := make([]string, 0, len(principals))
	for name := range principals {
		names = append(names, name)
	}
	sort.Strings(names)
	seen := map[[sha256.Size]byte]string{}
	for _, name := range names {
		if !principalName.MatchString(name) {
			return apperr.New(apperr.Invalid, "http api principal %q: names are 1-64 characters from [A-Za-z0-9_-]", name)
		}
		d, err := hex.DecodeString(strings.TrimSpace(principals[name]))
		if err != nil || len(d) != sha256.Size {
			return apperr.New(apperr.Invalid, "http api principal %q: token_sha256 must be 64 hexadecimal characters", name)
		}
		pt := principalToken{name: name}
		copy(pt.digest[:], d)
		if other, dup := seen[pt.digest]; dup {
			return apperr.New(apperr.Invalid, "http api principals %q and %q have the same token", other, name)
		}
		seen[pt.digest] = name
		a.principals = append(a.principals, pt)
	}
	return nil
}

// HasPrincipals reports whether principals are configured.
func (a *Authenticator) HasPrincipals() bool { return a != nil && len(a.principals) > 0 }

// Identify says who a request is: the principal whose token is the
// request's bearer token, else whoever the mode admits ("" with a nil
// Failure: the operator). Without a mode (None), a request without an
// Authorization header is the operator, as an unauthenticated loopback
// listener admits everyone; one that presents a bearer token matching no
// principal is refused when principals are configured, since it meant to
// be someone. A nil Authenticator admits everyone as the operator.
func (a *Authenticator) Identify(r *http.Request) (string, *Failure) {
	if a == nil {
		return "", nil
	}
	values := r.Header.Values("Authorization")
	if len(a.principals) > 0 && len(values) > 0 {
		if token, f := bearerToken(r.Header); f == nil {
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
				return match, nil
			}
		}
	}
	if a.mode != None {
		return "", a.Check(r)
	}
	if len(a.principals) > 0 && len(values) > 0 {
		if _, f := bearerToken(r.Header); f != nil {
			return "", f
		}
		return "", unauthorized(msgInvalidToken)
	}
	return "", nil
}
