package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// hs256Header is the JOSE header SignHS256 writes, already encoded.
var hs256Header = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

// segmentEncoding decodes JWS segments: base64url, no padding, no stray bits.
var segmentEncoding = base64.RawURLEncoding.Strict()

// SignHS256 returns a compact HS256 JWS of claims signed with secret, the form
// of token the signed-bearer-token mode accepts. It does not add or check any
// claim; callers set exp (and nbf, iss, aud) themselves.
func SignHS256(secret []byte, claims map[string]any) (string, error) {
	if len(secret) == 0 {
		return "", errors.New("auth: empty HS256 signing secret")
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signingInput := hs256Header + "." + base64.RawURLEncoding.EncodeToString(payload)
	return signingInput + "." + base64.RawURLEncoding.EncodeToString(hs256(secret, signingInput)), nil
}

func hs256(secret []byte, signingInput string) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(signingInput))
	return mac.Sum(nil)
}

// jwtClaims holds the registered claims codex looks at.
type jwtClaims struct {
	exp      int64 // floor of the exp claim, in Unix seconds
	nbf      int64 // ceiling of the nbf claim, when hasNbf
	hasNbf   bool
	iss      string
	audience []string
}

// checkJWT verifies token and then its claims, in codex's order: format and
// signature, exp, nbf, iss, aud.
func (a *Authenticator) checkJWT(token string) *Failure {
	c, ok := a.verifyJWT(token)
	if !ok {
		return unauthorized(msgInvalidJWT)
	}
	now := a.now().Unix()
	if now > saturatingAdd(c.exp, a.skewSeconds) {
		return unauthorized(msgExpiredJWT)
	}
	if c.hasNbf && now < saturatingAdd(c.nbf, -a.skewSeconds) {
		return unauthorized(msgNotYetValidJWT)
	}
	if a.issuer != "" && c.iss != a.issuer {
		return unauthorized(msgIssuerMismatch)
	}
	if a.audience != "" && !slices.Contains(c.audience, a.audience) {
		return unauthorized(msgAudienceMismatch)
	}
	return nil
}

// verifyJWT checks the compact JWS structure, the header and the signature,
// and only then decodes the claims.
func (a *Authenticator) verifyJWT(token string) (jwtClaims, bool) {
	headerSeg, rest, ok1 := strings.Cut(token, ".")
	payloadSeg, sigSeg, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(sigSeg, ".") {
		return jwtClaims{}, false
	}
	header, ok := decodeObject(headerSeg)
	if !ok || !validHeader(header) {
		return jwtClaims{}, false
	}
	sig, ok := decodeSegment(sigSeg)
	if !ok || !hmac.Equal(sig, hs256(a.secret, headerSeg+"."+payloadSeg)) {
		return jwtClaims{}, false
	}
	claims, ok := decodeObject(payloadSeg)
	if !ok {
		return jwtClaims{}, false
	}
	return parseClaims(claims)
}

// validHeader accepts exactly alg HS256. typ is optional but must be a string;
// crit is refused because no extension is understood here (RFC 7515 §4.1.11).
func validHeader(h map[string]json.RawMessage) bool {
	var alg string
	if raw, ok := h["alg"]; !ok || !isString(raw) || json.Unmarshal(raw, &alg) != nil || alg != "HS256" {
		return false
	}
	if typ, ok := h["typ"]; ok && !isNull(typ) && !isString(typ) {
		return false
	}
	_, crit := h["crit"]
	return !crit
}

// parseClaims types the claims like codex's serde structs do: a claim of the
// wrong type makes the token invalid even when its check is disabled.
func parseClaims(m map[string]json.RawMessage) (jwtClaims, bool) {
	var c jwtClaims
	exp, ok := m["exp"]
	if !ok {
		return c, false
	}
	if c.exp, ok = numericDate(exp, math.Floor); !ok {
		return c, false
	}
	if nbf, present := m["nbf"]; present && !isNull(nbf) {
		if c.nbf, ok = numericDate(nbf, math.Ceil); !ok {
			return c, false
		}
		c.hasNbf = true
	}
	if iss, present := m["iss"]; present && !isNull(iss) {
		if !isString(iss) || json.Unmarshal(iss, &c.iss) != nil {
			return c, false
		}
	}
	if aud, present := m["aud"]; present && !isNull(aud) {
		if c.audience, ok = audienceClaim(aud); !ok {
			return c, false
		}
	}
	return c, true
}

// numericDate parses a JSON number of seconds, integer or not. A fraction is
// removed with round: floor for exp and ceiling for nbf keep the comparisons
// with a whole-second "now" exact. Values outside int64 are invalid.
func numericDate(raw json.RawMessage, round func(float64) float64) (int64, bool) {
	s := string(raw)
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return 0, false // a string, bool, object… (raw is valid JSON already)
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
	}
	f = round(f)
	if math.IsNaN(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// audienceClaim accepts a string or an array of strings.
func audienceClaim(raw json.RawMessage) ([]string, bool) {
	if isString(raw) {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		return []string{s}, true
	}
	var list []*string
	if json.Unmarshal(raw, &list) != nil || list == nil {
		return nil, false
	}
	out := make([]string, len(list))
	for i, s := range list {
		if s == nil {
			return nil, false
		}
		out[i] = *s
	}
	return out, true
}

// decodeObject decodes a segment holding a UTF-8 JSON object. Keys match
// exactly (unlike json.Unmarshal into a struct); a duplicate key keeps its
// last value, as RFC 7515 §4 allows.
func decodeObject(seg string) (map[string]json.RawMessage, bool) {
	b, ok := decodeSegment(seg)
	if !ok || !utf8.Valid(b) {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

// decodeSegment decodes strict unpadded base64url. The alphabet is checked
// first because the decoder would silently skip CR and LF.
func decodeSegment(seg string) ([]byte, bool) {
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return nil, false
		}
	}
	b, err := segmentEncoding.DecodeString(seg)
	return b, err == nil
}

func isNull(raw json.RawMessage) bool   { return string(raw) == "null" }
func isString(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '"' }

func saturatingAdd(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}
