package configview

import (
	"cmp"
	"maps"
	"slices"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
)

// Warnings turns the warnings of a config load into configWarning
// notifications.
func Warnings(ws []config.Warning) []api.ConfigWarningNotification {
	out := make([]api.ConfigWarningNotification, 0, len(ws))
	for _, w := range ws {
		out = append(out, api.ConfigWarningNotification{Summary: w.String()})
	}
	return out
}

// Models turns the configured model list into model/list entries.
func Models(cfg *config.Config) []api.Model {
	infos := cfg.Models()
	out := make([]api.Model, 0, len(infos))
	for _, m := range infos {
		effort := string(m.DefaultReasoningEffort)
		if effort == "" {
			effort = "medium"
		}
		supported := m.SupportedReasoningEfforts
		if len(supported) == 0 {
			supported = []string{string(config.ReasoningLow), string(config.ReasoningMedium), string(config.ReasoningHigh)}
		}
		efforts := make(api.List[api.ReasoningEffortOption], 0, len(supported))
		for _, e := range supported {
			efforts = append(efforts, api.ReasoningEffortOption{ReasoningEffort: e, Description: effortDescriptions[config.ReasoningEffort(e)]})
		}
		modalities := api.List[api.InputModality]{api.InputText, api.InputImage}
		if len(m.InputModalities) > 0 {
			modalities = modalities[:0]
			for _, in := range m.InputModalities {
				modalities = append(modalities, api.InputModality(in))
			}
		}
		var agents *string
		if m.MultiAgentVersion != "" {
			agents = &m.MultiAgentVersion
		}
		out = append(out, api.Model{
			ID:                        m.ID,
			Model:                     m.ID,
			DisplayName:               m.DisplayName,
			Description:               m.Description,
			Hidden:                    m.Hidden,
			DefaultReasoningEffort:    effort,
			SupportedReasoningEfforts: efforts,
			InputModalities:           modalities,
			MultiAgentVersion:         agents,
			IsDefault:                 m.IsDefault,
			ServiceTiers:              serviceTiers(m.ServiceTiers),
			// The reference offers its priority tier as the "fast" speed
			// tier too (the TUI's /fast).
			AdditionalSpeedTiers: speedTiers(m.ServiceTiers),
		})
	}
	return out
}

// effortDescriptions are what model/list says of each reasoning effort.
var effortDescriptions = map[config.ReasoningEffort]string{
	config.ReasoningNone:    "No reasoning before answering",
	config.ReasoningMinimal: "The least reasoning, for the quickest answers",
	config.ReasoningLow:     "Quick answers, a little thought first",
	config.ReasoningMedium:  "A middle way between speed and depth, for most work",
	config.ReasoningHigh:    "More thought before answering, for harder problems",
	config.ReasoningXHigh:   "Even deeper reasoning, for hard problems",
	config.ReasoningMax:     "The deepest reasoning the model offers",
	config.ReasoningUltra:   "The deepest reasoning, handing parts of the task to sub-agents",
}

// speedTiers are a model's additionalSpeedTiers: "fast" when it has the
// priority tier.
func speedTiers(in []config.ServiceTier) api.List[string] {
	out := api.List[string]{}
	for _, st := range in {
		if st.ID == "priority" {
			out = append(out, "fast")
		}
	}
	return out
}

// serviceTiers are a model's configured tiers as model/list lists them.
func serviceTiers(in []config.ServiceTier) api.List[api.ModelServiceTier] {
	out := make(api.List[api.ModelServiceTier], 0, len(in))
	for _, st := range in {
		out = append(out, api.ModelServiceTier{ID: st.ID, Name: cmp.Or(st.Name, st.ID), Description: st.Description})
	}
	return out
}

// Read answers config/read: the effective config (secrets masked)
// and, per key, the layer that set it.
func Read(cfg *config.Config, file string) api.ConfigReadResult {
	origins := map[string]api.ConfigLayerMetadata{}
	for key, layer := range cfg.Origins() {
		var src api.ConfigLayerSource
		switch layer {
		case config.LayerFile:
			src = api.ConfigLayerSource{Type: api.LayerUser, File: file}
		case config.LayerUser:
			src = api.ConfigLayerSource{Type: api.LayerUser, File: config.OverlayFile(cfg.DataDir)}
		case config.LayerPrincipal:
			src = api.ConfigLayerSource{Type: api.LayerUser, File: cfg.UserConfigFile()}
		case config.LayerDefault:
			continue
		default:
			src = api.ConfigLayerSource{Type: api.LayerSessionFlags}
		}
		origins[key] = api.ConfigLayerMetadata{Name: src, Version: string(layer)}
	}
	return api.ConfigReadResult{Config: cfg.Redacted(), Origins: origins}
}

// Providers answers modelProvider/list from [model_providers]: the
// default provider first, then the others by id. A provider that uses
// OpenAI's own authentication (the built-in openai) is reported as the
// reference reports it; any other is a custom gateway, authenticated by
// its env_key when it has one. None is editable by clients (their URLs
// and keys are the operator's), but the default is: a client writes
// model_provider to its user config (modelProvider/default/set).
func Providers(cfg *config.Config) api.ModelProviderListResult {
	ids := slices.Sorted(maps.Keys(cfg.ModelProviders))
	if i := slices.Index(ids, cfg.ModelProvider); i > 0 {
		ids = append(append([]string{ids[i]}, ids[:i]...), ids[i+1:]...)
	}
	res := api.ModelProviderListResult{DefaultProviderID: cfg.ModelProvider, CanChangeDefault: true}
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

// Capabilities answers modelProvider/capabilities/read for cfg's default
// provider: the hosted tools appserver can offer its models. The hosted
// web_search tool exists in the Responses API only; appserver never offers
// image_generation.
func Capabilities(cfg *config.Config) api.ModelProviderCapabilitiesReadResult {
	pc := cfg.ModelProviders[cfg.ModelProvider]
	return api.ModelProviderCapabilitiesReadResult{WebSearch: pc.WireAPI != config.WireAPIChat}
}

// defaultContextWindow is Codex's context window for a model its catalog
// does not describe.
const defaultContextWindow = 272_000

// ContextWindow is the context window clients are told: 95% of
// model_context_window (or of the default), the share Codex lets a
// conversation fill, as the reference reports it.
func ContextWindow(cfg *config.Config) int64 {
	return modelWindow(cfg) * 95 / 100
}

// AutoCompactLimit is the context size at which a thread's context is
// compacted: model_auto_compact_token_limit, or else 90% of the model's
// context window, Codex's default.
func AutoCompactLimit(cfg *config.Config) int64 {
	if cfg.ModelAutoCompactTokenLimit > 0 {
		return cfg.ModelAutoCompactTokenLimit
	}
	return modelWindow(cfg) * 9 / 10
}

// modelWindow is the model's whole context window.
func modelWindow(cfg *config.Config) int64 {
	if cfg.ModelContextWindow > 0 {
		return int64(cfg.ModelContextWindow)
	}
	return defaultContextWindow
}

// ThreadDefaults are the settings of new threads a config write changes
// while the daemon runs.
type ThreadDefaults struct {
	// SandboxMode is "" when no layer of the config names a sandbox_mode:
	// threads then take the built-in read-only one from the :read-only
	// permission profile, as the reference's do.
	Model, ModelProvider, ApprovalPolicy, SandboxMode string
	// Features are the feature switches (config.FeatureFlags) by key.
	Features map[string]bool
	// ReasoningEffort and ReasoningSummary are model_reasoning_effort and
	// model_reasoning_summary.
	ReasoningEffort, ReasoningSummary string
	// Verbosity and ServiceTier are model_verbosity and service_tier.
	Verbosity, ServiceTier string
}

// Defaults returns the ThreadDefaults of cfg. For a principal's
// configuration (cfg.Principal() not "") only those the principal's own
// user config sets are filled in: the others follow the daemon-wide ones,
// whatever those become.
func Defaults(cfg *config.Config) ThreadDefaults {
	d := ThreadDefaults{Model: cfg.Model, ModelProvider: cfg.ModelProvider,
		ApprovalPolicy: string(cfg.ApprovalPolicy), SandboxMode: string(cfg.SandboxMode),
		Features:        cfg.Features.Map(),
		ReasoningEffort: string(cfg.ModelReasoningEffort), ReasoningSummary: cfg.ModelReasoningSummary,
		Verbosity: cfg.ModelVerbosity, ServiceTier: cfg.ServiceTier}
	if cfg.Principal() == "" {
		if !cfg.IsSet("sandbox_mode") {
			d.SandboxMode = ""
		}
		return d
	}
	origins := cfg.Origins()
	for key, f := range map[string]*string{"model": &d.Model, "model_provider": &d.ModelProvider,
		"approval_policy": &d.ApprovalPolicy, "sandbox_mode": &d.SandboxMode,
		"model_reasoning_effort": &d.ReasoningEffort, "model_reasoning_summary": &d.ReasoningSummary,
		"model_verbosity": &d.Verbosity, "service_tier": &d.ServiceTier} {
		if origins[key] != config.LayerPrincipal {
			*f = ""
		}
	}
	for key := range d.Features {
		if origins["features."+key] != config.LayerPrincipal {
			delete(d.Features, key)
		}
	}
	if len(d.Features) == 0 {
		d.Features = nil
	}
	return d
}

// ExperimentalFeatures lists the feature switches appserver implements
// (config.FeatureFlags) as experimentalFeature/list reports them: each
// with the reference's stage for the same key and its state in cfg,
// which the thread's own config switches (a key's value, nil for none)
// override.
func ExperimentalFeatures(cfg *config.Config, thread map[string]bool) []api.ExperimentalFeature {
	state := cfg.Features.Map()
	out := make([]api.ExperimentalFeature, 0, len(config.FeatureFlags))
	for _, f := range config.FeatureFlags {
		on := state[f.Name]
		if v, ok := thread[f.Name]; ok {
			on = v
		}
		out = append(out, api.ExperimentalFeature{Name: f.Name, Stage: api.ExperimentalFeatureStage(f.Stage),
			Enabled: on, DefaultEnabled: f.Default})
	}
	return out
}
