package frontdoor_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/frontdoor"
	"github.com/appserver/appserver/internal/server"
)

// unixDialer is an HTTP client that reaches path whatever the URL says.
func unixDialer(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
}

// shortDir is a private directory with a path short enough for a socket
// (t.TempDir's may not be).
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fd")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// The control socket: created with its missing directory private to the
// user, mode 0600, serving the JSON-RPC websocket without the network
// listener's authentication (the peer is the daemon's own user) and
// nothing else; removed when the front door shuts down.
func TestControlSocket(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "ctl", "app.sock")
	ln, err := frontdoor.ListenUnix(path, nil)
	require.NoError(t, err)
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	require.Equal(t, fs.ModeSocket, fi.Mode().Type())
	require.Equal(t, frontdoor.SocketMode, fi.Mode().Perm())
	di, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o700), di.Mode().Perm())

	authn, err := auth.New(auth.Config{Mode: auth.CapabilityToken, TokenSHA256: strings.Repeat("ab", 32)})
	require.NoError(t, err)
	drain := new(frontdoor.Drain)
	srv, err := server.New(server.Config{Auth: authn, Draining: drain.Draining})
	require.NoError(t, err)
	fd, err := frontdoor.New(frontdoor.Config{Drain: drain, Upgrade: srv.Handler(), Local: srv.LocalHandler()})
	require.NoError(t, err)
	served := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { served <- fd.Serve(ctx, ln) }()

	// The network listener asks for the token the control socket does
	// not.
	hs := httptest.NewServer(fd.Handler())
	t.Cleanup(hs.Close)
	_, wresp, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, wresp.StatusCode)
	hc := unixDialer(path)
	c := dial(t, "ws://localhost/rpc", &websocket.DialOptions{HTTPClient: hc})
	c.initialize()
	require.Contains(t, c.call(1, "account/read", map[string]any{}), "result")
	resp, err := hc.Get("http://localhost/healthz")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "the control socket serves the websocket only")
	require.Equal(t, "Connection header did not include 'upgrade'\n", string(body))

	cancel()
	require.NoError(t, <-served)
	// Generous: under load the close handshake with the test client can
	// take seconds; the test is about where the socket goes, not timing.
	sctx, scancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer scancel()
	require.NoError(t, fd.Shutdown(sctx))
	require.NoError(t, srv.CloseConnections(sctx))
	_, err = os.Lstat(path)
	require.ErrorIs(t, err, fs.ErrNotExist, "the socket outlived the front door")
}

// A socket left by a process that died is replaced; one a live process
// listens on, and a path that is not a socket, are refused.
func TestControlSocketStaleAndInUse(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "s")

	live, err := net.Listen("unix", path)
	require.NoError(t, err)
	_, err = frontdoor.ListenUnix(path, nil)
	require.ErrorContains(t, err, "in use")
	// A listener that closes without removing its socket leaves it stale.
	live.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, live.Close())
	_, err = os.Lstat(path)
	require.NoError(t, err)
	ln, err := frontdoor.ListenUnix(path, nil)
	require.NoError(t, err)
	require.NoError(t, ln.Close())

	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, []byte("keep"), 0o600))
	_, err = frontdoor.ListenUnix(file, nil)
	require.ErrorContains(t, err, "not a socket")
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "keep", string(data))

	_, err = frontdoor.ListenUnix("rel.sock", nil)
	require.ErrorContains(t, err, "not absolute")
	_, err = frontdoor.ListenUnix("/"+strings.Repeat("x", 120), nil)
	require.ErrorContains(t, err, "at most 107")
}

// helperMain, in the test binary re-run as another user, connects to the
// socket named by the environment and reports whether the server closed
// the connection without a word.
func helperMain() bool {
	path := os.Getenv("FRONTDOOR_TEST_CONNECT")
	if path == "" {
		return false
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		os.Stdout.WriteString("dial: " + err.Error())
		return true
	}
	_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		os.Stdout.WriteString("closed")
	} else {
		os.Stdout.WriteString("served")
	}
	return true
}

// A connection of another user is closed at once, even when the socket's
// mode would let it in (as during the instant between bind and chmod).
func TestControlSocketRefusesOtherUsers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	dir := shortDir(t)
	require.NoError(t, os.Chmod(dir, 0o755))
	path := filepath.Join(dir, "s")
	ln, err := frontdoor.ListenUnix(path, nil)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(path, 0o666))
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hi") })}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })

	// The test binary, where another user may run it.
	exe := filepath.Join(dir, "helper")
	bin, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(exe, bin, 0o755))
	run := func(uid uint32) string {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), "FRONTDOOR_TEST_CONNECT="+path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.Output()
		require.NoError(t, err)
		return string(out)
	}
	require.Equal(t, "closed", run(65534))
	require.Equal(t, "served", run(0))
}
