package turns

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/reqlog"
	"github.com/appserver/appserver/internal/stackgrow"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/loop"
)

// StartTurn starts a turn, or, when one is running, adds the input to it
// as the reference does (docs/protocol.md §8.3).
func (m *Manager) StartTurn(ctx context.Context, c Caller, p api.TurnStartParams) (api.TurnStartResult, After, error) {
	if err := m.refuseParentOwned(ctx, p.ThreadID); err != nil {
		return api.TurnStartResult{}, nil, err
	}
	return m.startTurn(ctx, c, p, nil)
}

// turnKind is a turn that does not start from user input: a user's shell
// command, a review, or a context compaction the client asked for. Its run is the turn's goroutine, from turn/started
// to finish.
type turnKind interface {
	runTurn(m *Manager, r *loop.Run, tc ToolContext)
}

// startTurn starts a turn that runs the model on p's input, or, when kind
// is set, a turn of that kind: that one never joins a running turn, it
// waits for it to end.
func (m *Manager) startTurn(ctx context.Context, c Caller, p api.TurnStartParams, kind turnKind) (api.TurnStartResult, After, error) {
	return m.startTurnWith(ctx, c, p, kind, nil)
}

// startTurnWith is startTurn; a turn made of a queued entry (take set)
// never joins a running turn nor goes to another daemon, and the batch
// that stores it takes the entry (thread/queue/start).
func (m *Manager) startTurnWith(ctx context.Context, c Caller, p api.TurnStartParams, kind turnKind, take *store.QueueTake) (api.TurnStartResult, After, error) {
	root := ""
	if p.RootTurnID != nil && *p.RootTurnID != "" {
		u, err := uuid.Parse(*p.RootTurnID)
		if err != nil {
			return api.TurnStartResult{}, nil, apperr.New(apperr.Invalid, "invalid rootTurnId: %v", err)
		}
		root = u.String()
	}
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.TurnStartResult{}, nil, err
	}
	defer t.unpin()
	// Reserve the turn's goroutine first: Manager.mu is never taken while
	// a thread's lock is held (lock order: Manager.mu, then thread.mu).
	m.mu.Lock()
	stopped := m.stopped
	if !stopped {
		m.turns.Add(1)
	}
	m.mu.Unlock()
	if stopped {
		return api.TurnStartResult{}, nil, apperr.New(apperr.Unavailable, "server is shutting down")
	}
	launched := false
	defer func() {
		if !launched {
			m.turns.Done()
		}
	}()
	// As the reference, a turn's settings are the thread's from then on.
	o := overrides{model: p.Model, cwd: p.Cwd, approval: p.ApprovalPolicy, sandboxPolicy: p.SandboxPolicy,
		permissions: p.Permissions, effort: p.Effort, summary: (*string)(p.Summary), serviceTier: p.ServiceTier,
		sandboxParam: "sandboxPolicy", roots: p.RuntimeWorkspaceRoots}
	if !c.Principal.IsOperator() {
		// Checked before the turn may go to another daemon, which runs it
		// as no one in particular: it gets the bounded settings.
		if p, err = t.boundedParams(c.Principal, o, p); err != nil {
			return api.TurnStartResult{}, nil, err
		}
	}
	// The lease comes first: the thread's writes from here on, the
	// settings' included, are this daemon's.
	release, err := m.own(ctx, t)
	if err != nil {
		if kind == nil && take == nil && apperr.Is(err, apperr.Conflict) {
			// The thread's turn runs on another daemon: the input goes
			// there, as it would join a turn running here. The caller
			// subscribes here, where it hears the turn through the event
			// fan-out between daemons.
			if t.subscribe(c.Conn) {
				m.cfg.Sink.Welcome(t.id)
			}
			var res api.TurnStartResult
			if ok, ferr := m.remote(ctx, t.id, "turn/start", p, &res); ok {
				return res, nil, ferr
			}
			// The other daemon's turn ended meanwhile: the thread is
			// free to run here.
			release, err = m.own(ctx, t)
		}
		if err != nil {
			return api.TurnStartResult{}, nil, err
		}
	}
	defer func() {
		if !launched {
			release()
		}
	}()
	changed, err := t.updateSettings(ctx, c.Principal, o)
	if err != nil {
		return api.TurnStartResult{}, nil, err
	}
	// A child's turn is started by its parent's tools, not by a client:
	// nobody subscribes.
	if t.subscribe(c.Conn) {
		m.cfg.Sink.Welcome(t.id)
	}
	if changed != nil {
		// Before the answer, as the reference sends it.
		changed()
	}
	input := []api.UserInput(p.Input)
	if err := t.ensureHistory(ctx); err != nil {
		return api.TurnStartResult{}, nil, err
	}

	t.mu.Lock()
	for t.active != nil {
		at := t.active
		// A compaction refuses input until it has settled; then the
		// input waits for its end like any other.
		refuse := kind == nil && at.kind != "" && !at.ending
		ending := at.ending
		t.mu.Unlock()
		switch {
		case take != nil && !ending:
			return api.TurnStartResult{}, nil, apperr.New(apperr.Invalid, "thread already has an active or pending turn")
		case take != nil:
			// A queued entry never steers; it waits for a turn that is
			// announcing its end, which its client may have heard already.
		case refuse:
			return api.TurnStartResult{}, nil, &NotSteerableError{TurnKind: at.kind, Start: true}
		case kind == nil && at.AddSteer(input, p.ClientUserMessageID):
			return api.TurnStartResult{Turn: pendingTurn(at)}, nil, nil
		}
		// The running turn is settling and takes no more input (or this
		// is a turn of a kind): the input starts a new turn once it has
		// ended.
		select {
		case <-at.Done:
		case <-ctx.Done():
			return api.TurnStartResult{}, nil, ctx.Err()
		}
		t.mu.Lock()
	}
	if err := m.countRunning(); err != nil {
		t.mu.Unlock()
		return api.TurnStartResult{}, nil, err
	}
	defer func() {
		if !launched {
			m.running.Add(-1)
		}
	}()
	at, tc, err := t.reserveLocked(ctx, p, root, kind)
	t.mu.Unlock()
	if err != nil {
		return api.TurnStartResult{}, nil, err
	}
	t.childTurn(true)
	run := at.run
	// What a launched turn gives back once it has ended, in this order.
	// Until launched is set, the deferred functions above do it.
	ended := func() {
		// Given back once the turn's end is stored.
		release()
		close(at.released)
		// Once the turn has given the lease back: a completed turn
		// starts the thread's next queued entry.
		if at.completed {
			m.kickQueue(t.id)
		}
		m.running.Add(-1)
		m.turns.Done()
	}
	// observe starts the turn's observation, on its goroutine, before it
	// runs anything.
	observe := func() context.Context {
		obs := m.cfg.Observer.TurnStarted(at.Ctx, TurnInfo{
			ThreadID: t.id, TurnID: at.ID, Provider: at.Settings.Provider, Model: at.Settings.Model, Caller: ctx,
		})
		run.SetObserved(obs)
		m.log.DebugContext(obs, "turn started", "thread", t.id, "turn", at.ID, "provider", at.Settings.Provider, "model", at.Settings.Model)
		return obs
	}
	// Read before the turn's goroutine may run: it owns the settings then.
	mdl := at.Settings.Model
	// The tool set is built with the turn reserved and the thread's lock
	// released: a slow ToolsFactory (MCP tools, skills) holds up no read
	// of the thread, and no other turn can start meanwhile.
	var first api.ThreadItem
	// fc is set when the turn's goroutine runs already, its first model
	// request overlapping the write of its user message; gone is closed
	// when that goroutine returned after the write failed.
	var fc *loop.FirstCommit
	var gone chan struct{}
	specs, reg, err := m.cfg.Tools(tc)
	if err == nil {
		run.SetTools(specs, reg)
		// Stored before the answer: an acknowledged turn is at worst
		// interrupted. A turn of a kind has no user message.
		if kind != nil {
			err = run.CreateTurn()
		} else {
			// The model request needs nothing of the write: the turn's
			// goroutine sends it while the write runs, and announces the
			// turn once the write has succeeded and the answer has been
			// handed over (After).
			first, err = t.storeFirst(ctx, at, take, input, p.ClientUserMessageID, c.Principal.Roots(), func(item api.ThreadItem) {
				fc, gone = loop.NewFirstCommit(), make(chan struct{})
				go func() {
					stackgrow.Grow()
					obs := observe()
					if !run.RunInputOverlapped(item, fc) {
						m.cfg.Observer.TurnAbandoned(obs)
						close(gone)
						return
					}
					ended()
				}()
			})
		}
	}
	if fc != nil {
		fc.Stored(err)
	}
	if err != nil {
		if fc != nil {
			// The request goes no further; the goroutine leaves no trace
			// and is gone before the turn is abandoned.
			at.Cancel(nil)
			<-gone
		}
		t.abandon(at)
		return api.TurnStartResult{}, nil, err
	}
	if at.kind != "" {
		at.CloseInput(false)
	}
	close(at.Stored)
	launched = true
	if cat := m.cfg.Defaults.Catalog; len(cat) > 0 && !cat[mdl] {
		// Before the answer, as the reference sends it, at every turn.
		id := t.id
		t.emit(api.MethodWarning, api.WarningNotification{ThreadID: &id,
			Message: "Model metadata for `" + mdl + "` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."})
	}
	if fc != nil {
		// The turn runs already; it may now announce itself. After must
		// be called, as for any started turn: until then the turn
		// announces nothing and cannot end.
		return api.TurnStartResult{Turn: pendingTurn(at)}, fc.Answered, nil
	}
	return api.TurnStartResult{Turn: pendingTurn(at)}, func() {
		go func() {
			stackgrow.Grow()
			defer ended()
			observe()
			if kind != nil {
				kind.runTurn(m, run, tc)
				return
			}
			run.RunInput(first)
		}()
	}, nil
}

// countRunning counts a new turn against MaxRunningTurns, or refuses it
// when as many run already.
func (m *Manager) countRunning() error {
	n := m.running.Add(1)
	if limit := int64(m.cfg.MaxRunningTurns); limit > 0 && n > limit {
		m.running.Add(-1)
		return apperr.New(apperr.Overloaded, "%d turns are running on this server, its max_running_turns; retry later", limit)
	}
	return nil
}

// storeFirst stores the turn record of at with its user message before
// turn/start answers, so that an acknowledged turn survives a crash with
// its input (Recover marks it interrupted); the group commit keeps this to
// a share of one transaction. It returns the message to announce. The
// thread's first turn also records the Git metadata of its cwd (gitInfo),
// looked for within roots (the caller's workspace roots, if any). A turn
// made of a queued entry (take set) takes it in the same batch. writing is
// called with the message once the batch is ready, before it is written.
func (t *thread) storeFirst(ctx context.Context, at *activeTurn, take *store.QueueTake, input []api.UserInput, clientID *string, roots []string, writing func(api.ThreadItem)) (api.ThreadItem, error) {
	// Items injected while the thread was idle come first, and leave the
	// thread's metadata in the batch that stores them with the turn.
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	// The Git metadata first: the injected items' patch carries it too.
	gitPatch := t.recordGitInfo(at.Settings.Cwd, roots)
	injected, injectedPatch := t.takeInjected()
	item, b, preview, err := at.run.FirstMessage(injected, input, clientID)
	if err == nil && gitPatch != nil {
		b.UpdateThreads = mergeThreadPatch(b.UpdateThreads, *gitPatch)
	}
	if err == nil && take != nil {
		// The entry and the turn it became are one write: stored
		// together, or neither.
		take := *take
		take.TurnID = at.ID
		b.TakeQueued = append(b.TakeQueued, take)
	}
	if err == nil && injectedPatch != nil {
		b.UpdateThreads = mergeThreadPatch(b.UpdateThreads, *injectedPatch)
	}
	if err == nil {
		// The turn's history is complete: its goroutine may start.
		writing(item)
		err = t.write(ctx, b)
	}
	if err != nil && take != nil && apperr.Is(err, apperr.Conflict) {
		// Another request, or another daemon, started the entry first.
		return item, store.QueuedNotFound(take.ID)
	}
	if err != nil {
		return item, fmt.Errorf("store turn: %w", err)
	}
	if injectedPatch != nil {
		t.mu.Lock()
		t.meta.Injected = nil
		t.mu.Unlock()
	}
	if preview != "" {
		t.mu.Lock()
		t.rec.Preview = preview
		t.mu.Unlock()
	}
	return item, nil
}

// reserveLocked makes a new turn the thread's running one, before its tool
// set is built and its record stored (a concurrent turn/start waits for
// it, steers wait until it is stored), and returns it (with its run) and
// the tools' view of it; t.mu must be held. abandon undoes it. ctx is the
// context of the request that starts the turn.
func (t *thread) reserveLocked(ctx context.Context, p api.TurnStartParams, root string, kind turnKind) (*activeTurn, ToolContext, error) {
	m := t.m
	settings, err := t.settingsLocked(p)
	if err != nil {
		return nil, ToolContext{}, err
	}
	// The turn outlives the request that starts it: its context keeps
	// the request's id for its log lines, and nothing else of it.
	turnCtx, cancel := context.WithCancelCause(reqlog.Detach(ctx))
	// Work started on behalf of another turn names it (root), as the
	// schema asks callers to.
	at := &activeTurn{Turn: loop.NewTurn(turnCtx, cancel, newID(), m.now(), settings, root), released: make(chan struct{})}
	// As the reference's compaction and review tasks, these take no
	// input.
	switch kind.(type) {
	case compactTurn:
		at.kind = "compact"
	case *reviewRequest:
		at.kind = "review"
	}
	t.history.EnsureWire()
	// The thread's history grows only when the turn ends.
	run := loop.NewRun(m.loopDeps, turnThread{t: t, at: at}, t.id, at.Turn, t.history.Snapshot(), t.newTurnBudgetLocked())
	run.UseRequestBuffers(t.reqInput, t.reqWire)
	t.reqInput, t.reqWire = nil, nil
	at.run = run
	tc := ToolContext{
		ThreadID: t.id, TurnID: at.ID, Cwd: settings.Cwd,
		DynamicTools: t.meta.DynamicTools, Sink: run,
		Model: settings.Model, Provider: settings.Provider,
		ApprovalPolicy: t.meta.ApprovalPolicy, Sandbox: t.meta.Sandbox,
		Approvals: t.approvals, Client: run,
		Interrupt:  func() { at.Cancel(errInterrupted) },
		Config:     t.meta.Config,
		Features:   m.defaults(principal.NameOf(deref(t.meta.Originator))).Features,
		Children:   t.childrenLocked(at),
		Goals:      t.goalsLocked(),
		Originator: deref(t.meta.Originator),
	}
	if p.CollaborationMode != nil {
		tc.CollaborationMode = string(p.CollaborationMode.Mode)
	}
	if at.kind == "review" {
		run.StartReviewer()
		reviewerTools(&tc)
	}
	t.active = at
	t.startGoalClockLocked(m.now())
	if t.unloadTimer != nil {
		t.unloadTimer.Stop()
		t.unloadTimer = nil
	}
	return at, tc, nil
}

// abandon undoes reserveLocked for a turn that could not start (its tool
// set or its record failed): it never ran and announced nothing.
func (t *thread) abandon(at *activeTurn) {
	at.CloseInput(false)
	close(at.Stored)
	at.Cancel(nil)
	t.mu.Lock()
	t.active = nil
	t.goalSince = time.Time{} // the turn never ran
	t.armUnloadLocked()
	t.mu.Unlock()
	close(at.Done)
	// StartTurn gives the lease back as it returns the error.
	close(at.released)
	t.childTurn(false)
}

// pendingTurn is the turn/start response: the reference leaves startedAt
// null and items not loaded until turn/started.
func pendingTurn(at *activeTurn) api.Turn {
	return api.Turn{ID: at.ID, RootTurnID: at.RootID(), Items: api.List[api.ThreadItem]{}, ItemsView: api.ItemsNotLoaded, Status: api.TurnInProgress}
}

// settingsLocked resolves the settings of a new turn; t.mu must be held.
func (t *thread) settingsLocked(p api.TurnStartParams) (loop.Settings, error) {
	s := loop.Settings{Provider: t.rec.ModelProvider, Cwd: t.rec.Cwd, Instructions: t.m.cfg.Defaults.Instructions}
	if t.rec.Model != nil {
		s.Model = *t.rec.Model
	}
	if s.Model == "" {
		return s, apperr.New(apperr.Invalid, "no model configured: set `model` in the config or pass one in thread/start or turn/start")
	}
	if t.meta.BaseInstructions != nil {
		s.Instructions = *t.meta.BaseInstructions
	}
	if t.meta.DeveloperInstructions != nil {
		s.Developer = *t.meta.DeveloperInstructions
	}
	if t.meta.ReasoningEffort != nil {
		s.Effort = *t.meta.ReasoningEffort
	}
	if p.Effort != nil {
		s.Effort = *p.Effort
	}
	s.Summary = t.meta.ReasoningSummary
	if p.Summary != nil {
		s.Summary = string(*p.Summary)
	}
	tier := t.meta.ServiceTier
	if p.ServiceTierForTurn != nil {
		tier = serviceTier(p.ServiceTierForTurn)
	}
	if tier != nil && slices.Contains(t.m.cfg.Defaults.ServiceTiers[s.Model], *tier) {
		s.ServiceTier = *tier
	}
	if def, ok := t.m.cfg.Defaults.ModelVerbosity[s.Model]; ok {
		s.Verbosity = cmp.Or(t.meta.Verbosity, def)
	}
	if len(p.OutputSchema) > 0 && string(p.OutputSchema) != "null" {
		s.OutputSchema = p.OutputSchema
	}
	if p.CollaborationMode != nil && p.CollaborationMode.Settings.DeveloperInstructions != nil {
		s.Developer = strings.TrimSpace(s.Developer + "\n\n" + *p.CollaborationMode.Settings.DeveloperInstructions)
	}
	return s, nil
}

// NotSteerableError refuses input for a running turn that takes none (a
// compaction), as the reference does: the transport answers turn/steer
// with the reference's activeTurnNotSteerable error info, turn/start with
// its internal error.
type NotSteerableError struct {
	// TurnKind is the running turn's kind: "compact".
	TurnKind string
	// Start is set when the input came with turn/start.
	Start bool
}

// Error returns the reference's message for turn/steer.
func (e *NotSteerableError) Error() string { return "cannot steer a " + e.TurnKind + " turn" }

// activeTurnOf returns the running turn after checking the client's
// expected id, with the reference's messages.
func (m *Manager) activeTurnOf(ctx context.Context, rawID, expected, idleMsg string) (*thread, *activeTurn, error) {
	t, err := m.threadFor(ctx, rawID, "thread not found: %s")
	if err != nil {
		return nil, nil, err
	}
	defer t.unpin()
	t.mu.Lock()
	at := t.active
	if at != nil && at.ending {
		// Settled and announcing turn/completed: nothing is left to
		// interrupt or steer, and the thread already reads as idle.
		at = nil
	}
	t.mu.Unlock()
	if at == nil {
		return nil, nil, apperr.New(apperr.Invalid, "%s", idleMsg)
	}
	if expected != at.ID {
		return nil, nil, apperr.New(apperr.Invalid, "expected active turn id `%s` but found `%s`", expected, at.ID)
	}
	return t, at, nil
}

// SteerTurn adds input to the running turn.
func (m *Manager) SteerTurn(ctx context.Context, c Caller, p api.TurnSteerParams) (api.TurnSteerResult, error) {
	var res api.TurnSteerResult
	if err := m.refuseParentOwned(ctx, p.ThreadID); err != nil {
		return res, err
	}
	if ok, err := m.remote(ctx, p.ThreadID, "turn/steer", p, &res); ok {
		return res, err
	}
	_, at, err := m.activeTurnOf(ctx, p.ThreadID, p.ExpectedTurnID, "no active turn to steer")
	if err != nil {
		return api.TurnSteerResult{}, err
	}
	if at.kind != "" {
		return api.TurnSteerResult{}, &NotSteerableError{TurnKind: at.kind}
	}
	if !at.AddSteer(p.Input, p.ClientUserMessageID) {
		// The turn is settling; it will not look at new input again.
		return api.TurnSteerResult{}, apperr.New(apperr.Invalid, "no active turn to steer")
	}
	return api.TurnSteerResult{TurnID: at.ID}, nil
}

// InterruptTurn stops the running turn once the response has been sent; it
// then completes with status interrupted.
func (m *Manager) InterruptTurn(ctx context.Context, p api.TurnInterruptParams) (After, error) {
	if ok, err := m.remote(ctx, p.ThreadID, "turn/interrupt", p, nil); ok {
		return nil, err
	}
	_, at, err := m.activeTurnOf(ctx, p.ThreadID, p.TurnID, "no active turn to interrupt")
	if err != nil {
		return nil, err
	}
	return func() { at.Cancel(errInterrupted) }, nil
}
