package turns

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
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
		Thread:                threadToAPI(t.rec, t.meta, t.statusLocked(), t.ephemeral),
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
	d := m.cfg.Defaults
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
	ephemeral := p.Ephemeral != nil && *p.Ephemeral
	t := newThread(m, rec, meta, ephemeral)
	if !ephemeral {
		metaJSON, _ := json.Marshal(meta)
		rec.Meta = metaJSON
		if err := m.cfg.Store.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{&rec}}); err != nil {
			return api.ThreadStartResult{}, nil, err
		}
		t.rec = rec
	}
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
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.ThreadResumeResult{}, nil, err
	}
	defer t.unpin()
	if err := t.update(ctx, overrides{
		model: p.Model, provider: p.ModelProvider, cwd: p.Cwd, approval: p.ApprovalPolicy,
		sandboxMode: p.Sandbox, base: p.BaseInstructions, developer: p.DeveloperInstructions,
	}); err != nil {
		return api.ThreadResumeResult{}, nil, err
	}
	t.subscribe(c.Conn)
	base := t.settingsResult()
	if p.ExcludeTurns == nil || !*p.ExcludeTurns {
		turns, err := m.allTurns(ctx, t)
		if err != nil {
			return api.ThreadResumeResult{}, nil, err
		}
		base.Thread.Turns = turns
	}
	res := api.ThreadResumeResult{
		Thread: base.Thread, Model: base.Model, ModelProvider: base.ModelProvider,
		Cwd: base.Cwd, RuntimeWorkspaceRoots: base.RuntimeWorkspaceRoots,
		ApprovalPolicy: base.ApprovalPolicy, ApprovalsReviewer: base.ApprovalsReviewer,
		Sandbox: base.Sandbox, ReasoningEffort: base.ReasoningEffort,
	}
	return res, func() {
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
		ThreadID: t.id, TurnID: turnID, TokenUsage: api.TokenUsage{Total: *total, Last: *last},
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

// allTurns returns every turn of a thread with all its items.
func (m *Manager) allTurns(ctx context.Context, t *thread) (api.List[api.Turn], error) {
	turns, err := m.turnRecords(ctx, t)
	if err != nil {
		return nil, err
	}
	items, err := m.itemRecords(ctx, t, "")
	if err != nil {
		return nil, err
	}
	byTurn := map[string][]store.Item{}
	for _, it := range items {
		byTurn[it.TurnID] = append(byTurn[it.TurnID], it)
	}
	out := make(api.List[api.Turn], 0, len(turns))
	for _, tr := range turns {
		at, err := turnToAPI(tr, byTurn[tr.ID], api.ItemsFull)
		if err != nil {
			return nil, apperr.Wrap(apperr.Internal, err, "corrupt item")
		}
		out = append(out, at)
	}
	return out, nil
}

// turnRecords lists every turn of a thread in order.
func (m *Manager) turnRecords(ctx context.Context, t *thread) ([]store.Turn, error) {
	if t != nil && t.ephemeral {
		t.mu.Lock()
		defer t.mu.Unlock()
		return append([]store.Turn(nil), t.memTurns...), nil
	}
	var out []store.Turn
	cursor := ""
	for {
		page, err := m.cfg.Store.ListTurns(ctx, store.TurnsQuery{ThreadID: t.id, Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Turns...)
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

// itemRecords lists every item of a thread (or of one turn) in order.
func (m *Manager) itemRecords(ctx context.Context, t *thread, turnID string) ([]store.Item, error) {
	if t.ephemeral {
		t.mu.Lock()
		defer t.mu.Unlock()
		var out []store.Item
		for _, it := range t.memItems {
			if turnID == "" || it.TurnID == turnID {
				out = append(out, it)
			}
		}
		return out, nil
	}
	var out []store.Item
	cursor := ""
	for {
		page, err := m.cfg.Store.ListItems(ctx, store.ItemsQuery{ThreadID: t.id, TurnID: turnID, Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

// ForkThread copies a thread (through lastTurnId) into a new one.
func (m *Manager) ForkThread(ctx context.Context, c Caller, p api.ThreadForkParams) (api.ThreadStartResult, After, error) {
	src, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.ThreadStartResult{}, nil, err
	}
	defer src.unpin()
	turns, err := m.turnRecords(ctx, src)
	if err != nil {
		return api.ThreadStartResult{}, nil, err
	}
	if p.LastTurnID != nil {
		cut := -1
		for i, tr := range turns {
			if tr.ID == *p.LastTurnID {
				cut = i
			}
		}
		if cut < 0 {
			return api.ThreadStartResult{}, nil, apperr.New(apperr.Invalid, "turn not found: %s", *p.LastTurnID)
		}
		if turns[cut].Status == store.TurnInProgress {
			return api.ThreadStartResult{}, nil, apperr.New(apperr.Invalid, "cannot fork through turn %s: it is still running", *p.LastTurnID)
		}
		turns = turns[:cut+1]
	}
	items, err := m.itemRecords(ctx, src, "")
	if err != nil {
		return api.ThreadStartResult{}, nil, err
	}

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
		return api.ThreadStartResult{}, nil, err
	}
	metaJSON, _ := json.Marshal(meta)
	rec.Meta = metaJSON

	ephemeral := p.Ephemeral != nil && *p.Ephemeral
	b := &store.Batch{CreateThreads: []*store.Thread{&rec}}
	kept := map[string]bool{}
	var history []model.InputItem
	for _, tr := range turns {
		cp := tr
		cp.ThreadID = rec.ID
		if cp.Status == store.TurnInProgress {
			// A running source turn ends, in the copy, as interrupted.
			cp.Status = store.TurnInterrupted
			cp.CompletedAt = &now
		}
		kept[tr.ID] = true
		b.CreateTurns = append(b.CreateTurns, &cp)
		h, err := turnHistory(tr)
		if err != nil {
			return api.ThreadStartResult{}, nil, err
		}
		history = append(history, h...)
	}
	for _, it := range items {
		if !kept[it.TurnID] {
			continue
		}
		cp := it
		cp.ThreadID = rec.ID
		b.AppendItems = append(b.AppendItems, &cp)
	}
	t := newThread(m, rec, meta, ephemeral)
	if err := t.write(ctx, b); err != nil {
		return api.ThreadStartResult{}, nil, err
	}
	if !ephemeral {
		t.rec = rec
	}
	t.history = history
	for _, it := range items {
		t.itemIDs[it.ItemID] = struct{}{}
	}
	if err := m.register(t); err != nil {
		return api.ThreadStartResult{}, nil, err
	}
	t.subscribe(c.Conn)
	res := t.settingsResult()
	if p.ExcludeTurns == nil || !*p.ExcludeTurns {
		all, err := m.allTurns(ctx, t)
		if err != nil {
			return api.ThreadStartResult{}, nil, err
		}
		res.Thread.Turns = all
	}
	return res, func() {
		t.replayUsage(c.Conn)
		m.cfg.Notifier.Broadcast("thread/started", api.ThreadStartedNotification{Thread: t.apiThread()})
	}, nil
}

// ArchiveThread unloads (interrupting a running turn) and archives.
func (m *Manager) ArchiveThread(ctx context.Context, p api.ThreadArchiveParams) (After, error) {
	id, err := parseThreadID(p.ThreadID)
	if err != nil {
		return nil, err
	}
	if t := m.loaded(id); t != nil {
		if t.ephemeral {
			return nil, apperr.New(apperr.Invalid, "ephemeral thread %s cannot be archived", id)
		}
		t.mu.Lock()
		at := t.active
		t.mu.Unlock()
		if at != nil {
			at.cancel(errInterrupted)
			<-at.done
		}
		m.mu.Lock()
		if m.threads[id] == t {
			delete(m.threads, id)
		}
		m.mu.Unlock()
		t.stopUnloadTimer()
		if f := m.cfg.ThreadUnloaded; f != nil {
			f(id)
		}
		m.cfg.Notifier.Broadcast("thread/status/changed", api.ThreadStatusChangedNotification{ThreadID: id, Status: api.ThreadStatus{Type: api.ThreadNotLoaded}})
	}
	archived, now := true, m.now()
	if err := m.cfg.Store.Write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{{ID: id, Archived: &archived, UpdatedAt: &now}}}); err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return nil, apperr.New(apperr.NotFound, "no rollout found for thread id %s", p.ThreadID)
		}
		return nil, err
	}
	return func() { m.cfg.Notifier.Broadcast("thread/archived", api.ThreadArchivedNotification{ThreadID: id}) }, nil
}

// UnarchiveThread restores an archived thread to the list.
func (m *Manager) UnarchiveThread(ctx context.Context, p api.ThreadUnarchiveParams) (api.ThreadUnarchiveResult, After, error) {
	id, err := parseThreadID(p.ThreadID)
	if err != nil {
		return api.ThreadUnarchiveResult{}, nil, err
	}
	archived, now := false, m.now()
	if err := m.cfg.Store.Write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{{ID: id, Archived: &archived, UpdatedAt: &now}}}); err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return api.ThreadUnarchiveResult{}, nil, apperr.New(apperr.NotFound, "no rollout found for thread id %s", p.ThreadID)
		}
		return api.ThreadUnarchiveResult{}, nil, err
	}
	rec, err := m.cfg.Store.GetThread(ctx, id)
	if err != nil {
		return api.ThreadUnarchiveResult{}, nil, err
	}
	th, err := m.storedThread(rec)
	if err != nil {
		return api.ThreadUnarchiveResult{}, nil, err
	}
	return api.ThreadUnarchiveResult{Thread: th}, func() {
		m.cfg.Notifier.Broadcast("thread/unarchived", api.ThreadUnarchivedNotification{ThreadID: id})
	}, nil
}

// storedThread renders a thread from its record, with its live status if
// it is loaded.
func (m *Manager) storedThread(rec store.Thread) (api.Thread, error) {
	if t := m.loaded(rec.ID); t != nil {
		return t.apiThread(), nil
	}
	var meta threadMeta
	if len(rec.Meta) > 0 {
		if err := json.Unmarshal(rec.Meta, &meta); err != nil {
			return api.Thread{}, apperr.Wrap(apperr.Internal, err, "corrupt thread metadata")
		}
	}
	return threadToAPI(rec, meta, api.ThreadStatus{Type: api.ThreadNotLoaded}, false), nil
}

// ListThreads pages stored threads.
func (m *Manager) ListThreads(ctx context.Context, p api.ThreadListParams) (api.ThreadListResult, error) {
	q := store.ListThreadsQuery{Desc: true, SortKey: store.SortCreatedAt, Cwds: p.Cwd, ModelProviders: p.ModelProviders}
	if p.SortKey != nil {
		switch *p.SortKey {
		case api.ThreadSortCreatedAt:
		case api.ThreadSortUpdatedAt:
			q.SortKey = store.SortUpdatedAt
		case api.ThreadSortRecencyAt, api.ThreadSortSectionPosition:
			// appserver has no thread sections, so every thread is in the
			// one unsectioned group, whose order is recency.
			q.SortKey = store.SortRecencyAt
		default:
			return api.ThreadListResult{}, apperr.New(apperr.Invalid, "unsupported sortKey `%s`", *p.SortKey)
		}
	}
	if p.SortDirection != nil && *p.SortDirection == api.SortAsc {
		q.Desc = false
	}
	if p.Archived != nil {
		q.Archived = *p.Archived
	}
	if p.Limit != nil {
		q.Limit = int(*p.Limit)
	}
	if p.Cursor != nil {
		q.Cursor = *p.Cursor
	}
	if p.SearchTerm != nil {
		q.SearchTerm = *p.SearchTerm
	}
	if len(p.Originators) > 0 {
		return api.ThreadListResult{}, apperr.New(apperr.Invalid, "filtering by originators is not supported")
	}
	page, err := m.cfg.Store.ListThreads(ctx, q)
	if err != nil {
		return api.ThreadListResult{}, err
	}
	excluded := map[string]bool{}
	for _, id := range p.ExcludedThreadIDs {
		excluded[strings.ToLower(id)] = true
	}
	res := api.ThreadListResult{Data: api.List[api.Thread]{}, ReadStates: map[string]api.ThreadReadState{}}
	for _, rec := range page.Threads {
		if excluded[rec.ID] {
			continue
		}
		th, err := m.storedThread(rec)
		if err != nil {
			return api.ThreadListResult{}, err
		}
		res.Data = append(res.Data, th)
	}
	res.NextCursor = optString(page.NextCursor)
	res.BackwardsCursor = optString(page.BackwardsCursor)
	return res, nil
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ReadThread returns a thread, loaded or stored, optionally with turns.
func (m *Manager) ReadThread(ctx context.Context, p api.ThreadReadParams) (api.ThreadReadResult, error) {
	id, err := parseThreadID(p.ThreadID)
	if err != nil {
		return api.ThreadReadResult{}, err
	}
	var th api.Thread
	t := m.loaded(id)
	if t != nil {
		th = t.apiThread()
	} else {
		rec, err := m.cfg.Store.GetThread(ctx, id)
		if apperr.Is(err, apperr.NotFound) {
			return api.ThreadReadResult{}, apperr.New(apperr.NotFound, "thread not loaded: %s", p.ThreadID)
		}
		if err != nil {
			return api.ThreadReadResult{}, err
		}
		if th, err = m.storedThread(rec); err != nil {
			return api.ThreadReadResult{}, err
		}
		t = &thread{id: id}
	}
	if p.IncludeTurns != nil && *p.IncludeTurns {
		turns, err := m.allTurns(ctx, t)
		if err != nil {
			return api.ThreadReadResult{}, err
		}
		th.Turns = turns
	}
	return api.ThreadReadResult{Thread: th}, nil
}

// knownThread returns a loaded thread, or a stand-in for a stored one whose
// transcript is read from the store.
func (m *Manager) knownThread(ctx context.Context, rawID string) (*thread, error) {
	id, err := parseThreadID(rawID)
	if err != nil {
		return nil, err
	}
	if t := m.loaded(id); t != nil {
		return t, nil
	}
	if _, err := m.cfg.Store.GetThread(ctx, id); err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return nil, apperr.New(apperr.NotFound, "thread not loaded: %s", rawID)
		}
		return nil, err
	}
	return &thread{id: id}, nil
}

// ListTurns pages a thread's turns (newest first by default).
func (m *Manager) ListTurns(ctx context.Context, p api.ThreadTurnsListParams) (api.TurnsPage, error) {
	t, err := m.knownThread(ctx, p.ThreadID)
	if err != nil {
		return api.TurnsPage{}, err
	}
	view := api.ItemsSummary
	if p.ItemsView != nil {
		view = *p.ItemsView
	}
	desc := p.SortDirection == nil || *p.SortDirection == api.SortDesc
	var turns []store.Turn
	var next, back string
	if t.ephemeral {
		turns, _ = m.turnRecords(ctx, t)
		if desc {
			for i, j := 0, len(turns)-1; i < j; i, j = i+1, j-1 {
				turns[i], turns[j] = turns[j], turns[i]
			}
		}
	} else {
		q := store.TurnsQuery{ThreadID: t.id, Desc: desc}
		if p.Limit != nil {
			q.Limit = int(*p.Limit)
		}
		if p.Cursor != nil {
			q.Cursor = *p.Cursor
		}
		page, err := m.cfg.Store.ListTurns(ctx, q)
		if err != nil {
			return api.TurnsPage{}, err
		}
		turns, next, back = page.Turns, page.NextCursor, page.BackwardsCursor
	}
	if len(turns) == 0 && (p.Cursor == nil || *p.Cursor == "") {
		return api.TurnsPage{}, apperr.New(apperr.Invalid, "thread %s is not materialized yet; thread/turns/list is unavailable before first user message", t.id)
	}
	res := api.TurnsPage{Data: make(api.List[api.Turn], 0, len(turns)), NextCursor: optString(next), BackwardsCursor: optString(back)}
	for _, tr := range turns {
		var items []store.Item
		if view != api.ItemsNotLoaded {
			if items, err = m.itemRecords(ctx, t, tr.ID); err != nil {
				return api.TurnsPage{}, err
			}
		}
		at, err := turnToAPI(tr, items, view)
		if err != nil {
			return api.TurnsPage{}, apperr.Wrap(apperr.Internal, err, "corrupt item")
		}
		res.Data = append(res.Data, at)
	}
	return res, nil
}

// ListItems pages a thread's persisted items (oldest first by default).
func (m *Manager) ListItems(ctx context.Context, p api.ThreadItemsListParams) (api.ThreadItemsListResult, error) {
	t, err := m.knownThread(ctx, p.ThreadID)
	if err != nil {
		return api.ThreadItemsListResult{}, err
	}
	q := store.ItemsQuery{ThreadID: t.id, Desc: p.SortDirection != nil && *p.SortDirection == api.SortDesc}
	if p.TurnID != nil {
		q.TurnID = *p.TurnID
	}
	if p.Limit != nil {
		q.Limit = int(*p.Limit)
	}
	if c := p.Cursor; c != nil {
		switch {
		case c.AnchorItemID != "":
			if q.TurnID == "" {
				return api.ThreadItemsListResult{}, apperr.New(apperr.Invalid, "an item cursor requires turnId")
			}
			if q.Desc {
				return api.ThreadItemsListResult{}, apperr.New(apperr.Invalid, "an item cursor is only supported with sortDirection asc")
			}
			anchor, err := m.anchorItem(ctx, t, c.AnchorItemID)
			if err != nil {
				return api.ThreadItemsListResult{}, err
			}
			q.AfterSeq = anchor
		default:
			q.Cursor = c.Opaque
		}
	}
	var items []store.Item
	var next, back string
	if t.ephemeral {
		all, _ := m.itemRecords(ctx, t, q.TurnID)
		for _, it := range all {
			if it.Seq > q.AfterSeq {
				items = append(items, it)
			}
		}
	} else {
		page, err := m.cfg.Store.ListItems(ctx, q)
		if err != nil {
			return api.ThreadItemsListResult{}, err
		}
		items, next, back = page.Items, page.NextCursor, page.BackwardsCursor
	}
	res := api.ThreadItemsListResult{Data: make(api.List[api.ThreadItemEntry], 0, len(items)), NextCursor: optString(next), BackwardsCursor: optString(back)}
	for _, it := range items {
		var ti api.ThreadItem
		if err := json.Unmarshal(it.Payload, &ti); err != nil {
			return api.ThreadItemsListResult{}, apperr.Wrap(apperr.Internal, err, "corrupt item")
		}
		res.Data = append(res.Data, api.ThreadItemEntry{TurnID: it.TurnID, Item: ti, StartedAtMs: ti.StartedAtMs, CompletedAtMs: ti.CompletedAtMs})
	}
	return res, nil
}

func (m *Manager) anchorItem(ctx context.Context, t *thread, itemID string) (int64, error) {
	if t.ephemeral {
		items, _ := m.itemRecords(ctx, t, "")
		for _, it := range items {
			if it.ItemID == itemID {
				return it.Seq, nil
			}
		}
		return 0, apperr.New(apperr.Invalid, "invalid cursor: item %s not found", itemID)
	}
	it, err := m.cfg.Store.GetItem(ctx, t.id, itemID)
	if apperr.Is(err, apperr.NotFound) {
		return 0, apperr.New(apperr.Invalid, "invalid cursor: item %s not found", itemID)
	}
	return it.Seq, err
}

// SetName names a thread and tells every connection.
func (m *Manager) SetName(ctx context.Context, p api.ThreadNameSetParams) (After, error) {
	id, err := parseThreadID(p.ThreadID)
	if err != nil {
		return nil, err
	}
	name := p.Name
	now := m.now()
	t := m.loaded(id)
	patch := store.ThreadPatch{ID: id, Name: &name, UpdatedAt: &now}
	if t != nil && t.ephemeral {
		err = t.write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{patch}})
	} else {
		err = m.cfg.Store.Write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{patch}})
	}
	if apperr.Is(err, apperr.NotFound) {
		return nil, apperr.New(apperr.NotFound, "no rollout found for thread id %s", p.ThreadID)
	}
	if err != nil {
		return nil, err
	}
	if t != nil {
		t.mu.Lock()
		t.rec.Name, t.rec.UpdatedAt = &name, now
		t.mu.Unlock()
	}
	return func() {
		m.cfg.Notifier.Broadcast("thread/name/updated", api.ThreadNameUpdatedNotification{ThreadID: id, ThreadName: &name})
	}, nil
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

// StartTurn starts a turn, or, when one is running, adds the input to it
// as the reference does (protocol.md §8.3).
func (m *Manager) StartTurn(ctx context.Context, c Caller, p api.TurnStartParams) (api.TurnStartResult, After, error) {
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
	if err := t.update(ctx, overrides{model: p.Model, cwd: p.Cwd, approval: p.ApprovalPolicy, sandboxPolicy: p.SandboxPolicy}); err != nil {
		return api.TurnStartResult{}, nil, err
	}
	if t.subscribe(c.Conn) {
		m.subscribersChanged(t.id)
	}
	input := []api.UserInput(p.Input)

	t.mu.Lock()
	for t.active != nil {
		at := t.active
		t.mu.Unlock()
		if at.addSteer(steer{input: input, clientID: p.ClientUserMessageID}) {
			return api.TurnStartResult{Turn: pendingTurn(at.id)}, nil, nil
		}
		// The running turn is settling and takes no more input: the
		// input starts a new turn once it has ended.
		select {
		case <-at.done:
		case <-ctx.Done():
			return api.TurnStartResult{}, nil, ctx.Err()
		}
		t.mu.Lock()
	}
	settings, err := t.settingsLocked(p)
	if err != nil {
		t.mu.Unlock()
		return api.TurnStartResult{}, nil, err
	}
	turnCtx, cancel := context.WithCancelCause(context.Background())
	at := &activeTurn{id: newID(), startedAt: m.now(), settings: settings, ctx: turnCtx, cancel: cancel, done: make(chan struct{})}
	run := &turnRun{
		t: t, at: at,
		// Share the prior history, capped at its length: the turn appends
		// only to its own slice, and the thread's grows (by append, which
		// never writes below this length) only when the turn ends.
		prior: t.history[:len(t.history):len(t.history)],
	}
	if len(t.historyWire) != len(t.history) {
		t.historyWire = make([]json.RawMessage, len(t.history))
		for i, it := range t.history {
			t.historyWire[i], _ = model.WireJSON(it)
		}
	}
	run.priorWire = t.historyWire[:len(t.historyWire):len(t.historyWire)]
	tc := ToolContext{
		ThreadID: t.id, TurnID: at.id, Cwd: settings.cwd,
		DynamicTools: t.meta.DynamicTools, Items: run,
		Model: settings.model, Provider: settings.provider,
		ApprovalPolicy: t.meta.ApprovalPolicy, Sandbox: t.meta.Sandbox,
		Approvals: t.approvals, Client: run, Notify: run.notify,
		Interrupt: func() { at.cancel(errInterrupted) }, TurnDiff: run.setDiff,
	}
	if p.CollaborationMode != nil {
		tc.CollaborationMode = string(p.CollaborationMode.Mode)
	}
	specs, reg, err := m.cfg.Tools(tc)
	if err != nil {
		t.mu.Unlock()
		cancel(nil)
		return api.TurnStartResult{}, nil, err
	}
	run.specs, run.registry = specs, reg
	t.active = at
	if t.unloadTimer != nil {
		t.unloadTimer.Stop()
		t.unloadTimer = nil
	}
	t.mu.Unlock()
	launched = true
	return api.TurnStartResult{Turn: pendingTurn(at.id)}, func() {
		go func() {
			defer m.turns.Done()
			run.run(input, p.ClientUserMessageID)
		}()
	}, nil
}

// pendingTurn is the turn/start response: the reference leaves startedAt
// null and items not loaded until turn/started.
func pendingTurn(id string) api.Turn {
	return api.Turn{ID: id, RootTurnID: &id, Items: api.List[api.ThreadItem]{}, ItemsView: api.ItemsNotLoaded, Status: api.TurnInProgress}
}

// settingsLocked resolves the settings of a new turn; t.mu must be held.
func (t *thread) settingsLocked(p api.TurnStartParams) (turnSettings, error) {
	s := turnSettings{provider: t.rec.ModelProvider, cwd: t.rec.Cwd, instructions: t.m.cfg.Defaults.Instructions}
	if t.rec.Model != nil {
		s.model = *t.rec.Model
	}
	if s.model == "" {
		return s, apperr.New(apperr.Invalid, "no model configured: set `model` in the config or pass one in thread/start or turn/start")
	}
	if t.meta.BaseInstructions != nil {
		s.instructions = *t.meta.BaseInstructions
	}
	if t.meta.DeveloperInstructions != nil {
		s.developer = *t.meta.DeveloperInstructions
	}
	if t.meta.ReasoningEffort != nil {
		s.effort = *t.meta.ReasoningEffort
	}
	if p.Effort != nil {
		s.effort = *p.Effort
	}
	s.summary = t.meta.ReasoningSummary
	if p.Summary != nil {
		s.summary = string(*p.Summary)
	}
	if len(p.OutputSchema) > 0 && string(p.OutputSchema) != "null" {
		s.outputSchema = p.OutputSchema
	}
	if p.CollaborationMode != nil && p.CollaborationMode.Settings.DeveloperInstructions != nil {
		s.developer = strings.TrimSpace(s.developer + "\n\n" + *p.CollaborationMode.Settings.DeveloperInstructions)
	}
	return s, nil
}

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
	if expected != at.id {
		return nil, nil, apperr.New(apperr.Invalid, "expected active turn id `%s` but found `%s`", expected, at.id)
	}
	return t, at, nil
}

// SteerTurn adds input to the running turn.
func (m *Manager) SteerTurn(ctx context.Context, c Caller, p api.TurnSteerParams) (api.TurnSteerResult, error) {
	_, at, err := m.activeTurnOf(ctx, p.ThreadID, p.ExpectedTurnID, "no active turn to steer")
	if err != nil {
		return api.TurnSteerResult{}, err
	}
	if !at.addSteer(steer{input: p.Input, clientID: p.ClientUserMessageID}) {
		// The turn is settling; it will not look at new input again.
		return api.TurnSteerResult{}, apperr.New(apperr.Invalid, "no active turn to steer")
	}
	return api.TurnSteerResult{TurnID: at.id}, nil
}

// InterruptTurn stops the running turn once the response has been sent; it
// then completes with status interrupted.
func (m *Manager) InterruptTurn(ctx context.Context, p api.TurnInterruptParams) (After, error) {
	_, at, err := m.activeTurnOf(ctx, p.ThreadID, p.TurnID, "no active turn to interrupt")
	if err != nil {
		return nil, err
	}
	return func() { at.cancel(errInterrupted) }, nil
}
