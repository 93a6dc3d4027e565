package pgtest

import (
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Proxy stands between a test's client and the database of a URL, so that
// the test can take the database away from that client (Down) and give it
// back (Up) as a Postgres outage would, without stopping the cluster other
// tests share. Down refuses new connections and cuts the open ones; the
// client sees the driver's own errors.
type Proxy struct {
	t      testing.TB
	target func() (net.Conn, error)
	addr   string // 127.0.0.1:PORT, kept across Down and Up
	url    string

	mu    sync.Mutex // guards ln and conns
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup // accept loop and copiers
}

// NewProxy returns a running proxy to the database of dbURL (a URL from
// URL); it stops at the end of t.
func NewProxy(t testing.TB, dbURL string) *Proxy {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	network, address := "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if strings.HasPrefix(cfg.Host, "/") {
		network, address = "unix", filepath.Join(cfg.Host, ".s.PGSQL."+strconv.Itoa(int(cfg.Port)))
	}
	p := &Proxy{t: t, conns: map[net.Conn]struct{}{},
		target: func() (net.Conn, error) { return net.Dial(network, address) }}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	p.addr = ln.Addr().String()
	p.url = throughProxy(dbURL, p.addr)
	p.serve(ln)
	t.Cleanup(func() {
		p.Down()
		p.wg.Wait()
	})
	return p
}

// throughProxy points dbURL at addr.
func throughProxy(dbURL, addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	if u, err := url.Parse(dbURL); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Del("host")
		q.Del("port")
		u.RawQuery = q.Encode()
		u.Host = addr
		if u.User == nil {
			u.User = url.User("postgres")
		}
		return u.String()
	}
	// In keyword/value strings the last setting of a key wins.
	return dbURL + " host=" + host + " port=" + port
}

// URL is the database's URL through the proxy.
func (p *Proxy) URL() string { return p.url }

// Down refuses new connections and cuts the open ones, as a stopped
// server does. It is a no-op when the proxy is down already.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
}

// Up accepts connections again, on the same address.
func (p *Proxy) Up() {
	p.t.Helper()
	p.mu.Lock()
	up := p.ln != nil
	p.mu.Unlock()
	if up {
		return
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("pgtest: proxy up again: %v", err)
	}
	p.serve(ln)
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by Down
			}
			p.pipe(c)
		}
	}()
}

// pipe connects c to the database until either side or Down closes it.
func (p *Proxy) pipe(c net.Conn) {
	s, err := p.target()
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // went down meanwhile
		p.mu.Unlock()
		_ = c.Close()
		_ = s.Close()
		return
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := func() {
		_ = c.Close()
		_ = s.Close()
		p.mu.Lock()
		delete(p.conns, c)
		delete(p.conns, s)
		p.mu.Unlock()
	}
	p.wg.Add(2)
	var once sync.Once
	for _, dir := range [][2]net.Conn{{c, s}, {s, c}} {
		go func() {
			defer p.wg.Done()
			// Either side ending (or Down) ends both.
			_, _ = io.Copy(dir[0], dir[1])
			once.Do(done)
		}()
	}
}
