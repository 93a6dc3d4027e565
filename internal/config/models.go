package config

import "slices"

// ModelInfo is one model as model/list reports it.
type ModelInfo struct {
	// ID is the model slug sent to the provider.
	ID string
	// DisplayName is shown to users; it defaults to ID.
	DisplayName string
	// Description is a one-line description, possibly empty.
	Description string
	// Provider is the model provider id.
	Provider string
	// DefaultReasoningEffort is the effort used when a turn names none;
	// empty means the provider's default.
	DefaultReasoningEffort ReasoningEffort
	// Hidden models are listed only when hidden ones are asked for.
	Hidden bool
	// IsDefault marks the model new threads use.
	IsDefault bool
	// ServiceTiers are the tiers a thread may choose for the model.
	ServiceTiers []ServiceTier
}

// Models returns the models for model/list: the configured model first,
// marked IsDefault, then the other [models.<id>] entries by id. When no
// model is configured the first visible catalog entry (else the first one)
// is the default; the list is empty only when there is no model at all.
// Entry fields left empty default to the id (display name) and
// model_provider (provider).
func (c *Config) Models() []ModelInfo {
	ids := sortedKeys(c.ModelCatalog)
	def := c.Model
	if def == "" {
		for _, id := range ids {
			if !c.ModelCatalog[id].Hidden {
				def = id
				break
			}
		}
		if def == "" && len(ids) > 0 {
			def = ids[0]
		}
	}
	if def == "" {
		return []ModelInfo{}
	}
	out := make([]ModelInfo, 0, len(ids)+1)
	out = append(out, c.modelInfo(def))
	out[0].IsDefault = true
	for _, id := range slices.DeleteFunc(ids, func(id string) bool { return id == def }) {
		out = append(out, c.modelInfo(id))
	}
	return out
}

func (c *Config) modelInfo(id string) ModelInfo {
	e := c.ModelCatalog[id]
	info := ModelInfo{
		ID:                     id,
		DisplayName:            e.DisplayName,
		Description:            e.Description,
		Provider:               e.Provider,
		DefaultReasoningEffort: e.DefaultReasoningEffort,
		Hidden:                 e.Hidden,
		ServiceTiers:           e.ServiceTiers,
	}
	if info.DisplayName == "" {
		info.DisplayName = id
	}
	if info.Provider == "" {
		info.Provider = c.ModelProvider
	}
	return info
}
