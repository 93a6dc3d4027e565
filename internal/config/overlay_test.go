package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
)

func TestWriteOverlay(t *testing.T) {
	dir := t.TempDir()
	ok := func(string) error { return nil }
	write := func(edits ...Edit) error {
		_, _, err := WriteOverlay(dir, edits, ok)
		return err
	}
	require.NoError(t, write(
		Edit{KeyPath: "model", Value: []byte(`"m1"`)},
		Edit{KeyPath: "model_providers.local", Value: []byte(`{"name":"Local","request_max_retries":2}`)},
	))
	require.NoError(t, write(Edit{KeyPath: "model_providers.local", Value: []byte(`{"base_url":"http://127.0.0.1:1/v1"}`), Upsert: true}))
	require.NoError(t, write(Edit{KeyPath: "model", Value: []byte(`null`)}))

	cfg, _, err := Load(Sources{Flags: map[string]string{"data_dir": dir}})
	require.NoError(t, err)
	require.Equal(t, "", cfg.Model, "null removed the key")
	p := cfg.ModelProviders["local"]
	require.Equal(t, "Local", p.Name, "upsert kept the table's other keys")
	require.Equal(t, "http://127.0.0.1:1/v1", p.BaseURL)
	require.Equal(t, 2, p.RequestMaxRetries)
	require.Equal(t, LayerUser, cfg.Origins()["model_providers.local.base_url"])

	// The environment and the command line win over the overlay.
	require.NoError(t, write(Edit{KeyPath: "model", Value: []byte(`"m2"`)}))
	cfg, _, err = Load(Sources{Flags: map[string]string{"data_dir": dir}, Overrides: []string{"model=m3"}})
	require.NoError(t, err)
	require.Equal(t, "m3", cfg.Model)

	// A refused check leaves the file as it was.
	before, err := os.ReadFile(OverlayFile(dir))
	require.NoError(t, err)
	_, _, err = WriteOverlay(dir, []Edit{{KeyPath: "model", Value: []byte(`"m4"`)}}, func(string) error { return apperr.New(apperr.Invalid, "no") })
	require.Error(t, err)
	after, err := os.ReadFile(OverlayFile(dir))
	require.NoError(t, err)
	require.Equal(t, before, after)

	_, _, err = WriteOverlay(dir, []Edit{{KeyPath: "listen", Value: []byte(`"ws://0.0.0.0:1"`)}}, ok)
	require.True(t, apperr.Is(err, apperr.Invalid), "operator keys are not writable: %v", err)
}

// A data dir that cannot be written is a clear Unavailable error. (Tests
// run as root, for whom permission bits do not make a directory read-only,
// so the directory here is one that does not exist.)
func TestWriteOverlayReadOnly(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	_, _, err := WriteOverlay(missing, []Edit{{KeyPath: "model", Value: []byte(`"m"`)}}, func(string) error { return nil })
	require.True(t, apperr.Is(err, apperr.Unavailable), "%v", err)
	require.Contains(t, err.Error(), "read-only")
}
