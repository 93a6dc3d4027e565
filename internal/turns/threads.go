package turns

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// Caller identifies the connection a method call came from.
type Caller struct {
	Conn       ConnID
	ClientName string
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
	base, developer      *string
	effort               *string
}

// apply validates and applies the overrides to a thread record and meta.
func (m *Manager) apply(rec *store.Thread, meta *threadMeta, o overrides) error {
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
	if o.sandboxMode != nil {
		p, err := sandboxPolicyFor(string(*o.sandboxMode))
		if err != nil {
			return err
		}
		meta.Sandbox = p
	}
	if o.sandboxPolicy != nil {
		meta.Sandbox = *o.sandboxPolicy
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
	return nil
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
		Thread:                threadToAPI(t.rec, t.meta, t.statusLocked(), t.ephemeral()),
		Model:                 model,
		ModelProvider:         t.rec.ModelProvider,
		Cwd:                   t.rec.Cwd,
		RuntimeWorkspaceRoots: api.List[string]{t.rec.Cwd},
		ApprovalPolicy:        t.meta.ApprovalPolicy,
		ApprovalsReviewer:     api.ReviewerUser,
		Sandbox:               t.meta.Sandbox,
		ReasoningEffort:       t.meta.ReasoningEffort,
	}
}

// StartThread creates a thread, subscribes the caller and announces it.
func (m *Manager) StartThread(ctx context.Context, c Caller, p api.ThreadStartParams) (api.ThreadStartResult, After, error) {
	if m.isStopped() {
		// Refuse before writing: a thread stored but reported as failed
		// would surprise the client.
		return api.ThreadStartResult{}, nil, apperr.New(apperr.Unavailable, "server is shutting down")
	}
	d := m.defaults()
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
	meta := threadMeta{
		ApprovalPolicy: api.AskForApproval{Policy: api.ApprovalPolicy(d.ApprovalPolicy)},
		Sandbox:        sandbox,
		CLIVersion:     d.CLIVersion,
		ThreadSource:   p.ThreadSource,
	}
	if c.ClientName != "" {
		name := c.ClientName
		meta.Originator = &name
	}
	if p.ServiceTier.Set {
		meta.ServiceTier = p.ServiceTier.Value
	}
	if err := m.apply(&rec, &meta, overrides{
		model: p.Model, provider: p.ModelProvider, cwd: p.Cwd, approval: p.ApprovalPolicy,
		sandboxMode: p.Sandbox, base: p.BaseInstructions, developer: p.DeveloperInstructions,
	}); err != nil {
		return api.ThreadStartResult{}, nil, err
	}
	if err := applyConfig(&meta, p.Config, p.Sandbox != nil); err != nil {
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
	st := m.storeFor(p.Ephemeral)
	metaJSON, _ := json.Marshal(meta)
	rec.Meta = metaJSON
	if err := st.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{&rec}}); err != nil {
		return api.ThreadStartResult{}, nil, err
	}
	t := newThread(m, rec, meta, st)
	// A new thread has no stored items: its ids are all taken here.
	t.allIDsInMemory = true
	if err := m.register(t); err != nil {
		return api.ThreadStartResult{}, nil, err
	}
	t.subscribe(c.Conn)
	res := t.settingsResult()
	return res, func() {
		m.subscribersChanged(t.id)
		m.cfg.Notifier.Broadcast("thread/started", api.ThreadStartedNotification{Thread: t.apiThread()})
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
func (m *Manager) StreamResume(ctx context.Context, c Caller, p api.ThreadResumeParams) (*ThreadStream, After, error) {
	res, t, after, err := m.resume(ctx, c, p)
	if err != nil {
		return nil, nil, err
	}
	defer t.unpin()
	s, err := t.transcript().stream(ctx, &res, &res.Thread, !isTrue(p.ExcludeTurns))
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
	if err := t.update(ctx, overrides{
		model: p.Model, provider: p.ModelProvider, cwd: p.Cwd, approval: p.ApprovalPolicy,
		sandboxMode: p.Sandbox, base: p.BaseInstructions, developer: p.DeveloperInstructions,
	}); err != nil {
		t.unpin()
		return api.ThreadResumeResult{}, nil, nil, err
	}
	t.subscribe(c.Conn)
	base := t.settingsResult()
	res := api.ThreadResumeResult{
		Thread: base.Thread, Model: base.Model, ModelProvider: base.ModelProvider,
		Cwd: base.Cwd, RuntimeWorkspaceRoots: base.RuntimeWorkspaceRoots,
		ApprovalPolicy: base.ApprovalPolicy, ApprovalsReviewer: base.ApprovalsReviewer,
		Sandbox: base.Sandbox, ReasoningEffort: base.ReasoningEffort,
	}
	return res, t, func() {
		t.replayUsage(c.Conn)
		// A client that resumes may answer calls still pending for it.
		m.subscribersChanged(t.id)
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
	t.m.cfg.Notifier.Send([]ConnID{conn}, "thread/tokenUsage/updated", api.ThreadTokenUsageUpdatedNotification{
		ThreadID: t.id, TurnID: turnID, TokenUsage: api.TokenUsage{Total: *total, Last: *last, ModelContextWindow: t.m.contextWindow()},
	})
}

// update applies overrides to a loaded thread and persists them.
func (t *thread) update(ctx context.Context, o overrides) error {
	if o == (overrides{}) {
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
	now := t.m.now()
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	t.mu.Lock()
	_ = t.m.apply(&t.rec, &t.meta, o) // validated above; cannot fail
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
func (m *Manager) StreamFork(ctx context.Context, c Caller, p api.ThreadForkParams) (*ThreadStream, After, error) {
	res, t, after, err := m.fork(ctx, c, p)
	if err != nil {
		return nil, nil, err
	}
	s, err := t.transcript().stream(ctx, &res, &res.Thread, !isTrue(p.ExcludeTurns))
	if err != nil {
		return nil, nil, err
	}
	return s, after, nil
}

// fork is ForkThread without the copy's turns.
func (m *Manager) fork(ctx context.Context, c Caller, p api.ThreadForkParams) (api.ThreadStartResult, *thread, After, error) {
	src, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.ThreadStartResult{}, nil, nil, err
	}
	defer src.unpin()
	src.mu.Lock()
	rec, meta := src.rec, src.meta
	src.mu.Unlock()
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
	if err := m.apply(&rec, &meta, overrides{
		model: p.Model, provider: p.ModelProvider, cwd: p.Cwd, approval: p.ApprovalPolicy,
		sandboxMode: p.Sandbox, base: p.BaseInstructions, developer: p.DeveloperInstructions,
	}); err != nil {
		return api.ThreadStartResult{}, nil, nil, err
	}
	if err := applyConfig(&meta, p.Config, p.Sandbox != nil); err != nil {
		return api.ThreadStartResult{}, nil, nil, err
	}
	metaJSON, _ := json.Marshal(meta)
	rec.Meta = metaJSON

	b := &store.Batch{CreateThreads: []*store.Thread{&rec}}
	if err := m.copyTranscript(ctx, src, rec.ID, p.LastTurnID, now, b); err != nil {
		return api.ThreadStartResult{}, nil, nil, err
	}
	st := m.storeFor(p.Ephemeral)
	if err := st.Write(ctx, b); err != nil {
		return api.ThreadStartResult{}, nil, nil, err
	}
	// The copy's history is read from its own store by its first turn.
	t := newThread(m, rec, meta, st)
	if err := m.register(t); err != nil {
		return api.ThreadStartResult{}, nil, nil, err
	}
	t.subscribe(c.Conn)
	return t.settingsResult(), t, func() {
		t.replayUsage(c.Conn)
		m.cfg.Notifier.Broadcast("thread/started", api.ThreadStartedNotification{Thread: t.apiThread()})
	}, nil
}

// copyTranscript adds to b a copy of src's stored turns (through
// lastTurnID when set) and their items, as turns and items of thread
// dstID; a source turn still running ends in the copy as interrupted. The
// copy's model history is read from the store by its first turn, like any
// loaded thread's.
func (m *Manager) copyTranscript(ctx context.Context, src *thread, dstID string, lastTurnID *string, now time.Time, b *store.Batch) error {
	turns, err := src.transcript().turns(ctx)
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
	items, err := src.transcript().items(ctx, "")
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
	if t.unsubscribe(c.Conn) {
		m.subscribersChanged(t.id)
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
	turns, err := t.transcript().apiTurns(ctx)
	if err != nil {
		return err
	}
	th.Turns = turns
	return nil
}

// isTrue reports whether an optional flag is set and true.
func isTrue(b *bool) bool { return b != nil && *b }
