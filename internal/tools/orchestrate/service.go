package orchestrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/mcp"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/registry/planning"
	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/skills"
	"github.com/appserver/appserver/internal/tools/agents"
	"github.com/appserver/appserver/internal/tools/applypatch"
	"github.com/appserver/appserver/internal/tools/execsession"
	"github.com/appserver/appserver/internal/tools/files"
	"github.com/appserver/appserver/internal/tools/goals"
	"github.com/appserver/appserver/internal/tools/shell"
	"github.com/appserver/appserver/internal/turns"
	"github.com/appserver/appserver/internal/turns/subagents"
)

// builtinToolNames are the names the built-in tools take (offered or
// registered as aliases), plus update_plan, the goal tools and the skills
// namespace; a client's dynamic tools may not use them.
var builtinToolNames = []string{
	planning.Name, "skills", agents.Namespace, goals.GetName, goals.CreateName, goals.UpdateName,
	shell.ShellName, shell.ShellCommandName, shell.ContainerExecName, shell.LocalShellName,
	applypatch.Name, execsession.ExecCommandName, execsession.WriteStdinName,
	files.ReadFileName, files.ListDirName, files.GrepFilesName, files.ViewImageName, files.RequestUserInputName,
}

// Config configures a Service. Every field is optional.
type Config struct {
	// RulesDir holds the exec-policy *.rules files loaded by New; "" loads
	// none.
	RulesDir string
	// RulesFile is where accepted exec-policy amendments are appended so
	// that they survive a restart; "" keeps them in memory only.
	RulesFile string
	// SandboxBackend selects the sandbox backend (sandbox.ParseBackend);
	// "" is auto.
	SandboxBackend string
	// SandboxPool bounds the pooled sandboxes (sandbox.PoolOptions; the
	// zero value is their defaults). Commands of the shell tools and exec
	// sessions use the thread as their pool key.
	SandboxPool sandbox.PoolOptions
	// Guard holds the daemon's own files and directories (data dir,
	// config, token, secret and key files): sandboxed commands neither
	// read nor write them (the sandbox hides Guard.Masked()), and the
	// tools the daemon runs itself (read_file, list_dir, grep_files,
	// view_image, apply_patch) go through it. nil masks nothing.
	Guard *fsguard.Guard
	// SnapshotDir holds the login-shell snapshots (shell.Snapshots): a
	// directory only the daemon writes, best inside a masked one (the data
	// dir); sandboxed commands are shown it read-only. "" uses a new
	// temporary directory, removed by Close.
	SnapshotDir string
	// NetworkRefused, when not "", refuses sandboxed commands with network
	// access, saying this reason (sandbox.Options.NetworkRefused).
	NetworkRefused string
	// WebSearch is "disabled" (or ""), "cached" or "live": the hosted
	// web_search tool offered to Responses models.
	WebSearch string
	// Providers are the configured model providers: a chat provider gets
	// apply_patch as a JSON function, and every provider's env_key is kept
	// out of the commands' environment.
	Providers map[string]config.ModelProvider
	// Models are the per-model tool choices (shell_type,
	// apply_patch_tool_type); a model not listed gets shell_command.
	Models map[string]config.ModelEntry
	// MultiAgent holds the limits of the multi_agent_v1 tools, offered to
	// threads whose config sets features.multi_agent.
	MultiAgent agents.Config
	// MCP serves the tools of the configured MCP servers; nil offers none.
	MCP *mcp.Manager
	// Audit records every command call with its decision path; nil
	// records nothing.
	Audit *audit.Log
	// Logger receives warnings (unknown thread policies, amendments that
	// could not be applied); nil discards them.
	Logger *slog.Logger
	// Now is the clock of item timestamps and tool wall times; nil is
	// time.Now.
	Now func() time.Time
}

// Service builds the tools of each turn and holds what they share across
// turns: the command environment, the sandbox, the exec-policy rules, the
// exec sessions of every thread and the commandExecution items of those
// sessions. It is safe for concurrent use.
type Service struct {
	cfg     Config
	log     *slog.Logger
	broker  *dynamic.Broker
	skills  *skills.Catalog
	env     shell.EnvPolicy
	sandbox *sandbox.Sandbox
	// rules are the exec-policy rules; accepted amendments are added.
	rules *policy.RuleSet
	execs *execsession.Supervisor
	// snapshots are the login-shell snapshots, per thread originator
	// and kind of command; nil when none could be set up. tmpDir is a
	// temporary SnapshotDir, removed by Close.
	snapshots *shell.Snapshots
	tmpDir    string
	// userShell is the daemon user's login shell, read once here: the
	// snapshots are taken with it, and reading /etc/passwd for every
	// turn's tools was about a third of building them (13 of 39 µs in
	// BenchmarkBuildTools). A changed login shell (chsh) takes effect
	// when the daemon restarts.
	userShell shell.UserShell
	// dynTools are the dynamic tool sets of recent turns, restored, a
	// set per thread.
	dynTools *restoredTools
	// agents counts the open sub-agents of every thread.
	agents *agents.Service

	closeOnce sync.Once

	mu        sync.Mutex
	execItems map[string]*execItem // thread + "\x00" + call id
}

// New returns the service. broker serves the calls of client-registered
// (dynamic) tools; nil refuses turns of threads that registered some.
// catalog is the skills namespace offered to the model; nil offers none.
func New(cfg Config, broker *dynamic.Broker, catalog *skills.Catalog) (*Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	backend, err := sandbox.ParseBackend(cfg.SandboxBackend)
	if err != nil {
		return nil, err
	}
	snapDir, tmpDir := cfg.SnapshotDir, ""
	if snapDir == "" {
		if tmpDir, err = os.MkdirTemp("", "appserver-shell-"); err != nil {
			return nil, fmt.Errorf("shell snapshots: %w", err)
		}
		snapDir = tmpDir
	} else if err := os.MkdirAll(snapDir, 0o700); err != nil {
		return nil, fmt.Errorf("shell snapshots: %w", err)
	}
	// Whatever the writable roots, commands may read the snapshots but
	// never change them.
	sb, err := sandbox.New(sandbox.Options{Backend: backend, Hidden: cfg.Guard.Masked(), ReadOnly: []string{snapDir}, NetworkRefused: cfg.NetworkRefused,
		Pool: cfg.SandboxPool, Logger: cfg.Logger})
	if err != nil {
		removeTemp(tmpDir)
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	var dirs []string
	if cfg.RulesDir != "" {
		dirs = append(dirs, cfg.RulesDir)
	}
	rules, err := policy.LoadRulesDirs(dirs...)
	if err != nil {
		sb.Close()
		removeTemp(tmpDir)
		return nil, fmt.Errorf("exec-policy rules: %w", err)
	}
	s := &Service{
		cfg:       cfg,
		log:       cfg.Logger,
		broker:    broker,
		skills:    catalog,
		sandbox:   sb,
		rules:     rules,
		execItems: map[string]*execItem{},
		agents:    agents.New(cfg.MultiAgent),
		tmpDir:    tmpDir,
		userShell: shell.DetectUserShell(),
		dynTools: newRestoredTools(func(data []byte) (*dynamic.Tools, error) {
			return dynamic.Restore(data, dynamic.Options{Builtins: builtinToolNames})
		}),
	}
	for _, p := range cfg.Providers {
		if p.EnvKey != "" {
			s.env.SecretVars = append(s.env.SecretVars, p.EnvKey)
		}
	}
	s.snapshots, err = shell.NewSnapshots(shell.SnapshotsConfig{
		Shell: s.userShell.Path, Dir: snapDir, Env: s.commandEnv, Sandbox: sb, Logger: cfg.Logger,
	})
	if err != nil {
		s.log.Warn("no shell snapshots: login shells run their profile for every command", "err", err)
	}
	s.execs = execsession.NewSupervisor(execsession.ManagerConfig{
		Observer: execObserver{s},
		Env:      s.commandEnv,
		Now:      cfg.Now,
		Logger:   cfg.Logger,
	})
	return s, nil
}

// Close kills and reaps every exec session and releases the sandbox
// (daemon shutdown). It may be called more than once.
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		_ = s.execs.Close()
		s.sandbox.Close()
		s.snapshots.Close()
		removeTemp(s.tmpDir)
	})
}

// removeTemp removes a temporary directory ("" is none).
func removeTemp(dir string) {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// Sandbox is the sandbox the tools run commands in, for command/exec to
// share.
func (s *Service) Sandbox() *sandbox.Sandbox { return s.sandbox }

// Env is the environment policy of commands, for command/exec to share.
func (s *Service) Env() shell.EnvPolicy { return s.env }

// ThreadUnloaded reaps the exec sessions of a thread that left memory,
// closes its pooled sandboxes and releases its open sub-agents
// (turns.Config.ThreadUnloaded).
func (s *Service) ThreadUnloaded(threadID string) {
	s.agents.ThreadUnloaded(threadID)
	if err := s.execs.Release(threadID); err != nil {
		s.log.Warn("closing exec sessions", "thread", threadID, "err", err)
	}
	s.sandbox.Retire(threadID)
}

// ChildTurn counts a spawned child's turn starting or ending against the
// sub-agent limits of the daemon and of the child's principal
// (turns.Config.ChildTurn).
func (s *Service) ChildTurn(childID, originator string, running bool) {
	s.agents.ChildTurn(childID, principal.NameOf(originator), running)
}

// ChildEnded is turns.Config.ChildEnded: the parent's model is told of
// its child's end in the collaboration tools' words.
func (s *Service) ChildEnded(childID, agentPath string, st subagents.State) string {
	return s.agents.ChildEnded(childID, agentPath, agentState(st))
}

// LiveSessions is the number of running exec sessions of every thread.
func (s *Service) LiveSessions() int { return s.execs.LiveSessions() }

// Build is the turns.ToolsFactory: the built-in tools under the thread's
// policies, update_plan, the goal tools (not for an ephemeral thread), the
// skills namespace when configured, the thread's dynamic tools (served by the broker) if it registered any, then
// the tools of the connected MCP servers (a name taken already is not
// offered again; none when the thread's config sets mcp_servers = {}).
// The thread's config overrides turn tools off (switches).
func (s *Service) Build(tc turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
	b := registry.NewBuilder(registry.Config{Logger: s.log, Now: s.cfg.Now})
	sw := parseSwitches(tc.Config, tc.Features, s.agents.Enabled())
	if err := s.register(b, tc, sw); err != nil {
		return nil, nil, err
	}
	if !sw.disabled[planning.Name] {
		if err := planning.Register(b, &planning.Handler{}); err != nil {
			return nil, nil, err
		}
	}
	if sw.goals && tc.Goals != nil {
		if err := goals.Register(b, tc.Goals); err != nil {
			return nil, nil, err
		}
	}
	if err := s.registerAgents(b, tc, sw); err != nil {
		return nil, nil, err
	}
	if s.skills != nil && sw.skills {
		if err := skills.Register(b, s.skills); err != nil {
			return nil, nil, err
		}
	}
	if len(tc.DynamicTools) == 0 {
		if err := s.registerMCP(b, tc, sw); err != nil {
			return nil, nil, err
		}
		specs, reg := b.Build()
		return specs, reg, nil
	}
	if s.broker == nil {
		return nil, nil, errors.New("the thread registered dynamic tools, but no broker serves them")
	}
	tools, err := s.dynTools.get(tc.ThreadID, tc.DynamicTools)
	if err != nil {
		return nil, nil, err
	}
	h := dynamic.NewHandler(dynamic.HandlerConfig{ThreadID: tc.ThreadID, Tools: tools, Broker: s.broker, Items: tc.Sink, Logger: s.log})
	if err := tools.AddTo(b, h); err != nil {
		return nil, nil, err
	}
	if err := s.registerMCP(b, tc, sw); err != nil {
		return nil, nil, err
	}
	specs, reg := b.Build()
	return tools.OfferedSpecs(specs), reg, nil
}

// registerMCP adds the MCP tools of the turn, when MCP is configured and
// the thread did not empty mcp_servers, without the servers the thread
// turned off.
func (s *Service) registerMCP(b *registry.Builder, tc turns.ToolContext, sw switches) error {
	if s.cfg.MCP == nil || !sw.mcp {
		return nil
	}
	return s.cfg.MCP.Register(b, s.mcpTurn(tc, sw))
}

// ValidateDynamicTools checks a thread/start registration and returns the
// form persisted with the thread (turns.Config.ValidateDynamicTools).
func ValidateDynamicTools(specs []api.DynamicToolSpec) (json.RawMessage, error) {
	tools, err := dynamic.Validate(specs, dynamic.Options{Builtins: builtinToolNames})
	if err != nil {
		return nil, err
	}
	return json.Marshal(tools)
}

// allowPrefix applies an accepted exec-policy amendment: every thread
// allows the prefix from now on, and it is appended to the rules file so
// it survives a restart.
func (s *Service) allowPrefix(prefix []string) {
	if err := s.rules.AddPrefixRule(prefix, policy.Allow); err != nil {
		s.log.Warn("exec-policy amendment not applied", "prefix", prefix, "err", err)
		return
	}
	if s.cfg.RulesFile == "" {
		return
	}
	if err := policy.AppendAllowRule(s.cfg.RulesFile, prefix); err != nil {
		s.log.Error("exec-policy amendment not persisted", "file", s.cfg.RulesFile, "err", err)
	}
}

// commandEnv is the environment of the commands tools run: the daemon's,
// minus its secrets.
func (s *Service) commandEnv() []string { return s.env.Build(os.Environ()) }

// nowMs is the clock in Unix milliseconds, as items carry it.
func (s *Service) nowMs() int64 { return s.cfg.Now().UnixMilli() }

// BackgroundTerminals lists the exec sessions the model left running in a
// thread, by process id.
func (s *Service) BackgroundTerminals(threadID string) []api.ThreadBackgroundTerminal {
	infos := s.execs.ThreadSessions(threadID)
	out := make([]api.ThreadBackgroundTerminal, 0, len(infos))
	for _, in := range infos {
		t := api.ThreadBackgroundTerminal{
			ProcessID: strconv.Itoa(in.ID), ItemID: in.CallID,
			Command: policy.ShellJoin(in.Argv), Cwd: in.Cwd,
		}
		if in.Pid > 0 {
			pid := uint32(in.Pid)
			t.OsPid = &pid
		}
		out = append(out, t)
	}
	return out
}

// TerminateBackgroundTerminal kills one exec session of a thread; false
// when the thread has no session with that process id.
func (s *Service) TerminateBackgroundTerminal(threadID, processID string) bool {
	id, err := strconv.Atoi(processID)
	if err != nil {
		return false
	}
	return s.execs.TerminateSession(threadID, id) == nil
}

// CleanBackgroundTerminals kills every exec session of a thread.
func (s *Service) CleanBackgroundTerminals(threadID string) {
	s.execs.TerminateThreadSessions(threadID)
}
