package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Layer names the configuration layer that set a value; see Config.Origins.
type Layer string

// The configuration layers, lowest precedence first.
const (
	// LayerDefault is a built-in default value.
	LayerDefault Layer = "default"
	// LayerFile is the TOML file given by --config or APPSERVER_CONFIG.
	LayerFile Layer = "file"
	// LayerUser is the per-user overlay in data_dir that clients write
	// (config/value/write, config/batchWrite); it comes after the file.
	LayerUser Layer = "user"
	// LayerEnv is an APPSERVER_* environment variable.
	LayerEnv Layer = "env"
	// LayerFlag is a dedicated command-line flag such as --listen.
	LayerFlag Layer = "flag"
	// LayerOverride is a repeatable -c key=value override.
	LayerOverride Layer = "override"
)

// LogFormat is the log_format setting.
type LogFormat string

// The accepted log formats.
const (
	// LogFormatText is human-readable key=value lines (the default).
	LogFormatText LogFormat = "text"
	// LogFormatJSON is one JSON object per line.
	LogFormatJSON LogFormat = "json"
)

// LogLevel is the log_level setting.
type LogLevel string

// The accepted log levels.
const (
	// LogLevelDebug logs everything.
	LogLevelDebug LogLevel = "debug"
	// LogLevelInfo is the default level.
	LogLevelInfo LogLevel = "info"
	// LogLevelWarn logs warnings and errors only.
	LogLevelWarn LogLevel = "warn"
	// LogLevelError logs errors only.
	LogLevelError LogLevel = "error"
)

// WSAuthMode is the ws_auth setting: how websocket upgrades are authenticated.
type WSAuthMode string

// The websocket auth modes, spelled as Codex's --ws-auth flag spells them.
const (
	// WSAuthNone, the zero value, authenticates nobody.
	WSAuthNone WSAuthMode = ""
	// WSAuthCapabilityToken requires a bearer token matching ws_token_file or
	// ws_token_sha256.
	WSAuthCapabilityToken WSAuthMode = "capability-token"
	// WSAuthSignedBearerToken requires an HS256 JWT signed with the secret in
	// ws_shared_secret_file.
	WSAuthSignedBearerToken WSAuthMode = "signed-bearer-token"
)

// ApprovalPolicy is Codex's approval_policy: when the user is asked before a
// command runs.
type ApprovalPolicy string

// The approval policies Codex accepts as strings.
const (
	// ApprovalUntrusted asks for everything but known-safe read-only commands.
	ApprovalUntrusted ApprovalPolicy = "untrusted"
	// ApprovalOnFailure runs sandboxed and asks only when a command fails
	// (deprecated in Codex, still accepted).
	ApprovalOnFailure ApprovalPolicy = "on-failure"
	// ApprovalOnRequest lets the model decide when to ask (the default).
	ApprovalOnRequest ApprovalPolicy = "on-request"
	// ApprovalNever never asks; failures go straight back to the model.
	ApprovalNever ApprovalPolicy = "never"
)

// SandboxMode is Codex's sandbox_mode: what commands may touch.
type SandboxMode string

// The sandbox modes.
const (
	// SandboxReadOnly allows reading only (the default).
	SandboxReadOnly SandboxMode = "read-only"
	// SandboxWorkspaceWrite allows writing inside the workspace.
	SandboxWorkspaceWrite SandboxMode = "workspace-write"
	// SandboxDangerFullAccess disables the sandbox.
	SandboxDangerFullAccess SandboxMode = "danger-full-access"
)

// WireAPI is the wire protocol a model provider speaks.
type WireAPI string

// The wire protocols.
const (
	// WireAPIResponses is the OpenAI Responses API (/v1/responses).
	WireAPIResponses WireAPI = "responses"
	// WireAPIChat is the Chat Completions API (/v1/chat/completions).
	WireAPIChat WireAPI = "chat"
)

// ReasoningEffort is a model reasoning effort as Codex spells it.
type ReasoningEffort string

// The reasoning efforts Codex knows.
const (
	// ReasoningNone disables reasoning.
	ReasoningNone ReasoningEffort = "none"
	// ReasoningMinimal is the least reasoning.
	ReasoningMinimal ReasoningEffort = "minimal"
	// ReasoningLow is low effort.
	ReasoningLow ReasoningEffort = "low"
	// ReasoningMedium is medium effort.
	ReasoningMedium ReasoningEffort = "medium"
	// ReasoningHigh is high effort.
	ReasoningHigh ReasoningEffort = "high"
	// ReasoningXHigh is the most reasoning.
	ReasoningXHigh ReasoningEffort = "xhigh"
)

// Defaults that callers may want to refer to.
const (
	// DefaultListen is the default listen address.
	DefaultListen = "ws://127.0.0.1:7878"
	// DefaultShutdownGracePeriod is how long shutdown waits for running turns.
	DefaultShutdownGracePeriod = 10 * time.Second
	// DefaultLeaseTTL is how long a thread lease outlives its node's last
	// heartbeat when several daemons share one Postgres database.
	DefaultLeaseTTL = 10 * time.Second
	// DefaultGCHeapFloorMiB is the default gc_heap_floor_mib.
	DefaultGCHeapFloorMiB = 16
	// DefaultWSMaxInboundInflightMiB is the default
	// ws_max_inbound_inflight_mib (rpcws.DefaultInboundBytes).
	DefaultWSMaxInboundInflightMiB = 128
	// DefaultWSMaxOutboundQueuedMiB is the default
	// ws_max_outbound_queued_mib (rpcws.DefaultOutboundBytes).
	DefaultWSMaxOutboundQueuedMiB = 32
	// DefaultDynamicToolReconnectTimeout is how long a client-registered
	// tool call waits for a connection that can answer it.
	DefaultDynamicToolReconnectTimeout = 5 * time.Minute
	// DefaultApprovalClientTimeout is how long an approval (or user
	// input) request waits for a subscribed client to send it to before
	// the call is declined.
	DefaultApprovalClientTimeout = 30 * time.Second
	// DefaultEventRetention is how long thread events are kept for
	// resuming clients.
	DefaultEventRetention = 24 * time.Hour
	// DefaultWSMaxClockSkewSeconds is the default JWT clock skew tolerance.
	DefaultWSMaxClockSkewSeconds = 30
	// DefaultModelProvider is the id of the built-in OpenAI provider.
	DefaultModelProvider = "openai"
	// DefaultRequestMaxRetries is Codex's default request_max_retries.
	DefaultRequestMaxRetries = 4
	// DefaultStreamMaxRetries is Codex's default stream_max_retries.
	DefaultStreamMaxRetries = 5
	// DefaultStreamIdleTimeoutMS is Codex's default stream_idle_timeout_ms.
	DefaultStreamIdleTimeoutMS = 300_000
	// DefaultMCPStartupTimeoutSec is Codex's default MCP startup_timeout_sec.
	DefaultMCPStartupTimeoutSec = 10.0
	// DefaultMCPToolTimeoutSec is Codex's default MCP tool_timeout_sec.
	DefaultMCPToolTimeoutSec = 60.0
)

// Config is appserver's effective configuration. The toml tags are the keys
// of config.toml (a Codex config.toml is accepted as is); Load fills it from
// all layers and validates it.
type Config struct {
	// Listen is the listen address of the websocket and the HTTP API,
	// ws://IP:PORT, or wss://IP:PORT to serve TLS (wss:// and https://)
	// with TLSCertFile and TLSKeyFile (port 0 picks one).
	Listen string `toml:"listen"`
	// TLSCertFile is the absolute path of the PEM certificate chain served
	// on a wss:// listener; re-read on SIGHUP. Required with wss://.
	TLSCertFile string `toml:"tls_cert_file"`
	// TLSKeyFile is the absolute path of the PEM private key of
	// TLSCertFile; re-read with it. Required with wss://.
	TLSKeyFile string `toml:"tls_key_file"`
	// DatabaseURL is a postgres:// URL; empty selects the embedded store in
	// DataDir.
	DatabaseURL string `toml:"database_url"`
	// NodeID names this daemon among those sharing DatabaseURL (thread
	// leases); empty means the host name with a random suffix, new for
	// every process. Unused with the embedded store.
	NodeID string `toml:"node_id"`
	// LeaseTTL is how long a thread lease outlives its node's last
	// heartbeat: a dead daemon's turns are taken over within about 1.5×
	// it. Unused with the embedded store.
	LeaseTTL time.Duration `toml:"lease_ttl"`
	// DataDir holds the embedded store and other local state.
	DataDir string `toml:"data_dir"`
	// Migrate runs migrations at start-up when true; nil means the default
	// (see MigrateOnStart).
	Migrate *bool `toml:"migrate"`
	// LogFormat is "text" or "json".
	LogFormat LogFormat `toml:"log_format"`
	// LogLevel is "debug", "info", "warn" or "error".
	LogLevel LogLevel `toml:"log_level"`
	// AllowedOrigins lists the browser origins (scheme://host[:port]) allowed
	// to connect; requests with any other Origin header are refused.
	AllowedOrigins []string `toml:"allowed_origins"`
	// ShutdownGracePeriod is how long shutdown lets running turns finish
	// before interrupting them; written as a duration string such as "10s".
	ShutdownGracePeriod time.Duration `toml:"shutdown_grace_period"`
	// ModelContextWindow is the models' context window in tokens (Codex's
	// model_context_window); 0 is Codex's default for a model its catalog
	// does not know, 272 000. Clients are told 95% of it, the part Codex
	// lets a conversation use.
	ModelContextWindow int `toml:"model_context_window"`
	// ModelAutoCompactTokenLimit is the context size in tokens at which a
	// thread's context is compacted before the next model request (Codex's
	// model_auto_compact_token_limit); 0 is 90% of the context window.
	ModelAutoCompactTokenLimit int64 `toml:"model_auto_compact_token_limit"`
	// CompactPrompt replaces the instruction that asks the model for a
	// summary when a thread's context is compacted (Codex's
	// compact_prompt); empty keeps appserver's own.
	CompactPrompt string `toml:"compact_prompt"`
	// ExperimentalCompactPromptFile names a file whose text is the
	// compaction instruction when compact_prompt is not set (Codex's
	// experimental_compact_prompt_file); the file must exist and not be
	// blank. Load reads it into CompactPrompt.
	ExperimentalCompactPromptFile string `toml:"experimental_compact_prompt_file"`
	// WebSearch is Codex's web_search mode: "disabled", "cached" (the
	// provider's index) or "live"; when enabled the hosted web_search tool
	// is offered to Responses-API models.
	WebSearch string `toml:"web_search"`
	// Features are Codex's feature switches; appserver acts on the ones
	// named in Features and ignores the others.
	Features Features `toml:"features"`
	// Agents are the limits of the sub-agent tools (features.multi_agent).
	Agents Agents `toml:"agents"`
	// OTel configures the export of OpenTelemetry traces; off by default.
	OTel OTel `toml:"otel"`
	// SandboxBackend selects the OS sandbox: "auto" (bubblewrap when it
	// works, else Landlock), "bwrap" or "landlock".
	SandboxBackend string `toml:"sandbox_backend"`
	// DynamicToolReconnectTimeout is how long a dynamic tool call waits
	// while no subscribed connection can take it before failing.
	DynamicToolReconnectTimeout time.Duration `toml:"dynamic_tool_reconnect_timeout"`
	// GCHeapFloorMiB keeps the garbage collector's heap goal at least this
	// many MiB while the live heap is small (see internal/gctune); 0
	// leaves the collector at its defaults (GOGC).
	GCHeapFloorMiB int `toml:"gc_heap_floor_mib"`
	// ApprovalClientTimeout is how long an approval or user-input request
	// waits while no subscribed connection can take it before the call is
	// declined (the model is told why).
	ApprovalClientTimeout time.Duration `toml:"approval_client_timeout"`
	// EventRetention is how long each thread's event log keeps its events
	// for clients that resume (SSE Last-Event-ID); default
	// DefaultEventRetention.
	EventRetention time.Duration `toml:"event_retention"`

	// WSAuth selects websocket authentication (Codex's --ws-auth).
	WSAuth WSAuthMode `toml:"ws_auth"`
	// WSTokenFile is the absolute path of the capability-token file.
	WSTokenFile string `toml:"ws_token_file"`
	// WSTokenSHA256 is the hex SHA-256 of the capability token.
	WSTokenSHA256 string `toml:"ws_token_sha256"`
	// WSSharedSecretFile is the absolute path of the HS256 shared-secret file.
	WSSharedSecretFile string `toml:"ws_shared_secret_file"`
	// WSIssuer, when set, must equal the JWT iss claim.
	WSIssuer string `toml:"ws_issuer"`
	// WSAudience, when set, must be in the JWT aud claim.
	WSAudience string `toml:"ws_audience"`
	// WSMaxClockSkewSeconds widens the JWT exp/nbf checks.
	WSMaxClockSkewSeconds int `toml:"ws_max_clock_skew_seconds"`
	// WSMaxInboundInflightMiB bounds the inbound websocket frames read and
	// not yet done being handled, across all connections; frames beyond it
	// are refused (requests answered -32001).
	WSMaxInboundInflightMiB int `toml:"ws_max_inbound_inflight_mib"`
	// WSMaxOutboundQueuedMiB bounds the bytes waiting to be written to one
	// connection; a client that lets more wait is disconnected as a slow
	// consumer.
	WSMaxOutboundQueuedMiB int `toml:"ws_max_outbound_queued_mib"`

	// Model is the default model for new threads; always listed by Models.
	Model string `toml:"model"`
	// ModelProvider is the id in ModelProviders used by default.
	ModelProvider string `toml:"model_provider"`
	// ApprovalPolicy is the default approval policy for new threads.
	ApprovalPolicy ApprovalPolicy `toml:"approval_policy"`
	// SandboxMode is the default sandbox mode for new threads.
	SandboxMode SandboxMode `toml:"sandbox_mode"`
	// ModelProviders maps provider ids to their settings; it always holds an
	// "openai" entry: the built-in provider, with any fields the
	// configuration sets for it.
	ModelProviders map[string]ModelProvider `toml:"model_providers"`
	// MCPServers maps MCP server ids to how to reach them.
	MCPServers map[string]MCPServer `toml:"mcp_servers"`
	// Skills configures the skill catalogs ([skills]).
	Skills Skills `toml:"skills"`
	// ModelCatalog is the [models.<id>] table: the models model/list
	// reports besides Model (see Models).
	ModelCatalog map[string]ModelEntry `toml:"models"`
	// HTTPAPI configures the HTTP/JSON API served under /v1 ([http_api]).
	HTTPAPI HTTPAPI `toml:"http_api"`

	// origins records, by dotted key, the layer and source that last set a
	// key or created a table entry; filled by Load.
	origins map[string]origin
}

// ModelProvider is one [model_providers.<id>] table, with Codex's fields and
// meaning.
type ModelProvider struct {
	// Name is a friendly display name.
	Name string `toml:"name"`
	// BaseURL is the provider's OpenAI-compatible API base URL.
	BaseURL string `toml:"base_url"`
	// EnvKey is the environment variable holding the API key.
	EnvKey string `toml:"env_key"`
	// EnvKeyInstructions tells the user how to obtain a key.
	EnvKeyInstructions string `toml:"env_key_instructions"`
	// WireAPI is "responses" or "chat".
	WireAPI WireAPI `toml:"wire_api"`
	// QueryParams are appended to every request URL.
	QueryParams map[string]string `toml:"query_params"`
	// HTTPHeaders are sent with every request (header → value).
	HTTPHeaders map[string]string `toml:"http_headers"`
	// EnvHTTPHeaders are sent with every request (header → name of the
	// environment variable holding the value; unset or empty means omitted).
	EnvHTTPHeaders map[string]string `toml:"env_http_headers"`
	// RequestMaxRetries is how often a failed request is retried.
	RequestMaxRetries int `toml:"request_max_retries"`
	// StreamMaxRetries is how often a dropped stream is reconnected.
	StreamMaxRetries int `toml:"stream_max_retries"`
	// StreamIdleTimeoutMS is how long a stream may be silent before it is
	// treated as lost, in milliseconds.
	StreamIdleTimeoutMS int `toml:"stream_idle_timeout_ms"`
	// RequiresOpenAIAuth marks providers that need an OpenAI login or key.
	RequiresOpenAIAuth bool `toml:"requires_openai_auth"`
}

// Skills configures skill catalogs: local roots searched after the
// workspace's own .agents/skills and .codex/skills folders, and remote
// providers reached over MCP-style HTTP.
type Skills struct {
	// Roots are extra local skill directories (absolute, ~/…, or relative
	// to the turn's cwd).
	Roots []string `toml:"roots"`
	// Remote maps provider ids to remote skill catalogs.
	Remote map[string]SkillsRemote `toml:"remote"`
}

// SkillsRemote is one remote skill provider ([skills.remote.<id>]).
type SkillsRemote struct {
	// URL is the provider's MCP endpoint.
	URL string `toml:"url"`
	// BearerTokenEnv names the environment variable holding its token.
	BearerTokenEnv string `toml:"bearer_token_env"`
}

// MCPServer is one [mcp_servers.<id>] table, with Codex's fields: either a
// stdio server (Command, Args, Env, Cwd) or a streamable HTTP server (URL,
// BearerTokenEnvVar, HTTPHeaders).
type MCPServer struct {
	// Command starts a stdio server.
	Command string `toml:"command"`
	// Args are the stdio server's arguments.
	Args []string `toml:"args"`
	// Env is extra environment for the stdio server.
	Env map[string]string `toml:"env"`
	// Cwd is the stdio server's working directory.
	Cwd string `toml:"cwd"`
	// URL is the streamable HTTP server's endpoint.
	URL string `toml:"url"`
	// BearerTokenEnvVar names the environment variable holding the HTTP
	// server's bearer token.
	BearerTokenEnvVar string `toml:"bearer_token_env_var"`
	// HTTPHeaders are sent to the HTTP server.
	HTTPHeaders map[string]string `toml:"http_headers"`
	// EnvHTTPHeaders are sent to the HTTP server: header → the name of the
	// environment variable holding its value (unset variables send none).
	EnvHTTPHeaders map[string]string `toml:"env_http_headers"`
	// DefaultToolsApprovalMode is the approval mode of the server's tools
	// that Tools does not name: "auto" (the default: ask unless the tool
	// is annotated read-only), "approve" (no prompt), "prompt" (ask a
	// client before each call) or "writes" (the same as auto).
	DefaultToolsApprovalMode MCPApprovalMode `toml:"default_tools_approval_mode"`
	// Tools are per-tool settings ([mcp_servers.<id>.tools.<tool>]).
	Tools map[string]MCPTool `toml:"tools"`
	// StartupTimeoutSec bounds initialisation and tool listing, in seconds.
	StartupTimeoutSec float64 `toml:"startup_timeout_sec"`
	// ToolTimeoutSec bounds one tool call, in seconds.
	ToolTimeoutSec float64 `toml:"tool_timeout_sec"`
	// Enabled is false to keep the server configured but unused.
	Enabled bool `toml:"enabled"`
	// EnabledTools, when non-nil, is the allow-list of tools to expose.
	EnabledTools []string `toml:"enabled_tools"`
	// DisabledTools are removed after EnabledTools is applied.
	DisabledTools []string `toml:"disabled_tools"`
}

// MCPApprovalMode says whether an MCP tool call asks a client first.
type MCPApprovalMode string

// The MCP approval modes (Codex's names).
const (
	// MCPApprovalAuto asks unless the tool is annotated readOnlyHint (the
	// default, as in Codex 0.169).
	MCPApprovalAuto MCPApprovalMode = "auto"
	// MCPApprovalApprove never asks: every call is approved.
	MCPApprovalApprove MCPApprovalMode = "approve"
	// MCPApprovalPrompt asks the thread's clients before every call.
	MCPApprovalPrompt MCPApprovalMode = "prompt"
	// MCPApprovalWrites is auto under its older name.
	MCPApprovalWrites MCPApprovalMode = "writes"
)

// MCPTool is one [mcp_servers.<id>.tools.<tool>] table.
type MCPTool struct {
	// ApprovalMode overrides the server's default_tools_approval_mode for
	// this tool; "" keeps the default.
	ApprovalMode MCPApprovalMode `toml:"approval_mode"`
}

// HTTPAPI is the [http_api] table. The HTTP API takes the websocket's
// credentials (ws_auth), whose holder sees every thread; principals add
// tokens of their own that see only the threads they created.
type HTTPAPI struct {
	// Principals maps principal names ([A-Za-z0-9_-], at most 64
	// characters) to their tokens ([http_api.principals.<name>]).
	Principals map[string]HTTPPrincipal `toml:"principals"`
	// PrincipalMaxSandbox is the most permissive sandbox mode a principal's
	// thread may run under (principal_max_sandbox; default
	// "workspace-write"). The operator's token has no ceiling.
	PrincipalMaxSandbox SandboxMode `toml:"principal_max_sandbox"`
	// PrincipalMaxApproval is the least asking approval policy a principal's
	// thread may run under, in the order untrusted, on-request, on-failure,
	// never (principal_max_approval; default "never"). Unless it is set to
	// "never" explicitly, "never" together with danger-full-access is
	// refused: nobody would be asked before an unsandboxed command.
	PrincipalMaxApproval ApprovalPolicy `toml:"principal_max_approval"`
}

// HTTPPrincipal is one [http_api.principals.<name>] table.
type HTTPPrincipal struct {
	// TokenSHA256 is the hex SHA-256 digest of the principal's bearer
	// token (as ws_token_sha256 is of the websocket's).
	TokenSHA256 string `toml:"token_sha256"`
}

// ModelEntry is one [models.<id>] table describing a model for model/list.
type ModelEntry struct {
	// DisplayName is shown to users; empty means the id.
	DisplayName string `toml:"display_name"`
	// Description is a one-line description.
	Description string `toml:"description"`
	// Provider is the model provider id; empty means Config.ModelProvider.
	Provider string `toml:"provider"`
	// DefaultReasoningEffort is the effort used when a turn names none.
	DefaultReasoningEffort ReasoningEffort `toml:"default_reasoning_effort"`
	// Hidden keeps the model out of model/list unless hidden ones are asked
	// for.
	Hidden bool `toml:"hidden"`
	// ShellType selects the shell tool offered with this model, as Codex's
	// model catalog does: "shell_command" (the default), "default" (the
	// argv `shell` tool), "local" (the hosted local_shell), "unified_exec"
	// (exec_command/write_stdin only) or "disabled".
	ShellType string `toml:"shell_type"`
	// ApplyPatchToolType is "freeform" or "function"; empty picks freeform
	// for the Responses wire API and function for chat.
	ApplyPatchToolType string `toml:"apply_patch_tool_type"`
	// SupportsSearchTool is Codex's model catalog flag of the same name:
	// the MCP tools are left out of the model's requests and found
	// through tool_search (Responses wire API only). Default false.
	SupportsSearchTool bool `toml:"supports_search_tool"`
}

// Features are the Codex feature switches appserver implements.
type Features struct {
	// MultiAgent offers the multi_agent_v1 collaboration tools
	// (spawn_agent, send_input, wait_agent, close_agent, resume_agent) to
	// every thread; a thread's own features.multi_agent override wins.
	// Default false.
	MultiAgent bool `toml:"multi_agent"`
}

// Agents are the limits of the sub-agent tools.
type Agents struct {
	// MaxThreads is how many open sub-agents one thread may have; 0 is
	// the default, 6.
	MaxThreads int `toml:"max_threads"`
	// MaxDepth is how deep sub-agents nest; 0 is the default, 1: a
	// thread's children spawn no children of their own.
	MaxDepth int `toml:"max_depth"`
	// MaxTotal is how many open sub-agents the daemon holds across
	// threads (an appserver key); 0 is the default, 64.
	MaxTotal int `toml:"max_total"`
}

// OTelExporter is how traces leave the daemon.
type OTelExporter string

// The values of otel.exporter.
const (
	// OTelExporterNone exports nothing: no tracer provider, no spans.
	OTelExporterNone OTelExporter = "none"
	// OTelExporterHTTP exports over OTLP/HTTP (protobuf).
	OTelExporterHTTP OTelExporter = "otlp-http"
	// OTelExporterGRPC exports over OTLP/gRPC.
	OTelExporterGRPC OTelExporter = "otlp-grpc"
)

// DefaultOTelServiceName is the service.name of the exported traces.
const DefaultOTelServiceName = "appserver"

// OTel is the [otel] table: where the turns' traces (turn, model request
// and tool call spans) are exported.
type OTel struct {
	// Exporter is "none" (the default), "otlp-http" or "otlp-grpc".
	Exporter OTelExporter `toml:"exporter"`
	// Endpoint is the collector's URL (http:// or https://, with the
	// path for otlp-http, e.g. http://localhost:4318/v1/traces); empty
	// leaves it to the exporter's default and the OTEL_EXPORTER_OTLP_*
	// environment variables.
	Endpoint string `toml:"endpoint"`
	// Headers are sent with every export, e.g. a collector's API key.
	Headers map[string]string `toml:"headers"`
	// ServiceName is the traces' service.name resource attribute.
	ServiceName string `toml:"service_name"`
}

// Enabled reports whether traces are exported.
func (o OTel) Enabled() bool { return o.Exporter != OTelExporterNone && o.Exporter != "" }

// Default returns the built-in configuration, resolving data_dir from the
// process environment.
func Default() Config {
	return defaults(os.Getenv, runtime.GOOS)
}

// defaults builds the default configuration; getenv and goos are parameters
// so Load can resolve data_dir from Sources.Env and tests can vary the OS.
func defaults(getenv func(string) string, goos string) Config {
	return Config{
		Listen:                      DefaultListen,
		DataDir:                     defaultDataDir(getenv, goos),
		LogFormat:                   LogFormatText,
		LogLevel:                    LogLevelInfo,
		AllowedOrigins:              []string{},
		ShutdownGracePeriod:         DefaultShutdownGracePeriod,
		LeaseTTL:                    DefaultLeaseTTL,
		DynamicToolReconnectTimeout: DefaultDynamicToolReconnectTimeout,
		GCHeapFloorMiB:              DefaultGCHeapFloorMiB,
		SandboxBackend:              "auto",
		WebSearch:                   "disabled",
		OTel:                        OTel{Exporter: OTelExporterNone, ServiceName: DefaultOTelServiceName},
		ApprovalClientTimeout:       DefaultApprovalClientTimeout,
		EventRetention:              DefaultEventRetention,
		WSMaxClockSkewSeconds:       DefaultWSMaxClockSkewSeconds,
		WSMaxInboundInflightMiB:     DefaultWSMaxInboundInflightMiB,
		WSMaxOutboundQueuedMiB:      DefaultWSMaxOutboundQueuedMiB,
		ModelProvider:               DefaultModelProvider,
		ApprovalPolicy:              ApprovalOnRequest,
		SandboxMode:                 SandboxReadOnly,
		ModelProviders:              map[string]ModelProvider{DefaultModelProvider: builtinOpenAI()},
		MCPServers:                  map[string]MCPServer{},
		ModelCatalog:                map[string]ModelEntry{},
		HTTPAPI:                     HTTPAPI{PrincipalMaxSandbox: SandboxWorkspaceWrite},
	}
}

// defaultDataDir is $XDG_DATA_HOME/appserver when XDG_DATA_HOME is an
// absolute path, else the platform's per-user data directory.
func defaultDataDir(getenv func(string) string, goos string) string {
	if xdg := getenv("XDG_DATA_HOME"); filepath.IsAbs(xdg) {
		return filepath.Join(xdg, "appserver")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if home == "" {
		return ""
	}
	if goos == "darwin" {
		return filepath.Join(home, "Library", "Application Support", "appserver")
	}
	return filepath.Join(home, ".local", "share", "appserver")
}

// builtinOpenAI returns a fresh copy of the built-in "openai" provider.
func builtinOpenAI() ModelProvider {
	p := newProvider()
	p.Name = "OpenAI"
	p.BaseURL = "https://api.openai.com/v1"
	p.EnvKey = "OPENAI_API_KEY"
	p.WireAPI = WireAPIResponses
	p.RequiresOpenAIAuth = true
	return p
}

// newProvider returns the starting point of a provider table that the
// configuration creates: Codex's defaults for the fields it leaves out.
func newProvider() ModelProvider {
	return ModelProvider{
		// Codex once defaulted custom providers to "chat"; current Codex
		// only speaks (and defaults to) "responses", so that is our default.
		WireAPI:             WireAPIResponses,
		RequestMaxRetries:   DefaultRequestMaxRetries,
		StreamMaxRetries:    DefaultStreamMaxRetries,
		StreamIdleTimeoutMS: DefaultStreamIdleTimeoutMS,
	}
}

// newMCPServer returns the starting point of an MCP server table.
func newMCPServer() MCPServer {
	return MCPServer{
		Enabled:           true,
		StartupTimeoutSec: DefaultMCPStartupTimeoutSec,
		ToolTimeoutSec:    DefaultMCPToolTimeoutSec,
	}
}

// MigrateOnStart reports whether migrations run at start-up: the migrate
// setting when given, else on for the embedded store and off for Postgres.
func (c *Config) MigrateOnStart() bool {
	if c.Migrate != nil {
		return *c.Migrate
	}
	return c.DatabaseURL == ""
}

// ListenAddr returns the parsed listen address (IP and port, ready for
// net.Listen("tcp", addr.String())), or the zero AddrPort if Listen is
// invalid; Load has already rejected invalid addresses.
func (c *Config) ListenAddr() netip.AddrPort {
	ap, err := ParseListen(c.Listen)
	if err != nil {
		return netip.AddrPort{}
	}
	return ap
}

// ListenTLS reports whether the listen address is wss://: the listener
// serves TLS with TLSCertFile and TLSKeyFile.
func (c *Config) ListenTLS() bool {
	return strings.HasPrefix(c.Listen, "wss://")
}

// ListenHost returns the IP of the listen address, without brackets.
func (c *Config) ListenHost() string {
	ap := c.ListenAddr()
	if !ap.IsValid() {
		return ""
	}
	return ap.Addr().String()
}

// ListenPort returns the port of the listen address (0 asks the OS for one).
func (c *Config) ListenPort() int {
	return int(c.ListenAddr().Port())
}
