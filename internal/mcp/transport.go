package mcp

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/appserver/appserver/internal/config"
)

// inheritedEnv are the variables of the daemon's environment a stdio server
// gets (as Codex passes them); everything else, secrets included, stays
// out unless the server's env sets it.
var inheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ"}

// stdioEnv is the environment of a stdio server: the inherited variables
// of base, then the server's env.
func stdioEnv(base []string, extra map[string]string) []string {
	keep := make(map[string]bool, len(inheritedEnv))
	for _, k := range inheritedEnv {
		keep[k] = true
	}
	var env []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if keep[k] {
			if _, over := extra[k]; !over {
				env = append(env, kv)
			}
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// stdioProcess is the running process of a stdio server, for killing its
// whole group once the session is closed.
type stdioProcess struct {
	cmd *exec.Cmd
}

// killGroup kills what is left of the server's process group (children
// that outlived it, or the server itself when it ignored stdin closing).
func (p *stdioProcess) killGroup() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	// The group id is the server's pid (Setpgid); a group that is gone
	// already answers ESRCH, which is fine.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// stdioTransport builds the transport of a stdio server: its own process
// group, the filtered environment, stderr to the log.
func stdioTransport(name string, cfg config.MCPServer, base []string, grace time.Duration, log *slog.Logger) (mcpsdk.Transport, *stdioProcess) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = stdioEnv(base, cfg.Env)
	cmd.Dir = cfg.Cwd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = &stderrLog{log: log, server: name, budget: stderrBudget}
	// A grandchild that keeps stderr open must not hold Wait (and with it
	// Stop) forever.
	cmd.WaitDelay = grace
	return &mcpsdk.CommandTransport{Command: cmd, TerminateDuration: grace}, &stdioProcess{cmd: cmd}
}

// Bounds of what a stdio server's stderr puts in the log.
const (
	stderrBudget  = 256 << 10 // bytes logged per process; the rest is dropped
	stderrLineMax = 2 << 10   // a longer line is cut
)

// stderrLog writes a server's stderr to the log line by line, within a
// budget per process so that a chatty or looping server cannot flood it.
type stderrLog struct {
	log    *slog.Logger
	server string

	mu      sync.Mutex
	partial []byte
	budget  int
	dropped bool
}

// Write implements io.Writer.
func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := max(stderrLineMax-len(w.partial), 0)
			w.partial = append(w.partial, p[:min(room, len(p))]...)
			break
		}
		room := max(stderrLineMax-len(w.partial), 0)
		w.partial = append(w.partial, p[:min(room, i)]...)
		w.emitLocked()
		p = p[i+1:]
	}
	return n, nil
}

func (w *stderrLog) emitLocked() {
	line := strings.TrimRight(string(w.partial), "\r")
	w.partial = w.partial[:0]
	if line == "" {
		return
	}
	if w.budget <= 0 {
		if !w.dropped {
			w.dropped = true
			w.log.Warn("MCP server stderr: log budget spent, dropping the rest", "server", w.server)
		}
		return
	}
	w.budget -= len(line)
	w.log.Info("MCP server stderr", "server", w.server, "line", line)
}

// httpTransport builds the transport of a streamable HTTP server. The
// bearer token and env_http_headers are read from env when connecting, so a
// reload picks up a rotated token.
func httpTransport(cfg config.MCPServer, getenv func(string) string) (mcpsdk.Transport, error) {
	headers := http.Header{}
	for k, v := range cfg.HTTPHeaders {
		headers.Set(k, v)
	}
	for k, env := range cfg.EnvHTTPHeaders {
		if v := getenv(env); v != "" {
			headers.Set(k, v)
		}
	}
	if cfg.BearerTokenEnvVar != "" {
		tok := getenv(cfg.BearerTokenEnvVar)
		if tok == "" {
			return nil, fmt.Errorf("environment variable %s (bearer_token_env_var) is not set", cfg.BearerTokenEnvVar)
		}
		headers.Set("Authorization", "Bearer "+tok)
	}
	client := &http.Client{Transport: &headerTransport{base: http.DefaultTransport, headers: headers}}
	return &mcpsdk.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: client, MaxRetries: 2}, nil
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
}

// RoundTrip implements http.RoundTripper.
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, vs := range t.headers {
			req.Header[k] = vs
		}
	}
	return t.base.RoundTrip(req)
}

// osGetenv is the default lookup of bearer tokens and header values.
func osGetenv(k string) string { return os.Getenv(k) }
