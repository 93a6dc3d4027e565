package serve_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/tlscert/tlscerttest"
)

// TestServeTLS listens on wss:// with a certificate and key file: the
// websocket and the HTTP API are served over TLS only, and after the files
// are replaced a SIGHUP makes the daemon serve the new certificate.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	first, certFile, keyFile := tlscerttest.Write(t, dir, 1)
	roots := x509.NewCertPool()
	roots.AddCert(first)

	// The log says when a certificate was loaded: the test's signal that
	// a reload happened.
	loaded := make(chan struct{}, 4)
	d := apptest.StartWith(t, apptest.Options{Stderr: logWatch{"tls certificate loaded", loaded}},
		"--listen", "wss://127.0.0.1:0", "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--data-dir", t.TempDir(), "--log-level", "info")
	addr := d.Addr
	require.True(t, strings.HasPrefix(addr, "wss://127.0.0.1:"), addr)
	recvWithin(t, loaded)
	base := "https://" + strings.TrimPrefix(addr, "wss://")

	// served GETs /readyz over a new connection and returns the serial
	// number of the certificate presented.
	served := func() int64 {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(base + "/readyz")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	require.Equal(t, int64(1), served())

	// Plain HTTP is not served on a TLS listener.
	resp, err := http.Get("http://" + strings.TrimPrefix(addr, "wss://") + "/readyz")
	if err == nil {
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "Go answers plain HTTP to a TLS port with 400")
	}

	// The websocket over TLS, with the HTTP API on the same port.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer hc.CloseIdleConnections()
	c, _, err := apptest.DialWith(t, addr, &websocket.DialOptions{HTTPClient: hc})
	require.NoError(t, err)
	c.Initialize(nil)

	// Over TLS the session cookie is Secure.
	sresp, err := hc.Post(base+"/v1/auth/session", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	sresp.Body.Close()
	require.Equal(t, http.StatusOK, sresp.StatusCode)
	require.Len(t, sresp.Cookies(), 1)
	require.True(t, sresp.Cookies()[0].Secure, "set over TLS: Secure")
	require.True(t, sresp.Cookies()[0].HttpOnly)

	// A renewed certificate: served once the daemon got SIGHUP, while
	// the open websocket stays up.
	second, _, _ := tlscerttest.Write(t, dir, 2)
	roots.AddCert(second)
	require.Equal(t, int64(1), served(), "the files alone change nothing")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	recvWithin(t, loaded)
	require.Equal(t, int64(2), served())
	c.Call("model/list", map[string]any{})
}

// logWatch is a daemon's log that signals each line containing a text
// (the daemon writes one record a Write), dropping signals nobody took.
type logWatch struct {
	text string
	seen chan<- struct{}
}

func (w logWatch) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.text) {
		select {
		case w.seen <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// Without TLS a SIGHUP (`systemctl reload`) has nothing to reload and must
// not kill the daemon; the log says so. The test waits for that line: the
// kernel may hand the signal to the process after kill returns, and a
// SIGHUP that comes once the daemon has stopped listening for it ends the
// process.
func TestSIGHUPWithoutTLSKeepsServing(t *testing.T) {
	seen := make(chan struct{}, 4)
	d := apptest.StartWith(t, apptest.Options{Stderr: logWatch{"no TLS certificate to reload", seen}},
		"--data-dir", t.TempDir(), "--log-level", "info")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	recvWithin(t, seen)
	require.Equal(t, http.StatusOK, apptest.Status(t, d.URL("/readyz")))
}

// recvWithin waits for a signal on ch, failing after 10 s.
func recvWithin(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("not seen in the log")
	}
}

// A SIGHUP that comes while the daemon shuts down (a reload overlapping a
// stop) is caught until the shutdown has ended: here during the grace
// period a running turn gets.
func TestSIGHUPDuringShutdown(t *testing.T) {
	ws := apptest.Workspace(t)
	fake := apptest.StartFake(t, `{"steps":[{"match":{"user_text":"hang"},"tool_calls":[`+apptest.ShellCall("call_h", "sleep 60")+`]}]}`)
	seen := make(chan struct{}, 4)
	args := append([]string{"--data-dir", t.TempDir(), "--shutdown-grace-period", "3s", "--log-level", "info"}, apptest.FakeArgs(fake, "responses")...)
	d := apptest.StartWith(t, apptest.Options{Stderr: logWatch{"no TLS certificate to reload", seen}}, args...)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws, "sandbox": "danger-full-access", "approvalPolicy": "never"})
	r.Call("turn/start", apptest.Input(threadID, "hang"))
	r.Until("item/started")
	go func() {
		for {
			if _, err := r.Read(30 * time.Second); err != nil {
				return
			}
		}
	}()

	stopped := make(chan error, 1)
	go func() { stopped <- d.Shutdown(t) }()
	time.Sleep(300 * time.Millisecond) // into the grace period
	select {
	case err := <-stopped:
		t.Fatalf("the daemon stopped before its grace period: %v", err)
	default:
	}
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	recvWithin(t, seen)
	require.NoError(t, <-stopped)
}
