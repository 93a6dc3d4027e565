package auth_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/auth"
)

// rejectionMessages are the only bodies codex sends on a refused upgrade.
var rejectionMessages = []string{
	"missing websocket bearer token",
	"invalid authorization header",
	"invalid websocket bearer token",
	"invalid websocket jwt",
	"expired websocket jwt",
	"websocket jwt is not valid yet",
	"websocket jwt issuer mismatch",
	"websocket jwt audience mismatch",
}

// FuzzCheckJWT feeds arbitrary bearer strings to the signed-bearer-token mode:
// Check must not panic, must answer 401 with one of codex's messages, and may
// accept only a token whose HS256 signature is right.
func FuzzCheckJWT(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "secret")
	require.NoError(f, os.WriteFile(path, []byte(testSecret), 0o600))
	a := newAuth(f, auth.Config{
		Mode:             auth.SignedBearerToken,
		SharedSecretFile: path,
		Issuer:           "issuer-a",
		Audience:         "appserver",
		Now:              func() time.Time { return testNow },
	})

	now := testNow.Unix()
	for _, claims := range []map[string]any{
		{"exp": now + 60, "iss": "issuer-a", "aud": "appserver"},
		{"exp": now + 60, "iss": "issuer-a", "aud": []string{"x", "appserver"}},
		{"exp": now - 60, "iss": "issuer-a", "aud": "appserver"},
		{"exp": now + 60, "nbf": now + 60, "iss": "issuer-a", "aud": "appserver"},
		{"exp": now + 60, "iss": "issuer-b", "aud": "appserver"},
		{"exp": now + 60, "iss": "issuer-a", "aud": "other"},
		{"exp": float64(now) + 0.5, "iss": "issuer-a", "aud": "appserver"},
		{"iss": "issuer-a"},
	} {
		f.Add(sign(f, testSecret, claims))
	}
	f.Add(sign(f, "another secret of at least 32 bytes", map[string]any{"exp": now + 60}))
	f.Add(b64(`{"alg":"none"}`) + "." + b64(`{"exp":9999999999}`) + ".")
	f.Add("")
	f.Add("..")
	f.Add("a.b.c")
	f.Add(" \t")
	f.Add("é.é.é")

	f.Fuzz(func(t *testing.T, bearer string) {
		check := func(value string) *auth.Failure {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header["Authorization"] = []string{value}
			fail := a.Check(r)
			if fail != nil {
				require.Equal(t, http.StatusUnauthorized, fail.Status)
				require.True(t, slices.Contains(rejectionMessages, fail.Message), "unexpected message %q", fail.Message)
			}
			return fail
		}
		check(bearer) // the whole header value

		if check("Bearer "+bearer) != nil {
			return
		}
		token := strings.TrimSpace(bearer)
		parts := strings.Split(token, ".")
		require.Len(t, parts, 3, "accepted %q", token)
		mac := hmac.New(sha256.New, []byte(testSecret))
		mac.Write([]byte(parts[0] + "." + parts[1]))
		require.Equal(t, base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), parts[2], "accepted %q", token)
	})
}
