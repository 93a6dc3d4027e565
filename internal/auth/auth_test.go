package auth_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/auth"
)

const (
	testToken  = "s3cret-capability-token"
	testSecret = "0123456789abcdef0123456789abcdef-shared" // 39 bytes
)

// testNow is the fixed clock of the JWT tests.
var testNow = time.Unix(1_750_000_000, 0)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func newAuth(t testing.TB, cfg auth.Config) *auth.Authenticator {
	t.Helper()
	a, err := auth.New(cfg)
	require.NoError(t, err)
	return a
}

// serve runs one request through a.Middleware; header values are set raw,
// bypassing net/http's own header validation. A nil value sends no header.
func serve(t *testing.T, a *auth.Authenticator, authorization *string) *httptest.ResponseRecorder {
	t.Helper()
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "upgraded")
	})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if authorization != nil {
		r.Header["Authorization"] = []string{*authorization}
	}
	w := httptest.NewRecorder()
	a.Middleware(next).ServeHTTP(w, r)
	return w
}

func header(v string) *string { return &v }

// requireAllowed asserts the request reached the wrapped handler.
func requireAllowed(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "upgraded", w.Body.String())
}

// requireRejected asserts codex's 401: exact body, text/plain, no newline.
func requireRejected(t *testing.T, w *httptest.ResponseRecorder, message string) {
	t.Helper()
	require.Equal(t, http.StatusUnauthorized, w.Code)
	require.Equal(t, "text/plain; charset=utf-8", w.Header().Get("Content-Type"))
	require.Equal(t, message, w.Body.String())
}

func TestNewRejectsBadSettings(t *testing.T) {
	tokenFile := writeFile(t, testToken)
	secretFile := writeFile(t, testSecret)
	digest := sha256.Sum256([]byte(testToken))
	sha := hex.EncodeToString(digest[:])
	missing := filepath.Join(t.TempDir(), "does-not-exist")

	tests := []struct {
		name string
		cfg  auth.Config
		want []string // substrings of the error
	}{
		{"unknown mode", auth.Config{Mode: "jwt"}, []string{"ws_auth", `"jwt"`}},
		{"none with token file", auth.Config{TokenFile: tokenFile}, []string{"ws_token_file", "capability-token"}},
		{"none with token sha256", auth.Config{TokenSHA256: sha}, []string{"ws_token_sha256", "capability-token"}},
		{"none with secret file", auth.Config{SharedSecretFile: secretFile}, []string{"ws_shared_secret_file", "signed-bearer-token"}},
		{"none with issuer", auth.Config{Issuer: "iss"}, []string{"ws_issuer", "signed-bearer-token"}},
		{"none with blank audience", auth.Config{Audience: " "}, []string{"ws_audience", "signed-bearer-token"}},
		{"none with skew", auth.Config{MaxClockSkew: time.Minute}, []string{"ws_max_clock_skew_seconds", "signed-bearer-token"}},

		{"capability with both sources", auth.Config{Mode: auth.CapabilityToken, TokenFile: tokenFile, TokenSHA256: sha},
			[]string{"ws_token_file and ws_token_sha256 are mutually exclusive"}},
		{"capability with no source", auth.Config{Mode: auth.CapabilityToken},
			[]string{"ws_token_file or ws_token_sha256 is required"}},
		{"capability with relative token file", auth.Config{Mode: auth.CapabilityToken, TokenFile: "token.txt"},
			[]string{"ws_token_file must be an absolute path", `"token.txt"`}},
		{"capability with missing token file", auth.Config{Mode: auth.CapabilityToken, TokenFile: missing},
			[]string{"ws_token_file", "does-not-exist"}},
		{"capability with whitespace-only token file", auth.Config{Mode: auth.CapabilityToken, TokenFile: writeFile(t, " \n\t\n")},
			[]string{"ws_token_file", "is empty"}},
		{"capability with empty token file", auth.Config{Mode: auth.CapabilityToken, TokenFile: writeFile(t, "")},
			[]string{"ws_token_file", "is empty"}},
		{"capability with non-UTF-8 token file", auth.Config{Mode: auth.CapabilityToken, TokenFile: writeFile(t, "tok\xffen")},
			[]string{"ws_token_file", "UTF-8"}},
		{"capability with short sha256", auth.Config{Mode: auth.CapabilityToken, TokenSHA256: sha[:63]},
			[]string{"ws_token_sha256 must be a 64-character hex SHA-256 digest"}},
		{"capability with non-hex sha256", auth.Config{Mode: auth.CapabilityToken, TokenSHA256: "g" + sha[1:]},
			[]string{"ws_token_sha256 must be a 64-character hex SHA-256 digest"}},
		{"capability with blank sha256", auth.Config{Mode: auth.CapabilityToken, TokenSHA256: "   "},
			[]string{"ws_token_sha256 must be a 64-character hex SHA-256 digest"}},
		{"capability with secret file", auth.Config{Mode: auth.CapabilityToken, TokenFile: tokenFile, SharedSecretFile: secretFile},
			[]string{"ws_shared_secret_file requires", "signed-bearer-token"}},
		{"capability with issuer", auth.Config{Mode: auth.CapabilityToken, TokenFile: tokenFile, Issuer: "iss"},
			[]string{"ws_issuer requires", "signed-bearer-token"}},
		{"capability with audience", auth.Config{Mode: auth.CapabilityToken, TokenFile: tokenFile, Audience: "aud"},
			[]string{"ws_audience requires", "signed-bearer-token"}},
		{"capability with skew", auth.Config{Mode: auth.CapabilityToken, TokenFile: tokenFile, MaxClockSkew: time.Second},
			[]string{"ws_max_clock_skew_seconds requires", "signed-bearer-token"}},

		{"jwt with token file", auth.Config{Mode: auth.SignedBearerToken, SharedSecretFile: secretFile, TokenFile: tokenFile},
			[]string{"ws_token_file requires", "capability-token"}},
		{"jwt with token sha256", auth.Config{Mode: auth.SignedBearerToken, SharedSecretFile: secretFile, TokenSHA256: sha},
			[]string{"ws_token_sha256 requires", "capability-token"}},
		{"jwt without secret file", auth.Config{Mode: auth.SignedBearerToken, Issuer: "iss"},
			[]string{"ws_shared_secret_file is required"}},
		{"jwt with relative secret file", auth.Config{Mode: auth.SignedBearerToken, SharedSecretFile: "./secret"},
			[]string{"ws_shared_secret_file must be an absolute path"}},
		{"jwt with missing secret file", auth.Config{Mode: auth.SignedBearerToken, SharedSecretFile: missing},
			[]string{"ws_shared_secret_file", "does-not-exist"}},
		{"jwt with whitespace-only secret file", auth.Config{Mode: auth.SignedBearerToken, SharedSecretFile: writeFile(t, "\n\n")},
			[]string{"ws_shared_secret_file", "is empty"}},
		// 31 bytes of secret padded past 32 with whitespace: the trimmed length counts.
		{"jwt with short secret", auth.Config{Mode: auth.SignedBearerToken, SharedSecretFile: writeFile(t, "  "+testSecret[:31]+"\n\n")},
			[]string{"ws_shared_secret_file", "at least 32 bytes", "got 31"}},
		{"jwt with negative skew", auth.Config{Mode: auth.SignedBearerToken, SharedSecretFile: secretFile, MaxClockSkew: -time.Second},
			[]string{"ws_max_clock_skew_seconds must be a non-negative whole number of seconds"}},
		{"jwt with fractional skew", auth.Config{Mode: auth.SignedBearerToken, SharedSecretFile: secretFile, MaxClockSkew: 1500 * time.Millisecond},
			[]string{"ws_max_clock_skew_seconds must be a non-negative whole number of seconds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := auth.New(tt.cfg)
			require.Error(t, err)
			require.Nil(t, a)
			require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
			for _, want := range tt.want {
				require.ErrorContains(t, err, want)
			}
		})
	}
}

func TestNoneAllowsEverything(t *testing.T) {
	a := newAuth(t, auth.Config{})
	require.False(t, a.Enabled())
	requireAllowed(t, serve(t, a, nil))
	requireAllowed(t, serve(t, a, header("Basic x")))
	require.Nil(t, a.Check(httptest.NewRequest(http.MethodGet, "/", nil)))
}

func TestCapabilityTokenHeaderParsing(t *testing.T) {
	// The file's surrounding whitespace is not part of the token.
	a := newAuth(t, auth.Config{Mode: auth.CapabilityToken, TokenFile: writeFile(t, "\n  "+testToken+" \t\n")})
	require.True(t, a.Enabled())

	tests := []struct {
		name   string
		header *string
		want   string // "" = allowed
	}{
		{"no header", nil, "missing websocket bearer token"},
		{"empty header", header(""), "invalid authorization header"},
		{"basic scheme", header("Basic x"), "invalid authorization header"},
		{"scheme only", header("Bearer"), "invalid authorization header"},
		{"empty token", header("Bearer "), "invalid authorization header"},
		{"blank token", header("Bearer  \t "), "invalid authorization header"},
		{"tab separator", header("Bearer\t" + testToken), "invalid authorization header"},
		{"leading space", header(" Bearer " + testToken), "invalid authorization header"},
		{"token without scheme", header(testToken), "invalid authorization header"},
		{"non-ASCII token", header("Bearer " + testToken + "é"), "invalid authorization header"},
		{"non-ASCII scheme", header("Bearér " + testToken), "invalid authorization header"},
		{"control character", header("Bearer " + testToken + "\x00"), "invalid authorization header"},
		{"wrong token", header("Bearer not-the-token"), "invalid websocket bearer token"},
		{"token prefix", header("Bearer " + testToken[:5]), "invalid websocket bearer token"},
		{"token with inner space", header("Bearer " + testToken + " x"), "invalid websocket bearer token"},
		{"right token", header("Bearer " + testToken), ""},
		{"lower-case scheme", header("bearer " + testToken), ""},
		{"upper-case scheme", header("BEARER " + testToken), ""},
		{"token padded with whitespace", header("Bearer   " + testToken + " \t"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := serve(t, a, tt.header)
			if tt.want == "" {
				requireAllowed(t, w)
				return
			}
			requireRejected(t, w, tt.want)
		})
	}
}

func TestCapabilityTokenFirstHeaderCounts(t *testing.T) {
	a := newAuth(t, auth.Config{Mode: auth.CapabilityToken, TokenFile: writeFile(t, testToken)})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header["Authorization"] = []string{"Bearer wrong", "Bearer " + testToken}
	f := a.Check(r)
	require.NotNil(t, f)
	require.Equal(t, auth.Failure{Status: http.StatusUnauthorized, Message: "invalid websocket bearer token"}, *f)
}

func TestCapabilityTokenSHA256EitherCase(t *testing.T) {
	digest := sha256.Sum256([]byte(testToken))
	lower := hex.EncodeToString(digest[:])
	for _, sha := range []string{lower, strings.ToUpper(lower), "  " + lower + "\n"} {
		t.Run(sha, func(t *testing.T) {
			a := newAuth(t, auth.Config{Mode: auth.CapabilityToken, TokenSHA256: sha})
			requireAllowed(t, serve(t, a, header("Bearer "+testToken)))
			requireRejected(t, serve(t, a, header("Bearer "+lower)), "invalid websocket bearer token")
		})
	}
}

// TestMiddlewareOverRealServer goes through net/http's own header handling.
func TestMiddlewareOverRealServer(t *testing.T) {
	a := newAuth(t, auth.Config{Mode: auth.CapabilityToken, TokenFile: writeFile(t, testToken)})
	srv := httptest.NewServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})))
	defer srv.Close()

	get := func(authorization string) (int, string, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/rpc", nil)
		require.NoError(t, err)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
	}

	status, _, _ := get("bearer " + testToken)
	require.Equal(t, http.StatusNoContent, status)

	status, contentType, body := get("")
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, "text/plain; charset=utf-8", contentType)
	require.Equal(t, "missing websocket bearer token", body)

	status, _, body = get("Bearer wrong")
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, "invalid websocket bearer token", body)
}

func TestCheckIsSafeForConcurrentUse(t *testing.T) {
	a := newAuth(t, auth.Config{Mode: auth.SignedBearerToken, SharedSecretFile: writeFile(t, testSecret), Now: func() time.Time { return testNow }})
	good := sign(t, testSecret, map[string]any{"exp": testNow.Unix() + 60})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			if i%2 == 0 {
				r.Header.Set("Authorization", "Bearer "+good)
				require.Nil(t, a.Check(r))
				return
			}
			r.Header.Set("Authorization", "Bearer x.y.z")
			require.NotNil(t, a.Check(r))
		})
	}
	wg.Wait()
}

func TestRequireForAddress(t *testing.T) {
	tests := []struct {
		mode    auth.Mode
		host    string
		refused bool
	}{
		{auth.None, "127.0.0.1", false},
		{auth.None, "127.0.0.1:4500", false},
		{auth.None, "127.8.9.10", false},
		{auth.None, "::1", false},
		{auth.None, "[::1]", false},
		{auth.None, "[::1]:4500", false},
		{auth.None, "localhost", false},
		{auth.None, "LocalHost:4500", false},
		{auth.None, "::ffff:127.0.0.1", false},
		{auth.None, "0.0.0.0", true},
		{auth.None, "0.0.0.0:4500", true},
		{auth.None, "::", true},
		{auth.None, "[::]:4500", true},
		{auth.None, "", true},
		{auth.None, ":4500", true},
		{auth.None, "192.168.1.20", true},
		{auth.None, "128.0.0.1", true},
		{auth.None, "::2", true},
		{auth.None, "localhost.example.com", true},
		{auth.None, "example.com:4500", true},
		{"bogus", "0.0.0.0", true},
		{auth.CapabilityToken, "0.0.0.0:4500", false},
		{auth.SignedBearerToken, "::", false},
		{auth.CapabilityToken, "127.0.0.1", false},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode)+"/"+tt.host, func(t *testing.T) {
			err := auth.RequireForAddress(tt.mode, tt.host)
			if !tt.refused {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, "refusing to start non-loopback websocket listener "+tt.host+" without auth")
			require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
		})
	}
}

func TestModeString(t *testing.T) {
	require.Equal(t, "none", auth.None.String())
	require.Equal(t, "capability-token", auth.CapabilityToken.String())
	require.Equal(t, "signed-bearer-token", auth.SignedBearerToken.String())
}

// --- JWT ---

func sign(t testing.TB, secret string, claims map[string]any) string {
	t.Helper()
	tok, err := auth.SignHS256([]byte(secret), claims)
	require.NoError(t, err)
	return tok
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// signRaw builds a token from literal header and payload JSON, MACed with h.
func signRaw(h func() hash.Hash, secret, headerJSON, payloadJSON string) string {
	input := b64(headerJSON) + "." + b64(payloadJSON)
	mac := hmac.New(h, []byte(secret))
	mac.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func jwtAuth(t *testing.T, cfg auth.Config) *auth.Authenticator {
	t.Helper()
	cfg.Mode = auth.SignedBearerToken
	cfg.SharedSecretFile = writeFile(t, "\n"+testSecret+"\n")
	cfg.Now = func() time.Time { return testNow }
	return newAuth(t, cfg)
}

func checkJWT(t *testing.T, a *auth.Authenticator, token, want string) {
	t.Helper()
	w := serve(t, a, header("Bearer "+token))
	if want == "" {
		requireAllowed(t, w)
		return
	}
	requireRejected(t, w, want)
}

func TestSignHS256(t *testing.T) {
	tok := sign(t, testSecret, map[string]any{"exp": 1, "iss": "me"})
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3)
	h, err := base64.RawURLEncoding.DecodeString(parts[0])
	require.NoError(t, err)
	require.JSONEq(t, `{"alg":"HS256","typ":"JWT"}`, string(h))
	p, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	require.JSONEq(t, `{"exp":1,"iss":"me"}`, string(p))
	require.Equal(t, signRaw(sha256.New, testSecret, string(h), string(p)), tok)

	_, err = auth.SignHS256(nil, map[string]any{"exp": 1})
	require.Error(t, err)
	_, err = auth.SignHS256([]byte(testSecret), map[string]any{"exp": make(chan int)})
	require.Error(t, err)
}

func TestJWTSignatureAndFormat(t *testing.T) {
	a := jwtAuth(t, auth.Config{})
	exp := testNow.Unix() + 60
	payload := `{"exp":1750000060}`
	valid := sign(t, testSecret, map[string]any{"exp": exp})
	parts := strings.Split(valid, ".")

	// The last of 43 signature characters carries 2 unused bits; setting one
	// keeps the bytes a lenient decoder would produce.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, parts[2][len(parts[2])-1])
	require.Zero(t, last&3)
	strayBits := parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-1] + string(alphabet[last|1])
	lenient, err := base64.RawURLEncoding.DecodeString(strings.Split(strayBits, ".")[2])
	require.NoError(t, err, "the non-strict decoder accepts it, so only strictness rejects it")
	require.Len(t, lenient, 32)

	tests := []struct {
		name, token, want string
	}{
		{"valid", valid, ""},
		{"valid without typ", signRaw(sha256.New, testSecret, `{"alg":"HS256"}`, payload), ""},
		{"valid with other typ and kid", signRaw(sha256.New, testSecret, `{"typ":"at+jwt","alg":"HS256","kid":"k1"}`, payload), ""},
		{"valid with escaped alg and spaces", signRaw(sha256.New, testSecret, "{ \"alg\" : \"HS\\u0032\\u00356\" }", "{ \"exp\" :\n 1750000060 }"), ""},
		{"wrong secret", sign(t, strings.Repeat("x", 40), map[string]any{"exp": exp}), "invalid websocket jwt"},
		{"alg none unsigned", b64(`{"alg":"none"}`) + "." + b64(payload) + ".", "invalid websocket jwt"},
		{"alg none with HMAC", signRaw(sha256.New, testSecret, `{"alg":"none"}`, payload), "invalid websocket jwt"},
		{"alg HS512", signRaw(sha512.New, testSecret, `{"alg":"HS512"}`, payload), "invalid websocket jwt"},
		{"alg HS512 label on HS256 mac", signRaw(sha256.New, testSecret, `{"alg":"HS512"}`, payload), "invalid websocket jwt"},
		{"alg lower case", signRaw(sha256.New, testSecret, `{"alg":"hs256"}`, payload), "invalid websocket jwt"},
		{"alg key upper case", signRaw(sha256.New, testSecret, `{"ALG":"HS256"}`, payload), "invalid websocket jwt"},
		{"alg missing", signRaw(sha256.New, testSecret, `{"typ":"JWT"}`, payload), "invalid websocket jwt"},
		{"alg not a string", signRaw(sha256.New, testSecret, `{"alg":256}`, payload), "invalid websocket jwt"},
		{"typ not a string", signRaw(sha256.New, testSecret, `{"alg":"HS256","typ":1}`, payload), "invalid websocket jwt"},
		{"crit header", signRaw(sha256.New, testSecret, `{"alg":"HS256","crit":["b64"],"b64":false}`, payload), "invalid websocket jwt"},
		{"header not JSON", signRaw(sha256.New, testSecret, `alg=HS256`, payload), "invalid websocket jwt"},
		{"header an array", signRaw(sha256.New, testSecret, `["HS256"]`, payload), "invalid websocket jwt"},
		{"payload an array", signRaw(sha256.New, testSecret, `{"alg":"HS256"}`, `[1750000060]`), "invalid websocket jwt"},
		{"payload null", signRaw(sha256.New, testSecret, `{"alg":"HS256"}`, `null`), "invalid websocket jwt"},
		{"payload with trailing data", signRaw(sha256.New, testSecret, `{"alg":"HS256"}`, payload+`{}`), "invalid websocket jwt"},
		{"payload not UTF-8", signRaw(sha256.New, testSecret, `{"alg":"HS256"}`, `{"exp":1750000060,"iss":"`+"\xff"+`"}`), "invalid websocket jwt"},
		{"one segment", parts[0], "invalid websocket jwt"},
		{"two segments", parts[0] + "." + parts[1], "invalid websocket jwt"},
		{"four segments", valid + "." + parts[2], "invalid websocket jwt"},
		{"empty signature", parts[0] + "." + parts[1] + ".", "invalid websocket jwt"},
		{"dots only", "..", "invalid websocket jwt"},
		{"truncated signature", valid[:len(valid)-2], "invalid websocket jwt"},
		{"padded signature", valid + "=", "invalid websocket jwt"},
		{"padded header", b64(`{"alg":"HS256"}`) + "==." + parts[1] + "." + parts[2], "invalid websocket jwt"},
		{"standard base64 alphabet", strings.NewReplacer("-", "+", "_", "/").Replace(valid), "invalid websocket jwt"},
		{"stray bits in signature", strayBits, "invalid websocket jwt"},
		{"swapped payload", parts[0] + "." + b64(`{"exp":9999999999}`) + "." + parts[2], "invalid websocket jwt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkJWT(t, a, tt.token, tt.want)
		})
	}
	require.NotEqual(t, valid, strings.NewReplacer("-", "+", "_", "/").Replace(valid), "the alphabet case must differ from the valid token")
}

func TestJWTClaims(t *testing.T) {
	now := testNow.Unix()
	a := jwtAuth(t, auth.Config{})
	raw := func(payload string) string {
		return signRaw(sha256.New, testSecret, `{"alg":"HS256","typ":"JWT"}`, payload)
	}

	tests := []struct {
		name   string
		claims map[string]any
		token  string // used instead of claims when set
		want   string
	}{
		{"exp in the future", map[string]any{"exp": now + 60}, "", ""},
		{"exp missing", map[string]any{"nbf": now}, "", "invalid websocket jwt"},
		{"exp null", nil, raw(`{"exp":null}`), "invalid websocket jwt"},
		{"exp a string", map[string]any{"exp": "1750000060"}, "", "invalid websocket jwt"},
		{"exp a bool", map[string]any{"exp": true}, "", "invalid websocket jwt"},
		{"exp beyond int64", nil, raw(`{"exp":1e30}`), "invalid websocket jwt"},
		{"exp integer beyond int64", nil, raw(`{"exp":99999999999999999999}`), "invalid websocket jwt"},
		{"exp max int64", nil, raw(`{"exp":9223372036854775807}`), ""},
		{"exp float", map[string]any{"exp": float64(now) + 0.5}, "", ""},
		{"exp exponent notation", nil, raw(`{"exp":1.75000006e9}`), ""},
		{"exp 20s ago within skew", map[string]any{"exp": now - 20}, "", ""},
		{"exp 30s ago at skew edge", map[string]any{"exp": now - 30}, "", ""},
		{"exp 31s ago", map[string]any{"exp": now - 31}, "", "expired websocket jwt"},
		{"exp 40s ago", map[string]any{"exp": now - 40}, "", "expired websocket jwt"},
		{"exp 29.5s ago", map[string]any{"exp": float64(now) - 29.5}, "", ""},
		{"exp 30.5s ago", map[string]any{"exp": float64(now) - 30.5}, "", "expired websocket jwt"},
		{"exp min int64", nil, raw(`{"exp":-9223372036854775808}`), "expired websocket jwt"},
		{"nbf past", map[string]any{"exp": now + 60, "nbf": now - 60}, "", ""},
		{"nbf null", nil, raw(`{"exp":1750000060,"nbf":null}`), ""},
		{"nbf 20s ahead within skew", map[string]any{"exp": now + 60, "nbf": now + 20}, "", ""},
		{"nbf 30s ahead at skew edge", map[string]any{"exp": now + 60, "nbf": now + 30}, "", ""},
		{"nbf 31s ahead", map[string]any{"exp": now + 60, "nbf": now + 31}, "", "websocket jwt is not valid yet"},
		{"nbf 40s ahead", map[string]any{"exp": now + 60, "nbf": now + 40}, "", "websocket jwt is not valid yet"},
		{"nbf 30.5s ahead", map[string]any{"exp": now + 60, "nbf": float64(now) + 30.5}, "", "websocket jwt is not valid yet"},
		{"nbf a string", map[string]any{"exp": now + 60, "nbf": "soon"}, "", "invalid websocket jwt"},
		{"iss not checked", map[string]any{"exp": now + 60, "iss": "anyone"}, "", ""},
		{"iss not a string", map[string]any{"exp": now + 60, "iss": 7}, "", "invalid websocket jwt"},
		{"aud not checked", map[string]any{"exp": now + 60, "aud": []string{"x"}}, "", ""},
		{"aud not a string", map[string]any{"exp": now + 60, "aud": 7}, "", "invalid websocket jwt"},
		{"aud array with a number", map[string]any{"exp": now + 60, "aud": []any{"x", 7}}, "", "invalid websocket jwt"},
		{"aud array with null", nil, raw(`{"exp":1750000060,"aud":["x",null]}`), "invalid websocket jwt"},
		{"aud an object", map[string]any{"exp": now + 60, "aud": map[string]any{}}, "", "invalid websocket jwt"},
		{"duplicate exp keeps the last", nil, raw(`{"exp":1,"exp":1750000060}`), ""},
		{"unknown claims ignored", map[string]any{"exp": now + 60, "sub": 1, "scope": []int{1}}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token := tt.token
			if token == "" {
				token = sign(t, testSecret, tt.claims)
			}
			checkJWT(t, a, token, tt.want)
		})
	}
}

func TestJWTDefaultClock(t *testing.T) {
	a := newAuth(t, auth.Config{Mode: auth.SignedBearerToken, SharedSecretFile: writeFile(t, testSecret)})
	checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": time.Now().Unix() + 300}), "")
	checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": time.Now().Unix() - 300}), "expired websocket jwt")
}

func TestJWTCustomSkew(t *testing.T) {
	now := testNow.Unix()
	a := jwtAuth(t, auth.Config{MaxClockSkew: 5 * time.Second})
	checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": now - 5}), "")
	checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": now - 6}), "expired websocket jwt")
	checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": now + 60, "nbf": now + 5}), "")
	checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": now + 60, "nbf": now + 6}), "websocket jwt is not valid yet")
}

func TestJWTIssuer(t *testing.T) {
	exp := testNow.Unix() + 60
	a := jwtAuth(t, auth.Config{Issuer: " issuer-a "}) // the setting is trimmed
	checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": exp, "iss": "issuer-a"}), "")
	checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": exp, "iss": "issuer-b"}), "websocket jwt issuer mismatch")
	checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": exp, "iss": "Issuer-A"}), "websocket jwt issuer mismatch")
	checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": exp, "iss": " issuer-a "}), "websocket jwt issuer mismatch")
	checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": exp}), "websocket jwt issuer mismatch")
	checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": exp, "iss": nil}), "websocket jwt issuer mismatch")

	blank := jwtAuth(t, auth.Config{Issuer: "   "}) // blank means not checked
	checkJWT(t, blank, sign(t, testSecret, map[string]any{"exp": exp, "iss": "anyone"}), "")
}

func TestJWTAudience(t *testing.T) {
	exp := testNow.Unix() + 60
	a := jwtAuth(t, auth.Config{Audience: "appserver"})
	tests := []struct {
		name string
		aud  any
		want string
	}{
		{"string", "appserver", ""},
		{"array containing it", []string{"other", "appserver"}, ""},
		{"other string", "other", "websocket jwt audience mismatch"},
		{"array without it", []string{"other", "appserver2"}, "websocket jwt audience mismatch"},
		{"empty array", []string{}, "websocket jwt audience mismatch"},
		{"null", nil, "websocket jwt audience mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": exp, "aud": tt.aud}), tt.want)
		})
	}
	checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": exp}), "websocket jwt audience mismatch")

	blank := jwtAuth(t, auth.Config{Audience: " "})
	checkJWT(t, blank, sign(t, testSecret, map[string]any{"exp": exp, "aud": "other"}), "")
}

func TestJWTCheckOrder(t *testing.T) {
	now := testNow.Unix()
	a := jwtAuth(t, auth.Config{Issuer: "issuer-a", Audience: "appserver"})
	bad := map[string]any{"iss": "issuer-b", "aud": "other"}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range bad {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	checkJWT(t, a, sign(t, strings.Repeat("w", 32), with(map[string]any{"exp": now - 100})), "invalid websocket jwt")
	checkJWT(t, a, sign(t, testSecret, with(map[string]any{"exp": now - 100, "nbf": now + 100})), "expired websocket jwt")
	checkJWT(t, a, sign(t, testSecret, with(map[string]any{"exp": now + 100, "nbf": now + 100})), "websocket jwt is not valid yet")
	checkJWT(t, a, sign(t, testSecret, with(map[string]any{"exp": now + 100})), "websocket jwt issuer mismatch")
	checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": now + 100, "iss": "issuer-a", "aud": "other"}), "websocket jwt audience mismatch")
	checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": now + 100, "iss": "issuer-a", "aud": "appserver"}), "")
	// A malformed claim is a format error, reported before expiry.
	checkJWT(t, a, sign(t, testSecret, map[string]any{"exp": now - 100, "aud": 1}), "invalid websocket jwt")
}

func TestJWTModeUsesHeaderRules(t *testing.T) {
	a := jwtAuth(t, auth.Config{})
	requireRejected(t, serve(t, a, nil), "missing websocket bearer token")
	requireRejected(t, serve(t, a, header("Basic x")), "invalid authorization header")
	requireRejected(t, serve(t, a, header("Bearer ")), "invalid authorization header")
	good := sign(t, testSecret, map[string]any{"exp": testNow.Unix() + 60})
	requireRejected(t, serve(t, a, header("Bearer "+good+"\n")), "invalid authorization header")
	requireAllowed(t, serve(t, a, header("bearer  "+good+" ")))
}
