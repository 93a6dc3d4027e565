package auth

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/appserver/appserver/internal/apperr"
)

// Mode selects how websocket upgrades are authenticated (the ws_auth setting).
type Mode string

// The websocket auth modes; the values are the ws_auth setting's spellings.
const (
	// None, the zero value, authenticates nobody and is only allowed on loopback.
	None Mode = ""
	// CapabilityToken requires `Authorization: Bearer <token>` whose SHA-256
	// matches the configured digest.
	CapabilityToken Mode = "capability-token"
	// SignedBearerToken requires `Authorization: Bearer <JWT>` signed with HS256
	// by the configured shared secret.
	SignedBearerToken Mode = "signed-bearer-token"
)

// DefaultMaxClockSkew is the clock skew tolerated on exp and nbf when
// Config.MaxClockSkew is zero.
const DefaultMaxClockSkew = 30 * time.Second

// MinSharedSecretBytes is the shortest JWT shared secret New accepts.
const MinSharedSecretBytes = 32

// The 401 bodies codex sends; clients and scripts match on them.
const (
	msgMissingToken     = "missing websocket bearer token"
	msgInvalidHeader    = "invalid authorization header"
	msgInvalidToken     = "invalid websocket bearer token"
	msgInvalidJWT       = "invalid websocket jwt"
	msgExpiredJWT       = "expired websocket jwt"
	msgNotYetValidJWT   = "websocket jwt is not valid yet"
	msgIssuerMismatch   = "websocket jwt issuer mismatch"
	msgAudienceMismatch = "websocket jwt audience mismatch"
)

// Config is the websocket auth configuration; empty strings mean "not set".
type Config struct {
	// Mode is the ws_auth setting.
	Mode Mode
	// TokenFile (ws_token_file) is the absolute path of a file holding the
	// capability token; exclusive with TokenSHA256.
	TokenFile string
	// TokenSHA256 (ws_token_sha256) is the hex SHA-256 digest of the
	// capability token, in either case; exclusive with TokenFile.
	TokenSHA256 string
	// SharedSecretFile (ws_shared_secret_file) is the absolute path of a file
	// holding the HS256 secret, at least MinSharedSecretBytes once trimmed.
	SharedSecretFile string
	// Issuer (ws_issuer), when not blank, must equal the JWT's iss claim.
	Issuer string
	// Audience (ws_audience), when not blank, must be (in) the JWT's aud claim.
	Audience string
	// MaxClockSkew (ws_max_clock_skew_seconds) widens the exp and nbf checks;
	// whole seconds only, zero means DefaultMaxClockSkew.
	MaxClockSkew time.Duration
	// Now is the clock used for exp and nbf; nil means time.Now.
	Now func() time.Time
	// Principals maps principal names to the hex SHA-256 digest of their
	// bearer tokens ([http_api.principals.<name>] token_sha256): Identify
	// knows them in every mode, None included.
	Principals map[string]string
}

// Authenticator checks websocket upgrade requests against one Config; it is
// immutable after New and safe for concurrent use.
type Authenticator struct {
	mode Mode

	tokenDigest [sha256.Size]byte // CapabilityToken: SHA-256 of the token; the token itself is not kept

	principals []principalToken // sorted by name

	secret      []byte // SignedBearerToken
	issuer      string // "" = not checked
	audience    string // "" = not checked
	skewSeconds int64
	now         func() time.Time
}

// Failure is why Check refused a request: the HTTP status and the exact
// plain-text body to send.
type Failure struct {
	// Status is the HTTP status, always 401 Unauthorized.
	Status int
	// Message is one of codex's fixed messages, e.g. "invalid websocket jwt".
	Message string
}

// New validates cfg and reads its token or secret file, so that every
// configuration mistake surfaces at startup as an apperr.Invalid error naming
// the setting.
func New(cfg Config) (*Authenticator, error) {
	if err := validateSettings(cfg); err != nil {
		return nil, err
	}
	a := &Authenticator{mode: cfg.Mode}
	if err := a.addPrincipals(cfg.Principals); err != nil {
		return nil, err
	}
	switch cfg.Mode {
	case CapabilityToken:
		if cfg.TokenFile != "" {
			token, err := readTrimmed("ws_token_file", cfg.TokenFile)
			if err != nil {
				return nil, err
			}
			a.tokenDigest = sha256.Sum256(token)
			clear(token)
			break
		}
		digest, err := hex.DecodeString(strings.TrimSpace(cfg.TokenSHA256))
		if err != nil || len(digest) != sha256.Size {
			return nil, apperr.New(apperr.Invalid, "ws_token_sha256 must be a 64-character hex SHA-256 digest")
		}
		copy(a.tokenDigest[:], digest)
	case SignedBearerToken:
		secret, err := readTrimmed("ws_shared_secret_file", cfg.SharedSecretFile)
		if err != nil {
			return nil, err
		}
		if len(secret) < MinSharedSecretBytes {
			return nil, apperr.New(apperr.Invalid, "ws_shared_secret_file %s must hold at least %d bytes (after trimming whitespace), got %d",
				cfg.SharedSecretFile, MinSharedSecretBytes, len(secret))
		}
		a.secret = secret
		a.issuer = strings.TrimSpace(cfg.Issuer)
		a.audience = strings.TrimSpace(cfg.Audience)
		skew := cfg.MaxClockSkew
		if skew == 0 {
			skew = DefaultMaxClockSkew
		}
		a.skewSeconds = int64(skew / time.Second)
		a.now = cfg.Now
		if a.now == nil {
			a.now = time.Now
		}
	}
	return a, nil
}

// validateSettings checks which settings are given against the mode, before
// any file is read.
func validateSettings(cfg Config) error {
	type setting struct {
		name  string
		given bool
	}
	tokenSettings := []setting{
		{"ws_token_file", cfg.TokenFile != ""},
		{"ws_token_sha256", cfg.TokenSHA256 != ""},
	}
	jwtSettings := []setting{
		{"ws_shared_secret_file", cfg.SharedSecretFile != ""},
		{"ws_issuer", cfg.Issuer != ""},
		{"ws_audience", cfg.Audience != ""},
		{"ws_max_clock_skew_seconds", cfg.MaxClockSkew != 0},
	}
	requireMode := func(settings []setting, want Mode) error {
		for _, s := range settings {
			if s.given {
				return apperr.New(apperr.Invalid, "%s requires ws_auth = %q (ws_auth is %q)", s.name, want, cfg.Mode)
			}
		}
		return nil
	}

	switch cfg.Mode {
	case None:
		if err := requireMode(tokenSettings, CapabilityToken); err != nil {
			return err
		}
		return requireMode(jwtSettings, SignedBearerToken)
	case CapabilityToken:
		if err := requireMode(jwtSettings, SignedBearerToken); err != nil {
			return err
		}
		switch {
		case cfg.TokenFile != "" && cfg.TokenSHA256 != "":
			return apperr.New(apperr.Invalid, "ws_token_file and ws_token_sha256 are mutually exclusive")
		case cfg.TokenFile == "" && cfg.TokenSHA256 == "":
			return apperr.New(apperr.Invalid, "ws_token_file or ws_token_sha256 is required when ws_auth = %q", CapabilityToken)
		case cfg.TokenFile != "":
			return requireAbsolute("ws_token_file", cfg.TokenFile)
		}
		return nil
	case SignedBearerToken:
		if err := requireMode(tokenSettings, CapabilityToken); err != nil {
			return err
		}
		if cfg.SharedSecretFile == "" {
			return apperr.New(apperr.Invalid, "ws_shared_secret_file is required when ws_auth = %q", SignedBearerToken)
		}
		if cfg.MaxClockSkew < 0 || cfg.MaxClockSkew%time.Second != 0 {
			return apperr.New(apperr.Invalid, "ws_max_clock_skew_seconds must be a non-negative whole number of seconds, got %v", cfg.MaxClockSkew)
		}
		return requireAbsolute("ws_shared_secret_file", cfg.SharedSecretFile)
	default:
		return apperr.New(apperr.Invalid, "unknown ws_auth %q (want %q or %q, or leave it unset)", cfg.Mode, CapabilityToken, SignedBearerToken)
	}
}

func requireAbsolute(setting, path string) error {
	if !filepath.IsAbs(path) {
		return apperr.New(apperr.Invalid, "%s must be an absolute path, got %q", setting, path)
	}
	return nil
}

// readTrimmed returns the whitespace-trimmed contents of a secret file, which
// must be non-empty UTF-8.
func readTrimmed(setting, path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, apperr.Wrap(apperr.Invalid, err, "%s: cannot read the file", setting)
	}
	defer clear(raw)
	if !utf8.Valid(raw) {
		return nil, apperr.New(apperr.Invalid, "%s %s is not valid UTF-8", setting, path)
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return nil, apperr.New(apperr.Invalid, "%s %s is empty", setting, path)
	}
	return bytes.Clone(trimmed), nil
}

// Enabled reports whether requests need credentials, i.e. the mode is not
// None (a nil Authenticator has none).
func (a *Authenticator) Enabled() bool { return a != nil && a.mode != None }

// Check authenticates an upgrade request from its Authorization header and
// returns nil when it may proceed.
func (a *Authenticator) Check(r *http.Request) *Failure {
	if a.mode == None {
		return nil
	}
	token, f := bearerToken(r.Header)
	if f != nil {
		return f
	}
	if a.mode == CapabilityToken {
		digest := sha256.Sum256([]byte(token))
		if subtle.ConstantTimeCompare(digest[:], a.tokenDigest[:]) != 1 {
			return unauthorized(msgInvalidToken)
		}
		return nil
	}
	return a.checkJWT(token)
}

// Middleware rejects requests that fail Check with the 401 codex sends and
// passes the others to next. Wrap only the websocket upgrade: health probes
// are not behind auth (docs/protocol.md §1.1).
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	if !a.Enabled() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f := a.Check(r); f != nil {
			f.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ServeHTTP writes the failure as codex does: its status and its message as
// a text/plain body without a trailing newline.
func (f *Failure) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(f.Message)))
	w.WriteHeader(f.Status)
	_, _ = io.WriteString(w, f.Message)
}

func unauthorized(msg string) *Failure {
	return &Failure{Status: http.StatusUnauthorized, Message: msg}
}

// bearerToken extracts the token of `Authorization: <scheme> <token>` the way
// codex does: first header only, visible ASCII only, the scheme matched
// case-insensitively against Bearer, the token trimmed and non-empty.
func bearerToken(h http.Header) (string, *Failure) {
	values := h.Values("Authorization")
	if len(values) == 0 {
		return "", unauthorized(msgMissingToken)
	}
	v := values[0]
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return "", unauthorized(msgInvalidHeader)
		}
	}
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", unauthorized(msgInvalidHeader)
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", unauthorized(msgInvalidHeader)
	}
	return token, nil
}

// RequireForAddress refuses to run without auth on anything but a loopback
// address (127.0.0.0/8, ::1 or "localhost"), as codex 0.169.0 does. host may
// carry a port; an empty host means every interface and is refused too.
func RequireForAddress(mode Mode, host string) error {
	if mode == CapabilityToken || mode == SignedBearerToken || isLoopback(host) {
		return nil
	}
	return apperr.New(apperr.Invalid,
		"refusing to start non-loopback websocket listener %s without auth; set ws_auth to %q or %q",
		host, CapabilityToken, SignedBearerToken)
}

func isLoopback(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	// An IPv4-mapped 127.x address is loopback traffic too.
	return err == nil && addr.Unmap().IsLoopback()
}

// String returns the ws_auth spelling of m, "none" for None.
func (m Mode) String() string {
	if m == None {
		return "none"
	}
	return string(m)
}
