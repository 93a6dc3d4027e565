package config

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDefault(t *testing.T) {
	cfg := defaults(func(k string) string { return map[string]string{"HOME": testHome}[k] }, "linux")
	require.Equal(t, "ws://127.0.0.1:7878", cfg.Listen)
	require.Empty(t, cfg.DatabaseURL)
	require.Equal(t, filepath.Join(testHome, ".local/share/appserver"), cfg.DataDir)
	require.Nil(t, cfg.Migrate)
	require.True(t, cfg.MigrateOnStart())
	require.Equal(t, LogFormatText, cfg.LogFormat)
	require.Equal(t, LogLevelInfo, cfg.LogLevel)
	require.Equal(t, []string{}, cfg.AllowedOrigins)
	require.Equal(t, 10*time.Second, cfg.ShutdownGracePeriod)
	require.Equal(t, WSAuthNone, cfg.WSAuth)
	require.Equal(t, 30, cfg.WSMaxClockSkewSeconds)
	require.Empty(t, cfg.Model)
	require.Equal(t, "openai", cfg.ModelProvider)
	require.Equal(t, ApprovalOnRequest, cfg.ApprovalPolicy)
	require.Equal(t, SandboxReadOnly, cfg.SandboxMode)
	require.Equal(t, map[string]ModelProvider{"openai": {
		Name:                "OpenAI",
		BaseURL:             "https://api.openai.com/v1",
		EnvKey:              "OPENAI_API_KEY",
		WireAPI:             WireAPIResponses,
		RequestMaxRetries:   4,
		StreamMaxRetries:    5,
		StreamIdleTimeoutMS: 300000,
		RequiresOpenAIAuth:  true,
	}}, cfg.ModelProviders)
	require.Empty(t, cfg.MCPServers)
	require.Empty(t, cfg.ModelCatalog)
	require.NoError(t, cfg.validate(), "the defaults must be valid")

	// Default is the same thing resolved from the process environment.
	d := Default()
	require.Equal(t, defaultDataDir(os.Getenv, runtime.GOOS), d.DataDir)
}

func TestDefaultDataDir(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		goos string
		want string
	}{
		{"xdg wins", map[string]string{"XDG_DATA_HOME": "/xdg", "HOME": "/h"}, "linux", "/xdg/appserver"},
		{"relative xdg is ignored", map[string]string{"XDG_DATA_HOME": "rel", "HOME": "/h"}, "linux", "/h/.local/share/appserver"},
		{"linux home", map[string]string{"HOME": "/h"}, "linux", "/h/.local/share/appserver"},
		{"macos home", map[string]string{"HOME": "/Users/u"}, "darwin", "/Users/u/Library/Application Support/appserver"},
		{"xdg wins on macos too", map[string]string{"XDG_DATA_HOME": "/xdg", "HOME": "/Users/u"}, "darwin", "/xdg/appserver"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := defaultDataDir(func(k string) string { return tt.env[k] }, tt.goos)
			require.Equal(t, filepath.FromSlash(tt.want), got)
		})
	}
}

func TestLoadDataDirFromSourcesEnv(t *testing.T) {
	cfg, _ := mustLoad(t, Sources{Env: []string{"HOME=/h", "XDG_DATA_HOME=/data"}})
	require.Equal(t, filepath.FromSlash("/data/appserver"), cfg.DataDir)
}

func TestPrecedence(t *testing.T) {
	file := writeConfig(t, `
listen = "ws://127.0.0.1:1001"
model = "from-file"
`)
	tests := []struct {
		name       string
		src        Sources
		wantListen string
		wantModel  string
		wantLayer  Layer
	}{
		{
			name:       "defaults",
			src:        Sources{},
			wantListen: DefaultListen, wantModel: "", wantLayer: LayerDefault,
		},
		{
			name:       "file over defaults",
			src:        Sources{File: file},
			wantListen: "ws://127.0.0.1:1001", wantModel: "from-file", wantLayer: LayerFile,
		},
		{
			name: "env over file",
			src: Sources{File: file, Env: testEnv(
				"APPSERVER_LISTEN=ws://127.0.0.1:1002", "APPSERVER_MODEL=from-env")},
			wantListen: "ws://127.0.0.1:1002", wantModel: "from-env", wantLayer: LayerEnv,
		},
		{
			name: "flag over env",
			src: Sources{File: file,
				Env:   testEnv("APPSERVER_LISTEN=ws://127.0.0.1:1002", "APPSERVER_MODEL=from-env"),
				Flags: map[string]string{"listen": "ws://127.0.0.1:1003", "model": "from-flag"}},
			wantListen: "ws://127.0.0.1:1003", wantModel: "from-flag", wantLayer: LayerFlag,
		},
		{
			name: "override over flag",
			src: Sources{File: file,
				Env:       testEnv("APPSERVER_LISTEN=ws://127.0.0.1:1002", "APPSERVER_MODEL=from-env"),
				Flags:     map[string]string{"listen": "ws://127.0.0.1:1003", "model": "from-flag"},
				Overrides: []string{"listen=ws://127.0.0.1:1004", `model="from-override"`}},
			wantListen: "ws://127.0.0.1:1004", wantModel: "from-override", wantLayer: LayerOverride,
		},
		{
			name:       "later override over earlier override",
			src:        Sources{File: file, Overrides: []string{"listen=ws://127.0.0.1:1004", "listen=ws://127.0.0.1:1005", "model=a", "model=b"}},
			wantListen: "ws://127.0.0.1:1005", wantModel: "b", wantLayer: LayerOverride,
		},
		{
			name:       "override over file without env or flags",
			src:        Sources{File: file, Overrides: []string{"model=o3"}},
			wantListen: "ws://127.0.0.1:1001", wantModel: "o3", wantLayer: LayerOverride,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, warnings := mustLoad(t, tt.src)
			require.Empty(t, warnings)
			require.Equal(t, tt.wantListen, cfg.Listen)
			require.Equal(t, tt.wantModel, cfg.Model)
			require.Equal(t, tt.wantLayer, cfg.Origins()["model"])
		})
	}
}

func TestPrecedenceMergesTableFieldsAcrossLayers(t *testing.T) {
	file := writeConfig(t, `
model_provider = "local"
[model_providers.local]
name = "File name"
base_url = "http://file.example/v1"
env_key = "LOCAL_KEY"
request_max_retries = 1
`)
	cfg, warnings := mustLoad(t, Sources{
		File:      file,
		Env:       testEnv("APPSERVER_MODEL_PROVIDERS__LOCAL__BASE_URL=http://env.example/v1"),
		Flags:     map[string]string{"model_providers.local.stream_max_retries": "9"},
		Overrides: []string{`model_providers.local.name="Override name"`},
	})
	require.Empty(t, warnings)
	require.Equal(t, ModelProvider{
		Name:                "Override name",
		BaseURL:             "http://env.example/v1",
		EnvKey:              "LOCAL_KEY",
		WireAPI:             WireAPIResponses,
		RequestMaxRetries:   1,
		StreamMaxRetries:    9,
		StreamIdleTimeoutMS: 300000,
	}, cfg.ModelProviders["local"])
	origins := cfg.Origins()
	require.Equal(t, LayerOverride, origins["model_providers.local.name"])
	require.Equal(t, LayerEnv, origins["model_providers.local.base_url"])
	require.Equal(t, LayerFlag, origins["model_providers.local.stream_max_retries"])
	require.Equal(t, LayerFile, origins["model_providers.local.env_key"])
	require.Equal(t, LayerFile, origins["model_providers.local.stream_idle_timeout_ms"], "a default inside an entry the file created")
	require.Equal(t, LayerDefault, origins["model_providers.openai.base_url"])
}

func TestFileOverridingBuiltinProviderMerges(t *testing.T) {
	file := writeConfig(t, `
[model_providers.openai]
base_url = "https://proxy.example/v1"
`)
	cfg, _ := mustLoad(t, Sources{File: file})
	want := builtinOpenAI()
	want.BaseURL = "https://proxy.example/v1"
	require.Equal(t, want, cfg.ModelProviders["openai"])
}

func TestConfigFileFromEnv(t *testing.T) {
	envFile := writeConfig(t, `model = "env-file"`)
	flagFile := writeConfig(t, `model = "flag-file"`)

	cfg, warnings := mustLoad(t, Sources{Env: testEnv("APPSERVER_CONFIG=" + envFile)})
	require.Empty(t, warnings, "APPSERVER_CONFIG is not a config key")
	require.Equal(t, "env-file", cfg.Model)

	cfg, _ = mustLoad(t, Sources{File: flagFile, Env: testEnv("APPSERVER_CONFIG=" + envFile)})
	require.Equal(t, "flag-file", cfg.Model, "--config wins over APPSERVER_CONFIG")

	msg := loadError(t, Sources{Env: testEnv("APPSERVER_CONFIG=/nonexistent/config.toml")})
	require.Equal(t, "config file /nonexistent/config.toml: not found", msg)
}

func TestFileErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string // after "config file PATH: "
	}{
		{"missing value", "model = \"o3\"\nlisten = \n", "line 2, column 10: expected value but found '\\n' instead"},
		{"duplicate table", "[a]\nx = 1\n[a]\ny = 2\n", "line 3, column 2: Key 'a' has already been defined."},
		{"bad string", "model = \"o3\n", "line 1, column 12: strings cannot contain newlines"},
		{"type error", `listen = 5`, "listen: expected a string"},
		{"nested type error", "[model_providers.x]\nrequest_max_retries = \"4\"\n", "model_providers.x.request_max_retries: expected an integer"},
		{"array of tables", "[[model_providers]]\nname = \"x\"\n", "model_providers: expected a table of tables"},
		{"duration", `shutdown_grace_period = 10`, `shutdown_grace_period: expected a duration string such as "10s"`},
		{"invalid value", `log_level = "loud"`, `log_level: expected "debug", "info", "warn" or "error", got "loud"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.content)
			require.Equal(t, "config file "+path+": "+tt.want, loadError(t, Sources{File: path}))
		})
	}

	require.Equal(t, "config file /nonexistent/x.toml: not found", loadError(t, Sources{File: "/nonexistent/x.toml"}))
	require.Contains(t, loadError(t, Sources{File: t.TempDir()}), "cannot read")
}

func TestEnv(t *testing.T) {
	tests := []struct {
		name  string
		env   []string
		check func(t *testing.T, cfg *Config)
	}{
		{
			name: "string keys",
			env:  []string{"APPSERVER_LISTEN=ws://127.0.0.1:9000", "APPSERVER_DATABASE_URL=postgres://u:p@db/app", "APPSERVER_DATA_DIR=/srv/data"},
			check: func(t *testing.T, cfg *Config) {
				require.Equal(t, "ws://127.0.0.1:9000", cfg.Listen)
				require.Equal(t, "postgres://u:p@db/app", cfg.DatabaseURL)
				require.Equal(t, "/srv/data", cfg.DataDir)
				require.False(t, cfg.MigrateOnStart())
			},
		},
		{
			name: "values parse like -c values",
			env: []string{"APPSERVER_MIGRATE=true", `APPSERVER_ALLOWED_ORIGINS=["https://a.example", "http://b.example:8080"]`,
				"APPSERVER_SHUTDOWN_GRACE_PERIOD=1m30s", `APPSERVER_MODEL="quoted"`},
			check: func(t *testing.T, cfg *Config) {
				require.Equal(t, ptr(true), cfg.Migrate)
				require.Equal(t, []string{"https://a.example", "http://b.example:8080"}, cfg.AllowedOrigins)
				require.Equal(t, 90*time.Second, cfg.ShutdownGracePeriod)
				require.Equal(t, "quoted", cfg.Model)
			},
		},
		{
			name: "double underscore separates segments",
			env:  []string{"APPSERVER_MODEL_PROVIDERS__LOCAL__BASE_URL=http://localhost:1234/v1", "APPSERVER_MODEL_PROVIDERS__LOCAL__REQUEST_MAX_RETRIES=7"},
			check: func(t *testing.T, cfg *Config) {
				p := cfg.ModelProviders["local"]
				require.Equal(t, "http://localhost:1234/v1", p.BaseURL)
				require.Equal(t, 7, p.RequestMaxRetries)
				require.Equal(t, 5, p.StreamMaxRetries, "new entries start from Codex's defaults")
			},
		},
		{
			name: "a field variable wins over a whole-entry variable",
			env: []string{"APPSERVER_MODEL_PROVIDERS__LOCAL__BASE_URL=http://b.example/v1",
				`APPSERVER_MODEL_PROVIDERS__LOCAL={base_url="http://a.example/v1", name="A"}`},
			check: func(t *testing.T, cfg *Config) {
				require.Equal(t, "http://b.example/v1", cfg.ModelProviders["local"].BaseURL)
				require.Equal(t, "A", cfg.ModelProviders["local"].Name)
			},
		},
		{
			name: "jwt settings",
			env: []string{"APPSERVER_WS_AUTH=signed-bearer-token", "APPSERVER_WS_SHARED_SECRET_FILE=/etc/appserver/secret",
				"APPSERVER_WS_MAX_CLOCK_SKEW_SECONDS=10", "APPSERVER_WS_ISSUER=issuer"},
			check: func(t *testing.T, cfg *Config) {
				require.Equal(t, WSAuthSignedBearerToken, cfg.WSAuth)
				require.Equal(t, "/etc/appserver/secret", cfg.WSSharedSecretFile)
				require.Equal(t, 10, cfg.WSMaxClockSkewSeconds)
				require.Equal(t, "issuer", cfg.WSIssuer)
			},
		},
		{
			name: "variables without the prefix are ignored",
			env:  []string{"LISTEN=ws://1.2.3.4:5", "MODEL=x", "appserver_model=x"},
			check: func(t *testing.T, cfg *Config) {
				require.Equal(t, DefaultListen, cfg.Listen)
				require.Empty(t, cfg.Model)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, warnings := mustLoad(t, Sources{Env: testEnv(tt.env...)})
			require.Empty(t, warnings)
			tt.check(t, cfg)
			for _, layer := range cfg.Origins() {
				require.Contains(t, []Layer{LayerDefault, LayerEnv}, layer)
			}
		})
	}
}

func TestEnvWarnings(t *testing.T) {
	_, warnings := mustLoad(t, Sources{Env: testEnv(
		"APPSERVER_FOO=1",
		"APPSERVER_MODEL_MAX_OUTPUT_TOKENS=100",
		"APPSERVER_TUI__THEME=dark",
		"APPSERVER_MODEL_PROVIDERS__OPENAI__COLOUR=red",
		"APPSERVER_=x",
		"APPSERVER_A____B=x",
		// A client's and the tests' variables are not configuration.
		"APPSERVER_URL=http://127.0.0.1:7878",
		"APPSERVER_TOKEN=secret",
		"APPSERVER_BIN=/usr/bin/appserver",
		"APPSERVER_TEST_DATABASE_URL=postgres://x",
		"APPSERVER_BENCH_BIN=/tmp/x",
	)})
	require.Equal(t, []Warning{
		unknownWarning("foo", "env APPSERVER_FOO"),
		codexWarning("model_max_output_tokens", "env APPSERVER_MODEL_MAX_OUTPUT_TOKENS"),
		codexWarning("tui", "env APPSERVER_TUI__THEME"),
		unknownWarning("model_providers.openai.colour", "env APPSERVER_MODEL_PROVIDERS__OPENAI__COLOUR"),
	}, withoutUnmappable(warnings))
	require.ElementsMatch(t, []Warning{
		{Path: "", Message: "environment variable APPSERVER_ does not name a config key (ignored)", Source: "env APPSERVER_"},
		{Path: "a____b", Message: "environment variable APPSERVER_A____B does not name a config key (ignored)", Source: "env APPSERVER_A____B"},
	}, unmappable(warnings))
}

func unmappable(ws []Warning) []Warning {
	var out []Warning
	for _, w := range ws {
		if w.Source == "env APPSERVER_" || w.Source == "env APPSERVER_A____B" {
			out = append(out, w)
		}
	}
	return out
}

func withoutUnmappable(ws []Warning) []Warning {
	var out []Warning
	for _, w := range ws {
		if w.Source != "env APPSERVER_" && w.Source != "env APPSERVER_A____B" {
			out = append(out, w)
		}
	}
	return out
}

func TestEnvEmptyValueIsEmptyString(t *testing.T) {
	cfg, _ := mustLoad(t, Sources{Env: testEnv("APPSERVER_DATABASE_URL=postgres://db/app"), Overrides: nil})
	require.Equal(t, "postgres://db/app", cfg.DatabaseURL)
	cfg, _ = mustLoad(t, Sources{Env: testEnv("APPSERVER_MODEL=")})
	require.Equal(t, "", cfg.Model)
	require.Equal(t, LayerEnv, cfg.Origins()["model"])
	require.Equal(t, "env APPSERVER_MIGRATE: expected a boolean", loadError(t, Sources{Env: testEnv("APPSERVER_MIGRATE=")}))
}

func TestFlags(t *testing.T) {
	cfg, warnings := mustLoad(t, Sources{Flags: map[string]string{
		"listen":                "ws://[::1]:0",
		"model":                 "1.5", // a string key takes the text literally
		"migrate":               "false",
		"allowed_origins":       "https://a.example, https://b.example",
		"shutdown_grace_period": "30s",
		"data_dir":              "/srv/appserver",
		"log_format":            "json",
	}})
	require.Empty(t, warnings)
	require.Equal(t, "ws://[::1]:0", cfg.Listen)
	require.Equal(t, "1.5", cfg.Model)
	require.Equal(t, ptr(false), cfg.Migrate)
	require.Equal(t, []string{"https://a.example", "https://b.example"}, cfg.AllowedOrigins)
	require.Equal(t, 30*time.Second, cfg.ShutdownGracePeriod)
	require.Equal(t, "/srv/appserver", cfg.DataDir)
	require.Equal(t, LogFormatJSON, cfg.LogFormat)
	require.Equal(t, LayerFlag, cfg.Origins()["allowed_origins"])

	cfg, _ = mustLoad(t, Sources{Flags: map[string]string{"allowed_origins": `["https://c.example"]`}})
	require.Equal(t, []string{"https://c.example"}, cfg.AllowedOrigins, "a TOML array works too")
	cfg, _ = mustLoad(t, Sources{Flags: map[string]string{"allowed_origins": ""}})
	require.Equal(t, []string{}, cfg.AllowedOrigins)
}

func TestOverridesApplied(t *testing.T) {
	file := writeConfig(t, `
[mcp_servers.docs]
command = "npx"
args = ["-y", "docs"]
tool_timeout_sec = 5
`)
	tests := []struct {
		name      string
		overrides []string
		check     func(t *testing.T, cfg *Config)
	}{
		{
			name:      "a field merges into the file's table",
			overrides: []string{"mcp_servers.docs.enabled=false"},
			check: func(t *testing.T, cfg *Config) {
				m := cfg.MCPServers["docs"]
				require.False(t, m.Enabled)
				require.Equal(t, "npx", m.Command)
				require.Equal(t, 5.0, m.ToolTimeoutSec)
			},
		},
		{
			name:      "a table value replaces the table, as in Codex",
			overrides: []string{`mcp_servers.docs={url="https://docs.example/mcp"}`},
			check: func(t *testing.T, cfg *Config) {
				require.Equal(t, MCPServer{URL: "https://docs.example/mcp", Enabled: true, StartupTimeoutSec: 10, ToolTimeoutSec: 60},
					cfg.MCPServers["docs"])
				require.Equal(t, LayerOverride, cfg.Origins()["mcp_servers.docs.tool_timeout_sec"])
			},
		},
		{
			name:      "a table via dotted keys creates an entry with defaults",
			overrides: []string{"model_providers.local.base_url=http://localhost:8080/v1", "model_provider=local"},
			check: func(t *testing.T, cfg *Config) {
				want := newProvider()
				want.BaseURL = "http://localhost:8080/v1"
				require.Equal(t, want, cfg.ModelProviders["local"])
				require.Equal(t, "local", cfg.ModelProvider)
			},
		},
		{
			name:      "an inline table creates an entry",
			overrides: []string{`models.o3={display_name="o3", hidden=true, default_reasoning_effort="high"}`},
			check: func(t *testing.T, cfg *Config) {
				require.Equal(t, ModelEntry{DisplayName: "o3", Hidden: true, DefaultReasoningEffort: ReasoningHigh}, cfg.ModelCatalog["o3"])
			},
		},
		{
			name:      "replacing the providers table keeps the built-in provider",
			overrides: []string{"model_providers={}"},
			check: func(t *testing.T, cfg *Config) {
				require.Equal(t, map[string]ModelProvider{"openai": builtinOpenAI()}, cfg.ModelProviders)
			},
		},
		{
			name:      "replacing the built-in provider starts from it",
			overrides: []string{`model_providers.openai={base_url="https://proxy.example/v1"}`},
			check: func(t *testing.T, cfg *Config) {
				want := builtinOpenAI()
				want.BaseURL = "https://proxy.example/v1"
				require.Equal(t, want, cfg.ModelProviders["openai"])
			},
		},
		{
			name:      "quoted key segments",
			overrides: []string{`mcp_servers."my.server".url="https://x.example/mcp"`, `mcp_servers.'my.server'.http_headers."X-Team"=agents`},
			check: func(t *testing.T, cfg *Config) {
				m := cfg.MCPServers["my.server"]
				require.Equal(t, "https://x.example/mcp", m.URL)
				require.Equal(t, map[string]string{"X-Team": "agents"}, m.HTTPHeaders)
				require.Equal(t, LayerOverride, cfg.Origins()[`mcp_servers."my.server".http_headers.X-Team`])
			},
		},
		{
			name:      "arrays replace",
			overrides: []string{`mcp_servers.docs.args=["serve"]`, `allowed_origins=["https://a.example"]`},
			check: func(t *testing.T, cfg *Config) {
				require.Equal(t, []string{"serve"}, cfg.MCPServers["docs"].Args)
				require.Equal(t, []string{"https://a.example"}, cfg.AllowedOrigins)
			},
		},
		{
			name:      "scalars of every type",
			overrides: []string{"migrate=false", "ws_auth=signed-bearer-token", "ws_shared_secret_file=/s", "ws_max_clock_skew_seconds=10", "shutdown_grace_period=2s", "mcp_servers.docs.startup_timeout_sec=1.5"},
			check: func(t *testing.T, cfg *Config) {
				require.Equal(t, ptr(false), cfg.Migrate)
				require.Equal(t, WSAuthSignedBearerToken, cfg.WSAuth)
				require.Equal(t, 10, cfg.WSMaxClockSkewSeconds)
				require.Equal(t, 2*time.Second, cfg.ShutdownGracePeriod)
				require.Equal(t, 1.5, cfg.MCPServers["docs"].StartupTimeoutSec)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, warnings := mustLoad(t, Sources{File: file, Overrides: tt.overrides})
			require.Empty(t, warnings)
			tt.check(t, cfg)
		})
	}
}

func TestUnknownKeyWarnings(t *testing.T) {
	file := writeConfig(t, `
foo = 1
tui = { theme = "dark" }

[model_providers.local]
base_url = "http://localhost:1/v1"
colour = "red"
experimental_bearer_token = "x"

[mcp_servers.m]
command = "x"
env_vars = ["A"]
bogus = true

[models.m1]
displayname = "typo"
`)
	source := "config file " + file
	_, warnings := mustLoad(t, Sources{File: file, Overrides: []string{
		"foo.bar=1",
		"model_max_output_tokens=100",
		"experimental_use_freeform_apply_patch=true",
		`mcp_servers.m.name="legacy"`,
	}})
	require.Equal(t, []Warning{
		unknownWarning("foo", source),
		unknownWarning("mcp_servers.m.bogus", source),
		codexWarning("mcp_servers.m.env_vars", source),
		unknownWarning("model_providers.local.colour", source),
		codexWarning("model_providers.local.experimental_bearer_token", source),
		unknownWarning("models.m1.displayname", source),
		codexWarning("tui", source),
		unknownWarning("foo", "-c foo.bar=1"),
		codexWarning("model_max_output_tokens", "-c model_max_output_tokens=100"),
		codexWarning("experimental_use_freeform_apply_patch", "-c experimental_use_freeform_apply_patch=true"),
		codexWarning("mcp_servers.m.name", `-c mcp_servers.m.name="legacy"`),
	}, warnings)
	require.Equal(t, "config file "+file+`: unknown config key "foo" (ignored)`, warnings[0].String())
}

func TestCodexConfigFile(t *testing.T) {
	path := filepath.Join("testdata", "codex_config.toml")
	cfg, warnings := mustLoad(t, Sources{File: path})

	source := "config file " + path
	var want []Warning
	for _, key := range []string{
		"disable_response_storage", "experimental_use_exec_command_tool", "features.web_search_request", "file_opener",
		"hide_agent_reasoning", "history", `mcp_servers."figma.remote".startup_timeout_ms`,
		"model_providers.azure.experimental_bearer_token",
		"notify", "otel.environment",
		"profile", "profiles", "projects", "sandbox_workspace_write", "shell_environment_policy",
		"tools", "tui",
	} {
		want = append(want, codexWarning(key, source))
	}
	// Codex's exporter table (its log events) is not a trace exporter.
	want = slices.Insert(want, 10, Warning{Path: "otel.exporter", Source: source,
		Message: `codex config key "otel.exporter" (a table) is not used by appserver (ignored); set it to "otlp-http" or "otlp-grpc" to export traces`})
	require.Equal(t, want, warnings)
	require.False(t, cfg.OTel.Enabled())

	require.Equal(t, "gpt-5-codex", cfg.Model, "profiles are not applied")
	require.Equal(t, ReasoningHigh, cfg.ModelReasoningEffort)
	require.Equal(t, "detailed", cfg.ModelReasoningSummary)
	require.Equal(t, "azure", cfg.ModelProvider)
	require.Equal(t, ApprovalUntrusted, cfg.ApprovalPolicy)
	require.Equal(t, SandboxWorkspaceWrite, cfg.SandboxMode)
	require.Equal(t, "ws://0.0.0.0:4500", cfg.Listen)
	require.Equal(t, WSAuthCapabilityToken, cfg.WSAuth)
	require.Equal(t, LogFormatJSON, cfg.LogFormat)
	require.Equal(t, map[string]ModelProvider{
		"openai": builtinOpenAI(),
		"azure": {
			Name:                "Azure",
			BaseURL:             "https://example.openai.azure.com/openai",
			EnvKey:              "AZURE_OPENAI_API_KEY",
			WireAPI:             WireAPIResponses,
			QueryParams:         map[string]string{"api-version": "2025-04-01-preview"},
			HTTPHeaders:         map[string]string{"X-Team": "agents", "Authorization": "Bearer not-a-real-secret"},
			RequestMaxRetries:   2,
			StreamMaxRetries:    5,
			StreamIdleTimeoutMS: 300000,
		},
		"ollama": {
			Name:                "Ollama",
			BaseURL:             "http://localhost:11434/v1",
			WireAPI:             WireAPIChat,
			RequestMaxRetries:   4,
			StreamMaxRetries:    5,
			StreamIdleTimeoutMS: 300000,
		},
	}, cfg.ModelProviders)
	require.Equal(t, map[string]MCPServer{
		"docs": {
			Command:           "npx",
			Args:              []string{"-y", "mcp-server-docs"},
			Env:               map[string]string{"DOCS_TOKEN": "not-a-secret", "DOCS_MODE": "fast"},
			StartupTimeoutSec: 20,
			ToolTimeoutSec:    30.5,
			Enabled:           true,
			EnabledTools:      []string{"search", "fetch"},
		},
		"figma.remote": {
			URL:               "https://mcp.figma.example/mcp",
			BearerTokenEnvVar: "FIGMA_TOKEN",
			StartupTimeoutSec: 10,
			ToolTimeoutSec:    60,
			Enabled:           false,
		},
	}, cfg.MCPServers)
	require.Equal(t, []ModelInfo{{ID: "gpt-5-codex", DisplayName: "gpt-5-codex", Provider: "azure", IsDefault: true}}, cfg.Models())
}

func TestTypeErrors(t *testing.T) {
	tests := []struct {
		name string
		src  Sources
		want string
	}{
		{"override string", Sources{Overrides: []string{"listen=5"}}, "-c listen=5: expected a string"},
		{"override bool from bare word", Sources{Overrides: []string{"migrate=yes"}}, "-c migrate=yes: expected a boolean"},
		{"override integer", Sources{Overrides: []string{"ws_max_clock_skew_seconds=1.5"}}, "-c ws_max_clock_skew_seconds=1.5: expected an integer"},
		{"override array from bare word", Sources{Overrides: []string{"allowed_origins=https://a"}}, "-c allowed_origins=https://a: expected an array of strings"},
		{"override array of numbers", Sources{Overrides: []string{"allowed_origins=[1]"}}, "-c allowed_origins=[1]: expected an array of strings"},
		{"override duration number", Sources{Overrides: []string{"shutdown_grace_period=10"}}, `-c shutdown_grace_period=10: expected a duration string such as "10s"`},
		{"override duration text", Sources{Overrides: []string{"shutdown_grace_period=soon"}}, `-c shutdown_grace_period=soon: invalid duration "soon" (expected a duration such as "10s", "1m30s" or "90d")`},
		{"override number", Sources{Overrides: []string{"mcp_servers.m.tool_timeout_sec=long"}}, "-c mcp_servers.m.tool_timeout_sec=long: expected a number"},
		{"override number inf", Sources{Overrides: []string{"mcp_servers.m.tool_timeout_sec=inf"}}, "-c mcp_servers.m.tool_timeout_sec=inf: expected a finite number"},
		{"override nested in inline table", Sources{Overrides: []string{`model_providers.x={request_max_retries="4"}`}},
			`-c model_providers.x={request_max_retries="4"}: model_providers.x.request_max_retries: expected an integer`},
		{"override table of tables", Sources{Overrides: []string{"model_providers=1"}}, "-c model_providers=1: expected a table of tables"},
		{"override table", Sources{Overrides: []string{"model_providers.x=1"}}, "-c model_providers.x=1: expected a table"},
		{"override string map", Sources{Overrides: []string{"model_providers.x.http_headers.A=1"}}, "-c model_providers.x.http_headers.A=1: expected a string"},
		{"override into a scalar", Sources{Overrides: []string{"listen.x=1"}}, "-c listen.x=1: listen: expected a string"},
		{"override date is not a string", Sources{Overrides: []string{"model=2024-01-01"}}, "-c model=2024-01-01: expected a string"},
		{"env", Sources{Env: testEnv("APPSERVER_MIGRATE=maybe")}, "env APPSERVER_MIGRATE: expected a boolean"},
		{"env nested", Sources{Env: testEnv("APPSERVER_MODEL_PROVIDERS__X={name=1}")}, "env APPSERVER_MODEL_PROVIDERS__X: model_providers.x.name: expected a string"},
		{"flag bool", Sources{Flags: map[string]string{"migrate": "maybe"}}, `flag --migrate: expected a boolean, got "maybe"`},
		{"flag int", Sources{Flags: map[string]string{"ws_max_clock_skew_seconds": "ten"}}, `flag --ws-max-clock-skew-seconds: expected an integer, got "ten"`},
		{"flag unknown key", Sources{Flags: map[string]string{"nope": "x"}}, `flag --nope: unknown config key "nope"`},
		{"flag bad key", Sources{Flags: map[string]string{"a..b": "x"}}, `flag --a..b: invalid config key "a..b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, loadError(t, tt.src))
		})
	}
}

func TestWarningsSurviveErrors(t *testing.T) {
	_, warnings, err := Load(Sources{Env: testEnv(), Overrides: []string{"tui.x=1", "listen=5"}})
	require.Error(t, err)
	require.Equal(t, []Warning{codexWarning("tui", "-c tui.x=1")}, warnings)
}
