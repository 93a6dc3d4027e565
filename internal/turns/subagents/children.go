package subagents

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// threadSourceSubagent is the threadSource tag of spawned children.
const threadSourceSubagent = "subagent"

// Children drives the child threads of one thread from its turn's tools
// (spawn_agent and the other collaboration tools): it creates children,
// gives them input, waits for them and stops them. Every method refuses a
// thread that is not a child of this one. It is safe for concurrent use.
type Children struct {
	s        *Service
	parentID string
	depth    int
	// path is the parent's task path ("" unless a v2 spawn named it).
	path string
	// rootTurnID is the rootTurnId of the turns the children start: the
	// root of the parent's turn whose tools drive them.
	rootTurnID string
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
	var rec store.Thread
	var meta transcript.ThreadMeta
	err := c.s.cfg.Table.CreateChild(ctx, c.parentID, sp.ForkContext, func(id string, now time.Time, parent store.Thread, pm transcript.ThreadMeta) (store.Thread, transcript.ThreadMeta, transcript.SpawnEdge) {
		rec = store.Thread{
			ID: id, Cwd: parent.Cwd, ModelProvider: parent.ModelProvider, Model: parent.Model,
			Source: "subAgent", CreatedAt: now, UpdatedAt: now, RecencyAt: now,
		}
		if sp.Model != "" {
			name := sp.Model
			rec.Model = &name
		}
		// The child can never be granted more than its parent: it takes
		// the parent's policies as they are, and nothing in a spawn
		// changes them.
		src := threadSourceSubagent
		meta = transcript.ThreadMeta{
			Cwd: rec.Cwd, ModelProvider: rec.ModelProvider,
			ApprovalPolicy: pm.ApprovalPolicy, ApprovalsReviewer: pm.ApprovalsReviewer, Sandbox: pm.Sandbox,
			ReasoningEffort: cmp.Or(optional(sp.ReasoningEffort), pm.ReasoningEffort), ReasoningSummary: pm.ReasoningSummary,
			BaseInstructions: pm.BaseInstructions, DeveloperInstructions: pm.DeveloperInstructions,
			Originator: pm.Originator, ThreadSource: &src, CLIVersion: pm.CLIVersion, ServiceTier: pm.ServiceTier,
			Verbosity: pm.Verbosity, Config: pm.Config,
			SubAgent: &transcript.SubAgent{ParentThreadID: c.parentID, Depth: c.depth + 1, AgentPath: sp.AgentPath, Nickname: sp.Nickname},
		}
		return rec, meta, transcript.SpawnEdge{ID: rec.ID, Nickname: sp.Nickname}
	})
	if err != nil {
		return Spawned{}, err
	}
	// No thread/started, as in the reference: clients learn of the child
	// from the spawn's collabAgentToolCall item.
	out := Spawned{ID: rec.ID, Model: c.s.cfg.Table.DefaultModel()}
	if rec.Model != nil {
		out.Model = *rec.Model
	}
	if meta.ReasoningEffort != nil {
		out.ReasoningEffort = *meta.ReasoningEffort
	}
	out.Start, err = c.store(ctx, rec.ID, sp.Input)
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
	after, err := c.s.cfg.Table.StartTurn(ctx, childID, c.rootTurnID, input)
	if err != nil || after == nil {
		return func() {}, err
	}
	return after, nil
}

// child loads a child of this thread, pinned until release; a thread that
// is not one is not found, so a model cannot reach other threads by id.
func (c *Children) child(ctx context.Context, id string) (Thread, func(), error) {
	notFound := apperr.New(apperr.NotFound, "agent with id %s not found", id)
	t, release, err := c.s.cfg.Table.Load(ctx, id)
	if err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return nil, nil, notFound
		}
		return nil, nil, err
	}
	sa, _ := t.State()
	if sa == nil || sa.ParentThreadID != c.parentID {
		release()
		return nil, nil, notFound
	}
	return t, release, nil
}

// SendInput gives a child more input: it steers the running turn, or
// starts a new one. With interrupt, the running turn is stopped first and
// the input starts the next.
func (c *Children) SendInput(ctx context.Context, childID string, input []api.UserInput, interrupt bool) error {
	t, release, err := c.child(ctx, childID)
	if err != nil {
		return err
	}
	defer release()
	if interrupt {
		t.Interrupt()
	}
	return c.start(ctx, childID, input)
}

// Message adds text to the child's model history without starting a
// turn: its running turn's next model request takes it, or its next turn.
func (c *Children) Message(ctx context.Context, childID, text string) error {
	t, release, err := c.child(ctx, childID)
	if err != nil {
		return err
	}
	defer release()
	return t.Inject(ctx, []model.InputItem{model.UserMessage(text)})
}

// Wait blocks until the child has no turn running (or ctx ends) and
// returns its state.
func (c *Children) Wait(ctx context.Context, childID string) (State, error) {
	t, release, err := c.child(ctx, childID)
	if err != nil {
		return State{}, err
	}
	defer release()
	for {
		_, done := t.State()
		if done == nil {
			return stateOf(t), nil
		}
		select {
		case <-done:
		case <-ctx.Done():
			return stateOf(t), ctx.Err()
		}
	}
}

// State returns the child's state without waiting.
func (c *Children) State(ctx context.Context, childID string) (State, error) {
	t, release, err := c.child(ctx, childID)
	if err != nil {
		return State{}, err
	}
	defer release()
	return stateOf(t), nil
}

// Interrupt stops the child's running turn, if any, and returns its state
// from before.
func (c *Children) Interrupt(ctx context.Context, childID string) (State, error) {
	t, release, err := c.child(ctx, childID)
	if err != nil {
		return State{}, err
	}
	defer release()
	st := stateOf(t)
	t.Interrupt()
	return st, nil
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
	edges, err := c.s.cfg.Table.SpawnEdges(ctx, c.parentID)
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
	t, release, err := c.s.cfg.Table.Load(ctx, c.parentID)
	if err != nil {
		return err
	}
	defer release()
	return t.UpdateSpawned(ctx, func(edges []transcript.SpawnEdge) ([]transcript.SpawnEdge, error) {
		i := slices.IndexFunc(edges, func(e transcript.SpawnEdge) bool { return e.ID == childID })
		if i < 0 {
			return nil, apperr.New(apperr.NotFound, "agent with id %s not found", childID)
		}
		next := slices.Clone(edges)
		next[i].Closed = closed
		return next, nil
	})
}

// optional is s as an optional setting: nil when empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
