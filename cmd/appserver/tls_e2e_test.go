package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

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

	ctx, cancel := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"serve", "--listen", "wss://127.0.0.1:0", "--tls-cert-file", certFile, "--tls-key-file", keyFile,
			"--data-dir", t.TempDir(), "--log-level", "info"}, outW, errW)
		outW.CloseWithError(io.EOF)
		errW.CloseWithError(io.EOF)
		done <- err
	}()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	// The log says when a certificate was loaded: the test's signal that
	// a reload happened.
	loaded := make(chan struct{}, 4)
	go func() {
		sc := bufio.NewScanner(errR)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "tls certificate loaded") {
				loaded <- struct{}{}
			}
		}
	}()
	sc := bufio.NewScanner(outR)
	addr := ""
	for addr == "" && sc.Scan() {
		addr, _ = listenAddr(sc.Text())
	}
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	require.True(t, strings.HasPrefix(addr, "wss://127.0.0.1:"), addr)
	<-loaded
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
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer hc.CloseIdleConnections()
	ws, _, err := websocket.Dial(dctx, addr, &websocket.DialOptions{HTTPClient: hc})
	require.NoError(t, err)
	require.NoError(t, ws.Write(dctx, websocket.MessageText, []byte(`{"id":1,"method":"initialize","params":{"clientInfo":{"name":"t","version":"1"}}}`)))
	_, data, err := ws.Read(dctx)
	require.NoError(t, err)
	require.Contains(t, string(data), `"result"`)

	// A renewed certificate: served once the daemon got SIGHUP, while
	// the open websocket stays up.
	second, _, _ := tlscerttest.Write(t, dir, 2)
	roots.AddCert(second)
	require.Equal(t, int64(1), served(), "the files alone change nothing")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	<-loaded
	require.Equal(t, int64(2), served())
	require.NoError(t, ws.Write(dctx, websocket.MessageText, []byte(`{"id":2,"method":"model/list","params":{}}`)))
	_, data, err = ws.Read(dctx)
	require.NoError(t, err)
	require.Contains(t, string(data), `"id":2`)
	_ = ws.CloseNow()
}

// Without TLS a SIGHUP (`systemctl reload`) has nothing to reload and must
// not kill the daemon.
func TestSIGHUPWithoutTLSKeepsServing(t *testing.T) {
	d := startDaemon(t, "--data-dir", t.TempDir())
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	require.Equal(t, http.StatusOK, httpStatus(t, d.httpURL("/readyz")))
}
