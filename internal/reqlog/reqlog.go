package reqlog

import (
	"context"
	"log/slog"

	"github.com/google/uuid"
)

// Header is the HTTP header a request id is taken from and answered in.
const Header = "X-Request-Id"

// Key is the log attribute holding the request id.
const Key = "request_id"

// MaxLen is the longest request id taken from a client.
const MaxLen = 128

// Valid reports whether a client's request id may be used as it is: 1 to
// MaxLen characters from A-Z, a-z, 0-9 and "-_.:+/=@", which every log
// format writes without escaping and no header or log line can be split
// with.
func Valid(id string) bool {
	if id == "" || len(id) > MaxLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '.', c == ':', c == '+', c == '/', c == '=', c == '@':
		default:
			return false
		}
	}
	return true
}

// New returns a new request id: a version 7 UUID, whose text sorts by the
// time it was made.
func New() string { return uuid.Must(uuid.NewV7()).String() }

// Request is what the logs know of one client request.
type Request struct {
	// ID is the request id.
	ID string
	// principal is who the request acts for, as the access log names it;
	// set by the door that authenticated the request.
	principal string
}

// Principal is the name SetPrincipal gave, "" when the request was not
// authenticated (refused, or a door without authentication).
func (r *Request) Principal() string { return r.principal }

type requestKey struct{}

// Start begins the logs' record of a request whose X-Request-Id header is
// given: the header's id when Valid, else a new one. The returned context
// carries it.
func Start(ctx context.Context, given string) (context.Context, *Request) {
	id := given
	if !Valid(id) {
		id = New()
	}
	r := &Request{ID: id}
	return context.WithValue(ctx, requestKey{}, r), r
}

// From returns the request ctx carries, or nil.
func From(ctx context.Context) *Request {
	r, _ := ctx.Value(requestKey{}).(*Request)
	return r
}

// ID returns the request id ctx carries, or "".
func ID(ctx context.Context) string {
	if r := From(ctx); r != nil {
		return r.ID
	}
	return ""
}

// SetPrincipal names who the request of ctx acts for in its access log
// line. It is called on the goroutine serving the request, before the
// handler returns; without a request in ctx it does nothing.
func SetPrincipal(ctx context.Context, name string) {
	if r := From(ctx); r != nil {
		r.principal = name
	}
}

// Detach returns a context that carries ctx's request id and nothing else
// of ctx (neither its values nor its cancellation), for work that outlives
// the request: a turn it started, a websocket session.
func Detach(ctx context.Context) context.Context {
	id := ID(ctx)
	if id == "" {
		return context.Background()
	}
	return context.WithValue(context.Background(), requestKey{}, &Request{ID: id})
}

// NewHandler wraps h so that a record logged with a context carrying a
// request id gets it as the Key attribute (inside the groups the logger
// opened), unless the logger or the record already has one.
func NewHandler(h slog.Handler) slog.Handler { return handler{inner: h} }

type handler struct {
	inner slog.Handler
	// has is set when the logger's attributes hold Key.
	has bool
}

func (h handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	if !h.has {
		if id := ID(ctx); id != "" && !recordHas(r) {
			r = r.Clone()
			r.AddAttrs(slog.String(Key, id))
		}
	}
	return h.inner.Handle(ctx, r)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	has := h.has
	for _, a := range attrs {
		has = has || a.Key == Key
	}
	return handler{inner: h.inner.WithAttrs(attrs), has: has}
}

func (h handler) WithGroup(name string) slog.Handler {
	return handler{inner: h.inner.WithGroup(name), has: h.has}
}

func recordHas(r slog.Record) bool {
	has := false
	r.Attrs(func(a slog.Attr) bool {
		has = a.Key == Key
		return !has
	})
	return has
}
