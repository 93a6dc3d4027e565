package config

import (
	"cmp"
	"slices"
)

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
	// SupportedReasoningEfforts are the efforts offered, in order; empty
	// means low, medium and high.
	SupportedReasoningEfforts []string
	// InputModalities are the kinds of input the model takes; empty means
	// text and image.
	InputModalities []string
	// MultiAgentVersion is the sub-agent protocol named for the model, ""
	// for none.
	MultiAgentVersion string
	// Hidden models are listed only when hidden ones are asked for.
	Hidden bool
	// IsDefault marks the model new threads use.
	IsDefault bool
	// ServiceTiers are the tiers a thread may choose for the model.
	ServiceTiers []ServiceTier
}

// Models returns the models for model/list: the configured model first,
// marked IsDefault, then the other entries of the Catalog by priority and
// id. When no model is configured the first visible catalog entry (else
// the first one) is the default; the list is empty only when there is no
// model at all. Entry fields left empty default to the id (display name)
// and model_provider (provider).
func (c *Config) Models() []ModelInfo {
	cat := c.Catalog()
	ids := sortedKeys(cat)
	slices.SortStableFunc(ids, func(a, b string) int { return cmp.Compare(cat[a].Priority, cat[b].Priority) })
	def := c.Model
	if def == "" {
		for _, id := range ids {
			if !cat[id].Hidden {
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
	out = append(out, c.modelInfo(cat, def))
	out[0].IsDefault = true
	for _, id := range slices.DeleteFunc(ids, func(id string) bool { return id == def }) {
		out = append(out, c.modelInfo(cat, id))
	}
	return out
}

func (c *Config) modelInfo(cat map[string]ModelEntry, id string) ModelInfo {
	e := cat[id]
	info := ModelInfo{
		ID:                        id,
		DisplayName:               cmp.Or(e.DisplayName, id),
		Description:               e.Description,
		Provider:                  cmp.Or(e.Provider, c.ModelProvider),
		DefaultReasoningEffort:    e.DefaultReasoningEffort,
		SupportedReasoningEfforts: e.SupportedReasoningEfforts,
		InputModalities:           e.InputModalities,
		MultiAgentVersion:         e.MultiAgentVersion,
		Hidden:                    e.Hidden,
		ServiceTiers:              e.ServiceTiers,
	}
	return info
}
