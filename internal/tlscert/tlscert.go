package tlscert

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/appserver/appserver/internal/service"
)

// Config says where the certificate is.
type Config struct {
	// CertFile is the PEM certificate chain, leaf first. Required.
	CertFile string
	// KeyFile is the PEM private key of the leaf. Required.
	KeyFile string
	// Logger receives reloads and their failures; nil discards.
	Logger *slog.Logger
}

// Reloader holds the certificate a TLS listener serves and reloads it from
// its files.
type Reloader struct {
	cfg  Config
	log  *slog.Logger
	cert atomic.Pointer[tls.Certificate]

	// mu serializes reloads, so that two SIGHUPs in a row cannot store
	// an older read after a newer one.
	mu sync.Mutex

	// base runs the signal watcher between Start and Stop.
	base     service.Base
	reloaded func(error) // test signal: called after each SIGHUP's reload
}

var _ service.Service = (*Reloader)(nil)

// New reads the certificate and key; an error means there is nothing to
// serve.
func New(cfg Config) (*Reloader, error) {
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("tls: a certificate file and a key file are required")
	}
	r := &Reloader{cfg: cfg, log: cfg.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the files again and serves what they hold from the next
// handshake on; on error the certificate in use stays.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cert, err := tls.LoadX509KeyPair(r.cfg.CertFile, r.cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("tls: load %s and %s: %w", r.cfg.CertFile, r.cfg.KeyFile, err)
	}
	r.cert.Store(&cert)
	r.log.Info("tls certificate loaded", "cert_file", r.cfg.CertFile,
		"subject", cert.Leaf.Subject.String(), "not_after", cert.Leaf.NotAfter.Format(time.RFC3339))
	return nil
}

// Certificate returns the certificate in use.
func (r *Reloader) Certificate() *tls.Certificate { return r.cert.Load() }

// TLSConfig is the server configuration that serves the certificate in use.
// It offers HTTP/1.1 only: websocket upgrades need it, and the HTTP API
// needs nothing more.
func (r *Reloader) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.cert.Load(), nil
		},
	}
}

// Start reloads the certificate on every SIGHUP until Stop.
func (r *Reloader) Start(ctx context.Context) error {
	_, run, err := r.base.Begin(ctx)
	if !run {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP)
	r.base.Go(func(ctx context.Context) {
		defer signal.Stop(sigs)
		r.watch(ctx, sigs)
	})
	return r.base.Started(nil)
}

func (r *Reloader) watch(ctx context.Context, sigs <-chan os.Signal) {
	for {
		select {
		case <-sigs:
			err := r.Reload()
			if err != nil {
				r.log.Error("tls certificate reload failed; still serving the previous one", "err", err)
			}
			if r.reloaded != nil {
				r.reloaded(err)
			}
		case <-ctx.Done():
			return
		}
	}
}

// Stop stops reloading on SIGHUP and waits for the watcher to end. It
// tolerates a Reloader never started and being called twice.
func (r *Reloader) Stop() { r.base.Stop(nil) }
