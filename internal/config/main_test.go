package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/apperr"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testHome is the HOME every test environment uses, so data_dir is
// predictable whatever the machine's environment.
const testHome = "/home/tester"

// testEnv returns a minimal environment plus extra "K=V" entries.
func testEnv(extra ...string) []string {
	return append([]string{"HOME=" + testHome, "PATH=/usr/bin"}, extra...)
}

// mustLoad loads src (with testEnv when src.Env is nil) and fails the test
// on error.
func mustLoad(t *testing.T, src Sources) (*Config, []Warning) {
	t.Helper()
	if src.Env == nil {
		src.Env = testEnv()
	}
	cfg, warnings, err := Load(src)
	require.NoError(t, err)
	require.NotNil(t, cfg)
	return cfg, warnings
}

// loadError loads src, requires an apperr.Invalid error and returns its
// client-safe message.
func loadError(t *testing.T, src Sources) string {
	t.Helper()
	if src.Env == nil {
		src.Env = testEnv()
	}
	cfg, _, err := Load(src)
	require.Error(t, err)
	require.Nil(t, cfg)
	require.True(t, apperr.Is(err, apperr.Invalid), "want an Invalid error, got %v", err)
	return apperr.MessageOf(err)
}

// writeConfig writes a config file into a fresh temporary directory and
// returns its path.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func unknownWarning(path, source string) Warning {
	return Warning{Path: path, Message: `unknown config key "` + path + `" (ignored)`, Source: source}
}

func codexWarning(path, source string) Warning {
	return Warning{Path: path, Message: `codex config key "` + path + `" is not used by appserver (ignored)`, Source: source}
}

func ptr[T any](v T) *T { return &v }
