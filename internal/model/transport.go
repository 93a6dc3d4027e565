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
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"time"
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
	// afterEndBytes and afterEndTimeout bound how much of a stream is
	// read, and for how long, after the event that ended it (see
	// finishStream).
	afterEndBytes   = 64 << 10
	afterEndTimeout = 500 * time.Millisecond
)

// errIdleTimeout is the cancel cause when a stream goes quiet for too long.
var errIdleTimeout = errors.New("idle timeout waiting for SSE")

// transport is what both wire clients share: the HTTP request, retries
// with backoff, the idle watchdog and error classification.
//
// Requests are made with net/http directly: the bodies are encoded by hand
// (with "stream":true), the URL and headers are prepared once per provider,
// and the event stream is read by sseReader with pooled buffers. (The
// openai-go SDK's request path, used before, cost about 40% of the
// daemon's allocations per tool round: a copy of the body to set "stream",
// headers rebuilt and cloned per attempt, a growing scanner buffer per
// stream, and a body wrapper that made the connection copy the body through
// a fresh buffer.)
type transport struct {
	cfg    ProviderConfig
	log    *slog.Logger
	deps   deps
	client *http.Client
	url    string      // the endpoint, with the configured query parameters
	header http.Header // the headers every request carries; cloned per request
}

// newTransport prepares the endpoint URL (base URL + path + query) and the
// static headers once.
func newTransport(cfg ProviderConfig, logger *slog.Logger, d deps, hc *http.Client, path string) (*transport, error) {
	u, err := url.Parse(strings.TrimSuffix(cfg.BaseURL, "/") + "/" + path)
	if err != nil {
		return nil, err
	}
	if len(cfg.QueryParams) > 0 {
		q := u.Query()
		for k, v := range cfg.QueryParams {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	h.Set("User-Agent", "appserver")
	if cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	for k, v := range cfg.Headers {
		h.Set(k, v)
	}
	return &transport{cfg: cfg, log: logger.With("provider", cfg.ID), deps: d, client: hc, url: u.String(), header: h}, nil
}

// logRequest writes the debug line of a request about to be sent: its
// model and size with the caller's LogAttrs. The provider is already on
// t.log, the one place that adds it.
func (t *transport) logRequest(ctx context.Context, msg string, req Request) {
	if !t.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	t.log.LogAttrs(ctx, slog.LevelDebug, msg, append([]slog.Attr{
		slog.String("model", req.Model), slog.Int("items", len(req.Input)), slog.Int("tools", len(req.Tools))}, req.LogAttrs...)...)
}

// sseHandler consumes one decoded SSE event; done reports a terminal event.
type sseHandler interface {
	// data is valid only during the call.
	handle(data []byte) (done bool, err error)
	// end is called when the stream ends cleanly without a terminal event;
	// it returns nil if the response is nevertheless complete.
	end() error
}

// runStats is what run reports besides its error.
type runStats struct {
	// attempts is how many HTTP requests were made.
	attempts int
	// limits are the rate limits of the last response that carried any.
	limits *RateLimits
}

// run sends body, retrying failures to obtain a stream, and feeds the
// stream to h; logAttrs are added to its log lines. It reports how many
// HTTP requests it made and the rate limits they reported, and drops the
// caller's reference to body.
func (t *transport) run(ctx context.Context, body *requestBody, h sseHandler, logAttrs []slog.Attr) (st runStats, _ error) {
	defer body.done()
	for attempt := 1; ; attempt++ {
		st.attempts = attempt
		err := t.attempt(ctx, body, h, &st)
		// An attempt that never wrote the request (the dial failed, say)
		// still ends the caller's wait for Sent: a retry may be minutes
		// away.
		body.markSent()
		if err == nil {
			return st, nil
		}
		if cb := (*callbackError)(nil); errors.As(err, &cb) {
			return st, cb.err
		}
		var me *Error
		if !errors.As(err, &me) || me.Kind == KindCanceled {
			return st, err
		}
		me.Attempts = attempt
		// Retryable errors only arise before a stream is obtained, so no
		// event has reached the caller and h is still untouched.
		if !me.Retryable() || attempt > t.cfg.MaxRetries {
			return st, me
		}
		delay, ok := t.retryDelay(me, attempt)
		if !ok {
			return st, me
		}
		t.log.LogAttrs(ctx, slog.LevelWarn, "model request failed; retrying", append([]slog.Attr{
			slog.String("kind", string(me.Kind)), slog.Int("status", me.HTTPStatus), slog.String("message", me.Message),
			slog.Int("attempt", attempt), slog.Duration("delay", delay)}, logAttrs...)...)
		if err := t.deps.sleep(ctx, delay); err != nil {
			return st, canceled(err)
		}
	}
}

// post sends one POST of body to the endpoint.
func (t *transport) post(ctx context.Context, body *requestBody) (*http.Response, error) {
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { body.wrote() },
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header = t.header.Clone()
	if t.deps.propagate != nil {
		t.deps.propagate(ctx, req.Header)
	}
	// GetBody lets net/http replay the body on a reused connection that
	// turns out to be dead, or on a 307/308 redirect.
	req.ContentLength = int64(len(body.bytes()))
	req.Body = body.reader()
	req.GetBody = func() (io.ReadCloser, error) { return body.reader(), nil }
	return t.client.Do(req)
}

// attempt makes one request and, if it got a stream, consumes it; the
// response's rate limits, when its headers carry any, go to st and to the
// client's observer (WithRateLimits), whatever its status.
func (t *transport) attempt(ctx context.Context, body *requestBody, h sseHandler, st *runStats) error {
	// The request ends with ctx while the stream runs, but not after
	// its end event: what follows is read in the background.
	actx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopParent := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	raw, err := t.post(actx, body)
	if err != nil {
		stopParent()
		cancel(nil)
		if ctx.Err() != nil {
			return canceled(ctx.Err())
		}
		return &Error{Kind: KindConnectionFailed, Message: connectionMessage(err), Err: err}
	}
	ended := false // the stream's end event was handled
	defer func() {
		stopParent()
		if ended {
			go finishStream(raw.Body, cancel)
			return
		}
		_ = raw.Body.Close()
		cancel(nil)
	}()
	if rl, ok := parseRateLimits(raw.Header, t.deps.now()); ok {
		st.limits = &rl
		if t.deps.rateLimits != nil {
			t.deps.rateLimits(rl)
		}
	}
	if raw.StatusCode < 200 || raw.StatusCode > 299 {
		return t.statusError(ctx, raw)
	}
	dec := newSSEReader(raw.Body)
	defer dec.release()

	idle := t.cfg.StreamIdleTimeout
	watchdog := time.AfterFunc(idle, func() { cancel(errIdleTimeout) })
	defer watchdog.Stop()
	for {
		data, ok := dec.next()
		if !ok {
			break
		}
		// The watchdog measures upstream silence, not the time the caller
		// spends handling an event.
		watchdog.Stop()
		done, err := h.handle(data)
		if err != nil || done {
			ended = err == nil
			return err
		}
		watchdog.Reset(idle)
	}
	switch {
	case ctx.Err() != nil:
		return canceled(ctx.Err())
	case errors.Is(context.Cause(actx), errIdleTimeout):
		return &Error{Kind: KindStreamDisconnected, Message: errIdleTimeout.Error(), Err: errIdleTimeout}
	case dec.err != nil:
		return &Error{Kind: KindStreamDisconnected, Message: "error reading the response stream: " + dec.err.Error(), Err: dec.err}
	}
	return h.end()
}

// finishStream reads what follows a stream's end event, at most
// afterEndBytes for at most afterEndTimeout, then closes the body and
// ends the request. net/http reuses a connection only once its response
// body was read to the end over HTTP/1.1 (a local model server, most
// proxies; HTTP/2 keeps the connection and resets the stream): a stream
// whose end event and the end of its chunked body reached the client in
// two reads (the server flushed between them) was closed with its
// connection, and the next request dialled a new one (and, over https,
// shook hands again). It runs on its own goroutine, so the turn does not
// wait for the server's last bytes. TestConnectionReusedAfterTheEndEvent;
// bench/README.md, "Model connections kept".
func finishStream(body io.ReadCloser, cancel context.CancelCauseFunc) {
	stop := time.AfterFunc(afterEndTimeout, func() { cancel(errAfterEnd) })
	_, _ = io.CopyN(io.Discard, body, afterEndBytes)
	stop.Stop()
	_ = body.Close()
	cancel(nil)
}

// errAfterEnd is the cancel cause of a stream that went on too long
// after its end event.
var errAfterEnd = errors.New("the stream went on after its end event")

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

// statusError turns a response that is not 2xx into an *Error from its
// status, its error body and its Retry-After headers.
func (t *transport) statusError(ctx context.Context, raw *http.Response) *Error {
	body, err := io.ReadAll(io.LimitReader(raw.Body, maxErrorBody))
	if err != nil && ctx.Err() != nil {
		return canceled(ctx.Err())
	}
	status := raw.StatusCode
	if status < 400 {
		msg := fmt.Sprintf("unexpected HTTP status %s", raw.Status)
		if loc := raw.Header.Get("Location"); loc != "" && status >= 300 {
			msg += fmt.Sprintf(" (redirect to %q; only 307 and 308 redirects, which keep the request, are followed)", redactQuery(loc))
		}
		return &Error{Kind: KindMalformed, HTTPStatus: status, Message: msg}
	}
	code, typ, msg := parseErrorBody(body)
	e := &Error{Kind: classifyStatus(status, code, typ), HTTPStatus: status, Code: code, Message: msg,
		Err: fmt.Errorf("POST %q: %s", redactQuery(t.url), raw.Status)}
	if d, ok := parseRetryAfter(raw.Header, t.deps.now()); ok {
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
	return fmt.Sprintf("%s %q: %v", uerr.Op, redactQuery(uerr.URL), uerr.Err)
}

// redactQuery drops a URL's query.
func redactQuery(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i]
	}
	return u
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
