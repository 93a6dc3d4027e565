package apptest

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/appserver/appserver/internal/serve"
)

// Version is the version of the daemons the harness starts in process.
const Version = "test"

// Daemon is appserver serving in this process, started through
// internal/serve as the binary starts it.
type Daemon struct {
	// Addr is the address the daemon announced: ws://IP:PORT,
	// wss://IP:PORT or unix://PATH.
	Addr string

	cancel context.CancelFunc
	done   chan error
}

// Options are the rarely needed settings of StartWith.
type Options struct {
	// Stderr receives the daemon's log (default: discarded).
	Stderr io.Writer
	// Stdout receives what the daemon writes on stdout after the line
	// announcing its address (default: discarded).
	Stdout io.Writer
}

// Start runs `appserver serve` in process with args after a loopback
// listener and the warn log level (args may name others: the last flag
// wins), waits until it listens, and stops it when the test ends.
func Start(t testing.TB, args ...string) *Daemon {
	t.Helper()
	return StartWith(t, Options{}, args...)
}

// StartWith is Start with opts.
func StartWith(t testing.TB, opts Options, args ...string) *Daemon {
	t.Helper()
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	d := &Daemon{cancel: cancel, done: make(chan error, 1)}
	p := serve.Process{Version: Version, Stdin: strings.NewReader(""), Stdout: pw, Stderr: opts.Stderr}
	go func() {
		err := serve.Serve(ctx, p, append([]string{"--listen", "ws://127.0.0.1:0", "--log-level", "warn"}, args...))
		pw.CloseWithError(io.EOF)
		d.done <- err
	}()
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		if addr, ok := serve.ListenAddr(lines.Text()); ok {
			d.Addr = addr
			break
		}
	}
	if d.Addr == "" {
		cancel()
		t.Fatalf("daemon did not start: %v", <-d.done)
	}
	// The rest of stdout is read until the daemon ends, so that it never
	// blocks on the pipe.
	go func() { _, _ = io.Copy(opts.Stdout, pr) }()
	t.Cleanup(func() { d.Stop(t) })
	return d
}

// Stop stops the daemon as SIGTERM does and waits until it has shut down,
// failing the test if it returns an error. Stopping a stopped daemon does
// nothing.
func (d *Daemon) Stop(t testing.TB) {
	t.Helper()
	if err := d.Shutdown(t); err != nil {
		t.Errorf("daemon: %v", err)
	}
}

// Shutdown is Stop that returns the daemon's error.
func (d *Daemon) Shutdown(t testing.TB) error {
	t.Helper()
	if d.cancel == nil {
		return nil
	}
	d.cancel()
	d.cancel = nil
	select {
	case err := <-d.done:
		return err
	case <-time.After(Wait):
		t.Fatal("daemon did not shut down")
		return nil
	}
}

// URL is the HTTP(S) URL of path on the daemon's network listener.
func (d *Daemon) URL(path string) string {
	return HTTPURL(d.Addr, path)
}

// HTTPURL is the HTTP(S) URL of path on the listener at addr (ws:// or
// wss://).
func HTTPURL(addr, path string) string {
	return "http" + strings.TrimPrefix(addr, "ws") + path
}

// Dial opens a websocket JSON-RPC connection to the daemon without
// initializing it (Dial).
func (d *Daemon) Dial(t testing.TB, hdr http.Header) (*Client, *http.Response, error) {
	t.Helper()
	return Dial(t, d.Addr, hdr)
}

// RPC is a client of the daemon, initialized with the experimental API.
func (d *Daemon) RPC(t testing.TB) *Client {
	t.Helper()
	return RPC(t, d.Addr, "", nil)
}

// RPC is a client of the daemon at addr, initialized with the
// experimental API and caps besides, with a bearer token (none when "").
func RPC(t testing.TB, addr, token string, caps map[string]any) *Client {
	t.Helper()
	var hdr http.Header
	if token != "" {
		hdr = http.Header{"Authorization": {"Bearer " + token}}
	}
	all := map[string]any{"experimentalApi": true}
	for k, v := range caps {
		all[k] = v
	}
	c := MustDial(t, addr, hdr)
	c.Initialize(all)
	return c
}

// Stdio is `appserver serve --listen stdio://` in process: one JSON-RPC
// session over pipes standing for its stdin and stdout.
type Stdio struct {
	// Client speaks to the session (not initialized).
	*Client
	stdin *io.PipeWriter
	done  chan error
}

// StartStdio runs the daemon on stdio:// in process with args after the
// warn log level; the daemon ends when CloseStdin closes its input, or
// when the test ends.
func StartStdio(t testing.TB, args ...string) *Stdio {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &Stdio{stdin: inW, done: make(chan error, 1)}
	p := serve.Process{Version: Version, Stdin: inR, Stdout: outW, Stderr: io.Discard}
	go func() {
		err := serve.Serve(context.Background(), p, append([]string{"--log-level", "warn"}, append(args, "--listen", "stdio://")...))
		outW.CloseWithError(io.EOF)
		inR.Close()
		s.done <- err
	}()
	s.Client = NewLinesClient(t, inW, outR)
	t.Cleanup(func() {
		if err := s.Wait(t); err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	return s
}

// CloseStdin closes the daemon's input, which ends it.
func (s *Stdio) CloseStdin() { _ = s.stdin.Close() }

// Wait closes the daemon's input, waits until it has shut down and
// returns its error.
func (s *Stdio) Wait(t testing.TB) error {
	t.Helper()
	s.CloseStdin()
	select {
	case err, ok := <-s.done:
		if ok {
			close(s.done)
		}
		return err
	case <-time.After(Wait):
		t.Fatal("daemon did not shut down")
		return nil
	}
}
