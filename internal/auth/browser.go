package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// Browsers cannot put an Authorization header on a WebSocket or an
// EventSource. A client holding a bearer token (the operator's or a
// principal's) exchanges it for a credential a browser can present, bound
// to whom the token stands for and to the Origin that asked:
//
//   - a ticket (POST /v1/auth/ticket): used once, valid seconds, carried
//     by a websocket upgrade as the subprotocol TicketProtocolPrefix+ticket
//     or by an upgrade or an event stream as the query parameter
//     TicketParam;
//   - a session (POST /v1/auth/session): the HttpOnly, SameSite=Strict
//     cookie SessionCookie, valid hours, taken by the upgrade and every
//     request of the HTTP API; a request that changes something (and an
//     upgrade) must carry an Origin header when the cookie is what
//     authenticates it, which the front door checks against
//     allowed_origins.
//
// Both are 256 random bits kept in the store as their SHA-256 only, so
// that every daemon of a shared database takes them and a ticket is used
// once across all of them (docs/frontend.md).
const (
	// WebSocketProtocol is the subprotocol a browser offers beside its
	// ticket, and the only one the server selects: the ticket itself is
	// never echoed.
	WebSocketProtocol = "appserver"
	// TicketProtocolPrefix starts the subprotocol that carries a ticket.
	TicketProtocolPrefix = "appserver.ticket."
	// TicketParam is the query parameter that carries a ticket.
	TicketParam = "ticket"
	// SessionCookie is the name of the session cookie.
	SessionCookie = "appserver_session"

	// DefaultTicketTTL is how long a ticket stays valid when
	// BrowserConfig.TicketTTL is zero.
	DefaultTicketTTL = 30 * time.Second
	// DefaultSessionTTL is how long a session stays valid when
	// BrowserConfig.SessionTTL is zero.
	DefaultSessionTTL = 12 * time.Hour
)

// secretBytes is the size of a ticket or session secret: 256 bits.
const secretBytes = 32

// The refusals of browser credentials.
const (
	msgTwoCredentials   = "more than one credential: send a ticket or an Authorization header, once"
	msgInvalidTicket    = "invalid or already used ticket"
	msgExpiredTicket    = "expired ticket"
	msgTicketOrigin     = "ticket issued to another origin"
	msgNoTickets        = "tickets are not taken here"
	msgInvalidSession   = "invalid or expired session cookie"
	msgSessionOrigin    = "session cookie issued to another origin"
	msgSessionNeedsOrig = "a request authenticated by the session cookie must carry an Origin header"
	msgCredentialStore  = "cannot check the credential now"
)

// CredentialStore keeps the browser credentials; store.Store is one.
type CredentialStore interface {
	PutCredential(ctx context.Context, c store.Credential, now time.Time) error
	GetCredential(ctx context.Context, kind store.CredentialKind, digest []byte) (store.Credential, bool, error)
	DeleteCredential(ctx context.Context, kind store.CredentialKind, digest []byte) (store.Credential, bool, error)
}

// BrowserConfig configures Browser. Store is required; zero values get
// the defaults noted per field.
type BrowserConfig struct {
	// Store keeps the credentials: the daemon's store, shared by every
	// daemon of a Postgres database.
	Store CredentialStore
	// TicketTTL (auth_ticket_ttl) is how long a ticket stays valid; 0
	// means DefaultTicketTTL.
	TicketTTL time.Duration
	// SessionTTL (auth_session_ttl) is how long a session stays valid; 0
	// means DefaultSessionTTL.
	SessionTTL time.Duration
	// Now is the clock; nil means time.Now. Daemons sharing a database
	// compare their clocks' times: keep them synchronised (NTP) to well
	// within TicketTTL.
	Now func() time.Time
	// Rand is the source of secrets; nil means crypto/rand.
	Rand io.Reader
	// Logger gets the store's failures; nil discards them.
	Logger *slog.Logger
}

// Browser issues and checks the credentials browsers present: tickets and
// session cookies.
type Browser struct {
	cfg BrowserConfig
}

// NewBrowser returns the issuer and checker of browser credentials.
func NewBrowser(cfg BrowserConfig) (*Browser, error) {
	if cfg.Store == nil {
		return nil, apperr.New(apperr.Invalid, "auth: browser credentials need a store")
	}
	if cfg.TicketTTL <= 0 {
		cfg.TicketTTL = DefaultTicketTTL
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Browser{cfg: cfg}, nil
}

// Grant is a credential handed to a client: its secret, which the daemon
// does not keep, and how long it stays valid.
type Grant struct {
	Secret string
	TTL    time.Duration
}

// Cookie returns the session cookie of a session grant: HttpOnly,
// SameSite=Strict, for every path, Secure when the request came over TLS.
func (g Grant) Cookie(secure bool) *http.Cookie {
	return &http.Cookie{
		Name: SessionCookie, Value: g.Secret, Path: "/", MaxAge: int(g.TTL / time.Second),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode,
	}
}

// ClearedSessionCookie is the cookie that makes a browser forget the
// session cookie.
func ClearedSessionCookie(secure bool) *http.Cookie {
	return &http.Cookie{
		Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode,
	}
}

// IssueTicket issues a ticket standing for subject (a principal's name,
// "" for the operator), bound to origin ("" binds none).
func (b *Browser) IssueTicket(ctx context.Context, subject, origin string) (Grant, error) {
	return b.issue(ctx, store.CredentialTicket, subject, origin, b.cfg.TicketTTL)
}

// StartSession issues a session standing for subject, bound to origin.
func (b *Browser) StartSession(ctx context.Context, subject, origin string) (Grant, error) {
	return b.issue(ctx, store.CredentialSession, subject, origin, b.cfg.SessionTTL)
}

// EndSession ends the session of a cookie's value; an unknown or
// malformed value ends nothing.
func (b *Browser) EndSession(ctx context.Context, secret string) error {
	digest, ok := digestOf(secret)
	if !ok {
		return nil
	}
	_, _, err := b.cfg.Store.DeleteCredential(ctx, store.CredentialSession, digest)
	return err
}

func (b *Browser) issue(ctx context.Context, kind store.CredentialKind, subject, origin string, ttl time.Duration) (Grant, error) {
	var raw [secretBytes]byte
	if _, err := io.ReadFull(b.cfg.Rand, raw[:]); err != nil {
		return Grant{}, apperr.Wrap(apperr.Internal, err, "reading random bytes")
	}
	digest := sha256.Sum256(raw[:])
	now := b.cfg.Now()
	err := b.cfg.Store.PutCredential(ctx, store.Credential{
		Digest: digest[:], Kind: kind, Subject: subject, Origin: origin, Expires: now.Add(ttl),
	}, now)
	if err != nil {
		return Grant{}, err
	}
	return Grant{Secret: base64.RawURLEncoding.EncodeToString(raw[:]), TTL: ttl}, nil
}

// digestOf returns the digest a secret is stored under; ok is false when
// the text is not a secret the daemon could have issued.
func digestOf(secret string) ([]byte, bool) {
	if base64.RawURLEncoding.DecodedLen(len(secret)) != secretBytes {
		return nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(secret)
	if err != nil || len(raw) != secretBytes {
		return nil, false
	}
	d := sha256.Sum256(raw)
	return d[:], true
}

// redeemTicket uses a ticket up: whatever the outcome, it cannot be
// presented again.
func (b *Browser) redeemTicket(ctx context.Context, secret, origin string) (string, *Failure) {
	digest, ok := digestOf(secret)
	if !ok {
		return "", unauthorized(msgInvalidTicket)
	}
	c, found, err := b.cfg.Store.DeleteCredential(ctx, store.CredentialTicket, digest)
	if err != nil {
		return "", b.storeFailure(err)
	}
	switch {
	case !found:
		return "", unauthorized(msgInvalidTicket)
	case !b.cfg.Now().Before(c.Expires):
		return "", unauthorized(msgExpiredTicket)
	case !originMatches(c.Origin, origin):
		return "", forbidden(msgTicketOrigin)
	}
	return c.Subject, nil
}

// session checks a session cookie's value; ok is false when it names no
// live session, which leaves the request as if it carried no cookie.
func (b *Browser) session(ctx context.Context, secret string, r *http.Request, door Door) (subject string, ok bool, f *Failure) {
	digest, valid := digestOf(secret)
	if !valid {
		return "", false, nil
	}
	c, found, err := b.cfg.Store.GetCredential(ctx, store.CredentialSession, digest)
	if err != nil {
		return "", false, b.storeFailure(err)
	}
	if !found || !b.cfg.Now().Before(c.Expires) {
		return "", false, nil
	}
	origin := r.Header.Get("Origin")
	// A cookie goes with every request the browser makes to the daemon,
	// whoever's page makes it: what changes something (and an upgrade,
	// which opens a session that does) must say which page asked, and
	// the front door refuses the pages not in allowed_origins.
	if origin == "" && (door.Upgrade || !safeMethod(r.Method)) {
		return "", false, forbidden(msgSessionNeedsOrig)
	}
	if !originMatches(c.Origin, origin) {
		return "", false, forbidden(msgSessionOrigin)
	}
	return c.Subject, true, nil
}

// originMatches reports whether a request from origin may present a
// credential issued to bound. A credential issued without an Origin (to
// a server that hands it to its page) is bound to none; a request
// without an Origin is not a browser's cross-origin request (browsers
// send one on every upgrade and cross-origin fetch).
func originMatches(bound, origin string) bool {
	return bound == "" || origin == "" || bound == origin
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func forbidden(msg string) *Failure { return &Failure{Status: http.StatusForbidden, Message: msg} }

func (b *Browser) storeFailure(err error) *Failure {
	b.cfg.Logger.Warn("checking a browser credential", "err", err)
	status := http.StatusInternalServerError
	if apperr.Is(err, apperr.Unavailable) || errors.Is(err, context.Canceled) {
		status = http.StatusServiceUnavailable
	}
	return &Failure{Status: status, Message: msgCredentialStore}
}

// Door says which credentials a door of the daemon takes besides the
// Authorization header.
type Door struct {
	// Tickets: a ticket in the TicketParam query parameter, and on an
	// upgrade in the Sec-WebSocket-Protocol header.
	Tickets bool
	// Cookie: the session cookie.
	Cookie bool
	// Upgrade: the door is the websocket upgrade, which a cookie opens
	// only with an Origin header, as it does a state-changing request.
	Upgrade bool
}

// The doors of the daemon that take more than a bearer token.
var (
	// WebSocketDoor is the websocket upgrade of the network listener.
	WebSocketDoor = Door{Tickets: true, Cookie: true, Upgrade: true}
	// EventStreamDoor is a thread's event stream (SSE) of the HTTP API.
	EventStreamDoor = Door{Tickets: true, Cookie: true}
	// APIDoor is every other request of the HTTP API.
	APIDoor = Door{Cookie: true}
	// BearerDoor takes the Authorization header only: the requests that
	// issue tickets and sessions, and /mcp.
	BearerDoor = Door{}
)

// Identify says whom a request at door stands for: a principal's name,
// or "" for the operator. The credential is, in this order, a ticket
// (which must come alone), the Authorization header (Authenticator.
// Identify, which also admits a request without credentials where no
// mode is set), or the session cookie. A cookie naming no live session
// counts as absent. a and b may be nil: then no mode is set and no
// browser credential is taken.
func Identify(ctx context.Context, a *Authenticator, b *Browser, r *http.Request, door Door) (string, *Failure) {
	hasAuth := len(r.Header.Values("Authorization")) > 0
	if door.Tickets {
		ticket, has, f := ticketOf(r, door)
		if f != nil {
			return "", f
		}
		if has {
			if hasAuth {
				return "", unauthorized(msgTwoCredentials)
			}
			if b == nil {
				return "", unauthorized(msgNoTickets)
			}
			return b.redeemTicket(ctx, ticket, r.Header.Get("Origin"))
		}
	}
	staleCookie := false
	if door.Cookie && !hasAuth && b != nil {
		if c, err := r.Cookie(SessionCookie); err == nil {
			subject, ok, f := b.session(ctx, c.Value, r, door)
			if f != nil {
				return "", f
			}
			if ok {
				return subject, nil
			}
			staleCookie = true
		}
	}
	name, f := a.Identify(r)
	if f != nil && staleCookie {
		f = unauthorized(msgInvalidSession)
	}
	return name, f
}

// ticketOf finds the ticket a request carries; more than one is refused.
func ticketOf(r *http.Request, door Door) (ticket string, has bool, f *Failure) {
	var found []string
	if door.Upgrade {
		for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
			for _, p := range strings.Split(v, ",") {
				if t, ok := strings.CutPrefix(strings.TrimSpace(p), TicketProtocolPrefix); ok {
					found = append(found, t)
				}
			}
		}
	}
	found = append(found, r.URL.Query()[TicketParam]...)
	switch len(found) {
	case 0:
		return "", false, nil
	case 1:
		return found[0], true, nil
	}
	return "", false, unauthorized(msgTwoCredentials)
}

// WithoutTicket returns r without the ticket query parameter, so that
// nothing after the check (a handler, a log line) sees it; r itself when
// it has none.
func WithoutTicket(r *http.Request) *http.Request {
	q := r.URL.Query()
	if _, ok := q[TicketParam]; !ok {
		return r
	}
	q.Del(TicketParam)
	r2 := r.Clone(r.Context())
	r2.URL.RawQuery = q.Encode()
	r2.RequestURI = r2.URL.RequestURI()
	return r2
}
