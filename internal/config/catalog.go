package config

import (
	_ "embed"
	"fmt"
	"net/url"
	"sync"

	"github.com/BurntSushi/toml"
)

// openAIModelsTOML is the built-in catalog of OpenAI's models, in the
// shape of config.toml's [models.<id>] tables.
//
//go:embed openai_models.toml
var openAIModelsTOML string

// openAIModels parses openAIModelsTOML once; a test holds the file to the
// rules of a configured catalog, so it cannot fail at run time.
var openAIModels = sync.OnceValue(func() map[string]ModelEntry {
	var f struct {
		Models map[string]ModelEntry `toml:"models"`
	}
	md, err := toml.Decode(openAIModelsTOML, &f)
	if err != nil {
		panic(fmt.Sprintf("config: built-in model catalog: %v", err))
	}
	if un := md.Undecoded(); len(un) > 0 {
		panic(fmt.Sprintf("config: built-in model catalog: unknown keys %v", un))
	}
	return f.Models
})

// Catalog is the model catalog model/list offers and turns are checked
// against: the [models] table when the configuration has one; else, when
// the default provider is OpenAI's own API (model_provider "openai" with
// its base_url left at, or set to, api.openai.com), the built-in catalog of
// OpenAI's models; else none (nil), and model/list offers the configured
// model alone: OpenAI's models mean nothing to another server. The result
// is shared: callers must not change it.
func (c *Config) Catalog() map[string]ModelEntry {
	if len(c.ModelCatalog) > 0 {
		return c.ModelCatalog
	}
	if c.ModelProvider != DefaultModelProvider {
		return nil
	}
	u, err := url.Parse(c.ModelProviders[DefaultModelProvider].BaseURL)
	if err != nil || u.Hostname() != "api.openai.com" {
		return nil
	}
	return openAIModels()
}
