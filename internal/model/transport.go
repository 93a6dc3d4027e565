package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

const (
	// retryBaseDelay is the first backoff delay; it doubles per attempt.
	retryBaseDelay = 200 * time.Millisecond
	// retryMaxDelay caps computed backoff.
	retryMaxDelay = 30 * time.Second
	// retryAfterLimit is the longest Retry-After we wait for; a longer one
	// ends the call with the error instead of stalling the turn.
	retryAfterLimit = 2 * time.Minute
	// maxErrorBody bounds how much of an error response body is read.
	maxErrorBody = 64 << 10
)

// errIdleTimeout is the cancel cause when a stream goes quiet for too long.
var errIdleTimeout = errors.New("idle timeout waiting for SSE")

// transport is what both wire clients share: SDK options, retries with
// backoff, the idle watchdog and error classification.
type transport struct {
	cfg     ProviderConfig
	log     *slog.Logger
	deps    deps
	sdkOpts []option.RequestOption
}

// openFunc starts one streaming HTTP request through the SDK with the given
// extra options and returns the SDK's error, if any.
type openFunc func(ctx context.Context, opts ...option.RequestOption) error

// sseHandler consumes one decoded SSE event; done reports a terminal event.
type sseHandler interface {
	handle(ev ssestream.Event) (done bool, err error)
	// end is called when the stream ends cleanly without a terminal event;
	// it returns nil if the response is nevertheless complete.
	end() error
}

// run sends body, retrying failures to obtain a stream, and feeds the
// stream to h.
func (t *transport) run(ctx context.Context, body []byte, open openFunc, h sseHandler) error {
	for attempt := 1; ; attempt++ {
		err := t.attempt(ctx, body, open, h)
		if err == nil {
			return nil
		}
		if cb := (*callbackError)(nil); errors.As(err, &cb) {
			return cb.err
		}
		var me *Error
		if !errors.As(err, &me) || me.Kind == KindCanceled {
			return err
		}
		me.Attempts = attempt
		// Retryable errors only arise before a stream is obtained, so no
		// event has reached the caller and h is still untouched.
		if !me.Retryable() || attempt > t.cfg.MaxRetries {
			return me
		}
		delay, ok := t.retryDelay(me, attempt)
		if !ok {
			return me
		}
		t.log.Warn("model request failed; retrying", "kind", me.Kind, "status", me.HTTPStatus,
			"message", me.Message, "attempt", attempt, "delay", delay)
		if err := t.deps.sleep(ctx, delay); err != nil {
			return canceled(err)
		}
	}
}

// attempt makes one request and, if it got a stream, consumes it.
func (t *transport) attempt(ctx context.Context, body []byte, open openFunc, h sseHandler) error {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var raw *http.Response
	err := open(actx, option.WithRequestBody("application/json", body), option.WithResponseInto(&raw))
	if err != nil {
		if raw != nil && raw.Body != nil {
			defer raw.Body.Close()
		}
		return t.classifyOpenError(ctx, err, raw)
	}
	if raw == nil || raw.Body == nil {
		return &Error{Kind: KindMalformed, Message: "empty HTTP response"}
	}
	dec := ssestream.NewDecoder(raw)
	defer dec.Close()

	idle := t.cfg.StreamIdleTimeout
	watchdog := time.AfterFunc(idle, func() { cancel(errIdleTimeout) })
	defer watchdog.Stop()
	for dec.Next() {
		// The watchdog measures upstream silence, not the time the caller
		// spends handling an event.
		watchdog.Stop()
		done, err := h.handle(dec.Event())
		if err != nil || done {
			return err
		}
		watchdog.Reset(idle)
	}
	switch {
	case ctx.Err() != nil:
		return canceled(ctx.Err())
	case errors.Is(context.Cause(actx), errIdleTimeout):
		return &Error{Kind: KindStreamDisconnected, Message: errIdleTimeout.Error(), Err: errIdleTimeout}
	case dec.Err() != nil:
		return &Error{Kind: KindStreamDisconnected, Message: "error reading the response stream: " + dec.Err().Error(), Err: dec.Err()}
	}
	return h.end()
}

// callbackError carries an error returned by the caller's event function
// through the transport untouched (and never retried).
type callbackError struct{ err error }

// Error returns the caller's error text.
func (c *callbackError) Error() string { return c.err.Error() }

// emitter wraps the caller's event function so that its errors are marked
// as the caller's; a nil fn ignores events.
func emitter(fn func(Event) error) func(Event) error {
	return func(ev Event) error {
		if fn == nil {
			return nil
		}
		if err := fn(ev); err != nil {
			return &callbackError{err: err}
		}
		return nil
	}
}

func canceled(err error) *Error {
	return &Error{Kind: KindCanceled, Message: "request canceled", Err: err}
}

// classifyOpenError turns a failure to obtain a stream into an *Error.
func (t *transport) classifyOpenError(ctx context.Context, err error, raw *http.Response) *Error {
	if ctx.Err() != nil {
		return canceled(ctx.Err())
	}
	status := 0
	var body []byte
	var header http.Header
	if raw != nil && raw.StatusCode >= 400 {
		status, header = raw.StatusCode, raw.Header
		if raw.Body != nil {
			body, _ = io.ReadAll(io.LimitReader(raw.Body, maxErrorBody))
		}
	} else if apiErr := (*openai.Error)(nil); errors.As(err, &apiErr) && apiErr.StatusCode >= 400 {
		status = apiErr.StatusCode
		body = []byte(apiErr.RawJSON())
	}
	if status == 0 {
		return &Error{Kind: KindConnectionFailed, Message: connectionMessage(err), Err: err}
	}
	code, typ, msg := parseErrorBody(body)
	e := &Error{Kind: classifyStatus(status, code, typ), HTTPStatus: status, Code: code, Message: msg, Err: err}
	if d, ok := parseRetryAfter(header, t.deps.now()); ok {
		e.RetryAfter, e.retryAfterSet = d, true
	}
	return e
}

// connectionMessage describes a transport error without the URL's query,
// which may carry provider parameters not meant for users.
func connectionMessage(err error) string {
	var uerr *url.Error
	if !errors.As(err, &uerr) {
		return err.Error()
	}
	u := uerr.URL
	if i := strings.IndexByte(u, '?'); i >= 0 {
		u = u[:i]
	}
	return fmt.Sprintf("%s %q: %v", uerr.Op, u, uerr.Err)
}

// parseErrorBody extracts code, type and message from an OpenAI-style error
// body ({"error":{…}} or a bare error object); anything else becomes the
// message, trimmed and truncated.
func parseErrorBody(body []byte) (code, typ, msg string) {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	obj := body
	if json.Unmarshal(body, &env) == nil && len(env.Error) > 0 {
		obj = env.Error
	}
	var e struct {
		Code    any    `json:"code"`
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	if json.Unmarshal(obj, &e) == nil && (e.Message != "" || e.Type != "" || e.Code != nil) {
		return anyString(e.Code), e.Type, e.Message
	}
	if json.Unmarshal(obj, &msg) == nil {
		return "", "", msg
	}
	msg = strings.TrimSpace(string(body))
	if len(msg) > 1000 {
		msg = msg[:1000] + "..."
	}
	return "", "", msg
}

func anyString(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

// parseRetryAfter reads retry-after-ms (OpenAI) or Retry-After (seconds or
// an HTTP date).
func parseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if d, ok := parseDelay(h.Get("Retry-After-Ms"), time.Millisecond); ok {
		return d, true
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if d, ok := parseDelay(v, time.Second); ok {
		return d, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

// parseDelay parses a non-negative decimal number of units, clamping absurd
// values so that they exceed retryAfterLimit instead of overflowing.
func parseDelay(v string, unit time.Duration) (time.Duration, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f < 0 || math.IsNaN(f) {
		return 0, false
	}
	if f*float64(unit) > float64(24*time.Hour) {
		return 24 * time.Hour, true
	}
	return time.Duration(f * float64(unit)), true
}

// retryDelay returns how long to wait before the next attempt, and false when
// upstream asked for a longer wait than we are willing to make.
func (t *transport) retryDelay(e *Error, attempt int) (time.Duration, bool) {
	if e.retryAfterSet {
		return e.RetryAfter, e.RetryAfter <= retryAfterLimit
	}
	d := float64(retryBaseDelay) * math.Pow(2, float64(attempt-1))
	d = min(d, float64(retryMaxDelay)) * t.deps.jitter()
	return time.Duration(d), true
}
