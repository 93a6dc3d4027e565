package config

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/appserver/appserver/internal/apperr"
)

// ParseListen parses a listen address of the form ws://IP:PORT, or
// wss://IP:PORT for TLS, where IP is an IPv4 or bracketed IPv6 literal (not
// a host name) and PORT is 0-65535.
func ParseListen(s string) (netip.AddrPort, error) {
	rest, ok := strings.CutPrefix(s, "ws://")
	if !ok {
		rest, ok = strings.CutPrefix(s, "wss://")
	}
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("expected ws://IP:PORT or wss://IP:PORT, got %q", s)
	}
	ap, err := netip.ParseAddrPort(rest)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("expected ws://IP:PORT or wss://IP:PORT with an IP address literal and a port, got %q", s)
	}
	return ap, nil
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
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) validateServer() error {
	if _, err := ParseListen(c.Listen); err != nil {
		return c.invalid(key("listen"), "%s", err.Error())
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
	for id, r := range c.Skills.Remote {
		if u, err := url.Parse(r.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c.invalid(key("skills", "remote", id, "url"), "must be an http(s) URL")
		}
	}
	for name, v := range map[string]int{"max_threads": c.Agents.MaxThreads, "max_depth": c.Agents.MaxDepth, "max_total": c.Agents.MaxTotal} {
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
	if c.DynamicToolReconnectTimeout <= 0 {
		return c.invalid(key("dynamic_tool_reconnect_timeout"), "must be positive")
	}
	if c.ApprovalClientTimeout <= 0 {
		return c.invalid(key("approval_client_timeout"), "must be positive")
	}
	if c.EventRetention <= 0 {
		return c.invalid(key("event_retention"), "must be positive")
	}
	if c.GCHeapFloorMiB < 0 || c.GCHeapFloorMiB > 1<<20 {
		return c.invalid(key("gc_heap_floor_mib"), "must be between 0 and 1048576")
	}
	// At least one frame of the largest size (16 MiB) must fit in flight.
	if c.WSMaxInboundInflightMiB < 16 || c.WSMaxInboundInflightMiB > 1<<20 {
		return c.invalid(key("ws_max_inbound_inflight_mib"), "must be between 16 and 1048576")
	}
	if c.WSMaxOutboundQueuedMiB < 1 || c.WSMaxOutboundQueuedMiB > 1<<20 {
		return c.invalid(key("ws_max_outbound_queued_mib"), "must be between 1 and 1048576")
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
		switch m.DefaultReasoningEffort {
		case "", ReasoningNone, ReasoningMinimal, ReasoningLow, ReasoningMedium, ReasoningHigh, ReasoningXHigh:
		default:
			return c.invalid(key("models", id, "default_reasoning_effort"),
				`expected "none", "minimal", "low", "medium", "high" or "xhigh", got %q`, m.DefaultReasoningEffort)
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
	}
	return nil
}

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
