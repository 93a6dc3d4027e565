package configview_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/config/configview"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
	w := configview.NewWriter(start, src, func(c *config.Config) { applied = c })
	write := func(key string, value any) api.ConfigWriteResult {
		t.Helper()
		raw, err := json.Marshal(value)
		require.NoError(t, err)
		res, err := w.WriteConfig(context.Background(), api.ConfigBatchWriteParams{Edits: []api.ConfigEdit{{KeyPath: key, Value: raw, MergeStrategy: "replace"}}})
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
