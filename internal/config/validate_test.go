package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestWSAuth(t *testing.T) {
	tests := []struct {
		name      string
		overrides []string
		want      string // empty: valid
	}{
		{"no auth", nil, ""},
		{"capability token file", []string{"ws_auth=capability-token", "ws_token_file=/etc/appserver/token"}, ""},
		{"capability token digest", []string{"ws_auth=capability-token", "ws_token_sha256=" + sha}, ""},
		{"capability token digest upper case", []string{"ws_auth=capability-token", "ws_token_sha256=" + strings.ToUpper(sha)}, ""},
		{"signed bearer token", []string{"ws_auth=signed-bearer-token", "ws_shared_secret_file=/etc/appserver/secret",
			"ws_issuer=me", "ws_audience=you", "ws_max_clock_skew_seconds=0"}, ""},
		{"empty strings are unset", []string{`ws_token_file=""`, `ws_issuer=""`}, ""},

		{"unknown mode", []string{"ws_auth=basic"},
			`-c ws_auth=basic: expected "capability-token" or "signed-bearer-token" (or empty for none), got "basic"`},
		{"token file without mode", []string{"ws_token_file=/t"},
			`-c ws_token_file=/t: requires ws_auth = "capability-token"`},
		{"token digest without mode", []string{"ws_token_sha256=" + sha},
			`-c ws_token_sha256=` + sha + `: requires ws_auth = "capability-token"`},
		{"secret file without mode", []string{"ws_shared_secret_file=/s"},
			`-c ws_shared_secret_file=/s: requires ws_auth = "signed-bearer-token"`},
		{"issuer without mode", []string{"ws_issuer=me"},
			`-c ws_issuer=me: requires ws_auth = "signed-bearer-token"`},
		{"audience without mode", []string{"ws_audience=you"},
			`-c ws_audience=you: requires ws_auth = "signed-bearer-token"`},
		{"clock skew without mode, even at its default", []string{"ws_max_clock_skew_seconds=30"},
			`-c ws_max_clock_skew_seconds=30: requires ws_auth = "signed-bearer-token"`},
		{"token file with jwt mode", []string{"ws_auth=signed-bearer-token", "ws_shared_secret_file=/s", "ws_token_file=/t"},
			`-c ws_token_file=/t: cannot be used with ws_auth = "signed-bearer-token" (it belongs to ws_auth = "capability-token")`},
		{"token digest with jwt mode", []string{"ws_auth=signed-bearer-token", "ws_shared_secret_file=/s", "ws_token_sha256=" + sha},
			`-c ws_token_sha256=` + sha + `: cannot be used with ws_auth = "signed-bearer-token" (it belongs to ws_auth = "capability-token")`},
		{"jwt setting with token mode", []string{"ws_auth=capability-token", "ws_token_file=/t", "ws_issuer=me"},
			`-c ws_issuer=me: cannot be used with ws_auth = "capability-token" (it belongs to ws_auth = "signed-bearer-token")`},
		{"capability token without token", []string{"ws_auth=capability-token"},
			`-c ws_auth=capability-token: capability-token requires ws_token_file or ws_token_sha256`},
		{"capability token with both", []string{"ws_auth=capability-token", "ws_token_file=/t", "ws_token_sha256=" + sha},
			`-c ws_token_sha256=` + sha + `: ws_token_file and ws_token_sha256 are mutually exclusive; set only one`},
		{"digest too short", []string{"ws_auth=capability-token", "ws_token_sha256=" + sha[1:]},
			`-c ws_token_sha256=` + sha[1:] + `: expected 64 hexadecimal characters (a SHA-256 digest)`},
		{"digest not hex", []string{"ws_auth=capability-token", "ws_token_sha256=" + strings.Repeat("zz", 32)},
			`-c ws_token_sha256=` + strings.Repeat("zz", 32) + `: expected 64 hexadecimal characters (a SHA-256 digest)`},
		{"relative token file", []string{"ws_auth=capability-token", "ws_token_file=token.txt"},
			`-c ws_token_file=token.txt: expected an absolute path, got "token.txt"`},
		{"relative secret file", []string{"ws_auth=signed-bearer-token", "ws_shared_secret_file=./secret"},
			`-c ws_shared_secret_file=./secret: expected an absolute path, got "./secret"`},
		{"jwt without secret file", []string{"ws_auth=signed-bearer-token", "ws_issuer=me"},
			`-c ws_auth=signed-bearer-token: signed-bearer-token requires ws_shared_secret_file`},
		{"negative clock skew", []string{"ws_auth=signed-bearer-token", "ws_shared_secret_file=/s", "ws_max_clock_skew_seconds=-1"},
			`-c ws_max_clock_skew_seconds=-1: must not be negative`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := Sources{Overrides: tt.overrides}
			if tt.want == "" {
				mustLoad(t, src)
				return
			}
			require.Equal(t, tt.want, loadError(t, src))
		})
	}
}

func TestWSAuthErrorsNameTheirSource(t *testing.T) {
	file := writeConfig(t, `ws_token_file = "/t"`)
	require.Equal(t, "config file "+file+`: ws_token_file: requires ws_auth = "capability-token"`,
		loadError(t, Sources{File: file}))
	require.Equal(t, `env APPSERVER_WS_AUTH: capability-token requires ws_token_file or ws_token_sha256`,
		loadError(t, Sources{Env: testEnv("APPSERVER_WS_AUTH=capability-token")}))
	require.Equal(t, `flag --ws-issuer: requires ws_auth = "signed-bearer-token"`,
		loadError(t, Sources{Flags: map[string]string{"ws_issuer": "me"}}))
}

// wss:// listens with TLS and needs both files, given as absolute paths;
// the files without wss:// are refused rather than silently unused.
func TestListenTLS(t *testing.T) {
	cfg, _ := mustLoad(t, Sources{Flags: map[string]string{"listen": "wss://0.0.0.0:8443", "tls_cert_file": "/etc/appserver/cert.pem", "tls_key_file": "/etc/appserver/key.pem"}})
	require.True(t, cfg.ListenTLS())
	require.Equal(t, "0.0.0.0", cfg.ListenHost())
	require.Equal(t, 8443, cfg.ListenPort())
	require.Equal(t, "/etc/appserver/cert.pem", cfg.TLSCertFile)
	l, err := ParseListen("wss://[::1]:443")
	require.NoError(t, err)
	require.Equal(t, ListenURL{Scheme: ListenWSS, Addr: netip.MustParseAddrPort("[::1]:443")}, l)
	cfg, _ = mustLoad(t, Sources{})
	require.False(t, cfg.ListenTLS())

	for _, tc := range []struct {
		flags map[string]string
		want  string
	}{
		{map[string]string{"listen": "wss://127.0.0.1:0"}, "flag --listen: wss:// needs tls_cert_file and tls_key_file (no tls_cert_file)"},
		{map[string]string{"listen": "wss://127.0.0.1:0", "tls_cert_file": "/c.pem"}, "wss:// needs tls_cert_file and tls_key_file (no tls_key_file)"},
		{map[string]string{"tls_cert_file": "/c.pem", "tls_key_file": "/k.pem"}, `requires a wss:// listen address (listen is "ws://127.0.0.1:7878")`},
		{map[string]string{"listen": "wss://127.0.0.1:0", "tls_cert_file": "c.pem", "tls_key_file": "/k.pem"}, `expected an absolute path, got "c.pem"`},
	} {
		require.Contains(t, loadError(t, Sources{Flags: tc.flags}), tc.want, "%v", tc.flags)
	}
}

func TestParseListen(t *testing.T) {
	valid := []struct {
		in   string
		host string
		port int
	}{
		{"ws://127.0.0.1:7878", "127.0.0.1", 7878},
		{"ws://0.0.0.0:0", "0.0.0.0", 0},
		{"ws://[::1]:80", "::1", 80},
		{"ws://[::]:65535", "::", 65535},
	}
	for _, tt := range valid {
		t.Run(tt.in, func(t *testing.T) {
			l, err := ParseListen(tt.in)
			require.NoError(t, err)
			require.Equal(t, ListenWS, l.Scheme)
			ap := l.Addr
			require.Equal(t, netip.MustParseAddr(tt.host), ap.Addr())
			cfg, _ := mustLoad(t, Sources{Overrides: []string{"listen=" + tt.in}})
			require.Equal(t, tt.host, cfg.ListenHost())
			require.Equal(t, tt.port, cfg.ListenPort())
			require.Equal(t, ap, cfg.ListenAddr())
		})
	}

	invalid := []string{
		"ws://localhost:7878",
		"ws://127.0.0.1",
		"ws://127.0.0.1:65536",
		"ws://127.0.0.1:-1",
		"ws://127.0.0.1:80/rpc",
		"ws://::1:80",
		"ws://[::1]",
		"ws://256.0.0.1:80",
		"wss://localhost:443",
		"http://127.0.0.1:80",
		"127.0.0.1:80",
		"stdio:///dev/tty",
		"stdio:",
		"unix:/tmp/a.sock",
		"off",
		"",
	}
	for _, in := range invalid {
		t.Run("invalid "+in, func(t *testing.T) {
			_, err := ParseListen(in)
			require.Error(t, err)
			msg := loadError(t, Sources{Flags: map[string]string{"listen": in}})
			require.Contains(t, msg, "flag --listen: expected ws://IP:PORT")
			require.Contains(t, msg, `got "`+in+`"`)
		})
	}

	require.Equal(t, `-c listen=ws://localhost:1: expected ws://IP:PORT or wss://IP:PORT with an IP address literal and a port, got "ws://localhost:1"`,
		loadError(t, Sources{Overrides: []string{"listen=ws://localhost:1"}}))

	var zero Config
	require.False(t, zero.ListenAddr().IsValid())
	require.Empty(t, zero.ListenHost())
	require.Zero(t, zero.ListenPort())
}

// The listen URLs of the reference's other transports: stdio:// and the
// control socket, at a path or (bare unix://) in data_dir.
func TestListenStdioAndUnix(t *testing.T) {
	cfg, _ := mustLoad(t, Sources{Flags: map[string]string{"listen": "stdio://"}})
	require.Equal(t, ListenURL{Scheme: ListenStdio}, cfg.ListenURL())
	require.Empty(t, cfg.ControlSocket())
	require.False(t, cfg.ListenAddr().IsValid())
	require.False(t, cfg.ListenTLS())

	dataDir := t.TempDir()
	cfg, _ = mustLoad(t, Sources{Flags: map[string]string{"listen": "unix://", "data_dir": dataDir}})
	require.Equal(t, ListenURL{Scheme: ListenUnix}, cfg.ListenURL())
	require.Equal(t, filepath.Join(dataDir, "app-server-control", "app-server-control.sock"), cfg.ControlSocket())

	cfg, _ = mustLoad(t, Sources{Flags: map[string]string{"listen": "unix:///run/appserver/ctl.sock"}})
	require.Equal(t, "/run/appserver/ctl.sock", cfg.ControlSocket())
	cwd, err := os.Getwd()
	require.NoError(t, err)
	cfg, _ = mustLoad(t, Sources{Flags: map[string]string{"listen": "unix://run/ctl.sock"}})
	require.Equal(t, filepath.Join(cwd, "run", "ctl.sock"), cfg.ControlSocket(), "a relative path is taken from the working directory")

	cfg, _ = mustLoad(t, Sources{Flags: map[string]string{"listen": "ws://127.0.0.1:0"}})
	require.Empty(t, cfg.ControlSocket())

	require.Contains(t, loadError(t, Sources{Flags: map[string]string{"listen": "unix://a\x00b"}}), "without NUL bytes")
	require.Contains(t, loadError(t, Sources{Flags: map[string]string{"listen": "unix://", "data_dir": "", "database_url": "postgres://db/x"}}),
		"unix:// puts the control socket in data_dir, which is empty")
	require.Contains(t, loadError(t, Sources{Flags: map[string]string{"listen": "unix://", "tls_cert_file": "/c.pem", "tls_key_file": "/k.pem"}}),
		"requires a wss:// listen address")
}

func TestValidation(t *testing.T) {
	tests := []struct {
		name      string
		overrides []string
		want      string // empty: valid
	}{
		{"postgres url", []string{"database_url=postgresql://u:p@db:5432/app?sslmode=disable"}, ""},
		{"other database scheme, password not echoed", []string{"database_url=mysql://u:hunter2@db/app"},
			"-c database_url=mysql://u:hunter2@db/app: expected a postgres:// or postgresql:// URL"},
		{"no data dir for the embedded store", []string{`data_dir=""`},
			`-c data_dir="": must not be empty when database_url is empty: the embedded store lives there`},
		{"no data dir with postgres", []string{`data_dir=""`, "database_url=postgres://db/app"}, ""},
		{"log format", []string{"log_format=xml"}, `-c log_format=xml: expected "text" or "json", got "xml"`},
		{"log level", []string{"log_level=trace"}, `-c log_level=trace: expected "debug", "info", "warn" or "error", got "trace"`},
		{"origins", []string{`allowed_origins=["https://a.example", "http://localhost:3000"]`}, ""},
		{"origin with path", []string{`allowed_origins=["https://a.example/app"]`},
			`-c allowed_origins=["https://a.example/app"]: "https://a.example/app" is not an origin (expected scheme://host[:port], no path)`},
		{"origin without scheme", []string{`allowed_origins=["a.example"]`},
			`-c allowed_origins=["a.example"]: "a.example" is not an origin (expected scheme://host[:port], no path)`},
		{"negative grace period", []string{"shutdown_grace_period=-1s"}, "-c shutdown_grace_period=-1s: must not be negative"},
		{"event bounds", []string{"event_item_max_kib=64", "event_thread_max_mib=1", `event_prune_interval="5s"`}, ""},
		{"no item bound", []string{"event_item_max_kib=0"}, "-c event_item_max_kib=0: must be between 1 and 1048576"},
		{"event log off", []string{"event_log=false"}, ""},
		{"event log off with postgres", []string{"event_log=false", "database_url=postgres://db/app"},
			"-c event_log=false: must be on with database_url: the daemons sharing the database get each other's events from the log"},
		{"no thread bound", []string{"event_thread_max_mib=0"}, "-c event_thread_max_mib=0: must be between 1 and 1048576"},
		{"no prune interval", []string{`event_prune_interval="0s"`}, `-c event_prune_interval="0s": must be positive`},
		{"no gc heap floor", []string{"gc_heap_floor_mib=0"}, ""},
		{"negative gc heap floor", []string{"gc_heap_floor_mib=-1"}, "-c gc_heap_floor_mib=-1: must be between 0 and 1048576"},
		{"inbound in flight below one frame", []string{"ws_max_inbound_inflight_mib=8"}, "-c ws_max_inbound_inflight_mib=8: must be between 16 and 1048576"},
		{"larger inbound in flight", []string{"ws_max_inbound_inflight_mib=1024"}, ""},
		{"no outbound queue", []string{"ws_max_outbound_queued_mib=0"}, "-c ws_max_outbound_queued_mib=0: must be between 1 and 1048576"},
		{"no pings", []string{`ws_ping_interval="0s"`}, ""},
		{"negative running turns", []string{"max_running_turns=-1"}, "-c max_running_turns=-1: must not be negative (0 sets no bound)"},
		{"unbounded running turns", []string{"max_running_turns=0"}, ""},
		{"few pending requests", []string{"max_pending_requests=8"}, "-c max_pending_requests=8: must be between 16 and 1048576"},
		{"negative ping interval", []string{`ws_ping_interval="-1s"`}, `-c ws_ping_interval="-1s": must not be negative (0 sends no pings)`},
		{"no pong timeout", []string{`ws_pong_timeout="0s"`}, `-c ws_pong_timeout="0s": must be at least 100ms`},
		{"ticket ttl", []string{`auth_ticket_ttl="5s"`, `auth_session_ttl="1h"`}, ""},
		{"ticket ttl too long", []string{`auth_ticket_ttl="1h"`}, `-c auth_ticket_ttl="1h": must be between 1s and 10m`},
		{"session ttl too short", []string{`auth_session_ttl="30s"`}, `-c auth_session_ttl="30s": must be between 1m and 720h`},
		{"otel over http", []string{"otel.exporter=otlp-http", `otel.endpoint="http://collector:4318/v1/traces"`, `otel.headers={api-key="k"}`, "otel.service_name=svc"}, ""},
		{"otel over grpc, default endpoint", []string{"otel.exporter=otlp-grpc"}, ""},
		{"otel exporter", []string{"otel.exporter=zipkin"}, `-c otel.exporter=zipkin: expected "none", "otlp-http" or "otlp-grpc", got "zipkin"`},
		{"otel endpoint", []string{"otel.endpoint=collector:4317"}, "-c otel.endpoint=collector:4317: must be an http(s) URL"},
		{"otel service name", []string{`otel.service_name=""`}, `-c otel.service_name="": must not be empty`},
		{"approval policy", []string{"approval_policy=always"},
			`-c approval_policy=always: expected "untrusted", "on-failure", "on-request" or "never", got "always"`},
		{"sandbox mode", []string{"sandbox_mode=none"},
			`-c sandbox_mode=none: expected "read-only", "workspace-write" or "danger-full-access", got "none"`},
		{"reasoning effort", []string{"model_reasoning_effort=huge"},
			`-c model_reasoning_effort=huge: expected one of none, minimal, low, medium, high, xhigh, max, ultra, got "huge"`},
		{"reasoning summary", []string{"model_reasoning_summary=long"},
			`-c model_reasoning_summary=long: expected "auto", "concise", "detailed" or "none", got "long"`},
		{"service tiers", []string{`models.m.service_tiers=[{id="priority", name="fast"}, {id="flex"}]`}, ""},
		{"service tier id", []string{`models.m.service_tiers=[{id="a b"}]`},
			`-c models.m.service_tiers=[{id="a b"}]: tier id "a b" must be 1 to 64 letters, digits, '_' or '-'`},
		{"service tier fast", []string{`models.m.service_tiers=[{id="fast"}]`},
			`-c models.m.service_tiers=[{id="fast"}]: tier id "fast" is reserved: "fast" is kept as "priority", "default" is no tier`},
		{"service tier twice", []string{`models.m.service_tiers=[{id="flex"}, {id="flex"}]`},
			`-c models.m.service_tiers=[{id="flex"}, {id="flex"}]: tier id "flex" is listed twice`},
		{"service tiers not tables", []string{`models.m.service_tiers=["priority"]`},
			`-c models.m.service_tiers=["priority"]: expected an array of tables`},
		{"reasoning settings", []string{"model_reasoning_effort=xhigh", "model_reasoning_summary=none"}, ""},
		{"every approval policy and sandbox mode", []string{"approval_policy=never", "approval_policy=on-failure", "sandbox_mode=danger-full-access"}, ""},
		{"undefined provider", []string{"model_provider=ollama"},
			`-c model_provider=ollama: provider "ollama" is not defined; add a [model_providers.ollama] table (only "openai" is built in)`},
		{"wire api", []string{"model_providers.x.wire_api=grpc"}, `-c model_providers.x.wire_api=grpc: expected "responses" or "chat", got "grpc"`},
		{"provider base url", []string{"model_providers.x.base_url=localhost:1234"},
			`-c model_providers.x.base_url=localhost:1234: expected an http:// or https:// URL, got "localhost:1234"`},
		{"negative retries", []string{"model_providers.x.stream_max_retries=-1"}, "-c model_providers.x.stream_max_retries=-1: must not be negative"},
		{"error inside an entry names the key", []string{`model_providers.x={wire_api="grpc"}`},
			`-c model_providers.x={wire_api="grpc"}: model_providers.x.wire_api: expected "responses" or "chat", got "grpc"`},
		{"mcp stdio", []string{`mcp_servers.m={command="npx", args=["-y"], env={A="1"}, cwd="/tmp"}`}, ""},
		{"mcp http", []string{`mcp_servers.m={url="https://x.example/mcp", bearer_token_env_var="T", http_headers={A="1"}}`}, ""},
		{"mcp neither", []string{"mcp_servers.m.enabled=false"},
			"-c mcp_servers.m.enabled=false: mcp_servers.m: set either command (stdio server) or url (streamable HTTP server)"},
		{"mcp both", []string{`mcp_servers.m={command="x", url="https://x.example"}`},
			`-c mcp_servers.m={command="x", url="https://x.example"}: command and url are mutually exclusive`},
		{"mcp url", []string{`mcp_servers.m={url="ftp://x"}`}, `-c mcp_servers.m={url="ftp://x"}: mcp_servers.m.url: expected an http:// or https:// URL, got "ftp://x"`},
		{"mcp url with args", []string{`mcp_servers.m={url="https://x.example", args=["a"]}`},
			`-c mcp_servers.m={url="https://x.example", args=["a"]}: mcp_servers.m.args: only applies to stdio servers (set with command), not url`},
		{"mcp command with bearer token", []string{`mcp_servers.m={command="x", bearer_token_env_var="T"}`},
			`-c mcp_servers.m={command="x", bearer_token_env_var="T"}: mcp_servers.m.bearer_token_env_var: only applies to streamable HTTP servers (set with url), not command`},
		{"mcp approval modes", []string{`mcp_servers.m={command="x", default_tools_approval_mode="prompt", tools={t={approval_mode="approve"}}}`}, ""},
		{"mcp http env headers", []string{`mcp_servers.m={url="https://x.example/mcp", env_http_headers={X-A="A_ENV"}}`}, ""},
		{"mcp bad approval mode", []string{`mcp_servers.m={command="x", tools={t={approval_mode="ask"}}}`},
			`-c mcp_servers.m={command="x", tools={t={approval_mode="ask"}}}: mcp_servers.m.tools.t.approval_mode: expected "auto", "approve", "prompt" or "writes", got "ask"`},
		{"mcp command with env headers", []string{`mcp_servers.m={command="x", env_http_headers={A="B"}}`},
			`-c mcp_servers.m={command="x", env_http_headers={A="B"}}: mcp_servers.m.env_http_headers: only applies to streamable HTTP servers (set with url), not command`},
		{"mcp negative timeout", []string{`mcp_servers.m={command="x", tool_timeout_sec=-1}`},
			`-c mcp_servers.m={command="x", tool_timeout_sec=-1}: mcp_servers.m.tool_timeout_sec: must not be negative`},
		{"model provider", []string{"models.m.provider=nope"}, `-c models.m.provider=nope: provider "nope" is not defined in model_providers`},
		{"model effort", []string{"models.m.default_reasoning_effort=huge"},
			`-c models.m.default_reasoning_effort=huge: expected one of none, minimal, low, medium, high, xhigh, max, ultra, got "huge"`},
		{"empty model id", []string{`models.""={}`}, `-c models.""={}: model id must not be empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := Sources{Overrides: tt.overrides}
			if tt.want == "" {
				mustLoad(t, src)
				return
			}
			require.Equal(t, tt.want, loadError(t, src))
		})
	}
}

func TestValidationErrorForDefaultValue(t *testing.T) {
	// A value nobody set is reported by key alone.
	cfg := defaults(func(string) string { return "" }, "linux")
	cfg.DataDir = ""
	require.EqualError(t, cfg.validate(), "data_dir: must not be empty when database_url is empty: the embedded store lives there")
}

func TestMigrateOnStart(t *testing.T) {
	tests := []struct {
		name    string
		migrate *bool
		dbURL   string
		want    bool
	}{
		{"embedded default", nil, "", true},
		{"postgres default", nil, "postgres://db/app", false},
		{"embedded off", ptr(false), "", false},
		{"postgres on", ptr(true), "postgres://db/app", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Migrate: tt.migrate, DatabaseURL: tt.dbURL}
			require.Equal(t, tt.want, cfg.MigrateOnStart())
		})
	}
}
