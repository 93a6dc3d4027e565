package turns

import (
	"cmp"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// Caller identifies the connection a method call came from.
type Caller struct {
	Conn       ConnID
	ClientName string
	// Principal is who the call acts for: its ceiling and workspace roots
	// bound the settings the call leaves a thread with (principal.Bound).
	// The zero value is the operator, who is not bounded.
	Principal principal.Principal
}

// After is work to run once the method's response has been sent, so that
// the notifications it causes follow the response on the wire.
type After func()

// overrides are the settings thread/start, resume, fork and turn/start may
// change.
type overrides struct {
	model, provider, cwd *string
	approval             *api.AskForApproval
	sandboxMode          *api.SandboxMode
	sandboxPolicy        *api.SandboxPolicy
	// permissions names a built-in permission profile, whose sandbox the
	// thread takes; never together with sandboxMode or sandboxPolicy.
	permissions     *string
	base, developer *string
	effort          *string
	// summary is the reasoning summary style; serviceTier sets (or, with
	// a null value, resets) the service tier.
	summary     *string
	serviceTier api.Nullable[string]
	// sandboxParam names the request's sandbox parameter in messages:
	// "sandbox" (thread methods) or "sandboxPolicy" (turn methods).
	sandboxParam string
	// roots are runtimeWorkspaceRoots: not used by a thread, but a
	// principal may only name its own.
	roots []string
}

// sandboxAsked reports whether the request chose the sandbox.
func (o overrides) sandboxAsked() bool {
	return o.sandboxMode != nil || o.sandboxPolicy != nil || o.permissions != nil
}

// empty reports whether the request changes nothing.
func (o overrides) empty() bool {
	return o.model == nil && o.provider == nil && o.cwd == nil && o.approval == nil && !o.sandboxAsked() &&
		o.base == nil && o.developer == nil && o.effort == nil && o.summary == nil && !o.serviceTier.Set && len(o.roots) == 0
}

// apply validates and applies the overrides to a thread record and meta.
func (m *Manager) apply(rec *store.Thread, meta *transcript.ThreadMeta, o overrides) error {
	if o.provider != nil {
		if _, err := m.cfg.Models.Client(*o.provider); err != nil {
			return err
		}
		rec.ModelProvider = *o.provider
		meta.ModelProvider = *o.provider
	}
	if o.model != nil {
		mdl := *o.model
		rec.Model = &mdl
	}
	if o.cwd != nil {
		cwd, err := absCwd(*o.cwd)
		if err != nil {
			return err
		}
		rec.Cwd = cwd
		meta.Cwd = cwd
	}
	if o.approval != nil {
		switch o.approval.Policy {
		case api.ApprovalUntrusted, api.ApprovalOnRequest, api.ApprovalNever, "on-failure":
		case "":
			if o.approval.Granular == nil {
				return apperr.New(apperr.Invalid, "Invalid request: approvalPolicy must be a policy name or {granular: …}")
			}
		default:
			return apperr.New(apperr.Invalid, "Invalid request: unknown variant `%s`, expected one of `untrusted`, `on-failure`, `on-request`, `never`", o.approval.Policy)
		}
		meta.ApprovalPolicy = *o.approval
	}
	if o.permissions != nil && (o.sandboxMode != nil || o.sandboxPolicy != nil) {
		return apperr.New(apperr.Invalid, "`permissions` cannot be combined with `%s`", cmp.Or(o.sandboxParam, "sandbox"))
	}
	if o.sandboxMode != nil {
		p, err := sandboxPolicyFor(string(*o.sandboxMode))
		if err != nil {
			return err
		}
		meta.Sandbox = p
		meta.PermissionProfile = ""
	}
	if o.sandboxPolicy != nil {
		meta.Sandbox = *o.sandboxPolicy
		meta.PermissionProfile = ""
	}
	if o.permissions != nil {
		p, err := profilePolicy(*o.permissions)
		if err != nil {
			return err
		}
		meta.Sandbox = p
		meta.PermissionProfile = *o.permissions
	}
	if o.base != nil {
		meta.BaseInstructions = o.base
	}
	if o.developer != nil {
		meta.DeveloperInstructions = o.developer
	}
	if o.effort != nil {
		meta.ReasoningEffort = o.effort
	}
	if o.summary != nil {
		switch api.ReasoningSummary(*o.summary) {
		case api.ReasoningSummaryAuto, api.ReasoningSummaryConcise, api.ReasoningSummaryDetailed, api.ReasoningSummaryNone:
		default:
			return apperr.New(apperr.Invalid, "Invalid request: unknown variant `%s`, expected one of `auto`, `concise`, `detailed`, `none`", *o.summary)
		}
		meta.ReasoningSummary = *o.summary
	}
	if o.serviceTier.Set {
		meta.ServiceTier = serviceTier(o.serviceTier.Value)
	}
	return nil
}

// serviceTier is the tier a thread keeps for a client's serviceTier: "fast"
// is the reference's name for the priority tier, and an explicit null
// selects the default tier, as the reference reports them.
func serviceTier(v *string) *string {
	tier := "default"
	if v != nil {
		tier = *v
	}
	if tier == "fast" {
		tier = "priority"
	}
	return &tier
}

func absCwd(cwd string) (string, error) {
	if strings.TrimSpace(cwd) == "" {
		return "", apperr.New(apperr.Invalid, "cwd must not be empty")
	}
	abs, err := filepath.Abs(cwd)
	if err != nil {
		return "", apperr.New(apperr.Invalid, "invalid cwd %q: %v", cwd, err)
	}
	return filepath.Clean(abs), nil
}

// sandboxPolicyFor maps a sandbox mode to the policy object responses carry.
func sandboxPolicyFor(mode string) (api.SandboxPolicy, error) {
	switch mode {
	case "read-only":
		return api.SandboxPolicy{Type: api.SandboxPolicyReadOnly}, nil
	case "workspace-write":
		return api.SandboxPolicy{Type: api.SandboxPolicyWorkspaceWrite, WritableRoots: []string{}}, nil
	case "danger-full-access":
		return api.SandboxPolicy{Type: api.SandboxPolicyDangerFullAccess}, nil
	}
	return api.SandboxPolicy{}, apperr.New(apperr.Invalid, "Invalid request: unknown variant `%s`, expected one of `read-only`, `workspace-write`, `danger-full-access`", mode)
}

// settingsResult fills the fields thread/start, resume and fork share.
func (t *thread) settingsResult() api.ThreadStartResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	model := ""
	if t.rec.Model != nil {
		model = *t.rec.Model
	}
	return api.ThreadStartResult{
		Thread:                  t.apiThreadLocked(),
		Model:                   model,
		ModelProvider:           t.rec.ModelProvider,
		Cwd:                     t.rec.Cwd,
		RuntimeWorkspaceRoots:   api.List[string]{t.rec.Cwd},
		ApprovalPolicy:          t.meta.ApprovalPolicy,
		ApprovalsReviewer:       api.ReviewerUser,
		Sandbox:                 t.meta.Sandbox,
		ActivePermissionProfile: activeProfile(t.meta.PermissionProfile),
		ReasoningEffort:         t.meta.ReasoningEffort,
		MultiAgentMode:          multiAgentMode,
		ServiceTier:             t.meta.ServiceTier,
	}
}

// multiAgentMode is the multiAgentMode of thread/start, resume and fork
// answers: always "explicitRequestOnly", as the reference answers (the
// field is deprecated there and takes no other value).
var multiAgentMode = json.RawMessage(`"explicitRequestOnly"`)

// StartThread creates a thread, subscribes the caller and announces it.
func (m *Manager) StartThread(ctx context.Context, c Caller, p api.ThreadStartParams) (api.ThreadStartResult, After, error) {
	if m.isStopped() {
		// Refuse before writing: a thread stored but reported as failed
		// would surprise the client.
		return api.ThreadStartResult{}, nil, apperr.New(apperr.Unavailable, "server is shutting down")
	}
	d := m.defaults(c.Principal.Name())
	now := m.now()
	rec := store.Thread{
		ID:            newID(),
		Cwd:           d.Cwd,
		ModelProvider: d.ModelProvider,
		Source:        "vscode",
		CreatedAt:     now, UpdatedAt: now, RecencyAt: now,
	}
	if d.Model != "" {
		mdl := d.Model
		rec.Model = &mdl
	}
	sandbox, err := sandboxPolicyFor(d.SandboxMode)
	if err != nil {
		return api.ThreadStartResult{}, nil, err
	}
	meta := transcript.ThreadMeta{
		ApprovalPolicy:    api.AskForApproval{Policy: api.ApprovalPolicy(d.ApprovalPolicy)},
		Sandbox:           sandbox,
		PermissionProfile: d.PermissionProfile,
		ReasoningEffort:   optional(d.ReasoningEffort),
		ReasoningSummary:  d.ReasoningSummary,
		Verbosity:         d.Verbosity,
		CLIVersion:        d.CLIVersion,
		ThreadSource:      p.ThreadSource,
	}
	if d.ServiceTier != "" {
		// service_tier as config has it; the client's serviceTier wins.
		meta.ServiceTier = serviceTier(&d.ServiceTier)
	}
	if c.ClientName != "" {
		name := c.ClientName
		meta.Originator = &name
	}
	if !c.Principal.IsOperator() && p.Cwd == nil {
		// Not the daemon's directory: the principal's own root.
		rec.Cwd = ""
	}
	o := overrides{
		model: p.Model, provider: p.ModelProvider, cwd: p.Cwd, approval: p.ApprovalPolicy,
		sandboxMode: p.Sandbox, permissions: p.Permissions, base: p.BaseInstructions, developer: p.DeveloperInstructions,
		serviceTier: p.ServiceTier, roots: p.RuntimeWorkspaceRoots,
	}
	if err := m.apply(&rec, &meta, o); err != nil {
		return api.ThreadStartResult{}, nil, err
	}
	profile, err := applyConfig(&meta, p.Config, o.sandboxAsked())
	if err != nil {
		return api.ThreadStartResult{}, nil, err
	}
	if err := bound(c.Principal, &rec, &meta, o, profile); err != nil {
		return api.ThreadStartResult{}, nil, err
	}
	if rec.Cwd == "" {
		return api.ThreadStartResult{}, nil, apperr.New(apperr.Invalid, "cwd is required: the server has no default working directory")
	}
	if len(p.DynamicTools) > 0 {
		if m.cfg.ValidateDynamicTools == nil {
			return api.ThreadStartResult{}, nil, apperr.New(apperr.Invalid, "dynamic tools are not supported by this server")
		}
		reg, err := m.cfg.ValidateDynamicTools(p.DynamicTools)
		if err != nil {
			return api.ThreadStartResult{}, nil, err
		}
		meta.DynamicTools = reg
	}
	st, err := m.storeFor(p.Ephemeral)
	if err != nil {
		return api.ThreadStartResult{}, nil, err
	}
	metaJSON, _ := json.Marshal(meta)
	rec.Meta = metaJSON
	if err := st.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{&rec}}); err != nil {
		return api.ThreadStartResult{}, nil, err
	}
	t := newThread(m, rec, meta, st, nil)
	// A new thread has no stored items: its ids are all taken here.
	t.allIDsInMemory = true
	if err := m.register(t); err != nil {
		return api.ThreadStartResult{}, nil, err
	}
	t.subscribe(c.Conn)
	res := t.settingsResult()
	return res, func() {
		th := t.apiThread()
		m.broadcastThread(th.ID, th.Originator, "thread/started", api.ThreadStartedNotification{Thread: th})
		m.threadStarted(th, meta.Config)
	}, nil
}

// threadFor loads a thread named by a client, mapping a missing one to the
// given reference message.
func (m *Manager) threadFor(ctx context.Context, rawID, notFound string) (*thread, error) {
	id, err := parseThreadID(rawID)
	if err != nil {
		return nil, err
	}
	t, err := m.load(ctx, id)
	if apperr.Is(err, apperr.NotFound) {
		return nil, apperr.New(apperr.NotFound, notFound, rawID)
	}
	return t, err
}

// ResumeThread loads a thread, applies overrides and subscribes the caller.
func (m *Manager) ResumeThread(ctx context.Context, c Caller, p api.ThreadResumeParams) (api.ThreadResumeResult, After, error) {
	res, t, after, err := m.resume(ctx, c, p)
	if err != nil {
		return api.ThreadResumeResult{}, nil, err
	}
	defer t.unpin()
	if err := t.loadTurns(ctx, &res.Thread, p.ExcludeTurns); err != nil {
		return api.ThreadResumeResult{}, nil, err
	}
	return res, after, nil
}

// StreamResume is ResumeThread for a websocket reply: its result is a
// ThreadStream, the thread's turns (unless p.ExcludeTurns) read from the
// store while the reply is written; ctx must outlive the call (the
// connection's). The turns are the transcript when the stream is made,
// as ResumeThread's, and the notifications of the thread that After sends
// follow the reply as they follow ResumeThread's.
func (m *Manager) StreamResume(ctx context.Context, c Caller, p api.ThreadResumeParams) (*transcript.ThreadStream, After, error) {
	res, t, after, err := m.resume(ctx, c, p)
	if err != nil {
		return nil, nil, err
	}
	defer t.unpin()
	s, err := t.transcript().Stream(ctx, &res, &res.Thread, !isTrue(p.ExcludeTurns))
	if err != nil {
		return nil, nil, err
	}
	return s, after, nil
}

// resume is ResumeThread without the thread's turns; the thread it returns
// is pinned until the caller unpins it.
func (m *Manager) resume(ctx context.Context, c Caller, p api.ThreadResumeParams) (api.ThreadResumeResult, *thread, After, error) {
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.ThreadResumeResult{}, nil, nil, err
	}
	if err := t.update(ctx, c.Principal, overrides{
		model: p.Model, provider: p.ModelProvider, cwd: p.Cwd, approval: p.ApprovalPolicy,
		sandboxMode: p.Sandbox, permissions: p.Permissions, base: p.BaseInstructions, developer: p.DeveloperInstructions,
		serviceTier: p.ServiceTier, roots: p.RuntimeWorkspaceRoots,
	}); err != nil {
		t.unpin()
		return api.ThreadResumeResult{}, nil, nil, err
	}
	t.subscribe(c.Conn)
	m.tellMCPStartup(t, c.Conn)
	base := t.settingsResult()
	res := api.ThreadResumeResult{
		Thread: base.Thread, Model: base.Model, ModelProvider: base.ModelProvider,
		Cwd: base.Cwd, RuntimeWorkspaceRoots: base.RuntimeWorkspaceRoots,
		ApprovalPolicy: base.ApprovalPolicy, ApprovalsReviewer: base.ApprovalsReviewer,
		Sandbox: base.Sandbox, ActivePermissionProfile: base.ActivePermissionProfile, ReasoningEffort: base.ReasoningEffort,
		MultiAgentMode: base.MultiAgentMode,
		// The thread's collaboration mode as the reference reports a
		// resumed thread's: the default mode with the thread's model and
		// effort.
		CollaborationMode: &api.CollaborationMode{Mode: api.ModeDefault, Settings: api.CollaborationSettings{Model: base.Model, ReasoningEffort: base.ReasoningEffort}},
		ServiceTier:       base.ServiceTier,
	}
	return res, t, func() {
		t.replayUsage(c.Conn)
		// A client that resumes may answer requests still pending for it.
		m.cfg.Sink.Welcome(t.id)
	}, nil
}

// replayUsage sends the latest token usage to one connection, as the
// reference does after resume and fork.
func (t *thread) replayUsage(conn ConnID) {
	t.mu.Lock()
	total, last, turnID := t.meta.TokenTotal, t.meta.LastUsage, t.meta.LastTurnID
	t.mu.Unlock()
	if total == nil || last == nil || turnID == "" {
		return
	}
	t.m.cfg.Sink.Send(conn, "thread/tokenUsage/updated", api.ThreadTokenUsageUpdatedNotification{
		ThreadID: t.id, TurnID: turnID, TokenUsage: api.TokenUsage{Total: *total, Last: *last, ModelContextWindow: t.m.contextWindow()},
	})
}

// update applies overrides to a loaded thread, bounded by who asked for
// them, and persists them. A principal's bounds are checked even when the
// request changes nothing: the thread's cwd must still lie in its roots.
func (t *thread) update(ctx context.Context, who principal.Principal, o overrides) error {
	if o.empty() && who.IsOperator() {
		return nil
	}
	// Validate on copies, then apply to the live state under the lock, so
	// that concurrent changes (token usage of a running turn, another
	// resume) are not overwritten by a stale copy.
	t.mu.Lock()
	rec, meta := t.rec, t.meta
	t.mu.Unlock()
	if err := t.m.apply(&rec, &meta, o); err != nil {
		return err
	}
	if err := bound(who, &rec, &meta, o, false); err != nil {
		return err
	}
	now := t.m.now()
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	t.mu.Lock()
	if o.empty() && t.rec.Cwd == rec.Cwd && sameBounds(t.meta, meta) {
		t.mu.Unlock()
		return nil // within bounds as it was: nothing to store
	}
	_ = t.m.apply(&t.rec, &t.meta, o) // validated above; cannot fail
	// The bounded settings are those the copy ended with.
	t.rec.Cwd, t.meta.Cwd = rec.Cwd, meta.Cwd
	t.meta.Sandbox, t.meta.ApprovalPolicy, t.meta.PermissionProfile = meta.Sandbox, meta.ApprovalPolicy, meta.PermissionProfile
	t.rec.UpdatedAt = now
	patch := store.ThreadPatch{ID: t.id, Model: t.rec.Model, Meta: t.metaJSONLocked(), UpdatedAt: &now}
	t.mu.Unlock()
	return t.write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{patch}})
}

// ForkThread copies a thread (through lastTurnId) into a new one.
func (m *Manager) ForkThread(ctx context.Context, c Caller, p api.ThreadForkParams) (api.ThreadStartResult, After, error) {
	res, t, after, err := m.fork(ctx, c, p)
	if err != nil {
		return api.ThreadStartResult{}, nil, err
	}
	if err := t.loadTurns(ctx, &res.Thread, p.ExcludeTurns); err != nil {
		return api.ThreadStartResult{}, nil, err
	}
	return res, after, nil
}

// StreamFork is ForkThread for a websocket reply: its result is a
// ThreadStream, the copy's turns (unless p.ExcludeTurns) read from its
// store while the reply is written (see StreamResume).
func (m *Manager) StreamFork(ctx context.Context, c Caller, p api.ThreadForkParams) (*transcript.ThreadStream, After, error) {
	res, t, after, err := m.fork(ctx, c, p)
	if err != nil {
		return nil, nil, err
	}
	s, err := t.transcript().Stream(ctx, &res, &res.Thread, !isTrue(p.ExcludeTurns))
	if err != nil {
		return nil, nil, err
	}
	return s, after, nil
}

// fork is ForkThread without the copy's turns.
func (m *Manager) fork(ctx context.Context, c Caller, p api.ThreadForkParams) (api.ThreadStartResult, *thread, After, error) {
	src, err := m.threadFor(ctx, p.ThreadID, noRollout)
	if err != nil {
		return api.ThreadStartResult{}, nil, nil, err
	}
	defer src.unpin()
	src.mu.Lock()
	rec, meta := src.rec, src.meta
	src.mu.Unlock()
	if err := src.checkForkable(ctx, rec, meta); err != nil {
		return api.ThreadStartResult{}, nil, nil, err
	}
	now := m.now()
	rec.ID = newID()
	srcID := src.id
	rec.ForkedFromID = &srcID
	rec.Archived = false
	rec.CreatedAt, rec.UpdatedAt, rec.RecencyAt = now, now, now
	if c.ClientName != "" {
		name := c.ClientName
		meta.Originator = &name
	}
	meta.ThreadSource = p.ThreadSource
	if meta.ReasoningEffort == nil {
		// A source that never chose an effort: the copy takes the one
		// saved since (model_reasoning_effort).
		meta.ReasoningEffort = optional(m.defaults(c.Principal.Name()).ReasoningEffort)
	}
	o := overrides{
		model: p.Model, provider: p.ModelProvider, cwd: p.Cwd, approval: p.ApprovalPolicy,
		sandboxMode: p.Sandbox, permissions: p.Permissions, base: p.BaseInstructions, developer: p.DeveloperInstructions,
		serviceTier: p.ServiceTier, roots: p.RuntimeWorkspaceRoots,
	}
	if err := m.apply(&rec, &meta, o); err != nil {
		return api.ThreadStartResult{}, nil, nil, err
	}
	profile, err := applyConfig(&meta, p.Config, o.sandboxAsked())
	if err != nil {
		return api.ThreadStartResult{}, nil, nil, err
	}
	if err := bound(c.Principal, &rec, &meta, o, profile); err != nil {
		return api.ThreadStartResult{}, nil, nil, err
	}
	metaJSON, _ := json.Marshal(meta)
	rec.Meta = metaJSON

	b := &store.Batch{CreateThreads: []*store.Thread{&rec}}
	if err := m.copyTranscript(ctx, src, rec.ID, p.LastTurnID, now, b); err != nil {
		return api.ThreadStartResult{}, nil, nil, err
	}
	st, err := m.storeFor(p.Ephemeral)
	if err != nil {
		return api.ThreadStartResult{}, nil, nil, err
	}
	if err := st.Write(ctx, b); err != nil {
		return api.ThreadStartResult{}, nil, nil, err
	}
	// The copy's history is read from its own store by its first turn.
	t := newThread(m, rec, meta, st, m.lineage(ctx, meta))
	if err := m.register(t); err != nil {
		return api.ThreadStartResult{}, nil, nil, err
	}
	t.subscribe(c.Conn)
	return t.settingsResult(), t, func() {
		t.replayUsage(c.Conn)
		th := t.apiThread()
		m.broadcastThread(th.ID, th.Originator, "thread/started", api.ThreadStartedNotification{Thread: th})
		m.threadStarted(th, meta.Config)
	}, nil
}

// noRollout is how thread/fork refuses a thread it cannot copy: one that
// does not exist or that has nothing to copy yet, in the reference's words
// (its threads have no rollout file until then).
const noRollout = "no rollout found for thread id %s"

// checkForkable refuses, as NotFound, a fork of a thread that has nothing
// to copy: an ephemeral thread (kept in memory only, never copied), or one
// only started, whatever its settings. A thread counts as used once it has
// a turn (a user message or a `!cmd`, even interrupted at once), a name,
// injected items, a goal or Git metadata, or is itself a fork: what makes
// the reference write a thread's rollout, checked against its answers.
func (t *thread) checkForkable(ctx context.Context, rec store.Thread, meta transcript.ThreadMeta) error {
	if t.ephemeral() {
		return apperr.New(apperr.NotFound, noRollout, t.id)
	}
	if rec.Name != nil || rec.ForkedFromID != nil || meta.Reverted || len(meta.Injected) > 0 ||
		meta.Goal != nil || meta.GitInfo != nil {
		return nil
	}
	page, err := t.store.ListTurns(ctx, store.TurnsQuery{ThreadID: t.id, Limit: 1})
	if err != nil {
		return err
	}
	if len(page.Turns) == 0 {
		return apperr.New(apperr.NotFound, noRollout, t.id)
	}
	return nil
}

// copyTranscript adds to b a copy of src's stored turns (through
// lastTurnID when set) and their items, as turns and items of thread
// dstID; a source turn still running ends in the copy as interrupted. The
// copy's model history is read from the store by its first turn, like any
// loaded thread's.
func (m *Manager) copyTranscript(ctx context.Context, src *thread, dstID string, lastTurnID *string, now time.Time, b *store.Batch) error {
	turns, err := src.transcript().Turns(ctx)
	if err != nil {
		return err
	}
	if lastTurnID != nil {
		cut := -1
		for i, tr := range turns {
			if tr.ID == *lastTurnID {
				cut = i
			}
		}
		if cut < 0 {
			return apperr.New(apperr.Invalid, "turn not found: %s", *lastTurnID)
		}
		if turns[cut].Status == store.TurnInProgress {
			return apperr.New(apperr.Invalid, "cannot fork through turn %s: it is still running", *lastTurnID)
		}
		turns = turns[:cut+1]
	}
	items, err := src.transcript().Items(ctx, "")
	if err != nil {
		return err
	}
	kept := map[string]bool{}
	for _, tr := range turns {
		cp := tr
		cp.ThreadID = dstID
		if cp.Status == store.TurnInProgress {
			// A running source turn ends, in the copy, as interrupted.
			cp.Status = store.TurnInterrupted
			cp.CompletedAt = &now
		}
		kept[tr.ID] = true
		b.CreateTurns = append(b.CreateTurns, &cp)
	}
	for _, it := range items {
		if !kept[it.TurnID] {
			continue
		}
		cp := it
		cp.ThreadID = dstID
		b.AppendItems = append(b.AppendItems, &cp)
	}
	return nil
}

// Unsubscribe removes the caller from a thread.
func (m *Manager) Unsubscribe(c Caller, p api.ThreadUnsubscribeParams) (api.ThreadUnsubscribeResult, error) {
	id, err := parseThreadID(p.ThreadID)
	if err != nil {
		return api.ThreadUnsubscribeResult{}, err
	}
	t := m.loaded(id)
	if t == nil {
		return api.ThreadUnsubscribeResult{Status: api.NotLoaded}, nil
	}
	if m.cfg.Sink.Unsubscribe(t.id, c.Conn) {
		t.unsubscribed()
		return api.ThreadUnsubscribeResult{Status: api.Unsubscribed}, nil
	}
	return api.ThreadUnsubscribeResult{Status: api.NotSubscribed}, nil
}

// loadTurns fills th's turns from the thread's transcript unless the
// client asked to exclude them (thread/resume, thread/fork).
func (t *thread) loadTurns(ctx context.Context, th *api.Thread, exclude *bool) error {
	if isTrue(exclude) {
		return nil
	}
	turns, err := t.transcript().APITurns(ctx)
	if err != nil {
		return err
	}
	th.Turns = turns
	return nil
}

// isTrue reports whether an optional flag is set and true.
func isTrue(b *bool) bool { return b != nil && *b }
