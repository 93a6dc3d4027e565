package main

import (
	"encoding/json"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/registry/planning"
	"github.com/appserver/appserver/internal/skills"
	"github.com/appserver/appserver/internal/turns"
)

// providers builds one model client per configured provider on first use.
// Secrets are read from the environment variables the config names, and
// from nowhere else.
type providers struct {
	cfg    map[string]config.ModelProvider
	getenv func(string) string
	log    *slog.Logger

	mu      sync.Mutex
	clients map[string]model.Client
}

func newProviders(cfg *config.Config, log *slog.Logger) *providers {
	return &providers{cfg: cfg.ModelProviders, getenv: os.Getenv, log: log, clients: map[string]model.Client{}}
}

// Client implements turns.ModelRouter.
func (p *providers) Client(id string) (model.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[id]; ok {
		return c, nil
	}
	pc, ok := p.cfg[id]
	if !ok {
		return nil, apperr.New(apperr.Invalid, "unknown model provider %q: add [model_providers.%s] to the config", id, id)
	}
	headers := map[string]string{}
	for k, v := range pc.HTTPHeaders {
		headers[k] = v
	}
	for header, env := range pc.EnvHTTPHeaders {
		if v := p.getenv(env); v != "" {
			headers[header] = v
		}
	}
	apiKey := ""
	if pc.EnvKey != "" {
		apiKey = p.getenv(pc.EnvKey)
	}
	c, err := model.New(model.ProviderConfig{
		ID:                id,
		Name:              pc.Name,
		BaseURL:           pc.BaseURL,
		APIKey:            apiKey,
		WireAPI:           string(pc.WireAPI),
		Headers:           headers,
		QueryParams:       pc.QueryParams,
		MaxRetries:        retries(pc.RequestMaxRetries),
		StreamIdleTimeout: time.Duration(pc.StreamIdleTimeoutMS) * time.Millisecond,
	}, p.log.With("provider", id))
	if err != nil {
		return nil, err
	}
	p.clients[id] = c
	return c, nil
}

// retries maps the config's count (0 = none) to the client's (0 = default,
// negative = none).
func retries(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// builtinNames are the tool names the daemon itself offers; a client's
// dynamic tools may not take them.
var builtinNames = append([]string{planning.Name, "skills"}, builtinToolNames...)

// skillsConfig maps the [skills] config section.
func skillsConfig(cfg *config.Config) skills.Config {
	sc := skills.Config{Roots: cfg.Skills.Roots, Remote: map[string]skills.RemoteConfig{}}
	for id, r := range cfg.Skills.Remote {
		sc.Remote[id] = skills.RemoteConfig{URL: r.URL, BearerTokenEnv: r.BearerTokenEnv}
	}
	return sc
}

// newSkillsCatalog builds the skill catalog: the workspace's own skill
// folders always (for skills/list), plus configured roots and remotes.
func newSkillsCatalog(cfg *config.Config, log *slog.Logger) (*skills.Catalog, error) {
	return skills.New(skillsConfig(cfg), skills.Options{Logger: log})
}

// turnTools builds the tool set of a turn: the built-in tools (shell,
// apply_patch, exec sessions, file tools; see builtinTools.register), then
// the thread's dynamic tools (served by the broker) if it registered any.
func turnTools(log *slog.Logger, broker *dynamic.Broker, cat *skills.Catalog, bt *builtinTools) turns.ToolsFactory {
	return func(tc turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
		b := registry.NewBuilder(registry.Config{Logger: log})
		if bt != nil {
			if err := bt.register(b, tc); err != nil {
				return nil, nil, err
			}
		}
		if err := planning.Register(b, &planning.Handler{}); err != nil {
			return nil, nil, err
		}
		if cat != nil {
			if err := skills.Register(b, cat); err != nil {
				return nil, nil, err
			}
		}
		if len(tc.DynamicTools) == 0 {
			specs, reg := b.Build()
			return specs, reg, nil
		}
		tools, err := dynamic.Restore(tc.DynamicTools, dynamic.Options{Builtins: builtinNames})
		if err != nil {
			return nil, nil, err
		}
		h := dynamic.NewHandler(dynamic.HandlerConfig{ThreadID: tc.ThreadID, Tools: tools, Broker: broker, Items: tc.Items, Logger: log})
		if err := tools.AddTo(b, h); err != nil {
			return nil, nil, err
		}
		specs, reg := b.Build()
		return tools.OfferedSpecs(specs), reg, nil
	}
}

// validateDynamicTools checks a thread/start registration and returns the
// form persisted with the thread.
func validateDynamicTools(specs []api.DynamicToolSpec) (json.RawMessage, error) {
	tools, err := dynamic.Validate(specs, dynamic.Options{Builtins: builtinNames})
	if err != nil {
		return nil, err
	}
	return json.Marshal(tools)
}
