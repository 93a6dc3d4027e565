package configview_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/config/configview"
)

// edit is one replace edit of value (marshalled to JSON).
func edit(t *testing.T, key string, value any) api.ConfigEdit {
	t.Helper()
	raw, err := json.Marshal(value)
	require.NoError(t, err)
	return api.ConfigEdit{KeyPath: key, Value: raw, MergeStrategy: "replace"}
}

// A write whose value the daemon's command line or environment hides
// succeeds with okOverridden, naming the session-flags layer and the value
// in effect; other writes answer ok; config/read attributes written values
// to the user overlay.
func TestWriteReportsOverride(t *testing.T) {
	dir := t.TempDir()
	src := config.Sources{
		Flags:     map[string]string{"data_dir": dir},
		Env:       []string{"APPSERVER_APPROVAL_POLICY=never"},
		Overrides: []string{`model="forced"`},
	}
	start, _, err := config.Load(src)
	require.NoError(t, err)
	var applied *config.Config
	w, warnings := configview.NewWriter(start, src, func(_ string, c *config.Config) { applied = c })
	require.Empty(t, warnings)
	write := func(key string, value any) api.ConfigWriteResult {
		t.Helper()
		res, err := w.WriteConfig(context.Background(), "", api.ConfigBatchWriteParams{Edits: []api.ConfigEdit{edit(t, key, value)}})
		require.NoError(t, err)
		return res
	}

	res := write("model", "mine")
	require.Equal(t, "okOverridden", res.Status)
	require.JSONEq(t, `{"message":"Overridden by session flags","overridingLayer":{"name":{"type":"sessionFlags"},"version":"override"},"effectiveValue":"forced"}`, string(res.OverriddenMetadata))

	res = write("approval_policy", "on-request")
	require.Equal(t, "okOverridden", res.Status, "the environment overrides too")
	require.Contains(t, string(res.OverriddenMetadata), `"effectiveValue":"never"`)

	res = write("sandbox_mode", "danger-full-access")
	require.Equal(t, "ok", res.Status)
	require.Nil(t, res.OverriddenMetadata)
	require.Equal(t, config.SandboxMode("danger-full-access"), applied.SandboxMode, "the write is applied")
	require.Same(t, applied, w.Current())

	origin := configview.Read(w.Current(), "").Origins["sandbox_mode"]
	require.Equal(t, api.LayerUser, origin.Name.Type)
	require.Equal(t, config.OverlayFile(dir), origin.Name.File)
}

// operatorConfig is a daemon's config file with a provider and a
// principal of its own.
const operatorConfig = `
model = "m1"
model_provider = "local"
[model_providers.local]
base_url = "http://127.0.0.1:1/v1"
env_key = "LOCAL_KEY"
[http_api.principals.alice]
token_sha256 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
[http_api.principals.bob]
token_sha256 = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
`

// newWriter starts a writer over a data dir with operatorConfig; applied
// records what it hands on, by principal.
func newWriter(t *testing.T) (w *configview.Writer, dir string, applied map[string]*config.Config) {
	t.Helper()
	dir = t.TempDir()
	file := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(file, []byte(operatorConfig), 0o600))
	src := config.Sources{File: file, Flags: map[string]string{"data_dir": dir}, Env: []string{"HOME=/nonexistent"}}
	start, _, err := config.Load(src)
	require.NoError(t, err)
	applied = map[string]*config.Config{}
	w, _ = configview.NewWriter(start, src, func(p string, c *config.Config) { applied[p] = c })
	return w, dir, applied
}

// The keys only the operator sets are refused by config/value/write and
// config/batchWrite with the key named and the reference's error code;
// nothing is written and nothing applied.
func TestWriteRefusesOperatorKeys(t *testing.T) {
	for _, tc := range []struct {
		key   string
		value any
		code  api.ConfigWriteErrorCode
	}{
		{"http_api.principal_max_sandbox", "danger-full-access", api.ConfigLayerReadonly},
		{"http_api.principals.mallory", map[string]any{"token_sha256": "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"}, api.ConfigLayerReadonly},
		{"http_api.principals.mallory.token_sha256", "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc", api.ConfigLayerReadonly},
		{"model_providers.evil", map[string]any{"base_url": "http://evil.example/v1", "env_key": "LOCAL_KEY"}, api.ConfigLayerReadonly},
		{"model_providers.evil.env_key", "LOCAL_KEY", api.ConfigLayerReadonly},
		{"mcp_servers.x.command", "/bin/sh", api.ConfigLayerReadonly},
		{"event_retention", "1s", api.ConfigLayerReadonly},
		{"node_id", "other", api.ConfigLayerReadonly},
		{"sandbox_backend", "landlock", api.ConfigLayerReadonly},
		{"otel.endpoint", "http://evil.example", api.ConfigLayerReadonly},
		{"data_dir", "/elsewhere", api.ConfigLayerReadonly},
		{"no_such_key", true, api.ConfigSchemaUnknownKey},
		{"model", "a\x00b", api.ConfigValidationError},
		{"model_provider", "evil", api.ConfigValidationError},
	} {
		t.Run(tc.key, func(t *testing.T) {
			w, dir, applied := newWriter(t)
			for _, p := range []api.ConfigBatchWriteParams{
				{Edits: []api.ConfigEdit{edit(t, tc.key, tc.value)}},
				{Edits: []api.ConfigEdit{edit(t, "model", "m2"), edit(t, tc.key, tc.value)}},
			} {
				_, err := w.WriteConfig(context.Background(), "", p)
				var we *configview.WriteError
				require.True(t, errors.As(err, &we), "%s: %v", tc.key, err)
				require.Equal(t, tc.code, we.ConfigWriteErrorCode())
				require.True(t, apperr.Is(err, apperr.Invalid))
				require.Contains(t, apperr.MessageOf(err), `"`+tc.key+`"`)
				_, statErr := os.Stat(config.OverlayFile(dir))
				require.True(t, errors.Is(statErr, os.ErrNotExist), "nothing written")
				require.Empty(t, applied)
				require.Equal(t, "m1", w.Current().Model)
			}
		})
	}
}

// With principals configured, a principal's writes go to its own user
// config: its new threads and its config/read see them, another
// principal's and the operator's do not; the operator's writes stay
// daemon-wide and reach the principals for what they did not set.
func TestPrincipalWritesOwnConfig(t *testing.T) {
	w, dir, applied := newWriter(t)
	ctx := context.Background()
	res, err := w.WriteConfig(ctx, "alice", api.ConfigBatchWriteParams{Edits: []api.ConfigEdit{
		edit(t, "model", "alice-model"), edit(t, "sandbox_mode", "workspace-write"),
	}})
	require.NoError(t, err)
	require.Equal(t, config.PrincipalOverlayFile(dir, "alice"), res.FilePath)
	_, statErr := os.Stat(config.OverlayFile(dir))
	require.True(t, errors.Is(statErr, os.ErrNotExist), "the daemon-wide user config is untouched")
	require.Equal(t, configview.ThreadDefaults{Model: "alice-model", SandboxMode: "workspace-write"}, configview.Defaults(applied["alice"]),
		"only what alice set is hers")
	require.NotContains(t, applied, "")

	model := func(principal string) any { return w.Read(principal, "").Config["model"] }
	require.Equal(t, "alice-model", model("alice"))
	require.Equal(t, "m1", model("bob"))
	require.Equal(t, "m1", model(""))
	require.Equal(t, "m1", w.Current().Model)
	origin := w.Read("alice", "").Origins["model"]
	require.Equal(t, config.PrincipalOverlayFile(dir, "alice"), origin.Name.File)

	// A principal is held to its ceiling, and to its own file.
	_, err = w.WriteConfig(ctx, "bob", api.ConfigBatchWriteParams{Edits: []api.ConfigEdit{edit(t, "sandbox_mode", "danger-full-access")}})
	var we *configview.WriteError
	require.True(t, errors.As(err, &we), "%v", err)
	require.Equal(t, api.ConfigValidationError, we.ConfigWriteErrorCode())
	other := config.OverlayFile(dir)
	_, err = w.WriteConfig(ctx, "bob", api.ConfigBatchWriteParams{Edits: []api.ConfigEdit{edit(t, "model", "x")}, FilePath: &other})
	require.True(t, errors.As(err, &we), "%v", err)
	require.Equal(t, api.ConfigLayerReadonly, we.ConfigWriteErrorCode())
	require.Equal(t, "m1", model("bob"))

	// The operator's write is daemon-wide; alice keeps her model.
	_, err = w.WriteConfig(ctx, "", api.ConfigBatchWriteParams{Edits: []api.ConfigEdit{edit(t, "model", "m2"), edit(t, "approval_policy", "never")}})
	require.NoError(t, err)
	require.Equal(t, "m2", model("bob"))
	require.Equal(t, "alice-model", model("alice"))
	require.Equal(t, "never", w.Read("alice", "").Config["approval_policy"])
	require.Equal(t, "m2", applied[""].Model)

	// Feature switches are a principal's own too: alice's new threads and
	// experimentalFeature/list see hers, bob's the daemon's.
	_, err = w.WriteConfig(ctx, "alice", api.ConfigBatchWriteParams{Edits: []api.ConfigEdit{edit(t, "features.shell_tool", false)}})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"shell_tool": false}, configview.Defaults(applied["alice"]).Features)
	enabled := func(principal, name string, thread map[string]bool) bool {
		for _, f := range w.ExperimentalFeatures(principal, thread) {
			if f.Name == name {
				return f.Enabled
			}
		}
		t.Fatalf("%s not listed", name)
		return false
	}
	require.False(t, enabled("alice", "shell_tool", nil))
	require.True(t, enabled("bob", "shell_tool", nil))
	require.True(t, enabled("alice", "shell_tool", map[string]bool{"shell_tool": true}), "the thread's own switch wins")
	require.True(t, applied[""].Features.ShellTool)
}

// At start, the principals' user configs are loaded and handed on; the
// keys a principal may not write found there are left out, with warnings.
func TestNewWriterLoadsPrincipalConfigs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(file, []byte(operatorConfig), 0o600))
	pfile := config.PrincipalOverlayFile(dir, "alice")
	require.NoError(t, os.MkdirAll(filepath.Dir(pfile), 0o700))
	require.NoError(t, os.WriteFile(pfile, []byte("model = \"mine\"\nsandbox_mode = \"danger-full-access\"\n[http_api]\nprincipal_max_sandbox = \"danger-full-access\"\n"), 0o600))
	src := config.Sources{File: file, Flags: map[string]string{"data_dir": dir}, Env: []string{"HOME=/nonexistent"}}
	start, _, err := config.Load(src)
	require.NoError(t, err)
	applied := map[string]*config.Config{}
	w, warnings := configview.NewWriter(start, src, func(p string, c *config.Config) { applied[p] = c })
	require.Equal(t, configview.ThreadDefaults{Model: "mine"}, configview.Defaults(applied["alice"]))
	var named []string
	for _, x := range warnings {
		require.Equal(t, "user config "+pfile, x.Source)
		named = append(named, x.Path)
	}
	require.ElementsMatch(t, []string{"sandbox_mode", "http_api"}, named)
	require.Equal(t, "read-only", w.Read("alice", "").Config["sandbox_mode"])
}
