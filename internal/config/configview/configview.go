package configview

import (
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
		out = append(out, api.Model{
			ID:                     m.ID,
			Model:                  m.ID,
			DisplayName:            m.DisplayName,
			Description:            m.Description,
			Hidden:                 m.Hidden,
			DefaultReasoningEffort: effort,
			SupportedReasoningEfforts: api.List[api.ReasoningEffortOption]{
				{ReasoningEffort: "low", Description: "Fast responses with lighter reasoning"},
				{ReasoningEffort: "medium", Description: "Balances speed and reasoning depth"},
				{ReasoningEffort: "high", Description: "Greater reasoning depth for complex problems"},
			},
			InputModalities: api.List[api.InputModality]{api.InputText, api.InputImage},
			IsDefault:       m.IsDefault,
		})
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
		case config.LayerDefault:
			continue
		default:
			src = api.ConfigLayerSource{Type: api.LayerSessionFlags}
		}
		origins[key] = api.ConfigLayerMetadata{Name: src, Version: string(layer)}
	}
	return api.ConfigReadResult{Config: cfg.Redacted(), Origins: origins}
}
