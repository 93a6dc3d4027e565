package tlscert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/service"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/tlscert/tlscerttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// selfSigned writes a self-signed certificate with serial number serial
// to dir/cert.pem and dir/key.pem.
func selfSigned(t *testing.T, dir string, serial int64) *x509.Certificate {
	cert, _, _ := tlscerttest.Write(t, dir, serial)
	return cert
}

// serve accepts TLS connections with r's configuration and completes
// their handshakes until the test ends; it returns the address.
func serve(t *testing.T, r *Reloader) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.TLSConfig())
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	})
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// served returns the serial number of the certificate addr presents,
// verified against roots.
func served(t *testing.T, addr string, roots *x509.CertPool) int64 {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots})
	require.NoError(t, err)
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// A SIGHUP makes the listener serve the certificate now in the files; a
// reload that fails keeps the one in use.
func TestReloadOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	roots := x509.NewCertPool()
	roots.AddCert(selfSigned(t, dir, 1))
	r, err := New(Config{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")})
	require.NoError(t, err)
	reloaded := make(chan error, 1)
	r.reloaded = func(err error) { reloaded <- err }
	require.NoError(t, r.Start(context.Background()))
	defer r.Stop()
	addr := serve(t, r)
	require.Equal(t, int64(1), served(t, addr, roots))

	roots.AddCert(selfSigned(t, dir, 2))
	require.Equal(t, int64(1), served(t, addr, roots), "nothing changes before the signal")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	require.NoError(t, <-reloaded)
	require.Equal(t, int64(2), served(t, addr, roots))

	// A key that does not belong to the certificate: the reload fails and
	// the previous certificate is still served.
	cert, err := os.ReadFile(filepath.Join(dir, "cert.pem"))
	require.NoError(t, err)
	other := t.TempDir()
	selfSigned(t, other, 4)
	key, err := os.ReadFile(filepath.Join(other, "key.pem"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "key.pem"), key, 0o600))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	require.Error(t, <-reloaded)
	require.Equal(t, int64(2), served(t, addr, roots))
	require.Equal(t, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate().Certificate[0]}))
}

// New needs both files, readable and matching; Stop is safe unstarted and
// twice, a second Start does nothing and a stopped Reloader stays stopped.
func TestNewAndStop(t *testing.T) {
	dir := t.TempDir()
	selfSigned(t, dir, 1)
	_, err := New(Config{CertFile: filepath.Join(dir, "cert.pem")})
	require.Error(t, err)
	_, err = New(Config{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "missing.pem")})
	require.ErrorContains(t, err, "missing.pem")
	r, err := New(Config{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")})
	require.NoError(t, err)
	r.Stop()
	require.NoError(t, r.Start(context.Background()))
	require.NoError(t, r.Start(context.Background()))
	r.Stop()
	r.Stop()
	require.ErrorIs(t, r.Start(context.Background()), service.ErrStopped)
}
