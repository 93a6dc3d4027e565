package main

import (
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/skills"
	"github.com/appserver/appserver/internal/tools/orchestrate"
)

// modelRouter maps [model_providers] to the model clients' router.
func modelRouter(cfg *config.Config, log *slog.Logger) *model.Router {
	providers := make(map[string]model.ProviderSource, len(cfg.ModelProviders))
	for id, pc := range cfg.ModelProviders {
		// The config counts retries (0 = none); the client's 0 means its
		// default and a negative count none.
		retries := pc.RequestMaxRetries
		if retries <= 0 {
			retries = -1
		}
		providers[id] = model.ProviderSource{
			Config: model.ProviderConfig{
				Name:              pc.Name,
				BaseURL:           pc.BaseURL,
				WireAPI:           string(pc.WireAPI),
				Headers:           pc.HTTPHeaders,
				QueryParams:       pc.QueryParams,
				MaxRetries:        retries,
				StreamIdleTimeout: time.Duration(pc.StreamIdleTimeoutMS) * time.Millisecond,
			},
			APIKeyEnv: pc.EnvKey,
			HeaderEnv: pc.EnvHTTPHeaders,
		}
	}
	return model.NewRouter(model.RouterConfig{Providers: providers, Logger: log})
}

// skillsConfig maps the [skills] config section.
func skillsConfig(cfg *config.Config) skills.Config {
	sc := skills.Config{Roots: cfg.Skills.Roots, Remote: map[string]skills.RemoteConfig{}}
	for id, r := range cfg.Skills.Remote {
		sc.Remote[id] = skills.RemoteConfig{URL: r.URL, BearerTokenEnv: r.BearerTokenEnv}
	}
	return sc
}

// newTools builds the tool orchestration: the exec-policy rules live in
// data_dir/rules; the skills namespace is offered only when [skills]
// configures roots or remotes.
func newTools(cfg *config.Config, configFile string, log *slog.Logger, broker *dynamic.Broker, cat *skills.Catalog) (*orchestrate.Service, error) {
	if !skillsConfig(cfg).Configured() {
		cat = nil
	}
	return orchestrate.New(orchestrate.Config{
		RulesDir:       filepath.Join(cfg.DataDir, "rules"),
		RulesFile:      policy.DefaultRulesFile(cfg.DataDir),
		SandboxBackend: cfg.SandboxBackend,
		// The daemon's own state: sandboxed commands neither read nor write it.
		Hidden:    []string{cfg.DataDir, configFile, cfg.WSTokenFile, cfg.WSSharedSecretFile},
		WebSearch: cfg.WebSearch,
		Providers: cfg.ModelProviders,
		Models:    cfg.ModelCatalog,
		Logger:    log,
	}, broker, cat)
}

// apiProviders answers modelProvider/list from [model_providers]: the
// default provider first, then the others by id. A provider that uses
// OpenAI's own authentication (the built-in openai) is reported as the
// reference reports it; any other is a custom gateway, authenticated by its env_key when it has one. None is editable
// by clients: the configuration is the operator's.
func apiProviders(cfg *config.Config) api.ModelProviderListResult {
	ids := slices.Sorted(maps.Keys(cfg.ModelProviders))
	if i := slices.Index(ids, cfg.ModelProvider); i > 0 {
		ids = append(append([]string{ids[i]}, ids[:i]...), ids[i+1:]...)
	}
	res := api.ModelProviderListResult{DefaultProviderID: cfg.ModelProvider}
	for _, id := range ids {
		pc := cfg.ModelProviders[id]
		sum := api.ModelProviderSummary{ID: id, Name: pc.Name, Settings: api.ProviderSettings{Type: "customGateway"}}
		if sum.Name == "" {
			sum.Name = id
		}
		if pc.RequiresOpenAIAuth {
			sum.Settings.Type = "openai"
		} else {
			if pc.BaseURL != "" {
				u := pc.BaseURL
				sum.BaseURL = &u
			}
			sum.Settings.Auth = &api.GatewayAuth{Mode: "none"}
			if pc.EnvKey != "" {
				sum.Settings.Auth = &api.GatewayAuth{Mode: "environmentVariable", EnvKey: pc.EnvKey}
			}
		}
		res.Data = append(res.Data, sum)
	}
	return res
}

// defaultContextWindow is Codex's context window for a model its catalog
// does not describe.
const defaultContextWindow = 272_000

// contextWindow is the context window clients are told: 95% of
// model_context_window (or of the default), the share Codex lets a
// conversation fill, as the reference reports it.
func contextWindow(cfg *config.Config) int64 {
	w := int64(cfg.ModelContextWindow)
	if w == 0 {
		w = defaultContextWindow
	}
	return w * 95 / 100
}
