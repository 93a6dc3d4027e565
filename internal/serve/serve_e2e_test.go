package serve_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/serve"
	"github.com/appserver/appserver/internal/store/pgtest"
)

func TestServeEmbeddedStoreAndGracefulShutdown(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "fresh", "data")
	cfgFile := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(`
model = "gpt-test"
model_provider = "local"
bogus_key = 1

[model_providers.local]
name = "Local"
base_url = "http://127.0.0.1:1/v1"
wire_api = "chat"

[tui]
theme = "dark"
`), 0o600))
	d := apptest.Start(t, "--data-dir", dataDir, "--config", cfgFile, "-c", `approval_policy="never"`)
	_, err := os.Stat(filepath.Join(dataDir, "appserver.db"))
	require.NoError(t, err, "embedded store is created inside --data-dir on first run")
	require.Equal(t, 200, apptest.Status(t, d.URL("/healthz")))
	require.Equal(t, 200, apptest.Status(t, d.URL("/readyz")))

	c := d.RPC(t)
	models := c.Call("model/list", map[string]any{"includeHidden": true})
	require.Contains(t, string(models), `"id":"gpt-test"`)
	require.Contains(t, string(models), `"isDefault":true`)
	cfg := c.Call("config/read", map[string]any{"includeLayers": true, "cwd": "."})
	var view struct {
		Config  map[string]any            `json:"config"`
		Origins map[string]map[string]any `json:"origins"`
	}
	require.NoError(t, json.Unmarshal(cfg, &view))
	require.Equal(t, "gpt-test", view.Config["model"])
	require.Equal(t, "never", view.Config["approval_policy"])
	require.Contains(t, view.Origins, "model")
	c.Call("account/read", map[string]any{})
	c.Call("configRequirements/read", nil)

	// SIGTERM/SIGINT cancel run's context: the client sees a going-away close.
	d.Stop(t)
	readErr := c.Closed()
	require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(readErr), "%v", readErr)

	// The store survived the shutdown: a second start opens it again.
	d2 := apptest.Start(t, "--data-dir", dataDir)
	require.Equal(t, 200, apptest.Status(t, d2.URL("/readyz")))
}

func TestConfigWarningsReachClients(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("bogus_key = 1\n"), 0o600))
	d := apptest.Start(t, "--data-dir", t.TempDir(), "--config", cfgFile)
	c := apptest.MustDial(t, d.Addr, nil)
	c.Initialize(nil)
	f := c.Next()
	require.Equal(t, "configWarning", f.Method, "the first message after initialize's answer")
	require.Contains(t, string(f.Params), `bogus_key`)
}

func TestServeCapabilityTokenAuth(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600))
	d := apptest.Start(t, "--data-dir", t.TempDir(), "--ws-auth", "capability-token", "--ws-token-file", tokenFile)
	// Health stays outside auth.
	require.Equal(t, 200, apptest.Status(t, d.URL("/healthz")))

	_, resp, err := d.Dial(t, nil)
	require.Error(t, err)
	require.Equal(t, 401, resp.StatusCode)
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, "missing websocket bearer token", string(body))

	_, resp, err = d.Dial(t, http.Header{"Authorization": {"Bearer wrong"}})
	require.Error(t, err)
	body, _ = io.ReadAll(resp.Body)
	require.Equal(t, "invalid websocket bearer token", string(body))

	c, _, err := d.Dial(t, http.Header{"Authorization": {"bearer s3cret-token"}})
	require.NoError(t, err)
	c.Initialize(nil)
}

func TestServeSignedBearerTokenAuth(t *testing.T) {
	secret := []byte(strings.Repeat("k", 40))
	secretFile := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secretFile, secret, 0o600))
	d := apptest.Start(t, "--data-dir", t.TempDir(), "--ws-auth", "signed-bearer-token",
		"--ws-shared-secret-file", secretFile, "--ws-issuer", "ci", "--ws-audience", "appserver")

	good, err := auth.SignHS256(secret, map[string]any{"exp": time.Now().Add(time.Minute).Unix(), "iss": "ci", "aud": []string{"x", "appserver"}})
	require.NoError(t, err)
	c, _, err := d.Dial(t, http.Header{"Authorization": {"Bearer " + good}})
	require.NoError(t, err)
	c.Initialize(nil)

	for _, tc := range []struct {
		claims map[string]any
		want   string
	}{
		{map[string]any{"exp": time.Now().Add(-time.Minute).Unix(), "iss": "ci", "aud": "appserver"}, "expired websocket jwt"},
		{map[string]any{"exp": time.Now().Add(time.Minute).Unix(), "iss": "other", "aud": "appserver"}, "websocket jwt issuer mismatch"},
		{map[string]any{"exp": time.Now().Add(time.Minute).Unix(), "iss": "ci", "aud": "nope"}, "websocket jwt audience mismatch"},
		{map[string]any{"iss": "ci", "aud": "appserver"}, "invalid websocket jwt"},
	} {
		tok, err := auth.SignHS256(secret, tc.claims)
		require.NoError(t, err)
		_, resp, err := d.Dial(t, http.Header{"Authorization": {"Bearer " + tok}})
		require.Error(t, err)
		require.Equal(t, 401, resp.StatusCode)
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, tc.want, string(body))
	}
}

func TestServeAndMigrateOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	var out strings.Builder
	require.NoError(t, serve.Migrate(context.Background(), serve.Process{Stdout: &out, Stderr: io.Discard}, []string{"--database-url", url}))
	require.Contains(t, out.String(), "migrations applied (postgres)")
	d := apptest.Start(t, "--database-url", url)
	require.Equal(t, 200, apptest.Status(t, d.URL("/readyz")))
	c, _, err := d.Dial(t, nil)
	require.NoError(t, err)
	c.Initialize(nil)
}

// The web console is served at "/" unless web_console is false; the
// websocket upgrade at "/" works either way.
func TestWebConsoleSwitch(t *testing.T) {
	on := apptest.Start(t, "--data-dir", t.TempDir())
	require.Equal(t, http.StatusOK, apptest.Status(t, on.URL("/")))
	require.Equal(t, http.StatusOK, apptest.Status(t, on.URL("/console/app.js")))
	on.RPC(t)

	off := apptest.Start(t, "--data-dir", t.TempDir(), "-c", "web_console=false")
	require.Equal(t, http.StatusBadRequest, apptest.Status(t, off.URL("/")), "only the websocket is served at /")
	require.Equal(t, http.StatusBadRequest, apptest.Status(t, off.URL("/console/app.js")))
	off.RPC(t)
}
