package subagents

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// Table is the thread table as sub-agents need it (internal/turns
// implements it).
type Table interface {
	// Load returns thread id, loading it from its store if needed, pinned
	// in memory until release is called. An id that is not a thread id
	// is not found.
	Load(ctx context.Context, id string) (th Thread, release func(), err error)
	// Loaded returns thread id if it is in memory, else nil; it is not
	// pinned.
	Loaded(id string) Thread
	// LoadedThreads returns the threads in memory, none pinned.
	LoadedThreads() []Thread
	// CreateChild creates a child of the loaded parentID: build gets a
	// new thread id, the time and the parent's record and meta (read
	// under the parent's lock: build must not block) and returns the
	// child's record (its Meta is set from meta), meta and the spawn edge
	// added to the parent's meta. With fork the child starts with a copy
	// of the parent's transcript. The child and the parent's edge are
	// stored in one write, and the child is then loaded.
	CreateChild(ctx context.Context, parentID string, fork bool, build func(id string, now time.Time, parent store.Thread, meta transcript.ThreadMeta) (store.Thread, transcript.ThreadMeta, transcript.SpawnEdge)) error
	// StartTurn stores a turn on threadID's input, or steers its running
	// one, on behalf of the turn rootTurnID, and returns what launches it
	// (nil when there is nothing to launch).
	StartTurn(ctx context.Context, threadID, rootTurnID string, input []api.UserInput) (launch func(), err error)
	// SpawnEdges returns the spawn edges in id's meta, loaded or not.
	SpawnEdges(ctx context.Context, id string) ([]transcript.SpawnEdge, error)
	// DefaultModel is the model of a thread that names none.
	DefaultModel() string
	// Now is the table's clock.
	Now() time.Time
}

// Thread is one thread of the table.
type Thread interface {
	// ID is the thread's id.
	ID() string
	// State returns, under one lock, the sub-agent record of the thread
	// (nil unless it is a child) and the done channel of its running
	// turn (nil when it has none).
	State() (sa *transcript.SubAgent, running <-chan struct{})
	// Interrupt stops its running turn, if any, as turn/interrupt does.
	Interrupt()
	// Inject adds items to its model history without starting a turn:
	// the running turn's next model request takes them, or the next turn.
	Inject(ctx context.Context, items []model.InputItem) error
	// UpdateSpawned replaces the spawn edges of its meta with what f
	// returns from the current ones (f must not change them in place)
	// and stores the meta; a failed write puts the edges back.
	UpdateSpawned(ctx context.Context, f func([]transcript.SpawnEdge) ([]transcript.SpawnEdge, error)) error
	// ShowOnTurn announces the item items returns (its start, then its
	// completion) on the running turn, unless there is none or it is
	// ending: items is called only then.
	ShowOnTurn(items func() (started, completed api.ThreadItem))
}

// State is a child's state as the collaboration tools report it.
type State struct {
	// Running is true while the child has a turn in progress.
	Running bool
	// Status is the status of its last finished turn ("" before any).
	Status api.TurnStatus
	// Answer is the last agent message of that turn, if it had one.
	Answer *string
	// Error is the turn's error message when it failed.
	Error string
}

// Config is what a Service needs.
type Config struct {
	// Table is the thread table.
	Table Table
	// ChildEnded words the end of a child's turn for its parent's model
	// (turns.Config.ChildEnded); nil or "" tells nothing.
	ChildEnded func(childID, agentPath string, st State) string
	// Logger logs a parent that could not be told of its child's end.
	Logger *slog.Logger
}

// Service is the sub-agents of one thread table. It is safe for
// concurrent use.
type Service struct {
	cfg Config
}

// New returns the sub-agents of cfg.Table.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg}
}

// Parent is a thread whose turn's tools drive its children.
type Parent struct {
	// ThreadID is the parent thread.
	ThreadID string
	// SubAgent is its own sub-agent record (nil for a thread a client
	// started): its depth and task path.
	SubAgent *transcript.SubAgent
	// RootTurnID is the rootTurnId of the turns its children start: the
	// root of the parent's turn whose tools drive them.
	RootTurnID string
}

// Of returns the Children of p's turn.
func (s *Service) Of(p Parent) *Children {
	depth, path := 0, ""
	if p.SubAgent != nil {
		depth, path = p.SubAgent.Depth, p.SubAgent.AgentPath
	}
	return &Children{s: s, parentID: p.ThreadID, depth: depth, path: path, rootTurnID: p.RootTurnID}
}

// stateOf reads a child's state.
func stateOf(t Thread) State {
	sa, running := t.State()
	st := State{Running: running != nil}
	if sa != nil {
		st.Status, st.Answer, st.Error = sa.LastStatus, sa.LastAnswer, sa.LastError
	}
	return st
}

// RecordEnd returns a child's sub-agent record with the end of its turn
// turnID (status, its error and its final item), kept in its meta and
// written with the turn's end; nil (not a child) stays nil.
func RecordEnd(sa *transcript.SubAgent, turnID string, status api.TurnStatus, turnErr *api.TurnError, final *api.ThreadItem) *transcript.SubAgent {
	if sa == nil {
		return nil
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
	return &cp
}

// SettleEnd returns a loading child's record corrected from its last
// stored turn: a turn that never finished (the daemon died under it, and
// recovery marked it interrupted) left the end of the turn before it in
// the meta.
func SettleEnd(sa *transcript.SubAgent, last store.Turn) *transcript.SubAgent {
	if sa == nil || last.ID == sa.EndedTurnID || last.Status == store.TurnInProgress {
		return sa
	}
	cp := *sa
	cp.LastStatus, cp.LastAnswer, cp.LastError, cp.EndedTurnID = api.TurnStatus(last.Status), nil, "", last.ID
	return &cp
}

// TellParent adds the words of a child's turn end (Config.ChildEnded) to
// its parent's model history. The thread table calls it on the child's
// turn once its end is stored, before it is announced and the turn lets go
// of the thread, so that a parent waiting for the child has the note in
// its next model request; a parent gone or unreadable is logged, and the
// child's end stands. A thread that is not a child is told nothing.
func (s *Service) TellParent(ctx context.Context, child Thread) {
	f := s.cfg.ChildEnded
	if f == nil {
		return
	}
	sa, _ := child.State()
	if sa == nil || sa.LastStatus == "" || sa.AgentPath != "" && sa.LastStatus == api.TurnInterrupted {
		// A v2 child interrupted tells its parent nothing, as in the
		// reference: interrupt_agent answered for it.
		return
	}
	text := f(child.ID(), sa.AgentPath, State{Status: sa.LastStatus, Answer: sa.LastAnswer, Error: sa.LastError})
	if text == "" {
		return
	}
	parent, release, err := s.cfg.Table.Load(ctx, sa.ParentThreadID)
	if err == nil {
		err = parent.Inject(ctx, []model.InputItem{model.UserMessage(text)})
		release()
	}
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "the parent was not told of its child's end", "thread", sa.ParentThreadID, "child", child.ID(), "err", err)
	}
}

// ShowEndToParent shows the end of a child named by a task path (a v2
// collaboration child) on its parent's running turn, as the reference
// does: a subAgentActivity item of kind completed. The thread table calls
// it after the child's turn/completed is out, before a wait on the child
// returns. A parent not loaded, or idle, shows nothing.
func (s *Service) ShowEndToParent(child Thread) {
	sa, _ := child.State()
	if sa == nil || sa.AgentPath == "" || sa.EndedTurnID == "" || sa.LastStatus == api.TurnInterrupted {
		return
	}
	parent := s.cfg.Table.Loaded(sa.ParentThreadID)
	if parent == nil {
		return
	}
	parent.ShowOnTurn(func() (api.ThreadItem, api.ThreadItem) {
		ms := s.cfg.Table.Now().UnixMilli()
		body := &api.SubAgentActivityItem{
			ID: "subagent-completed-" + sa.EndedTurnID, Kind: api.SubAgentCompleted, AgentThreadID: child.ID(), AgentPath: sa.AgentPath,
		}
		started := *body
		return api.ThreadItem{Body: &started, StartedAtMs: &ms}, api.ThreadItem{Body: body, StartedAtMs: &ms, CompletedAtMs: &ms}
	})
}

// InterruptChildren stops the running turns of the loaded children of
// parentID: interrupting a parent interrupts the work it delegated. The
// thread table calls it when a turn of parentID ended interrupted.
func (s *Service) InterruptChildren(parentID string) {
	for _, t := range s.cfg.Table.LoadedThreads() {
		if sa, _ := t.State(); sa != nil && sa.ParentThreadID == parentID {
			t.Interrupt()
		}
	}
}

// Descendants returns the threads id spawned, their children and so on,
// parents before their children. A child that is no longer stored (it was
// deleted) is left out.
func (s *Service) Descendants(ctx context.Context, id string) ([]string, error) {
	var out []string
	seen := map[string]bool{id: true}
	for queue := []string{id}; len(queue) > 0; queue = queue[1:] {
		edges, err := s.cfg.Table.SpawnEdges(ctx, queue[0])
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
