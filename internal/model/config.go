package model

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/appserver/appserver/internal/apperr"
)

// The wire APIs a provider can speak (ProviderConfig.WireAPI).
const (
	WireAPIResponses = "responses"
	WireAPIChat      = "chat"
)

// Defaults applied by New to zero-valued ProviderConfig fields.
const (
	DefaultMaxRetries        = 4
	DefaultRequestTimeout    = 2 * time.Minute
	DefaultStreamIdleTimeout = 5 * time.Minute
)

// ProviderConfig describes one model provider, as configured in
// [model_providers.<id>]. The caller resolves secrets: the client never
// reads OPENAI_* environment variables (only the standard HTTP_PROXY,
// HTTPS_PROXY and NO_PROXY are honoured).
type ProviderConfig struct {
	// ID is the provider's configuration key, e.g. "openai".
	ID string
	// Name is a display name.
	Name string
	// BaseURL is the API root including its version segment, e.g.
	// "https://api.openai.com/v1"; "/responses" or "/chat/completions" is
	// appended. Required.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>" when not empty.
	APIKey string
	// WireAPI is "responses" (default) or "chat".
	WireAPI string
	// Headers are extra HTTP headers sent with every request.
	Headers map[string]string
	// QueryParams are extra URL query parameters (e.g. Azure's
	// api-version) sent with every request.
	QueryParams map[string]string
	// RequestTimeout bounds the wait for the response headers of one
	// attempt once the request is sent; the stream itself is bounded by
	// StreamIdleTimeout. 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxRetries is how many times a request that failed with 429, 5xx or
	// a connection error is retried before streaming starts, with
	// exponential backoff and jitter, honouring Retry-After. 0 means
	// DefaultMaxRetries; a negative value disables retries.
	MaxRetries int
	// StreamIdleTimeout is how long a stream may go without an event before
	// it is abandoned as disconnected. 0 means DefaultStreamIdleTimeout.
	StreamIdleTimeout time.Duration
}

// Option adjusts a client built by New; the defaults suit production.
type Option func(*deps)

// WithSleep replaces the function that waits between retries; it must return
// ctx.Err() if ctx ends first. Tests use it to record delays without
// sleeping.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(d *deps) { d.sleep = sleep }
}

// WithClock replaces the clock used to interpret HTTP-date Retry-After
// headers.
func WithClock(now func() time.Time) Option {
	return func(d *deps) { d.now = now }
}

// WithJitter replaces the source of backoff jitter: it returns a factor in
// [0.9, 1.1) by default.
func WithJitter(jitter func() float64) Option {
	return func(d *deps) { d.jitter = jitter }
}

// WithRateLimits gives the client a function called with the rate limits
// of every response whose headers carry some (RateLimits), retries and
// refusals included, on the goroutine of the Stream that got it.
func WithRateLimits(observe func(RateLimits)) Option {
	return func(d *deps) { d.rateLimits = observe }
}

// WithPropagation sets the function that writes what a request's context
// carries for the provider into the request's headers: the W3C trace
// context of the daemon's span, so that the provider's spans join the
// turn's trace. It runs once per attempt and must not block.
func WithPropagation(propagate func(ctx context.Context, h http.Header)) Option {
	return func(d *deps) { d.propagate = propagate }
}

type deps struct {
	sleep      func(ctx context.Context, d time.Duration) error
	now        func() time.Time
	jitter     func() float64
	propagate  func(ctx context.Context, h http.Header) // nil: nothing
	rateLimits func(RateLimits)                         // nil: nobody
}

// New returns a Client for the provider: a Responses API client or a Chat
// Completions client, depending on cfg.WireAPI. A nil logger discards logs.
func New(cfg ProviderConfig, logger *slog.Logger, opts ...Option) (Client, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d := deps{sleep: sleepCtx, now: time.Now, jitter: func() float64 { return 0.9 + 0.2*rand.Float64() }}
	for _, o := range opts {
		o(&d)
	}
	if cfg.BaseURL == "" {
		return nil, apperr.New(apperr.Invalid, "model provider %q: base_url is required", cfg.ID)
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, apperr.New(apperr.Invalid, "model provider %q: invalid base_url %q (want http:// or https://)", cfg.ID, cfg.BaseURL)
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.StreamIdleTimeout == 0 {
		cfg.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.WireAPI == "" {
		cfg.WireAPI = WireAPIResponses
	}
	if cfg.WireAPI != WireAPIResponses && cfg.WireAPI != WireAPIChat {
		return nil, apperr.New(apperr.Invalid, "model provider %q: unknown wire_api %q (want %q or %q)", cfg.ID, cfg.WireAPI, WireAPIResponses, WireAPIChat)
	}
	hc := &http.Client{Transport: newHTTPTransport(cfg.RequestTimeout), CheckRedirect: keepBodyRedirects}
	path := "responses"
	if cfg.WireAPI == WireAPIChat {
		path = "chat/completions"
	}
	t, err := newTransport(cfg, logger, d, hc, path)
	if err != nil {
		return nil, apperr.New(apperr.Invalid, "model provider %q: invalid base_url %q: %v", cfg.ID, cfg.BaseURL, err)
	}
	if cfg.WireAPI == WireAPIChat {
		return &chatClient{t: t}, nil
	}
	return &responsesClient{t: t}, nil
}

// keepBodyRedirects follows a redirect only when the request is sent again
// as it was (307, 308). A 301, 302 or 303 would turn the POST into a GET
// without its body, which no model API answers usefully; and a request
// body's write accounting (requestBody) counts every request sent as one
// copy of the body. The redirect response is then reported as an error.
func keepBodyRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if req.Method != via[0].Method || req.GetBody == nil {
		return http.ErrUseLastResponse
	}
	return nil
}

// newHTTPTransport returns a transport of its own for one provider, with the
// standard proxy and dial settings and a bound on waiting for headers.
func newHTTPTransport(headerTimeout time.Duration) *http.Transport {
	var tr *http.Transport
	if def, ok := http.DefaultTransport.(*http.Transport); ok {
		tr = def.Clone()
	} else {
		tr = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true, IdleConnTimeout: 90 * time.Second}
	}
	tr.ResponseHeaderTimeout = headerTimeout
	// Every thread with a running turn streams from the same host; Go's
	// default of two idle connections per host would make most turns of a
	// busy daemon open (and, over TLS, handshake) a new connection.
	tr.MaxIdleConnsPerHost = 256
	tr.MaxIdleConns = 512
	// A request body that fits in the connection's write buffer goes out
	// in one write; a larger one is copied to the socket through a
	// temporary buffer of up to 32 KB per request (net/http wraps the body
	// in an io.LimitReader, so the body's own WriteTo is never used).
	tr.WriteBufferSize = 64 << 10
	return tr
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
