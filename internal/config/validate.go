package config

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/appserver/appserver/internal/apperr"
)

// Listen schemes: the transports a listen URL names.
const (
	// ListenWS is ws://IP:PORT: the websocket JSON-RPC protocol and the
	// HTTP API on one TCP listener.
	ListenWS = "ws"
	// ListenWSS is wss://IP:PORT: the same over TLS.
	ListenWSS = "wss"
	// ListenUnix is unix:// or unix://PATH: the JSON-RPC websocket on the
	// control socket, for the daemon's own user only.
	ListenUnix = "unix"
	// ListenStdio is stdio://: one JSON-RPC session, newline-delimited
	// JSON on stdin and stdout.
	ListenStdio = "stdio"
)

// ListenURL is a parsed listen URL.
type ListenURL struct {
	// Scheme is ListenWS, ListenWSS, ListenUnix or ListenStdio.
	Scheme string
	// Addr is the IP and port of ws:// and wss://.
	Addr netip.AddrPort
	// Path is the socket of unix://PATH as written; empty for unix://,
	// which means DefaultControlSocket in data_dir.
	Path string
}

// listenForms lists the listen URLs ParseListen accepts, for its errors.
const listenForms = "ws://IP:PORT, wss://IP:PORT, unix://, unix://PATH or stdio://"

// ParseListen parses a listen URL: ws://IP:PORT, or wss://IP:PORT for
// TLS, where IP is an IPv4 or bracketed IPv6 literal (not a host name) and
// PORT is 0-65535; unix:// (the default control socket) or unix://PATH
// (absolute, or relative to the working directory); or stdio://.
func ParseListen(s string) (ListenURL, error) {
	if s == "stdio://" {
		return ListenURL{Scheme: ListenStdio}, nil
	}
	if path, ok := strings.CutPrefix(s, "unix://"); ok {
		if strings.ContainsRune(path, 0) {
			return ListenURL{}, fmt.Errorf("expected a socket path without NUL bytes, got %q", s)
		}
		return ListenURL{Scheme: ListenUnix, Path: path}, nil
	}
	scheme := ListenWS
	rest, ok := strings.CutPrefix(s, "ws://")
	if !ok {
		scheme = ListenWSS
		rest, ok = strings.CutPrefix(s, "wss://")
	}
	if !ok {
		return ListenURL{}, fmt.Errorf("expected %s, got %q", listenForms, s)
	}
	ap, err := netip.ParseAddrPort(rest)
	if err != nil {
		return ListenURL{}, fmt.Errorf("expected ws://IP:PORT or wss://IP:PORT with an IP address literal and a port, got %q", s)
	}
	return ListenURL{Scheme: scheme, Addr: ap}, nil
}

// lookupOrigin returns the origin of the value at path: the source that set
// it, or created the table entry holding it; ok is false for defaults.
func (c *Config) lookupOrigin(path []string) (origin, bool) {
	for n := len(path); n > 0; n-- {
		if o, ok := c.origins[formatKey(path[:n])]; ok {
			return o, true
		}
	}
	return origin{}, false
}

// invalid returns an apperr.Invalid error about the value at path, naming
// the source that set it as source.errorf does.
func (c *Config) invalid(path []string, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	key := formatKey(path)
	o, ok := c.lookupOrigin(path)
	switch {
	case !ok:
		return apperr.New(apperr.Invalid, "%s: %s", key, msg)
	case o.key == key:
		return apperr.New(apperr.Invalid, "%s: %s", o.name, msg)
	default:
		return apperr.New(apperr.Invalid, "%s: %s: %s", o.name, key, msg)
	}
}

// IsSet reports whether a layer above the built-in defaults (the file, a
// user or principal config, the environment, a flag) set the value at the
// dotted key, e.g. "sandbox_mode".
func (c *Config) IsSet(key string) bool { return c.explicit(strings.Split(key, ".")...) }

// explicit reports whether a layer above the defaults set the value at path.
func (c *Config) explicit(path ...string) bool {
	_, ok := c.lookupOrigin(path)
	return ok
}

// validate checks the values Load cannot check by type alone and returns the
// first problem found.
func (c *Config) validate() error {
	checks := []func() error{
		c.validateServer,
		c.validateWSAuth,
		c.validateAgent,
		c.validateProviders,
		c.validateMCPServers,
		c.validateModels,
		c.validateHTTPAPI,
		c.validateWebhooks,
		c.validateBudgets,
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) validateServer() error {
	l, err := ParseListen(c.Listen)
	if err != nil {
		return c.invalid(key("listen"), "%s", err.Error())
	}
	if l.Scheme == ListenUnix && l.Path == "" && c.DataDir == "" {
		return c.invalid(key("listen"), "unix:// puts the control socket in data_dir, which is empty; name the socket: unix://PATH")
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	if c.DatabaseURL != "" {
		// The URL may hold a password: never echo it.
		u, err := url.Parse(c.DatabaseURL)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return c.invalid(key("database_url"), "expected a postgres:// or postgresql:// URL")
		}
	}
	if c.DatabaseURL == "" && c.DataDir == "" {
		return c.invalid(key("data_dir"), "must not be empty when database_url is empty: the embedded store lives there")
	}
	switch c.LogFormat {
	case LogFormatText, LogFormatJSON:
	default:
		return c.invalid(key("log_format"), `expected "text" or "json", got %q`, c.LogFormat)
	}
	switch c.LogLevel {
	case LogLevelDebug, LogLevelInfo, LogLevelWarn, LogLevelError:
	default:
		return c.invalid(key("log_level"), `expected "debug", "info", "warn" or "error", got %q`, c.LogLevel)
	}
	for _, o := range c.AllowedOrigins {
		if !isOrigin(o) {
			return c.invalid(key("allowed_origins"), "%q is not an origin (expected scheme://host[:port], no path)", o)
		}
	}
	for i, sw := range c.Skills.Config {
		if (sw.Path == "") == (strings.TrimSpace(sw.Name) == "") || sw.Path != "" && !filepath.IsAbs(sw.Path) {
			return c.invalid(key("skills", "config"), "entry %d: expected exactly one of an absolute path and a name", i+1)
		}
	}
	for id, r := range c.Skills.Remote {
		if u, err := url.Parse(r.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c.invalid(key("skills", "remote", id, "url"), "must be an http(s) URL")
		}
	}
	for name, v := range map[string]int{"max_threads": c.Agents.MaxThreads, "max_depth": c.Agents.MaxDepth, "max_total": c.Agents.MaxTotal, "max_per_principal": c.Agents.MaxPerPrincipal} {
		if v < 0 {
			return c.invalid(key("agents", name), "must not be negative (0 is the default)")
		}
	}
	switch c.OTel.Exporter {
	case OTelExporterNone, OTelExporterHTTP, OTelExporterGRPC:
	default:
		return c.invalid(key("otel", "exporter"), `expected "none", "otlp-http" or "otlp-grpc", got %q`, c.OTel.Exporter)
	}
	if e := c.OTel.Endpoint; e != "" {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c.invalid(key("otel", "endpoint"), "must be an http(s) URL")
		}
	}
	if c.OTel.ServiceName == "" {
		return c.invalid(key("otel", "service_name"), "must not be empty")
	}
	switch c.WebSearch {
	case "disabled", "cached", "live":
	default:
		return c.invalid(key("web_search"), "must be disabled, cached or live")
	}
	switch c.SandboxBackend {
	case "auto", "bwrap", "landlock":
	default:
		return c.invalid(key("sandbox_backend"), "must be auto, bwrap or landlock")
	}
	if c.SandboxPoolSize < 0 {
		return c.invalid(key("sandbox_pool_size"), "must not be negative (0 turns pooling off)")
	}
	if c.SandboxPoolIdleTimeout <= 0 {
		return c.invalid(key("sandbox_pool_idle_timeout"), "must be positive")
	}
	if c.DynamicToolReconnectTimeout <= 0 {
		return c.invalid(key("dynamic_tool_reconnect_timeout"), "must be positive")
	}
	if c.ApprovalClientTimeout <= 0 {
		return c.invalid(key("approval_client_timeout"), "must be positive")
	}
	if !c.EventLog && c.DatabaseURL != "" {
		return c.invalid(key("event_log"), "must be on with database_url: the daemons sharing the database get each other's events from the log")
	}
	if !c.EventLog && len(c.Webhooks) > 0 {
		return c.invalid(key("event_log"), "must be on with [[webhooks]] entries: webhooks are delivered from the log")
	}
	if c.EventRetention <= 0 {
		return c.invalid(key("event_retention"), "must be positive")
	}
	if c.Audit.Retention <= 0 {
		return c.invalid(key("audit", "retention"), "must be positive")
	}
	if c.Audit.PruneInterval <= 0 {
		return c.invalid(key("audit", "prune_interval"), "must be positive")
	}
	if c.EventItemMaxKiB < 1 || c.EventItemMaxKiB > 1<<20 {
		return c.invalid(key("event_item_max_kib"), "must be between 1 and 1048576")
	}
	if c.EventThreadMaxMiB < 1 || c.EventThreadMaxMiB > 1<<20 {
		return c.invalid(key("event_thread_max_mib"), "must be between 1 and 1048576")
	}
	if c.EventPruneInterval <= 0 {
		return c.invalid(key("event_prune_interval"), "must be positive")
	}
	if c.GCHeapFloorMiB < 0 || c.GCHeapFloorMiB > 1<<20 {
		return c.invalid(key("gc_heap_floor_mib"), "must be between 0 and 1048576")
	}
	// At least one frame of the largest size (16 MiB) must fit in flight.
	if c.WSMaxInboundInflightMiB < 16 || c.WSMaxInboundInflightMiB > 1<<20 {
		return c.invalid(key("ws_max_inbound_inflight_mib"), "must be between 16 and 1048576")
	}
	if c.MaxRunningTurns < 0 {
		return c.invalid(key("max_running_turns"), "must not be negative (0 sets no bound)")
	}
	if c.MaxPendingRequests < 16 || c.MaxPendingRequests > 1<<20 {
		return c.invalid(key("max_pending_requests"), "must be between 16 and 1048576")
	}
	if c.WSMaxOutboundQueuedMiB < 1 || c.WSMaxOutboundQueuedMiB > 1<<20 {
		return c.invalid(key("ws_max_outbound_queued_mib"), "must be between 1 and 1048576")
	}
	if c.WSPingInterval < 0 {
		return c.invalid(key("ws_ping_interval"), "must not be negative (0 sends no pings)")
	}
	if c.WSPongTimeout < 100*time.Millisecond {
		return c.invalid(key("ws_pong_timeout"), "must be at least 100ms")
	}
	if c.AuthTicketTTL < time.Second || c.AuthTicketTTL > 10*time.Minute {
		return c.invalid(key("auth_ticket_ttl"), "must be between 1s and 10m")
	}
	if c.AuthSessionTTL < time.Minute || c.AuthSessionTTL > 30*24*time.Hour {
		return c.invalid(key("auth_session_ttl"), "must be between 1m and 720h")
	}
	if c.ShutdownGracePeriod < 0 {
		return c.invalid(key("shutdown_grace_period"), "must not be negative")
	}
	if c.LeaseTTL < 100*time.Millisecond {
		return c.invalid(key("lease_ttl"), "must be at least 100ms")
	}
	return nil
}

// isOrigin reports whether s is a serialized web origin: scheme://host[:port].
func isOrigin(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && u.Host != "" && u.User == nil &&
		u.Path == "" && u.RawQuery == "" && u.Fragment == "" && !u.ForceQuery
}

func (c *Config) validateWSAuth() error {
	mode := c.WSAuth
	switch mode {
	case WSAuthNone, WSAuthCapabilityToken, WSAuthSignedBearerToken:
	default:
		return c.invalid(key("ws_auth"), `expected "capability-token" or "signed-bearer-token" (or empty for none), got %q`, mode)
	}
	settings := []struct {
		key  string
		set  bool
		mode WSAuthMode
	}{
		{"ws_token_file", c.WSTokenFile != "", WSAuthCapabilityToken},
		{"ws_token_sha256", c.WSTokenSHA256 != "", WSAuthCapabilityToken},
		{"ws_shared_secret_file", c.WSSharedSecretFile != "", WSAuthSignedBearerToken},
		{"ws_issuer", c.WSIssuer != "", WSAuthSignedBearerToken},
		{"ws_audience", c.WSAudience != "", WSAuthSignedBearerToken},
		{"ws_max_clock_skew_seconds", c.explicit("ws_max_clock_skew_seconds"), WSAuthSignedBearerToken},
	}
	for _, s := range settings {
		if !s.set || s.mode == mode {
			continue
		}
		if mode == WSAuthNone {
			return c.invalid(key(s.key), "requires ws_auth = %q", s.mode)
		}
		return c.invalid(key(s.key), "cannot be used with ws_auth = %q (it belongs to ws_auth = %q)", mode, s.mode)
	}
	switch mode {
	case WSAuthCapabilityToken:
		switch {
		case c.WSTokenFile == "" && c.WSTokenSHA256 == "":
			return c.invalid(key("ws_auth"), "capability-token requires ws_token_file or ws_token_sha256")
		case c.WSTokenFile != "" && c.WSTokenSHA256 != "":
			return c.invalid(key("ws_token_sha256"), "ws_token_file and ws_token_sha256 are mutually exclusive; set only one")
		}
	case WSAuthSignedBearerToken:
		if c.WSSharedSecretFile == "" {
			return c.invalid(key("ws_auth"), "signed-bearer-token requires ws_shared_secret_file")
		}
	}
	if c.WSTokenSHA256 != "" {
		if b, err := hex.DecodeString(strings.TrimSpace(c.WSTokenSHA256)); err != nil || len(b) != 32 {
			return c.invalid(key("ws_token_sha256"), "expected 64 hexadecimal characters (a SHA-256 digest)")
		}
	}
	for _, f := range []struct{ key, path string }{
		{"ws_token_file", c.WSTokenFile},
		{"ws_shared_secret_file", c.WSSharedSecretFile},
	} {
		if f.path != "" && !filepath.IsAbs(f.path) {
			return c.invalid(key(f.key), "expected an absolute path, got %q", f.path)
		}
	}
	if c.WSMaxClockSkewSeconds < 0 {
		return c.invalid(key("ws_max_clock_skew_seconds"), "must not be negative")
	}
	return nil
}

// validateTLS checks that wss:// comes with a certificate and a key, and
// that they are not set for a plain ws:// listener, where they would
// silently do nothing.
func (c *Config) validateTLS() error {
	files := []struct{ key, path string }{{"tls_cert_file", c.TLSCertFile}, {"tls_key_file", c.TLSKeyFile}}
	for _, f := range files {
		switch {
		case c.ListenTLS() && f.path == "":
			return c.invalid(key("listen"), "wss:// needs tls_cert_file and tls_key_file (no %s)", f.key)
		case !c.ListenTLS() && f.path != "":
			return c.invalid(key(f.key), "requires a wss:// listen address (listen is %q)", c.Listen)
		case f.path != "" && !filepath.IsAbs(f.path):
			return c.invalid(key(f.key), "expected an absolute path, got %q", f.path)
		}
	}
	return nil
}

func (c *Config) validateAgent() error {
	switch c.ApprovalPolicy {
	case ApprovalUntrusted, ApprovalOnFailure, ApprovalOnRequest, ApprovalNever:
	default:
		return c.invalid(key("approval_policy"), `expected "untrusted", "on-failure", "on-request" or "never", got %q`, c.ApprovalPolicy)
	}
	switch c.SandboxMode {
	case SandboxReadOnly, SandboxWorkspaceWrite, SandboxDangerFullAccess:
	default:
		return c.invalid(key("sandbox_mode"), `expected "read-only", "workspace-write" or "danger-full-access", got %q`, c.SandboxMode)
	}
	if c.ModelReasoningEffort != "" && !slices.Contains(effortNames, string(c.ModelReasoningEffort)) {
		return c.invalid(key("model_reasoning_effort"), "expected one of %s, got %q", strings.Join(effortNames, ", "), c.ModelReasoningEffort)
	}
	switch c.ModelReasoningSummary {
	case "", "auto", "concise", "detailed", "none":
	default:
		return c.invalid(key("model_reasoning_summary"), `expected "auto", "concise", "detailed" or "none", got %q`, c.ModelReasoningSummary)
	}
	if !validVerbosity(c.ModelVerbosity) {
		return c.invalid(key("model_verbosity"), `expected "low", "medium" or "high", got %q`, c.ModelVerbosity)
	}
	if c.ServiceTier != "" && !serviceTierRE.MatchString(c.ServiceTier) {
		return c.invalid(key("service_tier"), "must be 1 to 64 letters, digits, '_' or '-', got %q", c.ServiceTier)
	}
	if c.ModelContextWindow < 0 {
		return c.invalid(key("model_context_window"), "must not be negative, got %d", c.ModelContextWindow)
	}
	if c.ModelAutoCompactTokenLimit < 0 {
		return c.invalid(key("model_auto_compact_token_limit"), "must not be negative, got %d", c.ModelAutoCompactTokenLimit)
	}
	return c.readCompactPrompt()
}

// readCompactPrompt reads experimental_compact_prompt_file into
// CompactPrompt unless compact_prompt is set, which wins as in Codex. A
// file that cannot be read or holds only blanks is an error, as in Codex,
// rather than a compaction silently run with another prompt.
func (c *Config) readCompactPrompt() error {
	c.CompactPrompt = strings.TrimSpace(c.CompactPrompt)
	if c.CompactPrompt != "" || c.ExperimentalCompactPromptFile == "" {
		return nil
	}
	b, err := os.ReadFile(c.ExperimentalCompactPromptFile)
	if err != nil {
		return c.invalid(key("experimental_compact_prompt_file"), "cannot read the compact prompt file: %v", err)
	}
	text := strings.TrimSpace(string(b))
	if text == "" {
		return c.invalid(key("experimental_compact_prompt_file"), "the compact prompt file %s is empty", c.ExperimentalCompactPromptFile)
	}
	c.CompactPrompt = text
	return nil
}

func (c *Config) validateProviders() error {
	for _, id := range sortedKeys(c.ModelProviders) {
		p := c.ModelProviders[id]
		at := func(field string) []string { return key("model_providers", id, field) }
		if id == "" {
			return c.invalid(key("model_providers", id), "provider id must not be empty")
		}
		switch p.WireAPI {
		case WireAPIResponses, WireAPIChat:
		default:
			return c.invalid(at("wire_api"), `expected "responses" or "chat", got %q`, p.WireAPI)
		}
		if p.BaseURL != "" && !isHTTPURL(p.BaseURL) {
			return c.invalid(at("base_url"), "expected an http:// or https:// URL, got %q", p.BaseURL)
		}
		for _, f := range []struct {
			field string
			n     int
		}{
			{"request_max_retries", p.RequestMaxRetries},
			{"stream_max_retries", p.StreamMaxRetries},
			{"stream_idle_timeout_ms", p.StreamIdleTimeoutMS},
		} {
			if f.n < 0 {
				return c.invalid(at(f.field), "must not be negative")
			}
		}
	}
	if _, ok := c.ModelProviders[c.ModelProvider]; !ok {
		return c.invalid(key("model_provider"), "provider %q is not defined; add a [model_providers.%s] table (only %q is built in)",
			c.ModelProvider, formatKey(key(c.ModelProvider)), DefaultModelProvider)
	}
	return nil
}

// isHTTPURL reports whether s is an absolute http(s) URL with a host.
func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func (c *Config) validateMCPServers() error {
	for _, id := range sortedKeys(c.MCPServers) {
		m := c.MCPServers[id]
		at := func(field string) []string { return key("mcp_servers", id, field) }
		switch {
		case id == "":
			return c.invalid(key("mcp_servers", id), "server id must not be empty")
		case m.Command == "" && m.URL == "":
			return c.invalid(key("mcp_servers", id), "set either command (stdio server) or url (streamable HTTP server)")
		case m.Command != "" && m.URL != "":
			return c.invalid(key("mcp_servers", id), "command and url are mutually exclusive")
		}
		if m.URL != "" {
			if !isHTTPURL(m.URL) {
				return c.invalid(at("url"), "expected an http:// or https:// URL, got %q", m.URL)
			}
			for _, f := range []flagged{{"args", len(m.Args) > 0}, {"env", len(m.Env) > 0}, {"cwd", m.Cwd != ""}} {
				if f.set {
					return c.invalid(at(f.field), "only applies to stdio servers (set with command), not url")
				}
			}
		} else {
			for _, f := range []flagged{{"bearer_token_env_var", m.BearerTokenEnvVar != ""}, {"http_headers", len(m.HTTPHeaders) > 0}, {"env_http_headers", len(m.EnvHTTPHeaders) > 0}} {
				if f.set {
					return c.invalid(at(f.field), "only applies to streamable HTTP servers (set with url), not command")
				}
			}
		}
		if m.StartupTimeoutSec < 0 {
			return c.invalid(at("startup_timeout_sec"), "must not be negative")
		}
		if m.ToolTimeoutSec < 0 {
			return c.invalid(at("tool_timeout_sec"), "must not be negative")
		}
		if err := c.validateMCPApproval(at("default_tools_approval_mode"), m.DefaultToolsApprovalMode); err != nil {
			return err
		}
		for _, tool := range sortedKeys(m.Tools) {
			if err := c.validateMCPApproval(key("mcp_servers", id, "tools", tool, "approval_mode"), m.Tools[tool].ApprovalMode); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Config) validateMCPApproval(at []string, mode MCPApprovalMode) error {
	switch mode {
	case "", MCPApprovalAuto, MCPApprovalApprove, MCPApprovalPrompt, MCPApprovalWrites:
		return nil
	}
	return c.invalid(at, `expected "auto", "approve", "prompt" or "writes", got %q`, mode)
}

func (c *Config) validateModels() error {
	for _, id := range sortedKeys(c.ModelCatalog) {
		m := c.ModelCatalog[id]
		if id == "" {
			return c.invalid(key("models", id), "model id must not be empty")
		}
		if m.Provider != "" {
			if _, ok := c.ModelProviders[m.Provider]; !ok {
				return c.invalid(key("models", id, "provider"), "provider %q is not defined in model_providers", m.Provider)
			}
		}
		if m.DefaultReasoningEffort != "" && !slices.Contains(effortNames, string(m.DefaultReasoningEffort)) {
			return c.invalid(key("models", id, "default_reasoning_effort"),
				"expected one of %s, got %q", strings.Join(effortNames, ", "), m.DefaultReasoningEffort)
		}
		switch m.ShellType {
		case "", "shell_command", "default", "local", "unified_exec", "disabled":
		default:
			return c.invalid(key("models", id, "shell_type"),
				`expected "shell_command", "default", "local", "unified_exec" or "disabled", got %q`, m.ShellType)
		}
		switch m.ApplyPatchToolType {
		case "", "freeform", "function":
		default:
			return c.invalid(key("models", id, "apply_patch_tool_type"), `expected "freeform" or "function", got %q`, m.ApplyPatchToolType)
		}
		if !validVerbosity(m.DefaultVerbosity) {
			return c.invalid(key("models", id, "default_verbosity"), `expected "low", "medium" or "high", got %q`, m.DefaultVerbosity)
		}
		if err := c.validateModelLists(id, m); err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, st := range m.ServiceTiers {
			switch {
			case !serviceTierRE.MatchString(st.ID):
				return c.invalid(key("models", id, "service_tiers"), "tier id %q must be 1 to 64 letters, digits, '_' or '-'", st.ID)
			case st.ID == "fast" || st.ID == "default":
				return c.invalid(key("models", id, "service_tiers"), `tier id %q is reserved: "fast" is kept as "priority", "default" is no tier`, st.ID)
			case seen[st.ID]:
				return c.invalid(key("models", id, "service_tiers"), "tier id %q is listed twice", st.ID)
			}
			seen[st.ID] = true
		}
	}
	return nil
}

// validateModelLists checks what a [models.<id>] entry lists for
// model/list: its efforts, input kinds and sub-agent version.
func (c *Config) validateModelLists(id string, m ModelEntry) error {
	for _, e := range m.SupportedReasoningEfforts {
		if !slices.Contains(effortNames, e) {
			return c.invalid(key("models", id, "supported_reasoning_efforts"), "expected one of %s, got %q", strings.Join(effortNames, ", "), e)
		}
	}
	if m.DefaultReasoningEffort != "" && len(m.SupportedReasoningEfforts) > 0 && !slices.Contains(m.SupportedReasoningEfforts, string(m.DefaultReasoningEffort)) {
		return c.invalid(key("models", id, "default_reasoning_effort"), "%q is not one of supported_reasoning_efforts", m.DefaultReasoningEffort)
	}
	for _, in := range m.InputModalities {
		if in != "text" && in != "image" {
			return c.invalid(key("models", id, "input_modalities"), `expected "text" or "image", got %q`, in)
		}
	}
	switch m.MultiAgentVersion {
	case "", "disabled", "v1", "v2":
	default:
		return c.invalid(key("models", id, "multi_agent_version"), `expected "disabled", "v1" or "v2", got %q`, m.MultiAgentVersion)
	}
	return nil
}

// validVerbosity reports whether v is a verbosity ("" for none).
func validVerbosity(v string) bool {
	switch v {
	case "", "low", "medium", "high":
		return true
	}
	return false
}

// serviceTierRE is what a service tier id may be.
var serviceTierRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// principalNameRE is what an [http_api.principals.<name>] may be called.
var principalNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func (c *Config) validateHTTPAPI() error {
	seen := map[string]string{}
	for _, name := range sortedKeys(c.HTTPAPI.Principals) {
		p := c.HTTPAPI.Principals[name]
		if !principalNameRE.MatchString(name) {
			return c.invalid(key("http_api", "principals", name), "principal names are 1-64 characters from A-Z, a-z, 0-9, '_' and '-'")
		}
		digest := strings.ToLower(strings.TrimSpace(p.TokenSHA256))
		if b, err := hex.DecodeString(digest); err != nil || len(b) != 32 {
			return c.invalid(key("http_api", "principals", name, "token_sha256"), "expected 64 hexadecimal characters (the SHA-256 digest of the token)")
		}
		if other, dup := seen[digest]; dup {
			return c.invalid(key("http_api", "principals", name, "token_sha256"), "the same token as principal %q; every principal needs its own", other)
		}
		seen[digest] = name
		for _, root := range p.WorkspaceRoots {
			if !filepath.IsAbs(root) || filepath.Clean(root) == "/" {
				return c.invalid(key("http_api", "principals", name, "workspace_roots"), "expected absolute directories other than \"/\", got %q", root)
			}
		}
	}
	if w := c.HTTPAPI.PrincipalWorkspaces; w != "" && (!filepath.IsAbs(w) || filepath.Clean(w) == "/") {
		return c.invalid(key("http_api", "principal_workspaces"), "expected an absolute directory other than \"/\", got %q", w)
	}
	switch c.HTTPAPI.PrincipalMaxSandbox {
	case SandboxReadOnly, SandboxWorkspaceWrite, SandboxDangerFullAccess:
	default:
		return c.invalid(key("http_api", "principal_max_sandbox"), `expected "read-only", "workspace-write" or "danger-full-access", got %q`, c.HTTPAPI.PrincipalMaxSandbox)
	}
	switch c.HTTPAPI.PrincipalMaxApproval {
	case "", ApprovalUntrusted, ApprovalOnFailure, ApprovalOnRequest, ApprovalNever:
	default:
		return c.invalid(key("http_api", "principal_max_approval"), `expected "untrusted", "on-request", "on-failure" or "never", got %q`, c.HTTPAPI.PrincipalMaxApproval)
	}
	return nil
}

// flagged pairs a field name with whether it is set.
type flagged struct {
	field string
	set   bool
}

// key builds a key path.
func key(segs ...string) []string { return segs }

// validateWebhooks checks the [[webhooks]] entries and reads the secrets
// of those that name a secret_file.
func (c *Config) validateWebhooks() error {
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		at := func(field string) []string { return key("webhooks", strconv.Itoa(i), field) }
		if err := CheckWebhookURL(w.URL, true); err != nil {
			return c.invalid(at("url"), "%v", err)
		}
		switch {
		case w.Secret != "" && w.SecretFile != "":
			return c.invalid(at("secret"), "secret and secret_file are mutually exclusive")
		case w.SecretFile != "":
			b, err := os.ReadFile(w.SecretFile)
			if err != nil {
				return c.invalid(at("secret_file"), "cannot read the webhook secret: %v", err)
			}
			w.Secret = strings.TrimSpace(string(b))
		case w.Secret == "":
			return c.invalid(at("secret"), "set secret or secret_file (whsec_ and base64)")
		}
		if err := CheckWebhookSecret(w.Secret); err != nil {
			field := "secret"
			if w.SecretFile != "" {
				field = "secret_file"
			}
			return c.invalid(at(field), "%v", err)
		}
		if err := CheckWebhookEvents(w.Events); err != nil {
			return c.invalid(at("events"), "%v", err)
		}
		if w.RetryFor < 0 {
			return c.invalid(at("retry_for"), "must not be negative")
		}
	}
	return nil
}

// MaxWebhookURL bounds a receiver's URL, in bytes.
const MaxWebhookURL = 2048

// CheckWebhookURL checks a receiver's URL, wherever it is given (the
// [[webhooks]] table, POST /v1/webhooks): http or https, a host, bounded,
// no NUL or white space. Credentials (basic auth for the receiver) are
// allowed only if allowCredentials: the operator's file may hold them
// (config/read masks the password); the HTTP API refuses them, because a
// subscription's URL is shown back in its listings.
func CheckWebhookURL(raw string, allowCredentials bool) error {
	if raw == "" {
		return errors.New("url is required")
	}
	if len(raw) > MaxWebhookURL {
		return fmt.Errorf("url is %d bytes, more than %d", len(raw), MaxWebhookURL)
	}
	if strings.IndexByte(raw, 0) >= 0 {
		return errors.New("url contains a NUL character")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || strings.ContainsAny(raw, "\r\n\t "):
		return fmt.Errorf("url %q is not a valid URL", raw)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("url must be http:// or https://, got %q", raw)
	case u.Hostname() == "":
		return fmt.Errorf("url %q has no host", raw)
	case u.User != nil && !allowCredentials:
		return errors.New("url must not hold credentials")
	}
	return nil
}

// CheckWebhookEvents checks a subscription's event types against
// WebhookEventTypes.
func CheckWebhookEvents(events []string) error {
	for _, e := range events {
		if !slices.Contains(WebhookEventTypes, e) {
			return fmt.Errorf("unknown event type %q (expected one of %s)", e, strings.Join(WebhookEventTypes, ", "))
		}
	}
	return nil
}

// CheckWebhookSecret checks a webhook signing secret: "whsec_" and the
// standard base64 of 24 to 64 bytes.
func CheckWebhookSecret(secret string) error {
	b64, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return errors.New(`expected a secret of the form "whsec_" and base64`)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return errors.New(`the secret after "whsec_" is not standard base64`)
	}
	if len(key) < 24 || len(key) > 64 {
		return fmt.Errorf("the secret holds %d bytes; expected 24 to 64", len(key))
	}
	return nil
}

// validateBudgets checks the [budgets] table: a known period and
// on_exceeded, no negative limit or price.
func (c *Config) validateBudgets() error {
	b := &c.Budgets
	if _, _, err := b.PeriodSpec(); err != nil {
		return c.invalid(key("budgets", "period"), "%v", err)
	}
	switch b.OnExceeded {
	case "", BudgetFail, BudgetAsk:
	default:
		return c.invalid(key("budgets", "on_exceeded"), "expected %q or %q, got %q", BudgetFail, BudgetAsk, b.OnExceeded)
	}
	limits := func(at []string, l BudgetLimits) error {
		if l.MaxTokens < 0 {
			return c.invalid(append(at, "max_tokens"), "must not be negative, got %d", l.MaxTokens)
		}
		if l.MaxCost < 0 || math.IsNaN(l.MaxCost) || math.IsInf(l.MaxCost, 0) {
			return c.invalid(append(at, "max_cost"), "must be a finite amount not below 0, got %v", l.MaxCost)
		}
		return nil
	}
	for _, s := range []struct {
		name string
		l    BudgetLimits
	}{{"turn", b.Turn}, {"thread", b.Thread}, {"principal", b.Principal}} {
		if err := limits(key("budgets", s.name), s.l); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(b.Principals) {
		if err := limits(key("budgets", "principals", name), b.Principals[name]); err != nil {
			return err
		}
	}
	for _, id := range sortedKeys(b.Prices) {
		p := b.Prices[id]
		price := func(field string, v float64) error {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return c.invalid(key("budgets", "prices", id, field), "a price per million tokens must be finite and not below 0, got %v", v)
			}
			return nil
		}
		cached := p.Input
		if p.CachedInput != nil {
			cached = *p.CachedInput
		}
		for _, f := range []struct {
			name string
			v    float64
		}{{"input", p.Input}, {"cached_input", cached}, {"output", p.Output}} {
			if err := price(f.name, f.v); err != nil {
				return err
			}
		}
	}
	return nil
}
