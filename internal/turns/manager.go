package turns

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/budget"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/loop"
	"github.com/appserver/appserver/internal/turns/subagents"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// broadcastThread broadcasts a notification about a thread, with its
// originator, so that the sink keeps it from clients that may not see the
// thread.
func (m *Manager) broadcastThread(threadID string, owner *string, method string, params any) {
	m.cfg.Sink.BroadcastThread(threadID, owner, method, params)
}

// threadStarted runs Config.ThreadStarted for a thread just announced.
func (m *Manager) threadStarted(th api.Thread, config map[string]json.RawMessage) {
	if f := m.cfg.ThreadStarted; f != nil {
		f(th.ID, config, func(method string, params any) { m.broadcastThread(th.ID, th.Originator, method, params) })
	}
}

// tellMCPStartup tells conn, once per load of a thread from the store,
// the start-up of the thread's MCP servers (Config.ThreadStarted), as the
// reference's thread/resume does when it loads the thread; a thread
// already loaded (started, forked or spawned here, or resumed since its
// load) tells nothing.
func (m *Manager) tellMCPStartup(t *thread, conn ConnID) {
	t.mu.Lock()
	untold, config := t.mcpUntold, t.meta.Config
	t.mcpUntold = false
	t.mu.Unlock()
	if f := m.cfg.ThreadStarted; untold && f != nil {
		f(t.id, config, func(method string, params any) { m.cfg.Sink.Send(conn, method, params) })
	}
}

// childTurn reports a turn of a spawned child starting or ending
// (Config.ChildTurn); t.mu must not be held.
func (t *thread) childTurn(running bool) {
	f := t.m.cfg.ChildTurn
	if f == nil {
		return
	}
	t.mu.Lock()
	child, owner := t.meta.SubAgent != nil, t.meta.Originator
	t.mu.Unlock()
	if child {
		f(t.id, deref(owner), running)
	}
}

// originator is the thread's originator (nil when it has none); t.mu must
// not be held.
func (t *thread) originator() *string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.meta.Originator
}

// ownerOf is the originator of a thread, loaded or stored; nil when it
// has none or cannot be read (its broadcasts then reach the operator's
// clients only).
func (m *Manager) ownerOf(ctx context.Context, threadID string) *string {
	if t := m.loaded(threadID); t != nil {
		return t.originator()
	}
	rec, err := m.cfg.Store.GetThread(ctx, threadID)
	if err != nil {
		return nil
	}
	var meta struct {
		Originator *string `json:"originator"`
	}
	if json.Unmarshal(rec.Meta, &meta) != nil {
		return nil
	}
	return meta.Originator
}

// ModelRouter resolves a provider id to its model client.
type ModelRouter interface {
	Client(provider string) (model.Client, error)
}

// ToolsFactory builds the tools offered in one turn: the specs for the model
// and the registry that dispatches the calls.
type ToolsFactory func(t ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error)

// ToolContext is what a ToolsFactory may know about the turn.
type ToolContext struct {
	ThreadID string
	TurnID   string
	Cwd      string
	// Originator is the thread's originator: the client name it was
	// created under, which for the HTTP API and /mcp names the principal
	// ("appserver-http/<name>"); "" when none: whose thread it is
	// (principal.NameOf). Tools keep state that must not be shared across
	// principals (the login-shell snapshots, sub-agent slots) by it.
	Originator string
	// DynamicTools is the thread's registration as ValidateDynamicTools
	// returned it (nil when the thread has none).
	DynamicTools json.RawMessage
	// Sink is how the turn's tools speak to its subscribers: their items,
	// output deltas, the turn's diff and handler events all go through it.
	Sink ToolSink

	// Model and Provider are the turn's model and model provider id.
	Model, Provider string
	// ApprovalPolicy and Sandbox are the thread's policies with the turn's
	// overrides applied.
	ApprovalPolicy api.AskForApproval
	Sandbox        api.SandboxPolicy
	// CollaborationMode is the turn's collaboration mode ("plan",
	// "default"), "" when the client chose none.
	CollaborationMode string
	// Approvals are the thread's session approvals (acceptForSession,
	// accepted exec-policy amendments, granted roots). They live in memory
	// with the loaded thread: an unload or a restart forgets them.
	Approvals *policy.SessionApprovals
	// Client sends server requests (approvals, user input) to a client of
	// the thread, with the status flags and serverRequest/resolved.
	Client ClientRequests
	// Interrupt stops the turn as turn/interrupt does (an approval
	// answered "cancel").
	Interrupt func()
	// Config is the thread's config overrides (thread/start `config`),
	// flattened to dotted keys (`features.shell_tool`); nil when it gave
	// none. Read-only: it is shared with the thread.
	Config map[string]json.RawMessage
	// Features are the feature switches (`features.<key>` by key) of the
	// configuration of the thread's principal when the turn started, the
	// user configs its clients write included; Config's own keys win over
	// them. Nil when the manager has none (the tool set's defaults).
	// Read-only.
	Features map[string]bool
	// Children creates and drives the thread's child threads (the
	// collaboration tools).
	Children *subagents.Children
	// Goals reads and sets the thread's goal (the goal tools); nil for an
	// ephemeral thread.
	Goals *ThreadGoals
}

// ToolSink is the one way a tool speaks to its turn's subscribers. The
// turn implements it; every notification it sends carries the turn's
// thread and turn ids, which is why no method takes them. It is safe for
// concurrent use, does not block on a slow client, and keeps working after
// the turn was interrupted or ended (an exec session's item completes when
// its process does). The ordering rule that holds its announcements against
// the turn's own is the loop's (internal/turns/loop, roundCommitter).
//
// Packages below turns (dynamic, files) declare the subset they use; the
// registry's handlers reach Emit through registry.TurnContext.
type ToolSink interface {
	// ItemStarted announces a tool's item in its inProgress state
	// (item/started); the item's StartedAtMs is used when set.
	ItemStarted(item api.ThreadItem)
	// ItemCompleted commits a tool's item in its final state, then
	// announces it (item/completed); the item's CompletedAtMs is used when
	// set. The commit is not cancelled by an interrupt.
	ItemCompleted(item api.ThreadItem)
	// ItemCompletedFinal is ItemCompleted for a call that announces
	// nothing after its item (a dynamic tool call): the item of a round's
	// last call is then committed with the round's history instead of on
	// its own, and announced once that commit is done.
	ItemCompletedFinal(item api.ThreadItem)
	// CommandOutputDelta streams a piece of a commandExecution item's
	// output (item/commandExecution/outputDelta).
	CommandOutputDelta(itemID, delta string)
	// TurnDiff records the turn's aggregate diff and announces it
	// (turn/diff/updated); it is announced again after each token usage
	// update of the turn.
	TurnDiff(diff string)
	// Emitter sends a registry handler's event (turn/plan/updated, a
	// terminal interaction) with the thread and turn ids added.
	registry.Emitter
}

// Defaults are the settings a thread gets when its client does not choose.
type Defaults struct {
	Model          string
	ModelProvider  string
	ApprovalPolicy string
	// SandboxMode is the sandbox of new threads; "" is the built-in
	// read-only one, which comes from the :read-only permission profile
	// (their activePermissionProfile), as the reference's does when its
	// config names no sandbox_mode.
	SandboxMode string
	// PermissionProfile is the built-in permission profile SandboxMode
	// comes from, "" for a mode the config names; the Manager fills it in
	// from its live defaults.
	PermissionProfile string
	// ReasoningEffort and ReasoningSummary are the reasoning settings of
	// new threads; "" chooses none.
	ReasoningEffort  string
	ReasoningSummary string
	// Verbosity and ServiceTier are the output verbosity and the service
	// tier of new threads; "" chooses none.
	Verbosity, ServiceTier string
	// Catalog are the models of the configuration's catalog (its
	// [models.<id>], else the built-in one of OpenAI's models for OpenAI's
	// API). When there is one, a turn on any other model (it runs with the
	// default metadata) warns its thread so at the turn's start, as the
	// reference warns of a model outside its catalog; without one (another
	// provider, no [models]), nothing is said.
	Catalog map[string]bool
	// ModelVerbosity are the models whose requests carry a verbosity, each
	// with its default (sent when the thread has none; "" sends none).
	ModelVerbosity map[string]string
	// ServiceTiers are, per model, the service tiers its threads may
	// have sent as service_tier; a thread's other tiers are not sent.
	ServiceTiers map[string][]string
	Cwd          string
	// Instructions is the system prompt when a thread gives no
	// baseInstructions.
	Instructions string
	// CLIVersion is reported as Thread.cliVersion.
	CLIVersion string
	// ContextWindow is the model context window clients are told with
	// every token usage update (the TUI's /status shows it); 0 reports
	// none.
	ContextWindow int64
	// AutoCompactLimit is the context size in tokens (the last model
	// request with its response) at which the next request is preceded
	// by a context compaction; 0 never compacts on its own.
	AutoCompactLimit int64
	// CompactPrompt is the instruction that ends a compaction's request,
	// asking the model for the summary (the config's compact_prompt);
	// empty means appserver's own.
	CompactPrompt string
	// Features are the feature switches of turns' tools by key
	// (ToolContext.Features); nil leaves the tool set's defaults.
	Features map[string]bool
}

// Config configures a Manager. Store, Sink and Models are required.
type Config struct {
	Store store.Store
	// Audit records the threads deleted; nil records nothing.
	Audit *audit.Log
	// Ephemeral holds the transcripts of ephemeral threads in memory (an
	// internal/store/memory store): they never reach Store, and leave
	// Ephemeral when their thread unloads. Nil refuses ephemeral threads.
	Ephemeral EphemeralStore
	// Sink hears everything the threads say and ask, and owns who hears
	// which thread (the hub).
	Sink   Sink
	Models ModelRouter
	Tools  ToolsFactory
	// ValidateDynamicTools checks the dynamicTools of thread/start and
	// returns what to persist with the thread; nil refuses registrations.
	ValidateDynamicTools func([]api.DynamicToolSpec) (json.RawMessage, error)
	// ThreadUnloaded is called (without locks held) after a thread left
	// memory, e.g. to reap its exec sessions.
	ThreadUnloaded func(threadID string)
	// ChildTurn is called (without locks held) when a turn of a spawned
	// child starts, before the start is acknowledged, and once its end is
	// announced, with the child's originator ("" when it has none): the
	// collaboration tools count running children against their limits.
	ChildTurn func(childID, originator string, running bool)
	// ChildEnded words the end of a spawned child's turn (the child's
	// task path is "" unless its spawn named one) for its parent's model:
	// the text of the user message added to the parent's model history
	// (the running turn's next request, or the parent's next turn); ""
	// tells nothing. Nil tells nothing.
	ChildEnded func(childID, agentPath string, st subagents.State) string
	// ThreadStarted is called (without locks held) once a thread started
	// or forked has been announced (thread/started), and when
	// thread/resume finds a thread loaded from the store, with its config
	// overrides (flattened, read-only) and tell, which sends a
	// notification about the thread (to the clients allowed to see a new
	// thread, to the resuming client): the MCP servers report their
	// start-up to the thread through it. Nil calls nothing.
	ThreadStarted func(threadID string, config map[string]json.RawMessage, tell func(method string, params any))
	// UserShell runs thread/shellCommand; nil refuses the method.
	UserShell UserShellRunner
	Defaults  Defaults
	// UnloadAfter is how long a thread with no subscribers and no running
	// turn stays loaded (one to two periods after its last subscriber left
	// without unsubscribing); 0 means one minute.
	UnloadAfter time.Duration
	// TrimAfter is how long a loaded thread with no running turn keeps
	// its model history in memory; after that it holds only its settings
	// and subscribers, and its next turn reads the history again from the
	// store (the turns since the last compaction). 0 means one minute.
	TrimAfter time.Duration
	// MaxCommitDelay bounds how long a tool round's commit waits for the
	// next model request to be written before it starts anyway (the
	// ordering rule is the loop's roundCommitter); 0 means 5ms, about what writing
	// a request takes on loopback.
	MaxCommitDelay time.Duration
	// MaxRunningTurns bounds the turns running at once on this daemon
	// (children's included); a turn past it is refused with an
	// apperr.Overloaded error. 0 means no bound.
	MaxRunningTurns int
	// ShutdownGrace bounds how long Stop waits for running turns before
	// interrupting them; 0 means interrupt at once.
	ShutdownGrace time.Duration
	// PendingEndsFile is where the ends of turns the store missed (it was
	// down when they ended; their clients were told they failed) are kept
	// until it takes them, so that the next start's Recover stores them as
	// told should the daemon stop first; "" keeps them in memory only, and
	// Recover marks such turns interrupted.
	PendingEndsFile string
	// Observer is told how turns, model requests and tool calls end, for
	// metrics; nil observes nothing.
	Observer Observer
	// Ownership decides which daemon runs a thread's turns when several
	// share one database (internal/cluster); Store must then be fenced by
	// it. Nil means this daemon owns every thread, and Recover settles
	// every turn left running.
	Ownership Ownership
	// Budgets are the token and cost limits of turns, threads and
	// principals; each response's usage is charged to them and a turn
	// stops at a limit (or asks to go on). Nil enforces none.
	Budgets *budget.Budgets
	Logger  *slog.Logger
	Now     func() time.Time
}

// Manager is the thread table. It is safe for concurrent use.
type Manager struct {
	cfg Config
	log *slog.Logger
	// sub is the sub-agents of the threads: the table calls its hooks at
	// a turn's end and gives each turn's tools their thread's Children.
	sub *subagents.Service
	// loopDeps are what every turn's agent loop shares.
	loopDeps *loop.Deps
	now      func() time.Time
	// mem holds the ephemeral threads: loaded threads that never reach
	// cfg.Store. A thread's transcript leaves it when the thread unloads.
	mem EphemeralStore

	mu      sync.Mutex // guards threads, stopped; never held while calling into a thread
	threads map[string]*thread
	stopped bool

	turns sync.WaitGroup // running turn goroutines
	// running counts the turns started and not ended, against
	// cfg.MaxRunningTurns.
	running atomic.Int64
	// ends stores again the ends of turns the store missed.
	ends *turnEnds

	// readStateMu serialises read-state updates (UpdateReadState), each a
	// read, a compare and a write.
	readStateMu sync.Mutex

	// liveMu guards live and principals, the defaults of new threads that
	// a config write changes while the daemon runs (UpdateDefaults).
	liveMu sync.Mutex
	live   LiveDefaults
	// principals are the defaults a principal's own config sets, by
	// principal; the fields it leaves empty follow live.
	principals map[string]LiveDefaults
}

// LiveDefaults are the defaults of new threads that take effect without a
// restart: what a client's config write changes (config/value/write,
// config/batchWrite). Empty fields mean the built-in defaults, as in
// Defaults, or for a principal's the daemon-wide ones.
type LiveDefaults struct {
	Model            string
	ModelProvider    string
	ApprovalPolicy   string
	SandboxMode      string
	ReasoningEffort  string
	ReasoningSummary string
	// PermissionProfile is the built-in permission profile SandboxMode
	// comes from: set by withBuiltins when it fills in the built-in
	// sandbox, "" for a mode a config names.
	PermissionProfile string
	Verbosity         string
	ServiceTier       string
	// Features are feature switches by key (Defaults.Features): every one
	// for the daemon-wide defaults, those its own config sets for a
	// principal's.
	Features map[string]bool
}

// withBuiltins fills the empty fields of l with the built-in defaults.
func (l LiveDefaults) withBuiltins() LiveDefaults {
	if l.ModelProvider == "" {
		l.ModelProvider = "openai"
	}
	if l.ApprovalPolicy == "" {
		l.ApprovalPolicy = "on-request"
	}
	if l.SandboxMode == "" {
		l.SandboxMode, l.PermissionProfile = "read-only", ProfileReadOnly
	}
	return l
}

// over returns l with the fields p sets replaced.
func (l LiveDefaults) over(p LiveDefaults) LiveDefaults {
	for _, f := range []struct {
		dst *string
		src string
	}{
		{&l.Model, p.Model}, {&l.ModelProvider, p.ModelProvider},
		{&l.ApprovalPolicy, p.ApprovalPolicy}, {&l.SandboxMode, p.SandboxMode},
		{&l.ReasoningEffort, p.ReasoningEffort}, {&l.ReasoningSummary, p.ReasoningSummary},
		{&l.Verbosity, p.Verbosity}, {&l.ServiceTier, p.ServiceTier},
	} {
		if f.src != "" {
			*f.dst = f.src
		}
	}
	if p.SandboxMode != "" {
		// The principal's config names the mode: no profile chose it.
		l.PermissionProfile = p.PermissionProfile
	}
	if len(p.Features) > 0 {
		merged := maps.Clone(l.Features)
		if merged == nil {
			merged = map[string]bool{}
		}
		maps.Copy(merged, p.Features)
		l.Features = merged
	}
	return l
}

// UpdateDefaults replaces the defaults of the threads started from now on
// with d: for principal's threads the fields d sets (principal's own
// config), for everyone's when principal is "" (the daemon-wide config).
// Running and loaded threads keep the settings they have.
func (m *Manager) UpdateDefaults(principal string, d LiveDefaults) {
	m.liveMu.Lock()
	defer m.liveMu.Unlock()
	if principal != "" {
		if m.principals == nil {
			m.principals = map[string]LiveDefaults{}
		}
		m.principals[principal] = d
		return
	}
	m.live = d.withBuiltins()
}

// PrincipalDefaults returns the defaults principal's own config sets (the
// last UpdateDefaults for it); its empty fields follow the daemon-wide
// ones.
func (m *Manager) PrincipalDefaults(principal string) LiveDefaults {
	m.liveMu.Lock()
	defer m.liveMu.Unlock()
	return m.principals[principal]
}

// defaults are cfg.Defaults with the live ones of principal's new threads
// ("" for the operator's) in place: the daemon-wide ones, with those of
// principal's own config over them.
func (m *Manager) defaults(principal string) Defaults {
	m.liveMu.Lock()
	live := m.live.over(m.principals[principal])
	m.liveMu.Unlock()
	d := m.cfg.Defaults
	d.Model, d.ModelProvider, d.ApprovalPolicy, d.SandboxMode = live.Model, live.ModelProvider, live.ApprovalPolicy, live.SandboxMode
	d.PermissionProfile = live.PermissionProfile
	d.Features = live.Features
	d.ReasoningEffort, d.ReasoningSummary = live.ReasoningEffort, live.ReasoningSummary
	d.Verbosity, d.ServiceTier = live.Verbosity, live.ServiceTier
	return d
}

// New returns a Manager; call Recover once before serving.
func New(cfg Config) (*Manager, error) {
	if cfg.Store == nil || cfg.Sink == nil || cfg.Models == nil {
		return nil, errors.New("turns: Store, Sink and Models are required")
	}
	if cfg.UnloadAfter <= 0 {
		cfg.UnloadAfter = time.Minute
	}
	if cfg.TrimAfter <= 0 {
		cfg.TrimAfter = time.Minute
	}
	if cfg.MaxCommitDelay <= 0 {
		cfg.MaxCommitDelay = 5 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Tools == nil {
		cfg.Tools = func(ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			specs, reg := registry.NewBuilder(registry.Config{Logger: cfg.Logger}).Build()
			return specs, reg, nil
		}
	}
	d := &cfg.Defaults
	if d.Instructions == "" {
		d.Instructions = defaultInstructions
	}
	if d.CompactPrompt == "" {
		d.CompactPrompt = loop.DefaultCompactPrompt
	}
	m := &Manager{
		cfg: cfg, log: cfg.Logger, now: cfg.Now,
		mem:     cfg.Ephemeral,
		threads: map[string]*thread{},
		ends:    newTurnEnds(cfg.Logger, cfg.Store, cfg.PendingEndsFile),
		live: LiveDefaults{Model: d.Model, ModelProvider: d.ModelProvider, ApprovalPolicy: d.ApprovalPolicy, SandboxMode: d.SandboxMode,
			Features: d.Features, ReasoningEffort: d.ReasoningEffort, ReasoningSummary: d.ReasoningSummary,
			Verbosity: d.Verbosity, ServiceTier: d.ServiceTier}.withBuiltins(),
	}
	m.sub = subagents.New(subagents.Config{Table: subagentTable{m}, ChildEnded: cfg.ChildEnded, Logger: cfg.Logger})
	m.loopDeps = &loop.Deps{Models: cfg.Models, Observer: cfg.Observer, Logger: cfg.Logger, Now: cfg.Now,
		CompactPrompt: d.CompactPrompt, ContextWindow: d.ContextWindow, MaxCommitDelay: cfg.MaxCommitDelay}
	return m, nil
}

const defaultInstructions = "You are a coding agent running in appserver. Work in the user's workspace, " +
	"use the tools you are given, keep the user informed with concise messages, and finish with a clear answer."

// Ownership is a thread's lease among several daemons: a turn holds it from
// before its record is stored until its end is, so that no other daemon
// runs or settles the thread's turns meanwhile.
type Ownership interface {
	// Acquire takes the thread's lease for a turn, or enters it again
	// when this daemon holds it. It returns the lease's token and the one
	// it replaced (the same token when already held here, 0 when nobody
	// ever held it); a loaded thread last written under another token
	// than prev is stale. A thread busy on another daemon is a Conflict.
	Acquire(ctx context.Context, threadID string) (token, prev int64, err error)
	// Release ends one Acquire; the last one frees the lease.
	Release(threadID string)
	// Forward sends a request to the daemon holding the thread's lease
	// and returns its JSON answer; ok is false, and nothing is sent, when
	// no other daemon holds it. That daemon runs it with Command.
	Forward(ctx context.Context, threadID, method string, params any) (result json.RawMessage, ok bool, err error)
}

// Recover settles turns left inProgress by a daemon that stopped or died:
// a turn whose end its clients were told but the store missed (kept in
// PendingEndsFile) gets that end; any other is marked interrupted, so
// that its thread loads idle with every completed item. With an Ownership
// it does nothing: the turns in progress may be running on other daemons,
// and the cluster settles those whose lease expired (TurnRecovered).
// Then the threads' queues move on (their first entries start).
func (m *Manager) Recover(ctx context.Context) error {
	if err := m.settle(ctx); err != nil {
		return err
	}
	// Entries queued before the stop (or the crash) move on, each once.
	return m.resumeQueues(ctx)
}

// settle is Recover's settling of the turns left inProgress.
func (m *Manager) settle(ctx context.Context) error {
	if m.cfg.Ownership != nil {
		return nil
	}
	told, err := readJournal(m.cfg.PendingEndsFile)
	if err != nil {
		return err
	}
	turns, err := m.cfg.Store.ListInProgressTurns(ctx)
	if err != nil {
		return err
	}
	if len(turns) > 0 {
		ends := make(map[[2]string]store.TurnPatch, len(told))
		for _, p := range told {
			ends[[2]string{p.ThreadID, p.ID}] = p
		}
		now := m.now()
		b := &store.Batch{}
		for _, t := range turns {
			p, ok := ends[[2]string{t.ThreadID, t.ID}]
			if !ok {
				p = store.TurnPatch{ThreadID: t.ThreadID, ID: t.ID, Status: store.TurnInterrupted, CompletedAt: &now}
			}
			b.UpdateTurns = append(b.UpdateTurns, p)
		}
		m.log.Info("settled turns of a previous run", "turns", len(turns), "endsAsTold", len(told))
		if err := m.cfg.Store.Write(ctx, b); err != nil {
			return err
		}
		// Into the threads' logs: a client that followed a turn of the
		// previous run and resumes after the last event it got learns how
		// the turn ended (numbered past everything the previous run sent,
		// docs/design.md "Numbering").
		for i, p := range b.UpdateTurns {
			m.cfg.Sink.Publish(Event{ThreadID: p.ThreadID, Method: "turn/completed", Params: settledTurn(turns[i], p)})
		}
	}
	if len(told) > 0 {
		if err := writeJournal(m.cfg.PendingEndsFile, nil); err != nil {
			m.log.Error("turn ends journal not removed", "path", m.cfg.PendingEndsFile, "err", err)
		}
	}
	return nil
}

// settledTurn is the turn/completed of stored turn t, which Recover
// settled with p.
func settledTurn(t store.Turn, p store.TurnPatch) api.TurnCompletedNotification {
	t.Status, t.CompletedAt = p.Status, p.CompletedAt
	if p.Error != nil {
		t.Error = p.Error
	}
	turn, _ := transcript.TurnToAPI(t, nil, api.ItemsNotLoaded)
	return api.TurnCompletedNotification{ThreadID: t.ThreadID, Turn: turn}
}

// Stop interrupts running turns (after ShutdownGrace), waits for them, and
// makes a last attempt at storing the ends the store missed. It tolerates
// being called twice and before any use.
func (m *Manager) Stop() {
	m.mu.Lock()
	m.stopped = true
	threads := make([]*thread, 0, len(m.threads))
	for _, t := range m.threads {
		threads = append(threads, t)
	}
	m.mu.Unlock()
	done := make(chan struct{})
	go func() { m.turns.Wait(); close(done) }()
	if m.cfg.ShutdownGrace > 0 {
		select {
		case <-done:
		case <-time.After(m.cfg.ShutdownGrace):
		}
	}
	for _, t := range threads {
		t.interruptActive(errShutdown)
		t.stopUnloadTimer()
	}
	<-done
	m.ends.Stop()
}

// Loaded returns the ids of the loaded threads, sorted.
func (m *Manager) Loaded() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.threads))
	for id := range m.threads {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// loadedThreads is a snapshot of the thread table, to call into threads
// without m.mu held.
func (m *Manager) loadedThreads() []*thread {
	m.mu.Lock()
	defer m.mu.Unlock()
	threads := make([]*thread, 0, len(m.threads))
	for _, t := range m.threads {
		threads = append(threads, t)
	}
	return threads
}

// loaded returns the loaded thread with id, or nil.
func (m *Manager) loaded(id string) *thread {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.threads[id]
}

// load returns the thread, loading it from the store if needed. The thread
// comes back pinned: it cannot be unloaded until the caller unpins it, so a
// subscription or a turn started on it always lands on the live object.
func (m *Manager) load(ctx context.Context, id string) (*thread, error) {
	if t := m.loadedPinned(id); t != nil {
		return t, nil
	}
	rec, err := m.cfg.Store.GetThread(ctx, id)
	if err != nil {
		return nil, err
	}
	t, err := m.hydrate(ctx, rec)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if existing := m.threads[id]; existing != nil {
		existing.pin()
		return existing, nil // another caller loaded it first
	}
	if m.stopped {
		return nil, apperr.New(apperr.Unavailable, "server is shutting down")
	}
	t.pin()
	m.threads[id] = t
	return t, nil
}

// loadedPinned returns the loaded thread with id, pinned, or nil.
func (m *Manager) loadedPinned(id string) *thread {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.threads[id]
	if t != nil {
		t.pin()
	}
	return t
}

// hydrate rebuilds a thread's in-memory state from the store: settings,
// token totals and the exact model history of every turn.
func (m *Manager) hydrate(ctx context.Context, rec store.Thread) (*thread, error) {
	meta, err := transcript.DecodeThreadMeta(rec.Meta)
	if err != nil {
		return nil, err
	}
	if meta.Cwd != "" {
		rec.Cwd = meta.Cwd
	}
	if meta.ModelProvider != "" {
		rec.ModelProvider = meta.ModelProvider
	}
	t := newThread(m, rec, meta, m.cfg.Store, m.lineage(ctx, meta))
	t.mcpUntold = true
	// The model history is read when a turn needs it (ensureHistory):
	// resuming a thread costs the same whatever its length. Only the last
	// turn's end matters here.
	page, err := t.store.ListTurns(ctx, store.TurnsQuery{ThreadID: t.id, Desc: true, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(page.Turns) > 0 {
		last := page.Turns[0]
		t.lastTurnFailed = last.Status == store.TurnFailed
		t.meta.SubAgent = subagents.SettleEnd(t.meta.SubAgent, last)
	}
	return t, nil
}

func (m *Manager) isStopped() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopped
}

// EphemeralStore is the memory store of ephemeral threads.
type EphemeralStore interface {
	store.Store
	// Forget drops a thread's transcript.
	Forget(threadID string)
}

// storeFor returns the store of a new thread: the memory store when the
// client asked for an ephemeral one, else the durable store.
func (m *Manager) storeFor(ephemeral *bool) (store.Store, error) {
	if ephemeral == nil || !*ephemeral {
		return m.cfg.Store, nil
	}
	if m.mem == nil {
		return nil, apperr.New(apperr.Invalid, "ephemeral threads are not supported by this server")
	}
	return m.mem, nil
}

// register adds a newly created thread to the table.
func (m *Manager) register(t *thread) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return apperr.New(apperr.Unavailable, "server is shutting down")
	}
	m.threads[t.id] = t
	// Its unload checks start now: nothing else may arm them if its
	// client goes away before using it.
	t.mu.Lock()
	t.armUnloadLocked()
	t.mu.Unlock()
	return nil
}

// unload drops an idle thread without subscribers from memory and tells
// every connection.
func (m *Manager) unload(t *thread) {
	m.mu.Lock()
	if m.threads[t.id] != t {
		m.mu.Unlock()
		return
	}
	if !t.unloadable() {
		m.mu.Unlock()
		// A pin, a turn or a subscriber came meanwhile: the next check
		// is armed again (unpin and a turn's end arm their own).
		t.mu.Lock()
		t.armUnloadLocked()
		t.mu.Unlock()
		return
	}
	delete(m.threads, t.id)
	m.mu.Unlock()
	t.stopUnloadTimer() // the trim timer: the thread is gone
	if t.ephemeral() {
		// Nothing can load it again: it is not in the durable store.
		m.mem.Forget(t.id)
	}
	if f := m.cfg.ThreadUnloaded; f != nil {
		f(t.id)
	}
	owner := t.originator()
	m.broadcastThread(t.id, owner, "thread/status/changed", api.ThreadStatusChangedNotification{ThreadID: t.id, Status: api.ThreadStatus{Type: api.ThreadNotLoaded}})
	m.broadcastThread(t.id, owner, "thread/closed", api.ThreadClosedNotification{ThreadID: t.id})
}

// newID returns a UUIDv7 string.
func newID() string { return uuid.Must(uuid.NewV7()).String() }

// parseThreadID validates a client-supplied thread id with the reference's
// message.
func parseThreadID(id string) (string, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", apperr.New(apperr.Invalid, "invalid thread id: %v", err)
	}
	return u.String(), nil
}

// contextWindow is Defaults.ContextWindow as token usage carries it.
func (m *Manager) contextWindow() *int64 {
	if w := m.cfg.Defaults.ContextWindow; w > 0 {
		return &w
	}
	return nil
}

// own takes the lease of t for a turn when daemons share the store, and
// reads t again when another daemon ran turns of it since this one last
// held it. The release it returns may be called more than once.
func (m *Manager) own(ctx context.Context, t *thread) (release func(), err error) {
	o := m.cfg.Ownership
	if o == nil || t.ephemeral() {
		return func() {}, nil
	}
	token, prev, err := o.Acquire(ctx, t.id)
	if err != nil {
		return nil, err
	}
	release = sync.OnceFunc(func() { o.Release(t.id) })
	t.mu.Lock()
	stale := prev != 0 && prev != t.leaseToken && t.active == nil
	t.leaseToken = token
	if stale {
		// Another daemon's turns, or its rollback, changed what the
		// read-state facts were read from.
		t.forgetReadFactsLocked()
	}
	t.mu.Unlock()
	if stale {
		if err := m.refresh(ctx, t); err != nil {
			release()
			return nil, err
		}
	}
	return release, nil
}

// refresh reads a loaded thread's state again from the store, after
// another daemon ran turns of it. A turn running here meanwhile keeps the
// state it has: it is the latest.
func (m *Manager) refresh(ctx context.Context, t *thread) error {
	rec, err := m.cfg.Store.GetThread(ctx, t.id)
	if err != nil {
		return err
	}
	fresh, err := m.hydrate(ctx, rec)
	if err != nil {
		return err
	}
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active != nil {
		return nil
	}
	t.rec, t.meta, t.lastTurnFailed = fresh.rec, fresh.meta, fresh.lastTurnFailed
	// The model history is read again by the turn (ensureHistory): what
	// this daemon held misses the other daemon's turns.
	t.history, t.historyLoaded, t.itemIDs = transcript.History{}, false, nil
	t.allIDsInMemory = false
	t.historyGen++
	t.reqInput, t.reqWire = nil, nil
	return nil
}

// LeaseLost stops the running turn of a thread whose lease this daemon
// lost (the cluster's Events): the store refuses its writes already.
func (m *Manager) LeaseLost(threadID string) {
	if t := m.loaded(threadID); t != nil {
		t.interruptActive(errLeaseLost)
	}
}

// TurnRecovered announces a turn of a dead daemon that this one marked
// interrupted (the cluster's Events): every connection hears that the
// thread is idle, and the thread's subscribers here and its event log
// that the turn ended.
func (m *Manager) TurnRecovered(threadID, turnID string) {
	if m.endToldHere(threadID, turnID) {
		return
	}
	// The dead daemon's thread is free: its queue moves on here.
	defer m.kickQueue(threadID)
	m.broadcastThread(threadID, m.ownerOf(context.Background(), threadID), "thread/status/changed", api.ThreadStatusChangedNotification{ThreadID: threadID, Status: api.ThreadStatus{Type: api.ThreadIdle}})
	if m.endLogged(threadID, turnID) {
		// The daemon that ran the turn lived on without its lease long
		// enough to log the end itself.
		return
	}
	turn := api.Turn{ID: turnID, Items: api.List[api.ThreadItem]{}, ItemsView: api.ItemsNotLoaded, Status: api.TurnInterrupted}
	note := api.TurnCompletedNotification{ThreadID: threadID, Turn: turn}
	t := m.loaded(threadID)
	if t == nil {
		// Published whether or not anybody here follows the thread: the
		// end goes into the thread's durable log, which webhooks and the
		// HTTP API's event streams read later, on any daemon.
		m.cfg.Sink.Publish(Event{ThreadID: threadID, Method: "turn/completed", Params: note})
		return
	}
	t.mu.Lock()
	// This daemon's own turn announces its end itself, while it runs and
	// after it lost the lease (with the same status).
	local := t.active != nil && t.active.ID == turnID || t.meta.LastTurnID == turnID
	t.mu.Unlock()
	if local {
		return
	}
	t.emit("turn/completed", note)
}

// recentEnds is how many of a thread's newest logged events endLogged
// looks through.
const recentEnds = 256

// endLogged reports whether the thread's log holds, among its newest
// events, the end of turnID: a daemon that lost its lease while its turn
// ran ends the turn itself (interrupted) and logs that end, which a
// failover scan elsewhere must not log again. An end that daemon logs
// after this look is logged twice; webhooks and event streams deliver at
// least once.
func (m *Manager) endLogged(threadID, turnID string) bool {
	ctx := context.Background()
	last, err := m.cfg.Store.LastEventSeq(ctx, threadID)
	if err != nil || last == 0 {
		return false
	}
	evs, err := m.cfg.Store.ListEvents(ctx, threadID, max(last-recentEnds, 0), recentEnds)
	if err != nil {
		return false
	}
	for _, ev := range evs {
		if ev.Method != "turn/completed" {
			continue
		}
		var f struct {
			Params struct {
				Turn struct {
					ID string `json:"id"`
				} `json:"turn"`
			} `json:"params"`
		}
		if json.Unmarshal(ev.Data, &f) == nil && f.Params.Turn.ID == turnID {
			return true
		}
	}
	return false
}

// endToldHere reports whether a turn a failover scan marked interrupted
// ended on this daemon, whose clients were told that end: the scan found
// it inProgress because the thread's lease was given back before the end
// was stored (the store was down), and the end waits for the store
// (turnEnds), or was written over the scan's meanwhile. Such a turn is not
// announced again, as interrupted: the end its clients heard is the one
// the store keeps.
func (m *Manager) endToldHere(threadID, turnID string) bool {
	// The pending end first: it leaves turnEnds only once written.
	if _, ok := m.ends.told(threadID, turnID); ok {
		return true
	}
	tr, err := m.cfg.Store.GetTurn(context.Background(), threadID, turnID)
	return err == nil && tr.Status != store.TurnInterrupted
}

// forwardedKey marks the context of a request another daemon forwarded,
// which is never forwarded again: a turn that moved meanwhile is reported
// as not running here rather than chased around the cluster.
type forwardedKey struct{}

// remote runs a request about a thread's running turn on the daemon that
// runs it, when that is another daemon, decoding its answer into out; ok
// is false when this daemon handles the request itself.
func (m *Manager) remote(ctx context.Context, rawID, method string, params, out any) (ok bool, err error) {
	o := m.cfg.Ownership
	if o == nil || ctx.Value(forwardedKey{}) != nil {
		return false, nil
	}
	id, err := parseThreadID(rawID)
	if err != nil {
		return false, nil // the local path reports it
	}
	if t := m.loaded(id); t != nil {
		t.mu.Lock()
		local := t.active != nil
		t.mu.Unlock()
		if local {
			return false, nil
		}
	}
	raw, ok, err := o.Forward(ctx, id, method, params)
	if !ok || err != nil || out == nil {
		return ok, err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return true, apperr.Wrap(apperr.Internal, err, "decode the answer of the node running the thread")
	}
	return true, nil
}

// Command runs a request another daemon forwarded because this one runs
// the thread's turn (the cluster's Events): turn/steer, turn/interrupt,
// thread/inject_items, thread/revert and turn/start, as if a client without a connection here had sent it.
func (m *Manager) Command(ctx context.Context, method string, params json.RawMessage) (any, error) {
	ctx = context.WithValue(ctx, forwardedKey{}, true)
	bad := func(err error) error { return apperr.Wrap(apperr.Invalid, err, "invalid forwarded %s", method) }
	switch method {
	case "turn/steer":
		var p api.TurnSteerParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, bad(err)
		}
		return m.SteerTurn(ctx, Caller{}, p)
	case "turn/interrupt":
		var p api.TurnInterruptParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, bad(err)
		}
		after, err := m.InterruptTurn(ctx, p)
		if after != nil {
			after()
		}
		return api.TurnInterruptResult{}, err
	case "thread/inject_items":
		var p api.ThreadInjectItemsParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, bad(err)
		}
		return m.InjectItems(ctx, p)
	case "thread/revert":
		var p api.ThreadRevertParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, bad(err)
		}
		res, after, err := m.RevertThread(ctx, p)
		if after != nil {
			after()
		}
		return res, err
	case "turn/start":
		var p api.TurnStartParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, bad(err)
		}
		// Not StartTurn: the daemon that forwarded it refused a client's
		// input to a parent-owned thread already, and a parent's own
		// follow-up to its child arrives this way too.
		res, after, err := m.startTurn(ctx, Caller{}, p, nil)
		if after != nil {
			after()
		}
		return res, err
	}
	return nil, apperr.New(apperr.Invalid, "unknown forwarded method %s", method)
}
