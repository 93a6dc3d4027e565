package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHTTPAPIPrincipals(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	other := strings.Repeat("cd", 32)
	load := func(toml string) (*Config, error) {
		f := filepath.Join(t.TempDir(), "config.toml")
		require.NoError(t, os.WriteFile(f, []byte(toml), 0o600))
		cfg, _, err := Load(Sources{File: f, Env: []string{"HOME=/home/x"}})
		return cfg, err
	}
	cfg, err := load("[http_api.principals.ci]\ntoken_sha256 = \"" + digest + "\"\n[http_api.principals.release-bot]\ntoken_sha256 = \"" + strings.ToUpper(other) + "\"\n")
	require.NoError(t, err)
	require.Equal(t, map[string]HTTPPrincipal{"ci": {TokenSHA256: digest}, "release-bot": {TokenSHA256: strings.ToUpper(other)}}, cfg.HTTPAPI.Principals)
	require.Equal(t, SandboxWorkspaceWrite, cfg.HTTPAPI.PrincipalMaxSandbox, "principals get no full access by default")
	// The digests are secrets to config/read.
	tree := cfg.Redacted()["http_api"].(map[string]any)["principals"].(map[string]any)
	require.Equal(t, RedactedValue, tree["ci"].(map[string]any)["token_sha256"])

	for _, c := range []struct{ toml, msg string }{
		{"[http_api.principals.ci]\ntoken_sha256 = \"abc\"\n", "http_api.principals.ci.token_sha256: expected 64 hexadecimal characters"},
		{"[http_api]\nprincipal_max_sandbox = \"full\"\n", `http_api.principal_max_sandbox: expected "read-only", "workspace-write" or "danger-full-access", got "full"`},
		{"[http_api]\nprincipal_max_approval = \"always\"\n", `http_api.principal_max_approval: expected "untrusted", "on-request", "on-failure" or "never", got "always"`},
		{"[http_api.principals.\"a b\"]\ntoken_sha256 = \"" + digest + "\"\n", "principal names are 1-64 characters"},
		{"[http_api.principals.a]\ntoken_sha256 = \"" + digest + "\"\n[http_api.principals.b]\ntoken_sha256 = \"" + digest + "\"\n", `the same token as principal "a"`},
		{"[http_api.principals.a]\ntoken_sha256 = 5\n", "expected a string"},
	} {
		_, err := load(c.toml)
		require.ErrorContains(t, err, c.msg)
	}
}
