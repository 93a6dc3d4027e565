package model

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"sync"

	"github.com/appserver/appserver/internal/apperr"
)

// ProviderSource is one configured provider as a Router builds its client:
// the client's config plus where its secrets are. The secrets are read
// from the environment when the provider is first used, and from nowhere
// else.
type ProviderSource struct {
	// Config is the client's config. Its ID is the provider's id; its
	// APIKey is the value of APIKeyEnv when that is set, and HeaderEnv's
	// headers are added to its Headers.
	Config ProviderConfig
	// APIKeyEnv names the environment variable holding the API key; ""
	// sends none.
	APIKeyEnv string
	// HeaderEnv maps header names to the environment variables holding
	// their values; a variable unset or empty leaves the header out (a
	// value in Config.Headers then stays).
	HeaderEnv map[string]string
}

// RouterConfig configures a Router.
type RouterConfig struct {
	// Providers are the configured providers by id.
	Providers map[string]ProviderSource
	// Getenv reads the secrets; nil is os.Getenv.
	Getenv func(string) string
	// Logger is given to each client (which adds its provider id); nil
	// discards.
	Logger *slog.Logger
	// Propagate is each client's WithPropagation; nil writes nothing.
	Propagate func(ctx context.Context, h http.Header)
}

// Router resolves a provider id to its client (turns.ModelRouter),
// building one client per provider on first use, and keeps the latest
// rate limits each provider's responses reported. It is safe for
// concurrent use.
type Router struct {
	cfg RouterConfig

	mu      sync.Mutex
	clients map[string]Client
	limits  map[string]RateLimits
}

// NewRouter returns a router over the configured providers.
func NewRouter(cfg RouterConfig) *Router {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Router{cfg: cfg, clients: map[string]Client{}, limits: map[string]RateLimits{}}
}

// RateLimits returns the latest rate limits each provider's responses
// reported, by provider id; a provider whose responses carried none (or
// that was not used yet) is absent.
func (r *Router) RateLimits() map[string]RateLimits {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.limits)
}

// Client returns the client of provider id; an id that is not configured
// is an apperr.Invalid error naming the config section to add.
func (r *Router) Client(id string) (Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[id]; ok {
		return c, nil
	}
	src, ok := r.cfg.Providers[id]
	if !ok {
		return nil, apperr.New(apperr.Invalid, "unknown model provider %q: add [model_providers.%s] to the config", id, id)
	}
	pc := src.Config
	pc.ID = id
	pc.Headers = maps.Clone(pc.Headers)
	if pc.Headers == nil {
		pc.Headers = map[string]string{}
	}
	for header, env := range src.HeaderEnv {
		if v := r.cfg.Getenv(env); v != "" {
			pc.Headers[header] = v
		}
	}
	if src.APIKeyEnv != "" {
		pc.APIKey = r.cfg.Getenv(src.APIKeyEnv)
	}
	opts := []Option{WithRateLimits(func(rl RateLimits) {
		r.mu.Lock()
		r.limits[id] = rl
		r.mu.Unlock()
	})}
	if r.cfg.Propagate != nil {
		opts = append(opts, WithPropagation(r.cfg.Propagate))
	}
	c, err := New(pc, r.cfg.Logger, opts...)
	if err != nil {
		return nil, err
	}
	r.clients[id] = c
	return c, nil
}
