package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The built-in catalog of OpenAI's models is the Catalog of a
// configuration whose default provider is OpenAI's own API and that has no
// [models] table; any other server, or a [models] table, replaces it.
func TestCatalogChoice(t *testing.T) {
	builtin := openAIModels()
	require.Len(t, builtin, 14)
	for _, tc := range []struct {
		name      string
		overrides []string
		want      map[string]ModelEntry
	}{
		{"the default provider", nil, builtin},
		{"openai at api.openai.com", []string{`model_providers.openai.base_url="https://api.openai.com/v1/"`}, builtin},
		{"openai pointed at another server", []string{`model_providers.openai.base_url="http://127.0.0.1:9/v1"`}, nil},
		{"another provider", []string{`model_provider="local"`, `model_providers.local.base_url="http://127.0.0.1:9/v1"`}, nil},
		{"another provider at api.openai.com", []string{`model_provider="proxy"`, `model_providers.proxy.base_url="https://api.openai.com/v1"`}, nil},
		{"a [models] table", []string{`models.m={display_name="M"}`}, map[string]ModelEntry{"m": {DisplayName: "M"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := mustLoad(t, Sources{Overrides: tc.overrides})
			require.Equal(t, tc.want, cfg.Catalog())
		})
	}
}

// The built-in catalog keeps the rules of a configured one, and every
// model's default effort is one it offers.
func TestBuiltinCatalogIsValid(t *testing.T) {
	cfg, _ := mustLoad(t, Sources{})
	cfg.ModelCatalog = openAIModels()
	require.NoError(t, cfg.validateModels())
	for id, m := range cfg.ModelCatalog {
		require.Contains(t, m.SupportedReasoningEfforts, string(m.DefaultReasoningEffort), id)
		require.NotEmpty(t, m.Description, id)
	}
}

// What a [models.<id>] entry lists for model/list is checked.
func TestModelListsValidated(t *testing.T) {
	for _, tc := range []struct{ override, msg string }{
		{`models.m.supported_reasoning_efforts=["low","huge"]`, `expected one of none, minimal, low, medium, high, xhigh, max, ultra, got "huge"`},
		{`models.m={default_reasoning_effort="high", supported_reasoning_efforts=["low"]}`, `"high" is not one of supported_reasoning_efforts`},
		{`models.m.input_modalities=["audio"]`, `expected "text" or "image", got "audio"`},
		{`models.m.multi_agent_version="v3"`, `expected "disabled", "v1" or "v2", got "v3"`},
	} {
		require.Contains(t, loadError(t, Sources{Overrides: []string{tc.override}}), tc.msg)
	}
}
