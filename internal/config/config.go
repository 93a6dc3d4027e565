package config

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
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
	// LayerPrincipal is a principal's own user config in data_dir, which
	// that principal's clients write; it comes after the daemon-wide one
	// and applies to that principal only.
	LayerPrincipal Layer = "principal"
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
	// ReasoningXHigh is extra high effort.
	ReasoningXHigh ReasoningEffort = "xhigh"
	// ReasoningMax is the deepest reasoning some models offer.
	ReasoningMax ReasoningEffort = "max"
	// ReasoningUltra is the deepest reasoning with tasks delegated, which
	// some models offer.
	ReasoningUltra ReasoningEffort = "ultra"
)

// Defaults that callers may want to refer to.
const (
	// DefaultListen is the default listen address.
	DefaultListen = "ws://127.0.0.1:7878"
	// DefaultControlSocket is where a bare unix:// listen URL puts the
	// control socket, relative to data_dir (the reference's place in its
	// home directory).
	DefaultControlSocket = "app-server-control/app-server-control.sock"
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
	// DefaultMaxRunningTurns is the default max_running_turns.
	DefaultMaxRunningTurns = 1000
	// DefaultMaxPendingRequests is the default max_pending_requests.
	DefaultMaxPendingRequests = 4096
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
	// DefaultSandboxPoolSize is how many pooled bubblewrap sandboxes live
	// at once (sandbox.DefaultPoolSize).
	DefaultSandboxPoolSize = 16
	// DefaultSandboxPoolIdleTimeout is how long an unused pooled sandbox
	// lives (sandbox.DefaultPoolIdleTimeout).
	DefaultSandboxPoolIdleTimeout = time.Minute
	// DefaultEventItemMaxKiB bounds the delta notifications one item keeps
	// in the event log: the cap of a command's aggregated output (1 MiB).
	DefaultEventItemMaxKiB = 1024
	// DefaultEventThreadMaxMiB bounds what one thread's event log keeps.
	DefaultEventThreadMaxMiB = 64
	// DefaultEventPruneInterval is how often the event log is pruned.
	DefaultEventPruneInterval = time.Minute
	// DefaultWSPingInterval is how often an idle websocket is pinged
	// (ws_ping_interval).
	DefaultWSPingInterval = 30 * time.Second
	// DefaultWSPongTimeout is how long a ping waits for its pong before
	// the connection is closed (ws_pong_timeout).
	DefaultWSPongTimeout = 15 * time.Second
	// DefaultAuthTicketTTL is how long a browser ticket stays valid
	// (auth_ticket_ttl).
	DefaultAuthTicketTTL = 30 * time.Second
	// DefaultAuthSessionTTL is how long a session cookie stays valid
	// (auth_session_ttl).
	DefaultAuthSessionTTL = 12 * time.Hour
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
	// Listen is the listen URL (ParseListen): ws://IP:PORT for the
	// websocket and the HTTP API, or wss://IP:PORT to serve them with TLS
	// (wss:// and https://) with TLSCertFile and TLSKeyFile (port 0 picks
	// one); unix:// or unix://PATH for the JSON-RPC websocket on a control
	// socket only the daemon's user can reach; stdio:// for one JSON-RPC
	// session on stdin and stdout.
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
	// WebConsole serves the web console at "/" of the network listener
	// (default true).
	WebConsole bool `toml:"web_console"`
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
	// named in Features (FeatureFlags) and ignores the others.
	Features Features `toml:"features"`
	// Agents are the limits of the sub-agent tools (features.multi_agent).
	Agents Agents `toml:"agents"`
	// OTel configures the export of OpenTelemetry traces; off by default.
	OTel OTel `toml:"otel"`
	// Audit configures the audit log.
	Audit Audit `toml:"audit"`
	// SandboxBackend selects the OS sandbox: "auto" (bubblewrap when it
	// works, else Landlock), "bwrap" or "landlock".
	SandboxBackend string `toml:"sandbox_backend"`
	// SandboxPoolSize bounds the pooled bubblewrap sandboxes, each kept
	// for one thread and one file-system view to run its commands one at
	// a time; 0 turns pooling off (a sandbox per command).
	SandboxPoolSize int `toml:"sandbox_pool_size"`
	// SandboxPoolIdleTimeout closes a pooled sandbox left unused this long.
	SandboxPoolIdleTimeout time.Duration `toml:"sandbox_pool_idle_timeout"`
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
	// EventLog keeps the durable event log of threads (default true).
	// Off, notifications are numbered in memory from 1 in each process and
	// stored nowhere: a client resumes only from this daemon's buffer (SSE),
	// thread/resume afterSeq replays nothing, and webhooks are unavailable.
	// It cannot be off with database_url (other daemons read the log) or
	// with [[webhooks]] entries.
	EventLog bool `toml:"event_log"`
	// EventRetention is how long each thread's event log keeps its events
	// for clients that resume (SSE Last-Event-ID); default
	// DefaultEventRetention.
	EventRetention time.Duration `toml:"event_retention"`
	// EventItemMaxKiB bounds the bytes of the delta notifications one item
	// keeps in the event log; the deltas past it still reach this daemon's
	// clients live; default DefaultEventItemMaxKiB.
	EventItemMaxKiB int `toml:"event_item_max_kib"`
	// EventThreadMaxMiB bounds the bytes one thread's event log keeps, the
	// oldest events pruned first; default DefaultEventThreadMaxMiB.
	EventThreadMaxMiB int `toml:"event_thread_max_mib"`
	// EventPruneInterval is how often events past the retention or their
	// thread's bound are deleted (and, on the embedded store, their space
	// given back); default DefaultEventPruneInterval.
	EventPruneInterval time.Duration `toml:"event_prune_interval"`

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
	// MaxRunningTurns bounds the turns running at once on this daemon;
	// a turn past it is refused (-32001 over JSON-RPC, 503 over HTTP). 0
	// means no bound.
	MaxRunningTurns int `toml:"max_running_turns"`
	// MaxPendingRequests bounds the JSON-RPC requests queued or being
	// handled across all connections; a request past it is answered
	// -32001.
	MaxPendingRequests int `toml:"max_pending_requests"`
	// WSMaxOutboundQueuedMiB bounds the bytes waiting to be written to one
	// connection; a client that lets more wait is disconnected as a slow
	// consumer.
	WSMaxOutboundQueuedMiB int `toml:"ws_max_outbound_queued_mib"`
	// WSPingInterval is how often the daemon pings each websocket
	// connection (network listener and control socket); 0 sends no pings.
	WSPingInterval time.Duration `toml:"ws_ping_interval"`
	// WSPongTimeout is how long a ping waits for the peer's pong before
	// the connection is closed.
	WSPongTimeout time.Duration `toml:"ws_pong_timeout"`
	// AuthTicketTTL is how long a ticket of POST /v1/auth/ticket stays
	// valid (it is used once).
	AuthTicketTTL time.Duration `toml:"auth_ticket_ttl"`
	// AuthSessionTTL is how long a session cookie of POST
	// /v1/auth/session stays valid.
	AuthSessionTTL time.Duration `toml:"auth_session_ttl"`

	// Model is the default model for new threads; always listed by Models.
	Model string `toml:"model"`
	// ModelProvider is the id in ModelProviders used by default.
	ModelProvider string `toml:"model_provider"`
	// ApprovalPolicy is the default approval policy for new threads.
	ApprovalPolicy ApprovalPolicy `toml:"approval_policy"`
	// SandboxMode is the default sandbox mode for new threads.
	SandboxMode SandboxMode `toml:"sandbox_mode"`
	// ModelReasoningEffort is the reasoning effort of new threads' turns;
	// "" sends none (the model's own default).
	ModelReasoningEffort ReasoningEffort `toml:"model_reasoning_effort"`
	// ModelReasoningSummary is the reasoning summary style of new
	// threads' turns ("auto", "concise", "detailed" or "none"); "" sends
	// none.
	ModelReasoningSummary string `toml:"model_reasoning_summary"`
	// ModelVerbosity is the output verbosity of new threads' turns
	// ("low", "medium" or "high"), sent as the Responses API's
	// text.verbosity to models whose catalog entry has support_verbosity;
	// "" sends the entry's default_verbosity.
	ModelVerbosity string `toml:"model_verbosity"`
	// ServiceTier is the service tier of new threads (as thread/start's
	// serviceTier; "fast" is kept as "priority"), sent as service_tier to
	// the models that list it in their service_tiers; "" chooses none.
	ServiceTier string `toml:"service_tier"`
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
	// Webhooks are the [[webhooks]] entries: receivers the daemon posts
	// signed notices of thread events to.
	Webhooks []Webhook `toml:"webhooks"`
	// Budgets are the token and cost limits of turns, threads and
	// principals, and the models' prices ([budgets]).
	Budgets Budgets `toml:"budgets"`

	// origins records, by dotted key, the layer and source that last set a
	// key or created a table entry; filled by Load.
	origins map[string]origin
	// principal is the principal whose user config Load applied
	// (Sources.Principal); "" for the daemon-wide configuration.
	principal string
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
	// Config are the skills turned off ([[skills.config]]), as Codex
	// keeps them: skills/config/write writes them to the user config.
	Config []SkillSwitch `toml:"config"`
}

// SkillSwitch is one [[skills.config]] entry: the skills of Name, or the
// one whose SKILL.md is at Path (exactly one of the two), on or off.
type SkillSwitch struct {
	Path    string `toml:"path"`
	Name    string `toml:"name"`
	Enabled bool   `toml:"enabled"`
}

// MaxSkillSwitches bounds the [[skills.config]] entries of a user config.
const MaxSkillSwitches = 1024

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

// DefaultWebhookRetryFor is how long a webhook's notice is retried after
// its first failed attempt (retry_for).
const DefaultWebhookRetryFor = 24 * time.Hour

// The webhook event types an entry's events may name.
const (
	WebhookTurnCompleted     = "turn.completed"
	WebhookTurnFailed        = "turn.failed"
	WebhookTurnInterrupted   = "turn.interrupted"
	WebhookApprovalRequested = "approval.requested"
	WebhookThreadArchived    = "thread.archived"
	WebhookThreadUnarchived  = "thread.unarchived"
)

// WebhookEventTypes lists the webhook event types, in the docs' order.
var WebhookEventTypes = []string{
	WebhookTurnCompleted, WebhookTurnFailed, WebhookTurnInterrupted,
	WebhookApprovalRequested, WebhookThreadArchived, WebhookThreadUnarchived,
}

// Webhook is one [[webhooks]] entry: where to post the notices of which
// events, signed with which secret (the Standard Webhooks scheme).
type Webhook struct {
	// URL is the receiver, an http:// or https:// URL.
	URL string `toml:"url"`
	// Secret is the signing secret, "whsec_" and base64; Load fills it
	// from SecretFile when that is set instead.
	Secret string `toml:"secret"`
	// SecretFile is a file holding the secret, for keeping it out of the
	// configuration.
	SecretFile string `toml:"secret_file"`
	// Events are the event types sent (WebhookEventTypes); empty sends
	// them all.
	Events []string `toml:"events"`
	// Thread, when set, limits the notices to that thread's events.
	Thread string `toml:"thread"`
	// AllowPrivate lets the receiver resolve to loopback, private,
	// link-local or unspecified addresses, which are refused otherwise.
	AllowPrivate bool `toml:"allow_private"`
	// RetryFor is how long a notice is retried after its first failed
	// attempt (default DefaultWebhookRetryFor); then it is dropped.
	RetryFor time.Duration `toml:"retry_for"`
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
	// PrincipalWorkspaces is the directory under which each principal
	// without workspace_roots gets a directory of its own,
	// <principal_workspaces>/<name>, created 0700 on first use
	// (principal_workspaces; default: "<data_dir>-workspaces", beside the
	// data directory, which sandboxed commands never see).
	PrincipalWorkspaces string `toml:"principal_workspaces"`
}

// HTTPPrincipal is one [http_api.principals.<name>] table.
type HTTPPrincipal struct {
	// TokenSHA256 is the hex SHA-256 digest of the principal's bearer
	// token (as ws_token_sha256 is of the websocket's).
	TokenSHA256 string `toml:"token_sha256"`
	// WorkspaceRoots are the absolute directories the principal's threads
	// may work in and write (workspace_roots); the first is the cwd of a
	// thread started without one. Default: the principal's own directory
	// under principal_workspaces.
	WorkspaceRoots []string `toml:"workspace_roots"`
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
	// SupportedReasoningEfforts are the efforts model/list offers for the
	// model, in order; empty means low, medium and high.
	SupportedReasoningEfforts []string `toml:"supported_reasoning_efforts"`
	// InputModalities are the kinds of input the model takes ("text",
	// "image"); empty means both.
	InputModalities []string `toml:"input_modalities"`
	// MultiAgentVersion is the sub-agent protocol model/list names for the
	// model ("disabled", "v1" or "v2"); "" names none.
	MultiAgentVersion string `toml:"multi_agent_version"`
	// Priority orders model/list after the default model: lower first,
	// then by id. Default 0.
	Priority int `toml:"priority"`
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
	// SupportVerbosity is Codex's model catalog flag of the same name:
	// the model's requests carry text.verbosity (model_verbosity, else
	// DefaultVerbosity). Default false: none is sent.
	SupportVerbosity bool `toml:"support_verbosity"`
	// DefaultVerbosity is the verbosity sent when model_verbosity is
	// unset ("low", "medium" or "high"; "" sends none).
	DefaultVerbosity string `toml:"default_verbosity"`
	// ServiceTiers are the service tiers a thread may choose for this
	// model (model/list serviceTiers); a thread's tier is sent as the
	// Responses API's service_tier only when listed here.
	ServiceTiers []ServiceTier `toml:"service_tiers"`
}

// ServiceTier is one [[models.<id>.service_tiers]] entry.
type ServiceTier struct {
	// ID is the tier sent to the provider as service_tier, e.g.
	// "priority" (the reference's "fast" is kept as "priority").
	ID string `toml:"id"`
	// Name is shown to users, e.g. "fast".
	Name string `toml:"name"`
	// Description is a one-line description.
	Description string `toml:"description"`
}

// Features are the Codex feature switches appserver implements
// (FeatureFlags lists them with their stages). Each is the default of
// every thread; a thread's own config override of the same key wins.
// Clients may write them to their user config (experimentalFeature/*, the
// TUI's /experimental), which applies to the turns started afterwards.
type Features struct {
	// ShellTool offers the tools that reach the workspace (the shell
	// tools, exec_command, apply_patch, read_file, list_dir, grep_files).
	// Default true.
	ShellTool bool `toml:"shell_tool"`
	// ViewImage offers view_image. Default true.
	ViewImage bool `toml:"view_image"`
	// UnifiedExec offers exec_command and write_stdin. Default true.
	UnifiedExec bool `toml:"unified_exec"`
	// MultiAgent offers the multi_agent_v1 collaboration tools
	// (spawn_agent, send_input, wait_agent, close_agent, resume_agent).
	// Default false.
	MultiAgent bool `toml:"multi_agent"`
	// MultiAgentV2 offers the v2 collaboration tools (collaboration
	// namespace: spawn_agent, wait_agent, list_agents, send_message,
	// followup_task, interrupt_agent) instead of
	// multi_agent_v1. Default false.
	MultiAgentV2 bool `toml:"multi_agent_v2"`
	// Goals offers the goal tools (get_goal, create_goal, update_goal).
	// Default true.
	Goals bool `toml:"goals"`
}

// FeatureFlag is one feature switch appserver implements: its key under
// [features], its lifecycle stage (the reference's for the same key:
// "beta", "underDevelopment", "stable", "deprecated" or "removed") and its
// default.
type FeatureFlag struct {
	Name    string
	Stage   string
	Default bool
}

// FeatureFlags are the feature switches appserver implements, in the
// order the reference lists them; the others of Codex's [features] table
// are accepted and ignored.
var FeatureFlags = []FeatureFlag{
	{"shell_tool", "stable", true},
	{"view_image", "stable", true},
	{"unified_exec", "stable", true},
	{"multi_agent", "deprecated", false},
	{"multi_agent_v2", "stable", false},
	{"goals", "stable", true},
}

// Map returns the switches by key, one entry per FeatureFlags entry.
func (f Features) Map() map[string]bool {
	return map[string]bool{
		"shell_tool":     f.ShellTool,
		"view_image":     f.ViewImage,
		"unified_exec":   f.UnifiedExec,
		"multi_agent":    f.MultiAgent,
		"multi_agent_v2": f.MultiAgentV2,
		"goals":          f.Goals,
	}
}

// Agents are the limits of the sub-agent tools.
type Agents struct {
	// MaxThreads is how many open sub-agents one thread may have; 0 is
	// the default, 6.
	MaxThreads int `toml:"max_threads"`
	// MaxDepth is how deep sub-agents nest; 0 is the default, 1: a
	// thread's children spawn no children of their own.
	MaxDepth int `toml:"max_depth"`
	// MaxTotal is how many sub-agents may run at once across the daemon
	// (an appserver key); 0 is the default, 64. A sub-agent holds its
	// slot while it has a turn running.
	MaxTotal int `toml:"max_total"`
	// MaxPerPrincipal is how many sub-agents the threads of one principal
	// may run at once (an appserver key); 0 is the default, 16. The
	// operator's threads are bounded by MaxTotal only.
	MaxPerPrincipal int `toml:"max_per_principal"`
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

// DefaultAuditRetention is how long the audit log keeps its entries.
const DefaultAuditRetention = 90 * 24 * time.Hour

// Audit is the [audit] table: the audit log's retention.
type Audit struct {
	// Retention is how long entries are kept ("90d" by default); older
	// ones are pruned every PruneInterval.
	Retention time.Duration `toml:"retention"`
	// PruneInterval is how often entries past Retention are deleted
	// ("1h" by default).
	PruneInterval time.Duration `toml:"prune_interval"`
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
		WebConsole:                  true,
		ShutdownGracePeriod:         DefaultShutdownGracePeriod,
		LeaseTTL:                    DefaultLeaseTTL,
		DynamicToolReconnectTimeout: DefaultDynamicToolReconnectTimeout,
		GCHeapFloorMiB:              DefaultGCHeapFloorMiB,
		SandboxBackend:              "auto",
		SandboxPoolSize:             DefaultSandboxPoolSize,
		SandboxPoolIdleTimeout:      DefaultSandboxPoolIdleTimeout,
		WebSearch:                   "disabled",
		OTel:                        OTel{Exporter: OTelExporterNone, ServiceName: DefaultOTelServiceName},
		ApprovalClientTimeout:       DefaultApprovalClientTimeout,
		EventLog:                    true,
		EventRetention:              DefaultEventRetention,
		Audit:                       Audit{Retention: DefaultAuditRetention, PruneInterval: time.Hour},
		EventItemMaxKiB:             DefaultEventItemMaxKiB,
		EventThreadMaxMiB:           DefaultEventThreadMaxMiB,
		EventPruneInterval:          DefaultEventPruneInterval,
		WSMaxClockSkewSeconds:       DefaultWSMaxClockSkewSeconds,
		WSMaxInboundInflightMiB:     DefaultWSMaxInboundInflightMiB,
		MaxRunningTurns:             DefaultMaxRunningTurns,
		MaxPendingRequests:          DefaultMaxPendingRequests,
		WSMaxOutboundQueuedMiB:      DefaultWSMaxOutboundQueuedMiB,
		WSPingInterval:              DefaultWSPingInterval,
		WSPongTimeout:               DefaultWSPongTimeout,
		AuthTicketTTL:               DefaultAuthTicketTTL,
		AuthSessionTTL:              DefaultAuthSessionTTL,
		ModelProvider:               DefaultModelProvider,
		ApprovalPolicy:              ApprovalOnRequest,
		SandboxMode:                 SandboxReadOnly,
		ModelProviders:              map[string]ModelProvider{DefaultModelProvider: builtinOpenAI()},
		MCPServers:                  map[string]MCPServer{},
		ModelCatalog:                map[string]ModelEntry{},
		HTTPAPI:                     HTTPAPI{PrincipalMaxSandbox: SandboxWorkspaceWrite},
		Features:                    defaultFeatures(),
	}
}

// defaultFeatures are the FeatureFlags defaults.
func defaultFeatures() Features {
	return Features{ShellTool: true, ViewImage: true, UnifiedExec: true, Goals: true}
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

// ListenURL returns the parsed listen URL, or the zero ListenURL if
// Listen is invalid; Load has already rejected invalid ones.
func (c *Config) ListenURL() ListenURL {
	l, _ := ParseListen(c.Listen)
	return l
}

// ListenAddr returns the IP and port of a ws:// or wss:// listen URL,
// ready for net.Listen("tcp", addr.String()), and the zero AddrPort for
// any other.
func (c *Config) ListenAddr() netip.AddrPort { return c.ListenURL().Addr }

// ListenTLS reports whether the listen address is wss://: the listener
// serves TLS with TLSCertFile and TLSKeyFile.
func (c *Config) ListenTLS() bool { return c.ListenURL().Scheme == ListenWSS }

// ListenHost returns the IP of the listen address, without brackets.
func (c *Config) ListenHost() string {
	ap := c.ListenAddr()
	if !ap.IsValid() {
		return ""
	}
	return ap.Addr().String()
}

// ControlSocket returns the absolute path of the control socket of a
// unix:// listen URL (DefaultControlSocket in DataDir for a bare
// unix://), and "" for any other.
func (c *Config) ControlSocket() string {
	l := c.ListenURL()
	if l.Scheme != ListenUnix {
		return ""
	}
	path := l.Path
	if path == "" {
		path = filepath.Join(c.DataDir, DefaultControlSocket)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return path
}

// ListenPort returns the port of the listen address (0 asks the OS for one).
func (c *Config) ListenPort() int {
	return int(c.ListenAddr().Port())
}

// Budgets is the [budgets] table: token and cost limits of each turn, each
// thread and each principal per period, and the prices that give a model
// response its cost. A limit of 0 is none.
type Budgets struct {
	// Period is the principals' budget period: "day" (the default, from
	// midnight UTC), "month" (from the first, UTC) or a duration such as
	// "6h" (periods aligned on the Unix epoch).
	Period string `toml:"period"`
	// OnExceeded is what a turn does at a limit: "fail" (the default) ends
	// it failed; "ask" asks the thread's client whether to go on.
	OnExceeded string `toml:"on_exceeded"`
	// Turn bounds each turn.
	Turn BudgetLimits `toml:"turn"`
	// Thread bounds each thread over its life.
	Thread BudgetLimits `toml:"thread"`
	// Principal bounds each principal (not the operator) per period.
	Principal BudgetLimits `toml:"principal"`
	// Principals replace Principal for the principals they name.
	Principals map[string]BudgetLimits `toml:"principals"`
	// Prices are by model id; a model without one costs nothing.
	Prices map[string]ModelPrice `toml:"prices"`
}

// BudgetLimits are the limits of one scope; 0 is none.
type BudgetLimits struct {
	// MaxTokens bounds the models' reported total tokens.
	MaxTokens int `toml:"max_tokens"`
	// MaxCost bounds the cost, in the prices' currency.
	MaxCost float64 `toml:"max_cost"`
}

// ModelPrice is a model's price per million tokens.
type ModelPrice struct {
	// Input is the price of uncached input tokens.
	Input float64 `toml:"input"`
	// CachedInput is the price of cached input tokens; unset means Input.
	CachedInput *float64 `toml:"cached_input"`
	// Output is the price of output tokens (reasoning included).
	Output float64 `toml:"output"`
}

// The values of budgets.on_exceeded.
const (
	BudgetFail = "fail"
	BudgetAsk  = "ask"
)

// PeriodSpec reads Period: month true for calendar months, else every is
// the period's length (a day for ""); an error names what is wrong.
func (b Budgets) PeriodSpec() (month bool, every time.Duration, err error) {
	switch b.Period {
	case "", "day":
		return false, 24 * time.Hour, nil
	case "month":
		return true, 0, nil
	}
	d, err := time.ParseDuration(b.Period)
	if err != nil {
		return false, 0, fmt.Errorf("expected \"day\", \"month\" or a duration such as \"6h\", got %q", b.Period)
	}
	if d < time.Minute {
		return false, 0, fmt.Errorf("a period must be at least a minute, got %s", d)
	}
	return false, d, nil
}
