package config

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedacted(t *testing.T) {
	cfg, _ := mustLoad(t, Sources{Overrides: []string{
		"database_url=postgres://app:hunter2@db:5432/app?sslmode=disable&password=hunter3",
		"ws_auth=capability-token",
		"ws_token_sha256=" + sha,
		`model_providers.x={base_url="https://x.example/v1", http_headers={Authorization="Bearer sk-1", "X-Api-Key"="sk-2", "X-Team"="agents"}, query_params={api-version="1", key="sk-3"}, env_http_headers={"X-Auth"="X_AUTH"}}`,
		`mcp_servers.m={url="https://m.example/mcp", http_headers={"Proxy-Authorization"="Basic abc", Accept="json"}}`,
		`mcp_servers.s={command="srv", env={GITHUB_TOKEN="ghp_x", DB_PASSWORD="pw", MODE="fast"}}`,
	}})
	m := cfg.Redacted()

	require.Equal(t, "postgres://app:REDACTED@db:5432/app?password=REDACTED&sslmode=disable", m["database_url"])
	require.Equal(t, RedactedValue, m["ws_token_sha256"])
	require.Equal(t, "capability-token", m["ws_auth"])

	x := m["model_providers"].(map[string]any)["x"].(map[string]any)
	require.Equal(t, map[string]any{"Authorization": RedactedValue, "X-Api-Key": RedactedValue, "X-Team": "agents"}, x["http_headers"])
	require.Equal(t, map[string]any{"api-version": "1", "key": RedactedValue}, x["query_params"])
	require.Equal(t, map[string]any{"X-Auth": "X_AUTH"}, x["env_http_headers"], "names of variables are not secrets")
	require.Equal(t, "https://x.example/v1", x["base_url"])

	servers := m["mcp_servers"].(map[string]any)
	require.Equal(t, map[string]any{"Proxy-Authorization": RedactedValue, "Accept": "json"}, servers["m"].(map[string]any)["http_headers"])
	require.Equal(t, map[string]any{"GITHUB_TOKEN": RedactedValue, "DB_PASSWORD": RedactedValue, "MODE": "fast"}, servers["s"].(map[string]any)["env"])

	// Secrets stay intact in the configuration itself.
	require.Equal(t, "Bearer sk-1", cfg.ModelProviders["x"].HTTPHeaders["Authorization"])
	require.Equal(t, "ghp_x", cfg.MCPServers["s"].Env["GITHUB_TOKEN"])
	require.Equal(t, sha, cfg.WSTokenSHA256)

	_, err := json.Marshal(m)
	require.NoError(t, err)
}

func TestRedactedShape(t *testing.T) {
	cfg, _ := mustLoad(t, Sources{Overrides: []string{"model=o3", `models.o3={display_name="o3"}`, `mcp_servers.m={command="x"}`}})
	m := cfg.Redacted()
	require.Equal(t, "ws://127.0.0.1:7878", m["listen"])
	require.Equal(t, "", m["database_url"])
	require.Equal(t, true, m["migrate"], "migrate shows its effective value")
	require.Equal(t, "10s", m["shutdown_grace_period"])
	require.Equal(t, []any{}, m["allowed_origins"])
	require.Equal(t, 30, m["ws_max_clock_skew_seconds"])
	require.Equal(t, "on-request", m["approval_policy"])
	require.Equal(t, "read-only", m["sandbox_mode"])
	require.Equal(t, "o3", m["model"])
	require.NotContains(t, m, "model_reasoning_effort", "unset, as Codex's clients expect: absent, never \"\"")
	require.NotContains(t, m, "model_reasoning_summary")
	require.Equal(t, map[string]any{"o3": map[string]any{
		"display_name": "o3", "description": "", "provider": "", "default_reasoning_effort": "", "hidden": false,
		"multi_agent_version": "", "priority": 0,
		"shell_type": "", "apply_patch_tool_type": "", "supports_search_tool": false,
		"support_verbosity": false, "default_verbosity": "",
	}}, m["models"])
	require.Equal(t, map[string]any{
		"command": "x", "cwd": "", "url": "", "bearer_token_env_var": "", "env": map[string]any{}, "http_headers": map[string]any{},
		"env_http_headers": map[string]any{}, "default_tools_approval_mode": "", "tools": map[string]any{},
		"startup_timeout_sec": 10.0, "tool_timeout_sec": 60.0, "enabled": true,
	}, m["mcp_servers"].(map[string]any)["m"], "unset lists (args, enabled_tools, disabled_tools) are left out")

	// Every leaf of the tree has an origin and nothing else does.
	leaves := map[string]bool{}
	var walk func(path []string, v any)
	walk = func(path []string, v any) {
		if mm, ok := v.(map[string]any); ok {
			for k, c := range mm {
				walk(append(path[:len(path):len(path)], k), c)
			}
			return
		}
		leaves[formatKey(path)] = true
	}
	walk(nil, m)
	origins := cfg.Origins()
	require.Len(t, origins, len(leaves))
	for k := range leaves {
		require.Contains(t, origins, k)
	}
}

func TestOrigins(t *testing.T) {
	file := writeConfig(t, `
listen = "ws://127.0.0.1:1"
[model_providers.local]
base_url = "http://localhost:1/v1"
[mcp_servers."figma.remote"]
url = "https://figma.example/mcp"
`)
	cfg, _ := mustLoad(t, Sources{
		File:      file,
		Env:       testEnv("APPSERVER_MODEL=o3"),
		Flags:     map[string]string{"log_level": "debug"},
		Overrides: []string{"model_providers.local.name=Local", "migrate=false"},
	})
	origins := cfg.Origins()
	for key, want := range map[string]Layer{
		"listen":                         LayerFile,
		"model":                          LayerEnv,
		"log_level":                      LayerFlag,
		"migrate":                        LayerOverride,
		"model_providers.local.name":     LayerOverride,
		"model_providers.local.base_url": LayerFile,
		"model_providers.local.request_max_retries": LayerFile,
		`mcp_servers."figma.remote".url`:            LayerFile,
		"model_providers.openai.base_url":           LayerDefault,
		"data_dir":                                  LayerDefault,
		"allowed_origins":                           LayerDefault,
		"shutdown_grace_period":                     LayerDefault,
		"ws_token_sha256":                           LayerDefault,
	} {
		require.Equal(t, want, origins[key], key)
	}

	// A -c table value replaces the entry, and with it the origins.
	cfg, _ = mustLoad(t, Sources{File: file, Overrides: []string{`model_providers.local={base_url="http://z/v1"}`}})
	origins = cfg.Origins()
	require.Equal(t, LayerOverride, origins["model_providers.local.base_url"])
	require.Equal(t, LayerOverride, origins["model_providers.local.request_max_retries"])

	// Default has no layers above it.
	d := Default()
	for key, layer := range d.Origins() {
		require.Equal(t, LayerDefault, layer, key)
	}
}

func TestModels(t *testing.T) {
	tests := []struct {
		name      string
		overrides []string
		want      []ModelInfo
	}{
		{"nothing configured, another server", []string{"model_providers.openai.base_url=http://localhost:1/v1"}, []ModelInfo{}},
		{
			name:      "model only, another server",
			overrides: []string{"model=gpt-5-codex", "model_providers.openai.base_url=http://localhost:1/v1"},
			want:      []ModelInfo{{ID: "gpt-5-codex", DisplayName: "gpt-5-codex", Provider: "openai", IsDefault: true}},
		},
		{
			name:      "priority before id",
			overrides: []string{"models.a.priority=2", "models.b.priority=1", "models.c={}", `models.d={priority=1, supported_reasoning_efforts=["low","max"], input_modalities=["text"], multi_agent_version="v2"}`},
			want: []ModelInfo{
				{ID: "c", DisplayName: "c", Provider: "openai", IsDefault: true},
				{ID: "b", DisplayName: "b", Provider: "openai"},
				{ID: "d", DisplayName: "d", Provider: "openai", SupportedReasoningEfforts: []string{"low", "max"},
					InputModalities: []string{"text"}, MultiAgentVersion: "v2"},
				{ID: "a", DisplayName: "a", Provider: "openai"},
			},
		},
		{
			name: "model first, then the catalog by id",
			overrides: []string{
				"model=m2", "model_providers.local.base_url=http://localhost:1/v1",
				`models.m3={display_name="Model 3", description="third", provider="local", default_reasoning_effort="low"}`,
				`models.m2={display_name="Model 2", hidden=true}`,
				`models.m1={}`,
			},
			want: []ModelInfo{
				{ID: "m2", DisplayName: "Model 2", Provider: "openai", Hidden: true, IsDefault: true},
				{ID: "m1", DisplayName: "m1", Provider: "openai"},
				{ID: "m3", DisplayName: "Model 3", Description: "third", Provider: "local", DefaultReasoningEffort: ReasoningLow},
			},
		},
		{
			name:      "no model: the first visible entry is the default",
			overrides: []string{"models.a.hidden=true", "models.b={}", "models.c={}"},
			want: []ModelInfo{
				{ID: "b", DisplayName: "b", Provider: "openai", IsDefault: true},
				{ID: "a", DisplayName: "a", Provider: "openai", Hidden: true},
				{ID: "c", DisplayName: "c", Provider: "openai"},
			},
		},
		{
			name:      "no model and all hidden: the first entry is the default",
			overrides: []string{"models.b.hidden=true", "models.a.hidden=true"},
			want: []ModelInfo{
				{ID: "a", DisplayName: "a", Provider: "openai", Hidden: true, IsDefault: true},
				{ID: "b", DisplayName: "b", Provider: "openai", Hidden: true},
			},
		},
		{
			name:      "entries default to model_provider",
			overrides: []string{"model=x", "model_provider=local", "model_providers.local.base_url=http://localhost:1/v1"},
			want:      []ModelInfo{{ID: "x", DisplayName: "x", Provider: "local", IsDefault: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _ := mustLoad(t, Sources{Overrides: tt.overrides})
			got := cfg.Models()
			require.Equal(t, tt.want, got)
			defaults := 0
			for _, m := range got {
				if m.IsDefault {
					defaults++
				}
			}
			if len(got) > 0 {
				require.Equal(t, 1, defaults)
			}
		})
	}
}

func TestWarningString(t *testing.T) {
	require.Equal(t, "m", Warning{Message: "m"}.String())
	require.Equal(t, "s: m", Warning{Message: "m", Source: "s"}.String())
}
