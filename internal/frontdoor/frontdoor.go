package frontdoor

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Pinger reports whether the transcript store is reachable; /readyz uses it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Mount is a handler served under a path prefix of the network listener,
// behind the origin guard.
type Mount struct {
	// Pattern is the prefix, for example "/v1".
	Pattern string
	Handler http.Handler
}

// Config configures a FrontDoor. Zero values get the defaults noted per
// field.
type Config struct {
	// AllowedOrigins lists the exact Origin header values that may reach
	// the network listener; any other request carrying an Origin header is
	// refused with 403.
	AllowedOrigins []string
	// Store is pinged by /readyz; nil means always ready.
	Store Pinger
	// Registry is served on /metrics and holds the front door's own
	// series; nil means a registry of its own (NewRegistry).
	Registry *prometheus.Registry
	// Drain is the daemon's drain state; nil means one of its own.
	Drain *Drain
	// Mounts are served on the network listener under their patterns.
	Mounts []Mount
	// Upgrade serves every other path of the network listener: the
	// websocket upgrade. nil answers 404.
	Upgrade http.Handler
	// Local serves every request of the unix control socket; nil refuses
	// to serve one.
	Local http.Handler
	// Tracing wraps the handling of every request of both listeners,
	// inside its request id and access log line and, on the network
	// listener, inside the router, so that the route pattern is known
	// when it returns (chi.RouteContext): the composition root's server
	// spans. nil traces nothing.
	Tracing func(http.Handler) http.Handler
	// Logger; nil discards.
	Logger *slog.Logger
}

// FrontDoor serves the daemon's listener.
type FrontDoor struct {
	cfg     Config
	log     *slog.Logger
	drain   *Drain
	router  chi.Router
	origins map[string]struct{}
	// originRejections counts requests refused for their Origin header.
	originRejections prometheus.Counter

	// local is what the control socket serves: Config.Local behind the
	// same request ids, access log and spans.
	local http.Handler

	mu     sync.Mutex    // guards hs and served
	hs     *http.Server  // the listener's server once Serve ran
	served chan struct{} // closed when hs.Serve has returned
}

// New builds the front door; Serve serves it on a listener.
func New(cfg Config) (*FrontDoor, error) {
	if cfg.Registry == nil {
		cfg.Registry = NewRegistry()
	}
	if cfg.Drain == nil {
		cfg.Drain = new(Drain)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Upgrade == nil {
		cfg.Upgrade = http.NotFoundHandler()
	}
	f := &FrontDoor{
		cfg:     cfg,
		log:     cfg.Logger,
		drain:   cfg.Drain,
		origins: make(map[string]struct{}, len(cfg.AllowedOrigins)),
		originRejections: promauto.With(cfg.Registry).NewCounter(prometheus.CounterOpts{
			Name: "appserver_origin_rejections_total",
			Help: "Requests refused with 403 because of a disallowed Origin header.",
		}),
	}
	for _, o := range cfg.AllowedOrigins {
		f.origins[o] = struct{}{}
	}
	r := f.newRouter()
	r.Use(f.originGuard)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	r.Get("/readyz", f.readyz)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{Registry: cfg.Registry}))
	for _, m := range cfg.Mounts {
		r.Mount(m.Pattern, m.Handler)
	}
	// Every other path, and every other method of the paths above, is the
	// websocket upgrade, under one route pattern.
	r.Handle(upgradeRoute, cfg.Upgrade)
	f.router = r
	if cfg.Local != nil {
		local := f.newRouter()
		local.Handle(upgradeRoute, cfg.Local)
		f.local = local
	}
	return f, nil
}

// upgradeRoute is the route pattern of the websocket upgrade.
const upgradeRoute = "/*"

// newRouter returns a router whose requests get their request id, access
// log line and span.
func (f *FrontDoor) newRouter() chi.Router {
	r := chi.NewRouter()
	r.Use(f.edge)
	if f.cfg.Tracing != nil {
		r.Use(f.cfg.Tracing)
	}
	return r
}

// NewRegistry returns a registry holding the Go runtime and process
// collectors, for the daemon's series and /metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler returns what the network listener serves.
func (f *FrontDoor) Handler() http.Handler { return f.router }

// Drain returns the drain state.
func (f *FrontDoor) Drain() *Drain { return f.drain }

// originGuard refuses any request whose Origin header is not allowed, which
// blocks cross-site websocket hijacking, and answers CORS for allowed ones.
func (f *FrontDoor) originGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin, present := r.Header["Origin"]
		if !present {
			next.ServeHTTP(w, r)
			return
		}
		if len(origin) != 1 {
			f.originRejections.Inc()
			w.WriteHeader(http.StatusForbidden)
			return
		}
		if _, ok := f.origins[origin[0]]; !ok && !sameLocalOrigin(r, origin[0]) {
			f.originRejections.Inc()
			w.WriteHeader(http.StatusForbidden)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin[0])
		// An allowed page may send the session cookie (fetch with
		// credentials "include"); the API asks more of a request that
		// the cookie authenticates (auth.Identify).
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key, Last-Event-ID, Prefer, X-Request-Id, Traceparent, Tracestate")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sameLocalOrigin reports whether origin is the origin the request was
// sent to (the page came from this listener: the web console) on a host
// that DNS cannot rebind to another address: an IP literal or "localhost".
// A page of another name that resolves here (DNS rebinding) has that name
// in its Origin and Host alike, so the host must not be a name; a daemon
// reached by a name, or behind a proxy that ends TLS, lists its origin in
// allowed_origins.
func sameLocalOrigin(r *http.Request, origin string) bool {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if r.Host == "" || origin != scheme+"://"+r.Host {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return host == "localhost" || net.ParseIP(strings.Trim(host, "[]")) != nil
}

func (f *FrontDoor) readyz(w http.ResponseWriter, r *http.Request) {
	if f.drain.Draining() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if f.cfg.Store != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := f.cfg.Store.Ping(ctx); err != nil {
			f.log.Warn("readiness check: store unreachable", "err", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// Serve serves on ln until ctx is cancelled or the listener fails, then
// starts draining and returns the listener's error, nil when ctx ended. A
// unix socket listener (ListenUnix) is the control socket and gets
// Config.Local; any other gets the router. The connections stay open, so
// that they still hear the end of the turns running; Shutdown closes the
// listener (the caller closes the connections it hijacked).
func (f *FrontDoor) Serve(ctx context.Context, ln net.Listener) error {
	var h http.Handler = f.router
	if ln.Addr().Network() == "unix" {
		if f.local == nil {
			return errors.New("frontdoor: no handler for a unix socket")
		}
		h = f.local
	}
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(f.log.Handler(), slog.LevelDebug),
	}
	served := make(chan struct{})
	f.mu.Lock()
	if f.hs != nil {
		f.mu.Unlock()
		return errors.New("frontdoor: Serve called twice")
	}
	f.hs, f.served = hs, served
	f.mu.Unlock()
	errc := make(chan error, 1)
	go func() {
		defer close(served)
		errc <- hs.Serve(ln)
	}()
	var err error
	select {
	case err = <-errc:
		// The listener failed: stop accepting just the same, so that the
		// caller's shutdown finds the same state as after ctx ended.
		f.log.Error("listener failed", "err", err)
	case <-ctx.Done():
		f.log.Info("shutting down")
	}
	f.drain.Start()
	return err
}

// Shutdown starts draining, closes the listener and waits for Serve's
// listener goroutine, or for ctx. It tolerates a front door that never
// served and being called twice.
func (f *FrontDoor) Shutdown(ctx context.Context) error {
	f.drain.Start()
	f.mu.Lock()
	hs, served := f.hs, f.served
	f.mu.Unlock()
	if hs == nil {
		return nil
	}
	err := hs.Shutdown(ctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	select {
	case <-served:
	case <-ctx.Done():
		if err == nil {
			err = errors.New("timed out waiting for the listener to close")
		}
	}
	return err
}
