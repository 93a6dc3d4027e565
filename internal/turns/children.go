package turns

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// threadSourceSubagent is the threadSource tag of spawned children.
const threadSourceSubagent = "subagent"

// AgentState is a child's state as the collaboration tools report it.
type AgentState struct {
	// Running is true while the child has a turn in progress.
	Running bool
	// Status is the status of its last finished turn ("" before any).
	Status api.TurnStatus
	// Answer is the last agent message of that turn, if it had one.
	Answer *string
	// Error is the turn's error message when it failed.
	Error string
}

// Children drives the child threads of one thread from its turn's tools
// (spawn_agent and the other collaboration tools): it creates children,
// gives them input, waits for them and stops them. Every method refuses a
// thread that is not a child of this one. It is safe for concurrent use.
type Children struct {
	m        *Manager
	parentID string
	depth    int
	// path is the parent's task path ("" unless a v2 spawn named it).
	path string
	// rootTurnID is the rootTurnId of the turns the children start: the
	// root of the parent's turn whose tools drive them.
	rootTurnID string
}

// childrenLocked returns the Children of t for its turn at; t.mu must be
// held.
func (t *thread) childrenLocked(at *activeTurn) *Children {
	depth, path := 0, ""
	if t.meta.SubAgent != nil {
		depth, path = t.meta.SubAgent.Depth, t.meta.SubAgent.AgentPath
	}
	return &Children{m: t.m, parentID: t.id, depth: depth, path: path, rootTurnID: *at.rootID()}
}

// Depth is this thread's spawn depth: 0 for a thread a client started,
// its parent's plus one for a child.
func (c *Children) Depth() int { return c.depth }

// AgentPath is this thread's task path as its spawn named it; "" for a
// thread a client started or a child spawned without one.
func (c *Children) AgentPath() string { return c.path }

// SpawnParams is a child to create.
type SpawnParams struct {
	// Input is the child's first turn's input.
	Input []api.UserInput
	// Nickname and AgentPath name the child in its source.
	Nickname, AgentPath string
	// Model and ReasoningEffort replace the parent's for the child; ""
	// inherits. Neither widens what the child may do.
	Model, ReasoningEffort string
	// ForkContext starts the child with a copy of the parent's transcript.
	ForkContext bool
}

// Spawned is a child Spawn created.
type Spawned struct {
	// ID is its thread id; "" when no child was created.
	ID string
	// Model and ReasoningEffort are what its turns run with ("" for the
	// provider's default effort).
	Model, ReasoningEffort string
	// Start launches the child's first turn, stored by Spawn: the caller
	// announces the spawn first, as the reference does, and must then
	// call it (once) whenever Spawn returned a child. It is a no-op when
	// the turn failed to start.
	Start func()
}

// Spawn creates a child thread that inherits this thread's model, cwd,
// policies, instructions and config, persists it with its parent, and
// stores a turn on its input, which Spawned.Start launches. A child
// created whose first turn failed to start comes back with the error.
func (c *Children) Spawn(ctx context.Context, sp SpawnParams) (Spawned, error) {
	input, nickname, agentPath := sp.Input, sp.Nickname, sp.AgentPath
	m := c.m
	parent, err := m.load(ctx, c.parentID)
	if err != nil {
		return Spawned{}, err
	}
	defer parent.unpin()
	now := m.now()
	b := &store.Batch{}
	childID := newID()
	if sp.ForkContext {
		// The child starts from the parent's transcript as stored: its
		// finished turns and the rounds of the running one committed so
		// far (the copy ends as interrupted).
		if err := m.copyTranscript(ctx, parent, childID, nil, now, b); err != nil {
			return Spawned{}, err
		}
	}
	// The child and its edge in the parent's meta are stored together:
	// metaMu keeps other writers of the parent's meta out until then.
	parent.metaMu.Lock()
	parent.mu.Lock()
	rec := store.Thread{
		ID: childID, Cwd: parent.rec.Cwd, ModelProvider: parent.rec.ModelProvider, Model: parent.rec.Model,
		Source: "subAgent", CreatedAt: now, UpdatedAt: now, RecencyAt: now,
	}
	if sp.Model != "" {
		name := sp.Model
		rec.Model = &name
	}
	pm := parent.meta
	parent.meta.Spawned = append(slices.Clip(pm.Spawned), transcript.SpawnEdge{ID: rec.ID, Nickname: nickname})
	parentPatch := store.ThreadPatch{ID: parent.id, Meta: parent.metaJSONLocked()}
	parent.mu.Unlock()
	// The child can never be granted more than its parent: it takes the
	// parent's policies as they are, and nothing in a spawn changes them.
	src := threadSourceSubagent
	meta := transcript.ThreadMeta{
		Cwd: rec.Cwd, ModelProvider: rec.ModelProvider,
		ApprovalPolicy: pm.ApprovalPolicy, ApprovalsReviewer: pm.ApprovalsReviewer, Sandbox: pm.Sandbox,
		ReasoningEffort: cmp.Or(optional(sp.ReasoningEffort), pm.ReasoningEffort), ReasoningSummary: pm.ReasoningSummary,
		BaseInstructions: pm.BaseInstructions, DeveloperInstructions: pm.DeveloperInstructions,
		Originator: pm.Originator, ThreadSource: &src, CLIVersion: pm.CLIVersion, ServiceTier: pm.ServiceTier,
		Config:   pm.Config,
		SubAgent: &transcript.SubAgent{ParentThreadID: c.parentID, Depth: c.depth + 1, AgentPath: agentPath, Nickname: nickname},
	}
	rec.Meta, _ = json.Marshal(meta)
	b.CreateThreads, b.UpdateThreads = []*store.Thread{&rec}, []store.ThreadPatch{parentPatch}
	err = parent.store.Write(ctx, b)
	if err != nil {
		parent.mu.Lock()
		parent.meta.Spawned = pm.Spawned
		parent.mu.Unlock()
	}
	parent.metaMu.Unlock()
	if err != nil {
		return Spawned{}, err
	}
	child := newThread(m, rec, meta, parent.store, append([]string{parent.id}, parent.ancestors...))
	if err := m.register(child); err != nil {
		return Spawned{}, err
	}
	// No thread/started, as in the reference: clients learn of the child
	// from the spawn's collabAgentToolCall item.
	out := Spawned{ID: child.id, Model: m.cfg.Defaults.Model}
	if rec.Model != nil {
		out.Model = *rec.Model
	}
	if meta.ReasoningEffort != nil {
		out.ReasoningEffort = *meta.ReasoningEffort
	}
	out.Start, err = c.store(ctx, child.id, input)
	return out, err
}

// start starts a turn on a child, or steers its running one, and launches
// it without waiting for a response to be sent first: no client asked.
func (c *Children) start(ctx context.Context, childID string, input []api.UserInput) error {
	launch, err := c.store(ctx, childID, input)
	launch()
	return err
}

// store starts a turn on a child, or steers its running one, and returns
// what launches it (a no-op when there is nothing to launch). The turn is
// stored and counted once store returns: launch must be called.
func (c *Children) store(ctx context.Context, childID string, input []api.UserInput) (func(), error) {
	root := c.rootTurnID
	_, after, err := c.m.startTurn(ctx, Caller{}, api.TurnStartParams{ThreadID: childID, Input: input, RootTurnID: &root}, nil)
	if err != nil || after == nil {
		return func() {}, err
	}
	return after, nil
}

// child loads a child of this thread, pinned; a thread that is not one is
// not found, so a model cannot reach other threads by id.
func (c *Children) child(ctx context.Context, id string) (*thread, error) {
	notFound := apperr.New(apperr.NotFound, "agent with id %s not found", id)
	if _, err := parseThreadID(id); err != nil {
		return nil, notFound
	}
	t, err := c.m.load(ctx, id)
	if err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return nil, notFound
		}
		return nil, err
	}
	t.mu.Lock()
	ok := t.meta.SubAgent != nil && t.meta.SubAgent.ParentThreadID == c.parentID
	t.mu.Unlock()
	if !ok {
		t.unpin()
		return nil, notFound
	}
	return t, nil
}

// SendInput gives a child more input: it steers the running turn, or
// starts a new one. With interrupt, the running turn is stopped first and
// the input starts the next.
func (c *Children) SendInput(ctx context.Context, childID string, input []api.UserInput, interrupt bool) error {
	t, err := c.child(ctx, childID)
	if err != nil {
		return err
	}
	defer t.unpin()
	if interrupt {
		t.interruptActive(errInterrupted)
	}
	return c.start(ctx, childID, input)
}

// Message adds text to the child's model history without starting a
// turn: its running turn's next model request takes it, or its next turn.
func (c *Children) Message(ctx context.Context, childID, text string) error {
	t, err := c.child(ctx, childID)
	if err != nil {
		return err
	}
	defer t.unpin()
	return t.inject(ctx, []model.InputItem{model.UserMessage(text)})
}

// Wait blocks until the child has no turn running (or ctx ends) and
// returns its state.
func (c *Children) Wait(ctx context.Context, childID string) (AgentState, error) {
	t, err := c.child(ctx, childID)
	if err != nil {
		return AgentState{}, err
	}
	defer t.unpin()
	for {
		t.mu.Lock()
		at := t.active
		t.mu.Unlock()
		if at == nil {
			return t.agentState(), nil
		}
		select {
		case <-at.done:
		case <-ctx.Done():
			return t.agentState(), ctx.Err()
		}
	}
}

// State returns the child's state without waiting.
func (c *Children) State(ctx context.Context, childID string) (AgentState, error) {
	t, err := c.child(ctx, childID)
	if err != nil {
		return AgentState{}, err
	}
	defer t.unpin()
	return t.agentState(), nil
}

// Interrupt stops the child's running turn, if any, and returns its state
// from before.
func (c *Children) Interrupt(ctx context.Context, childID string) (AgentState, error) {
	t, err := c.child(ctx, childID)
	if err != nil {
		return AgentState{}, err
	}
	defer t.unpin()
	st := t.agentState()
	t.interruptActive(errInterrupted)
	return st, nil
}

// agentState reads a child's state; t.mu must not be held.
func (t *thread) agentState() AgentState {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := AgentState{Running: t.active != nil}
	if sa := t.meta.SubAgent; sa != nil {
		st.Status, st.Answer, st.Error = sa.LastStatus, sa.LastAnswer, sa.LastError
	}
	return st
}

// recordChildEndLocked keeps a child's turn end in its meta, written with
// the turn's end; t.mu must be held.
func (t *thread) recordChildEndLocked(turnID string, status api.TurnStatus, turnErr *api.TurnError, final *api.ThreadItem) {
	sa := t.meta.SubAgent
	if sa == nil {
		return
	}
	cp := *sa
	cp.LastStatus, cp.LastAnswer, cp.LastError, cp.EndedTurnID = status, nil, "", turnID
	if turnErr != nil {
		cp.LastError = turnErr.Message
	}
	if final != nil {
		if msg, ok := final.Body.(*api.AgentMessageItem); ok {
			text := msg.Text
			cp.LastAnswer = &text
		}
	}
	t.meta.SubAgent = &cp
}

// tellParent adds the words of a child's turn end (Config.ChildEnded) to
// its parent's model history. It runs on the child's turn once its end is
// stored, before it is announced and the turn lets go of the thread, so
// that a parent waiting for the child has the note in its next model
// request; a parent gone or unreadable is logged, and the child's end
// stands.
func (t *thread) tellParent(ctx context.Context) {
	f := t.m.cfg.ChildEnded
	if f == nil {
		return
	}
	t.mu.Lock()
	sa := t.meta.SubAgent
	t.mu.Unlock()
	if sa == nil || sa.LastStatus == "" || sa.AgentPath != "" && sa.LastStatus == api.TurnInterrupted {
		// A v2 child interrupted tells its parent nothing, as in the
		// reference: interrupt_agent answered for it.
		return
	}
	text := f(t.id, sa.AgentPath, AgentState{Status: sa.LastStatus, Answer: sa.LastAnswer, Error: sa.LastError})
	if text == "" {
		return
	}
	parent, err := t.m.load(ctx, sa.ParentThreadID)
	if err == nil {
		err = parent.inject(ctx, []model.InputItem{model.UserMessage(text)})
		parent.unpin()
	}
	if err != nil {
		t.m.log.WarnContext(ctx, "the parent was not told of its child's end", "thread", sa.ParentThreadID, "child", t.id, "err", err)
	}
}

// showEndToParent shows the end of a child named by a task path (a v2
// collaboration child) on its parent's running turn, as the reference
// does: a subAgentActivity item of kind completed, announced after the
// child's turn/completed and before a wait on the child returns. A parent
// not loaded here, or idle, shows nothing.
func (t *thread) showEndToParent() {
	t.mu.Lock()
	sa := t.meta.SubAgent
	t.mu.Unlock()
	if sa == nil || sa.AgentPath == "" || sa.EndedTurnID == "" || sa.LastStatus == api.TurnInterrupted {
		return
	}
	parent := t.m.loaded(sa.ParentThreadID)
	if parent == nil {
		return
	}
	parent.mu.Lock()
	at := parent.active
	parent.mu.Unlock()
	if at == nil || at.ending || at.run == nil {
		return
	}
	ms := t.m.now().UnixMilli()
	body := &api.SubAgentActivityItem{
		ID: "subagent-completed-" + sa.EndedTurnID, Kind: api.SubAgentCompleted, AgentThreadID: t.id, AgentPath: sa.AgentPath,
	}
	started := *body
	at.run.ItemStarted(api.ThreadItem{Body: &started, StartedAtMs: &ms})
	at.run.ItemCompleted(api.ThreadItem{Body: body, StartedAtMs: &ms, CompletedAtMs: &ms})
}

// settleChildEnd corrects a loading child's recorded end from its last
// stored turn: a turn that never finished (the daemon died under it, and
// Recover marked it interrupted) left the end of the turn before it in the
// meta. The thread is not shared yet, so no lock is needed.
func (t *thread) settleChildEnd(last store.Turn) {
	sa := t.meta.SubAgent
	if sa == nil || last.ID == sa.EndedTurnID || last.Status == store.TurnInProgress {
		return
	}
	cp := *sa
	cp.LastStatus, cp.LastAnswer, cp.LastError, cp.EndedTurnID = api.TurnStatus(last.Status), nil, "", last.ID
	t.meta.SubAgent = &cp
}

// interruptChildren stops the running turns of the loaded children of
// parentID: interrupting a parent interrupts the work it delegated.
func (m *Manager) interruptChildren(parentID string) {
	m.mu.Lock()
	all := make([]*thread, 0, len(m.threads))
	for _, t := range m.threads {
		all = append(all, t)
	}
	m.mu.Unlock()
	for _, t := range all {
		t.mu.Lock()
		mine := t.meta.SubAgent != nil && t.meta.SubAgent.ParentThreadID == parentID
		t.mu.Unlock()
		if mine {
			t.interruptActive(errInterrupted)
		}
	}
}

// Child is one child of a thread as its parent recorded it.
type Child struct {
	// ID is the child's thread id.
	ID string
	// Nickname is the name the collaboration tools gave it.
	Nickname string
	// Closed is true once close_agent closed it (until resume_agent).
	Closed bool
}

// List returns the children this thread spawned, in spawn order.
func (c *Children) List(ctx context.Context) ([]Child, error) {
	edges, err := c.m.spawnEdges(ctx, c.parentID)
	if err != nil {
		return nil, err
	}
	out := make([]Child, len(edges))
	for i, e := range edges {
		out[i] = Child(e)
	}
	return out, nil
}

// SetClosed records that a child was closed (or reopened), so that a
// restart finds it as the tools left it.
func (c *Children) SetClosed(ctx context.Context, childID string, closed bool) error {
	t, err := c.m.load(ctx, c.parentID)
	if err != nil {
		return err
	}
	defer t.unpin()
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	t.mu.Lock()
	i := slices.IndexFunc(t.meta.Spawned, func(e transcript.SpawnEdge) bool { return e.ID == childID })
	if i < 0 {
		t.mu.Unlock()
		return apperr.New(apperr.NotFound, "agent with id %s not found", childID)
	}
	prev := t.meta.Spawned
	t.meta.Spawned = slices.Clone(prev)
	t.meta.Spawned[i].Closed = closed
	patch := store.ThreadPatch{ID: t.id, Meta: t.metaJSONLocked()}
	t.mu.Unlock()
	if err := t.write(ctx, &store.Batch{UpdateThreads: []store.ThreadPatch{patch}}); err != nil {
		t.mu.Lock()
		t.meta.Spawned = prev
		t.mu.Unlock()
		return err
	}
	return nil
}

// spawnEdges returns the children thread id recorded, loaded or not.
func (m *Manager) spawnEdges(ctx context.Context, id string) ([]transcript.SpawnEdge, error) {
	if t := m.loaded(id); t != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		return slices.Clone(t.meta.Spawned), nil
	}
	rec, err := m.cfg.Store.GetThread(ctx, id)
	if err != nil {
		return nil, err
	}
	meta, err := transcript.DecodeThreadMeta(rec.Meta)
	return meta.Spawned, err
}

// descendants returns the threads id spawned, their children and so on,
// parents before their children. A child that is no longer stored (it was
// deleted) is left out.
func (m *Manager) descendants(ctx context.Context, id string) ([]string, error) {
	var out []string
	seen := map[string]bool{id: true}
	for queue := []string{id}; len(queue) > 0; queue = queue[1:] {
		edges, err := m.spawnEdges(ctx, queue[0])
		if err != nil {
			if queue[0] != id && apperr.Is(err, apperr.NotFound) {
				out = slices.DeleteFunc(out, func(d string) bool { return d == queue[0] })
				continue
			}
			return nil, err
		}
		for _, e := range edges {
			if !seen[e.ID] {
				seen[e.ID] = true
				out = append(out, e.ID)
				queue = append(queue, e.ID)
			}
		}
	}
	return out, nil
}

// ListChildren returns the threads a thread spawned, in spawn order, as
// thread/read shows them without turns (the HTTP API lists them under
// their parent).
func (m *Manager) ListChildren(ctx context.Context, threadID string) ([]api.Thread, error) {
	id, err := parseThreadID(threadID)
	if err != nil {
		return nil, err
	}
	edges, err := m.spawnEdges(ctx, id)
	if err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return nil, apperr.New(apperr.NotFound, "thread not found: %s", threadID)
		}
		return nil, err
	}
	out := make([]api.Thread, 0, len(edges))
	for _, e := range edges {
		rec, err := m.cfg.Store.GetThread(ctx, e.ID)
		if apperr.Is(err, apperr.NotFound) {
			if t := m.loaded(e.ID); t != nil {
				out = append(out, t.apiThread()) // an ephemeral child
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		th, err := m.storedThread(rec)
		if err != nil {
			return nil, err
		}
		out = append(out, th)
	}
	return out, nil
}

// optional is s as an optional setting: nil when empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// deref is *s, "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
