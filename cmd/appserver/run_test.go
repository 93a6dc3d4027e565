package main

import (
	"bufio"
	"context"
	"encoding/json"
	"github.com/appserver/appserver/internal/mcp/mcptest"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/store/pgtest"
	"github.com/appserver/appserver/internal/testenv"
)

func TestMain(m *testing.M) {
	// Sandboxed commands re-execute this test binary as the sandbox helper,
	// as they do the daemon's binary.
	sandbox.MaybeRunHelper()
	// Built before HOME moves, so that it uses the real build cache.
	_, _ = mcptest.Build()
	home := testenv.IsolateHome()
	defer pgtest.Stop()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { home(); mcptest.Cleanup() }), goleak.IgnoreCurrent(), goleak.IgnoreAnyFunction("github.com/appserver/appserver/internal/sandbox.(*launcher).loop"))
}

// testDaemon is an in-process appserver started through run, as main does.
type testDaemon struct {
	addr   string // ws://host:port
	cancel context.CancelFunc
	done   chan error
}

func startDaemon(t *testing.T, args ...string) *testDaemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	d := &testDaemon{cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := run(ctx, append([]string{"serve", "--listen", "ws://127.0.0.1:0", "--log-level", "warn"}, args...), pw, io.Discard)
		pw.CloseWithError(io.EOF)
		d.done <- err
	}()
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		if addr, ok := listenAddr(lines.Text()); ok {
			d.addr = addr
			break
		}
	}
	if d.addr == "" {
		cancel()
		t.Fatalf("daemon did not start: %v", <-d.done)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	t.Cleanup(func() { d.stop(t) })
	return d
}

// listenAddr reads the address from the line the daemon announces it with
// on stdout: "appserver listening on ADDR", or under --log-format json a
// record with msg "appserver listening" and addr.
func listenAddr(line string) (string, bool) {
	if addr, ok := strings.CutPrefix(line, "appserver listening on "); ok {
		return addr, true
	}
	var rec struct{ Msg, Addr string }
	if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "appserver listening" && rec.Addr != "" {
		return rec.Addr, true
	}
	return "", false
}

func (d *testDaemon) stop(t *testing.T) {
	t.Helper()
	if d.cancel == nil {
		return
	}
	d.cancel()
	d.cancel = nil
	select {
	case err := <-d.done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("daemon did not shut down")
	}
}

func (d *testDaemon) httpURL(path string) string {
	return "http" + strings.TrimPrefix(d.addr, "ws") + path
}

type wsClient struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialDaemon(t *testing.T, d *testDaemon, hdr http.Header) (*wsClient, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, d.addr, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		return nil, resp, err
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &wsClient{t: t, ws: ws}, resp, nil
}

func (c *wsClient) roundTrip(id any, method string, params any) map[string]json.RawMessage {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	require.NoError(c.t, err)
	require.NoError(c.t, c.ws.Write(ctx, websocket.MessageText, b))
	for {
		_, data, err := c.ws.Read(ctx)
		require.NoError(c.t, err)
		var m map[string]json.RawMessage
		require.NoError(c.t, json.Unmarshal(data, &m))
		if _, ok := m["id"]; ok {
			return m
		}
	}
}

func (c *wsClient) initialize() {
	c.t.Helper()
	resp := c.roundTrip("initialize", "initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "codex-tui", "title": nil, "version": "0.169.0"},
		"capabilities": map[string]any{"experimentalApi": true},
	})
	require.Contains(c.t, resp, "result", "%s", resp["error"])
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

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
	d := startDaemon(t, "--data-dir", dataDir, "--config", cfgFile, "-c", `approval_policy="never"`)
	_, err := os.Stat(filepath.Join(dataDir, "appserver.db"))
	require.NoError(t, err, "embedded store is created inside --data-dir on first run")
	require.Equal(t, 200, httpStatus(t, d.httpURL("/healthz")))
	require.Equal(t, 200, httpStatus(t, d.httpURL("/readyz")))

	c, _, err := dialDaemon(t, d, nil)
	require.NoError(t, err)
	c.initialize()
	models := c.roundTrip(1, "model/list", map[string]any{"includeHidden": true})
	require.Contains(t, string(models["result"]), `"id":"gpt-test"`)
	require.Contains(t, string(models["result"]), `"isDefault":true`)
	cfg := c.roundTrip(2, "config/read", map[string]any{"includeLayers": true, "cwd": "."})
	var view struct {
		Config  map[string]any            `json:"config"`
		Origins map[string]map[string]any `json:"origins"`
	}
	require.NoError(t, json.Unmarshal(cfg["result"], &view))
	require.Equal(t, "gpt-test", view.Config["model"])
	require.Equal(t, "never", view.Config["approval_policy"])
	require.Contains(t, view.Origins, "model")
	require.Contains(t, c.roundTrip(3, "account/read", map[string]any{}), "result")
	require.Contains(t, c.roundTrip(4, "configRequirements/read", nil), "result")

	// SIGTERM/SIGINT cancel run's context: the client sees a going-away close.
	d.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var readErr error
	for readErr == nil {
		_, _, readErr = c.ws.Read(ctx)
	}
	require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(readErr), "%v", readErr)

	// The store survived the shutdown: a second start opens it again.
	d2 := startDaemon(t, "--data-dir", dataDir)
	require.Equal(t, 200, httpStatus(t, d2.httpURL("/readyz")))
}

func TestConfigWarningsReachClients(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("bogus_key = 1\n"), 0o600))
	d := startDaemon(t, "--data-dir", t.TempDir(), "--config", cfgFile)
	c, _, err := dialDaemon(t, d, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, c.ws.Write(ctx, websocket.MessageText, []byte(`{"id":1,"method":"initialize","params":{"clientInfo":{"name":"t","version":"1"}}}`)))
	_, _, err = c.ws.Read(ctx)
	require.NoError(t, err)
	_, data, err := c.ws.Read(ctx)
	require.NoError(t, err)
	require.Contains(t, string(data), `"method":"configWarning"`)
	require.Contains(t, string(data), `bogus_key`)
}

func TestServeRefusals(t *testing.T) {
	dir := t.TempDir()
	err := run(context.Background(), []string{"serve", "--listen", "ws://0.0.0.0:0", "--data-dir", dir}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "refusing to start non-loopback websocket listener")
	err = run(context.Background(), []string{"serve", "--data-dir", dir, "-c", "listen=5"}, io.Discard, io.Discard)
	require.Error(t, err)
	err = run(context.Background(), []string{"serve", "--data-dir", dir, "--ws-token-file", "relative/path"}, io.Discard, io.Discard)
	require.Error(t, err)
	err = run(context.Background(), []string{"bogus"}, io.Discard, io.Discard)
	require.Equal(t, 2, exitCode(err))
}

func TestServeCapabilityTokenAuth(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600))
	d := startDaemon(t, "--data-dir", t.TempDir(), "--ws-auth", "capability-token", "--ws-token-file", tokenFile)
	// Health stays outside auth.
	require.Equal(t, 200, httpStatus(t, d.httpURL("/healthz")))

	_, resp, err := dialDaemon(t, d, nil)
	require.Error(t, err)
	require.Equal(t, 401, resp.StatusCode)
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, "missing websocket bearer token", string(body))

	_, resp, err = dialDaemon(t, d, http.Header{"Authorization": {"Bearer wrong"}})
	require.Error(t, err)
	body, _ = io.ReadAll(resp.Body)
	require.Equal(t, "invalid websocket bearer token", string(body))

	c, _, err := dialDaemon(t, d, http.Header{"Authorization": {"bearer s3cret-token"}})
	require.NoError(t, err)
	c.initialize()
}

func TestServeSignedBearerTokenAuth(t *testing.T) {
	secret := []byte(strings.Repeat("k", 40))
	secretFile := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secretFile, secret, 0o600))
	d := startDaemon(t, "--data-dir", t.TempDir(), "--ws-auth", "signed-bearer-token",
		"--ws-shared-secret-file", secretFile, "--ws-issuer", "ci", "--ws-audience", "appserver")

	good, err := auth.SignHS256(secret, map[string]any{"exp": time.Now().Add(time.Minute).Unix(), "iss": "ci", "aud": []string{"x", "appserver"}})
	require.NoError(t, err)
	c, _, err := dialDaemon(t, d, http.Header{"Authorization": {"Bearer " + good}})
	require.NoError(t, err)
	c.initialize()

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
		_, resp, err := dialDaemon(t, d, http.Header{"Authorization": {"Bearer " + tok}})
		require.Error(t, err)
		require.Equal(t, 401, resp.StatusCode)
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, tc.want, string(body))
	}
}

func TestServeAndMigrateOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	var out strings.Builder
	require.NoError(t, run(context.Background(), []string{"migrate", "--database-url", url}, &out, io.Discard))
	require.Contains(t, out.String(), "migrations applied (postgres)")
	d := startDaemon(t, "--database-url", url)
	require.Equal(t, 200, httpStatus(t, d.httpURL("/readyz")))
	c, _, err := dialDaemon(t, d, nil)
	require.NoError(t, err)
	c.initialize()
}

func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		var out, errb strings.Builder
		require.NoError(t, run(context.Background(), args, &out, &errb), "%v", args)
		require.Equal(t, "appserver "+appVersion()+"\n", out.String(), "%v", args)
		require.Empty(t, errb.String())
	}
}

// -h and --help, alone or after a command, print the usage on stdout and
// succeed; a bad flag is a usage error (2) that names the flag, with
// nothing on stdout.
func TestHelpAndUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-h"}, "usage: appserver [command]"},
		{[]string{"--help"}, "usage: appserver [command]"},
		{[]string{"help"}, "usage: appserver [command]"},
		{[]string{"serve", "-h"}, "usage: appserver serve"},
		{[]string{"serve", "--help"}, "-shutdown-grace-period"},
		{[]string{"migrate", "--help"}, "usage: appserver migrate"},
		{[]string{"exec", "-h"}, "exit status:"},
		{[]string{"exec", "--help"}, "-idempotency-key"},
	} {
		var out, errb strings.Builder
		err := run(context.Background(), tc.args, &out, &errb)
		require.NoError(t, err, "%v", tc.args)
		require.Contains(t, out.String(), tc.want, "%v", tc.args)
		require.Empty(t, errb.String(), "%v", tc.args)
	}
	for _, args := range [][]string{{"serve", "--bogus"}, {"exec", "--bogus", "hi"}, {"migrate", "extra"}, {"exec"}} {
		var out strings.Builder
		err := run(context.Background(), args, &out, io.Discard)
		require.Error(t, err, "%v", args)
		require.Equal(t, 2, exitCode(err), "%v: %v", args, err)
		require.Empty(t, out.String(), "%v", args)
	}
	err := run(context.Background(), []string{"serve", "--bogus"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "-bogus")
}

// With --log-format json everything the daemon writes, on stdout as on
// stderr, is JSON: the address announcement is a record too.
func TestJSONLogsKeepStdoutJSON(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errb crashSyncBuffer
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"serve", "--listen", "ws://127.0.0.1:0", "--data-dir", t.TempDir(), "--log-format", "json", "--log-level", "info"}, pw, &errb)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	var stdout []string
	addr := ""
	sc := bufio.NewScanner(pr)
	for addr == "" && sc.Scan() {
		stdout = append(stdout, sc.Text())
		addr, _ = listenAddr(sc.Text())
	}
	require.NotEmpty(t, addr, "no address announced; stdout: %q", stdout)
	require.Equal(t, 200, httpStatus(t, "http"+strings.TrimPrefix(addr, "ws")+"/readyz"))
	cancel()
	rest, _ := io.ReadAll(pr)
	require.NoError(t, <-done)
	stdout = append(stdout, strings.Split(strings.TrimSpace(string(rest)), "\n")...)
	for _, out := range []struct {
		name  string
		lines []string
	}{{"stdout", stdout}, {"stderr", strings.Split(strings.TrimSpace(errb.String()), "\n")}} {
		for _, line := range out.lines {
			if line == "" {
				continue
			}
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &rec), "%s line %q is not JSON", out.name, line)
		}
	}
	require.Contains(t, errb.String(), `"msg":"appserver listening"`)
}
