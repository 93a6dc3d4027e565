package api

import "encoding/json"

// ConfigReadParams are the params of config/read.
type ConfigReadParams struct {
	// IncludeLayers asks for the per-layer breakdown.
	IncludeLayers bool `json:"includeLayers,omitempty"`
	// Cwd resolves project layers as seen from this directory, or null.
	Cwd *string `json:"cwd,omitempty"`
}

// ConfigReadResult is the result of config/read.
type ConfigReadResult struct {
	// Config is the effective config, mirroring config.toml (snake_case
	// keys); nil is written as {}.
	Config Map[any] `json:"config"`
	// Origins maps each dotted key to the layer that set it; nil is written
	// as {}.
	Origins Map[ConfigLayerMetadata] `json:"origins"`
	// Layers are the config layers, highest precedence first; 0.169.0 omits
	// the key (rather than writing null) unless includeLayers was set.
	Layers []ConfigLayer `json:"layers,omitempty"`
}

// ConfigLayerMetadata names the layer a value came from.
type ConfigLayerMetadata struct {
	// Name identifies the layer.
	Name ConfigLayerSource `json:"name"`
	// Version is a content hash of the layer, e.g. "sha256:…".
	Version string `json:"version"`
}

// ConfigLayer is one config layer with its raw contents.
type ConfigLayer struct {
	// Name identifies the layer.
	Name ConfigLayerSource `json:"name"`
	// Version is a content hash of the layer.
	Version string `json:"version"`
	// Config is the layer's own contents (any JSON value).
	Config json.RawMessage `json:"config"`
	// DisabledReason says why the layer is ignored; 0.169.0 omits the key when null.
	DisabledReason *string `json:"disabledReason,omitempty"`
}

// ConfigLayerSourceType is the discriminator of ConfigLayerSource.
type ConfigLayerSourceType string

// The config layer sources.
const (
	LayerMdm                             ConfigLayerSourceType = "mdm"
	LayerSystem                          ConfigLayerSourceType = "system"
	LayerUser                            ConfigLayerSourceType = "user"
	LayerProject                         ConfigLayerSourceType = "project"
	LayerSessionFlags                    ConfigLayerSourceType = "sessionFlags"
	LayerPackagedDefaults                ConfigLayerSourceType = "packagedDefaults"
	LayerEnterpriseManaged               ConfigLayerSourceType = "enterpriseManaged"
	LayerLegacyManagedConfigTomlFromFile ConfigLayerSourceType = "legacyManagedConfigTomlFromFile"
	LayerLegacyManagedConfigTomlFromMdm  ConfigLayerSourceType = "legacyManagedConfigTomlFromMdm"
)

// ConfigLayerSource identifies a config layer, tagged by type.
type ConfigLayerSource struct {
	// Type selects the variant.
	Type ConfigLayerSourceType
	// File is the layer file (user, system, packagedDefaults, legacyManagedConfigTomlFromFile).
	File string
	// Profile is the active profile of a user layer, or null.
	Profile *string
	// DotCodexFolder is the .codex folder of a project layer.
	DotCodexFolder string
	// Domain is the MDM domain.
	Domain string
	// Key is the MDM key.
	Key string
	// ID is the enterprise configuration id.
	ID string
	// Name is the enterprise configuration name.
	Name string
}

// MarshalJSON writes the keys of the selected variant.
func (s ConfigLayerSource) MarshalJSON() ([]byte, error) {
	type file struct {
		Type ConfigLayerSourceType `json:"type"`
		File string                `json:"file"`
	}
	switch s.Type {
	case LayerUser:
		return json.Marshal(struct {
			Type    ConfigLayerSourceType `json:"type"`
			File    string                `json:"file"`
			Profile *string               `json:"profile"`
		}{s.Type, s.File, s.Profile})
	case LayerSystem, LayerPackagedDefaults, LayerLegacyManagedConfigTomlFromFile:
		return json.Marshal(file{s.Type, s.File})
	case LayerProject:
		return json.Marshal(struct {
			Type           ConfigLayerSourceType `json:"type"`
			DotCodexFolder string                `json:"dotCodexFolder"`
		}{s.Type, s.DotCodexFolder})
	case LayerMdm:
		return json.Marshal(struct {
			Type   ConfigLayerSourceType `json:"type"`
			Domain string                `json:"domain"`
			Key    string                `json:"key"`
		}{s.Type, s.Domain, s.Key})
	case LayerEnterpriseManaged:
		return json.Marshal(struct {
			Type ConfigLayerSourceType `json:"type"`
			ID   string                `json:"id"`
			Name string                `json:"name"`
		}{s.Type, s.ID, s.Name})
	default:
		return json.Marshal(struct {
			Type ConfigLayerSourceType `json:"type"`
		}{s.Type})
	}
}

// UnmarshalJSON decodes any variant.
func (s *ConfigLayerSource) UnmarshalJSON(b []byte) error {
	var w struct {
		Type           ConfigLayerSourceType `json:"type"`
		File           string                `json:"file"`
		Profile        *string               `json:"profile"`
		DotCodexFolder string                `json:"dotCodexFolder"`
		Domain         string                `json:"domain"`
		Key            string                `json:"key"`
		ID             string                `json:"id"`
		Name           string                `json:"name"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = ConfigLayerSource(w)
	return nil
}
