package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/registry"
)

// The namespace and the names of its tools; the model calls them
// multi_agent_v1.spawn_agent and so on.
const (
	Namespace      = "multi_agent_v1"
	SpawnAgentName = "spawn_agent"
	SendInputName  = "send_input"
	WaitAgentName  = "wait_agent"
	CloseAgentName = "close_agent"
	ResumeName     = "resume_agent"
)

// State is a child's state as the thread table reports it.
type State struct {
	// Running is true while the child has a turn in progress.
	Running bool
	// Status is the status of its last finished turn: "completed",
	// "interrupted", "failed", or "" before any ended.
	Status string
	// Answer is that turn's last agent message, if it had one.
	Answer *string
	// Error is the turn's error message when it failed.
	Error string
}

// Spawn is a child to create.
type Spawn struct {
	// Input is the child's first turn's input.
	Input []api.UserInput
	// Nickname names the child for the user and the model.
	Nickname string
	// AgentPath is the child's task path ("" in multi_agent_v1).
	AgentPath string
	// Model and ReasoningEffort override the caller's for the child; ""
	// inherits.
	Model, ReasoningEffort string
	// ForkContext starts the child with a copy of the caller's thread.
	ForkContext bool
}

// Spawned is a child Spawn created.
type Spawned struct {
	// ID is its thread id; "" when no child was created.
	ID string
	// Model and ReasoningEffort are what its turns run with ("" for the
	// provider's default effort).
	Model, ReasoningEffort string
	// Start launches the child's stored first turn; the tool calls it
	// once the spawn's item completed, so that clients hear of the child
	// before its turn, as in the reference. Nil when there is nothing to
	// launch.
	Start func()
}

// Child is one child of the calling thread as the thread table recorded
// it.
type Child struct {
	// ID is the child's thread id.
	ID string
	// Nickname is the name it was spawned with.
	Nickname string
	// Closed is true once close_agent closed it (until resume_agent).
	Closed bool
}

// Threads is the thread table as the tools of one turn see it: the child
// threads of the calling thread. A thread that is not a child of the
// caller is not found.
type Threads interface {
	// Depth is the calling thread's spawn depth (0 for a thread a client
	// started).
	Depth() int
	// AgentPath is the calling thread's task path ("" for a thread a
	// client started, or a child spawned by multi_agent_v1).
	AgentPath() string
	// Spawn creates a child thread that inherits the caller's settings
	// (but for the overrides sp asks for) and stores a turn on its input,
	// which Spawned.Start launches. A child created whose first turn
	// failed to start comes back with the error.
	Spawn(ctx context.Context, sp Spawn) (Spawned, error)
	// Children lists the caller's children, in spawn order, as recorded
	// (the open ones survive a restart).
	Children(ctx context.Context) ([]Child, error)
	// SetClosed records that a child was closed or reopened.
	SetClosed(ctx context.Context, id string, closed bool) error
	// SendInput steers the child's running turn or starts a new one;
	// interrupt stops the running turn first.
	SendInput(ctx context.Context, id string, input []api.UserInput, interrupt bool) error
	// Message adds text to the child's model history without starting a
	// turn (its running turn or its next one takes it).
	Message(ctx context.Context, id, text string) error
	// Wait blocks until the child has no turn running, or ctx ends.
	Wait(ctx context.Context, id string) (State, error)
	// State returns the child's state without waiting.
	State(ctx context.Context, id string) (State, error)
	// Interrupt stops the child's running turn and returns its state
	// from before.
	Interrupt(ctx context.Context, id string) (State, error)
}

// Config switches the collaboration tools on and holds their limits. Zero
// values take the stated defaults.
type Config struct {
	// Enabled offers the tools to threads that do not choose (the
	// daemon's features.multi_agent); a thread's own features.multi_agent
	// config override wins. Default false.
	Enabled bool
	// MaxDepth is how deep children may nest: 1 (the default) lets a
	// thread a client started spawn children, and children spawn none.
	MaxDepth int
	// MaxPerThread is how many open (not closed) children one thread may
	// have; 0 means 6.
	MaxPerThread int
	// MaxTotal is how many children may run at once across the daemon; 0
	// means 64. A child holds its slot while it has a turn running
	// (ChildTurn), so a finished child frees it.
	MaxTotal int
	// MaxPerPrincipal is how many children the threads of one principal
	// may run at once; 0 means 16. The operator's threads (owner "") are
	// bounded by MaxTotal only.
	MaxPerPrincipal int
	// DefaultWait, MinWait and MaxWait bound wait_agent's timeout_ms;
	// 0 means 30s, 10s and one hour, the reference's bounds.
	DefaultWait, MinWait, MaxWait time.Duration
	// Now is the clock of the items' times; nil means time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.MaxDepth <= 0 {
		c.MaxDepth = 1
	}
	if c.MaxPerThread <= 0 {
		c.MaxPerThread = 6
	}
	if c.MaxTotal <= 0 {
		c.MaxTotal = 64
	}
	if c.MaxPerPrincipal <= 0 {
		c.MaxPerPrincipal = 16
	}
	if c.DefaultWait <= 0 {
		c.DefaultWait = 30 * time.Second
	}
	if c.MinWait <= 0 {
		c.MinWait = 10 * time.Second
	}
	if c.MaxWait <= 0 {
		c.MaxWait = time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// nicknames name children for the user, in turn.
var nicknames = []string{"Ada", "Boole", "Curie", "Darwin", "Euler", "Faraday", "Gauss", "Hopper", "Noether", "Turing"}

// Service holds what the collaboration tools share across turns: the open
// children of every thread, counted against the per-thread limit, and the
// running ones, counted against the daemon's and each principal's. It is
// safe for concurrent use.
//
// A child is open from spawn until close_agent; the thread table records
// which are closed, so a thread's first call after a restart (or after it
// was unloaded) counts its open children again. A child runs while it has
// a turn in progress, whoever started it: the thread table reports each
// start and end (ChildTurn), so a finished child frees its slot in the
// daemon's and its principal's count at once, closed or not.
type Service struct {
	cfg Config

	mu   sync.Mutex
	open map[string]map[string]string // parent thread -> open child -> nickname
	// pending counts per parent the spawns reserved and not yet settled.
	pending map[string]int
	// named counts per parent the children named so far; a parent is in
	// it once its recorded children were counted (restore).
	named map[string]int
	// running are the children with a turn in progress, by id, with
	// their owner; runningBy counts them per owner.
	running   map[string]string
	runningBy map[string]int
	// starting counts per owner the turns reserved by spawn_agent and
	// send_input and not yet reported by ChildTurn; startingAll is their
	// sum.
	starting    map[string]int
	startingAll int
	// news are the parents one of whose open children ended a turn since
	// their last collaboration wait_agent (ChildEnded).
	news map[string]bool
}

// New returns the service.
func New(cfg Config) *Service {
	return &Service{
		cfg: cfg.withDefaults(), open: map[string]map[string]string{}, pending: map[string]int{}, named: map[string]int{},
		running: map[string]string{}, runningBy: map[string]int{}, starting: map[string]int{}, news: map[string]bool{},
	}
}

// restore counts the open children parent recorded, once per load of the
// parent: they count against the limits and the tools reach them again
// without resume_agent. Those over the limits stay counted; only new
// spawns are refused.
func (s *Service) restore(ctx context.Context, parent string, th Threads) error {
	s.mu.Lock()
	_, done := s.named[parent]
	s.mu.Unlock()
	if done {
		return nil
	}
	kids, err := th.Children(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, done := s.named[parent]; done {
		return nil // a concurrent call restored it first
	}
	s.named[parent] = len(kids)
	for _, k := range kids {
		if k.Closed {
			continue
		}
		if s.open[parent] == nil {
			s.open[parent] = map[string]string{}
		}
		s.open[parent][k.ID] = k.Nickname
	}
	return nil
}

// Enabled reports whether threads that do not choose get the tools.
func (s *Service) Enabled() bool { return s.cfg.Enabled }

// Items is how the tools show their calls to the turn's clients, as
// collabAgentToolCall items; the turn's ToolSink implements it.
type Items interface {
	// ItemStarted announces an item in its inProgress state.
	ItemStarted(item api.ThreadItem)
	// ItemCompleted commits and announces an item in its final state.
	ItemCompleted(item api.ThreadItem)
}

// Register adds the multi_agent_v1 namespace to b for one turn of the
// thread parentID, whose threads belong to owner (a principal's name, ""
// for the operator), reaching its children through th and announcing its
// calls through items (nil announces nothing).
func (s *Service) Register(b *registry.Builder, parentID, owner string, th Threads, items Items) error {
	// Not parallel, as in the reference: the calls of one round run in
	// order (spawns get their nicknames in call order). The children
	// themselves run concurrently with everything.
	return b.Register(s.Spec(), &handler{s: s, parent: parentID, owner: owner, th: th, items: items}, false)
}

// The descriptions of the overrides spawn_agent takes in both namespaces.
const (
	modelDescription  = "The model the new agent runs on; yours when omitted."
	effortDescription = "How hard the new agent reasons (its reasoning effort); yours when omitted."
)

// Spec is the multi_agent_v1 namespace spec.
func (s *Service) Spec() registry.NamespaceSpec {
	noExtra := registry.AllowAdditional(false)
	items := registry.Array(registry.Object(map[string]*registry.Schema{
		"type":      registry.String("What this item is: text, image, local_image, audio, local_audio, skill or mention."),
		"text":      registry.String("For a text item: the text."),
		"image_url": registry.String("For an image item: the image's URL."),
		"audio_url": registry.String("For an audio item: the sound as a data URL."),
		"path":      registry.String("For local_image, local_audio and skill items: the file's path; for a mention item: what it mentions."),
		"name":      registry.String("For skill and mention items: the name shown for it."),
	}, nil, noExtra), "The input as a list of items (text, images, audio, skills, mentions), in place of message.")
	// As in the reference, message and items are both optional in the
	// schema: exactly one of them must be given.
	spawn := registry.Object(map[string]*registry.Schema{
		"message":          registry.String("The task for the new agent: what to do, its limits, and what to report back. Give this or items, not both."),
		"items":            items,
		"fork_context":     registry.Boolean("True starts the agent with a copy of this thread's history; false or omitted starts it with only its task."),
		"model":            registry.String(modelDescription),
		"reasoning_effort": registry.String(effortDescription),
	}, nil, noExtra)
	send := registry.Object(map[string]*registry.Schema{
		"target":    registry.String("Agent id (or nickname) returned by spawn_agent."),
		"message":   registry.String("The text for the agent. Give this or items, not both."),
		"items":     items,
		"interrupt": registry.Boolean("Stop the agent's current work first; otherwise the text joins it, or starts new work when it is idle."),
	}, []string{"target"}, noExtra)
	wait := registry.Object(map[string]*registry.Schema{
		"targets": registry.Array(registry.String(""), "Agent ids (or nicknames) to wait for; the call returns as soon as one of them has finished."),
		"timeout_ms": registry.Number(fmt.Sprintf("How long to wait in milliseconds: default %d, at least %d, at most %d. Waiting long is better than polling.",
			s.cfg.DefaultWait.Milliseconds(), s.cfg.MinWait.Milliseconds(), s.cfg.MaxWait.Milliseconds())),
	}, []string{"targets"}, noExtra)
	target := registry.Object(map[string]*registry.Schema{
		"target": registry.String("Agent id (or nickname) returned by spawn_agent."),
	}, []string{"target"}, noExtra)
	resume := registry.Object(map[string]*registry.Schema{
		"id": registry.String("Id of an agent closed with close_agent."),
	}, []string{"id"}, noExtra)
	return registry.NamespaceSpec{
		Name:        Namespace,
		Description: "Start and manage sub-agents that work in parallel with you.",
		Tools: []registry.FunctionSpec{
			{Name: SpawnAgentName, Parameters: spawn, Description: "Start a sub-agent on a self-contained task; it works in parallel and in its own thread. " +
				"Returns its agent_id and nickname at once; collect its answer with wait_agent. " +
				"Delegate only when the user or the instructions ask for sub-agents or parallel work."},
			{Name: SendInputName, Parameters: send, Description: "Give a sub-agent more input."},
			{Name: WaitAgentName, Parameters: wait, Description: "Wait until one of the agents has finished; returns the final status of those that have, " +
				"with the final answer of completed ones. On timeout the status map is empty."},
			{Name: CloseAgentName, Parameters: target, Description: "Close an agent, stopping its work, and return its status from before. " +
				"Open agents count against the limit until closed, finished or not."},
			{Name: ResumeName, Parameters: resume, Description: "Reopen a closed agent so that send_input and wait_agent reach it again."},
		},
	}
}

// reserve counts a new open child of parent (open) and a turn about to
// start on a child of owner (run) against the limits, or says which limit
// refuses it; release undoes it once the child or its turn is settled.
func (s *Service) reserve(parent, owner string, open, run bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.open[parent]) + s.pending[parent]; open && n >= s.cfg.MaxPerThread {
		return fmt.Errorf("agent limit reached: this thread has %d open agents (at most %d); close one with close_agent first", n, s.cfg.MaxPerThread)
	}
	if run {
		if n := len(s.running) + s.startingAll; n >= s.cfg.MaxTotal {
			return fmt.Errorf("agent limit reached: the server runs %d agents (at most %d); wait for one to finish or try later", n, s.cfg.MaxTotal)
		}
		if n := s.runningBy[owner] + s.starting[owner]; owner != "" && n >= s.cfg.MaxPerPrincipal {
			return fmt.Errorf("agent limit reached: this principal's threads run %d agents (at most %d); wait for one to finish first", n, s.cfg.MaxPerPrincipal)
		}
		s.starting[owner]++
		s.startingAll++
	}
	if open {
		s.pending[parent]++
	}
	return nil
}

// release ends a reservation: the child's turn was reported by ChildTurn,
// or never started.
func (s *Service) release(parent, owner string, open, run bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if run {
		if s.starting[owner]--; s.starting[owner] <= 0 {
			delete(s.starting, owner)
		}
		s.startingAll--
	}
	if open {
		if s.pending[parent]--; s.pending[parent] <= 0 {
			delete(s.pending, parent)
		}
	}
}

// settle records parent's new open child, before its reservation is
// released.
func (s *Service) settle(parent, id, nickname string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[parent] == nil {
		s.open[parent] = map[string]string{}
	}
	s.open[parent][id] = nickname
}

// ChildTurn records that a child thread, whose threads belong to owner
// (a principal's name, "" for the operator), started a turn (running) or
// ended one. The thread table reports every turn of every child this way,
// whoever started it, before the start is acknowledged and once the end
// is announced.
func (s *Service) ChildTurn(childID, owner string, running bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, was := s.running[childID]
	switch {
	case running && !was:
		s.running[childID] = owner
		s.runningBy[owner]++
	case !running && was:
		delete(s.running, childID)
		if s.runningBy[prev]--; s.runningBy[prev] <= 0 {
			delete(s.runningBy, prev)
		}
	}
}

// ChildEnded records that a child's turn ended in st, news for a
// collaboration wait_agent of its parent, and returns what the parent's
// model is told (EndNote). The thread table calls it for every end but a
// collaboration child's interrupted one, which the reference reports to
// nobody.
func (s *Service) ChildEnded(childID, path string, st State) string {
	s.mu.Lock()
	for parent, kids := range s.open {
		if _, ok := kids[childID]; ok {
			s.news[parent] = true
		}
	}
	s.mu.Unlock()
	return EndNote(childID, path, st)
}

// takeNews reports whether a child of parent ended a turn since the last
// call, and forgets it.
func (s *Service) takeNews(parent string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	news := s.news[parent]
	delete(s.news, parent)
	return news
}

// openChildren lists the ids of parent's open children.
func (s *Service) openChildren(parent string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.open[parent]))
	for id := range s.open[parent] {
		ids = append(ids, id)
	}
	return ids
}

// isRunning reports whether a child has a turn in progress.
func (s *Service) isRunning(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.running[id]
	return ok
}

// nextNickname names parent's next child; the names of one parent's
// children differ, so that a nickname is a target.
func (s *Service) nextNickname(parent string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.named[parent]
	s.named[parent]++
	name := nicknames[n%len(nicknames)]
	if round := n / len(nicknames); round > 0 {
		name = fmt.Sprintf("%s %d", name, round+1)
	}
	return name
}

// isOpen reports whether id is an open child of parent.
func (s *Service) isOpen(parent, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.open[parent][id]
	return ok
}

// resolve returns the id of parent's open child named target: its id or
// its nickname (models often name an agent by the name they were told).
func (s *Service) resolve(parent, target string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.open[parent][target]; ok {
		return target, true
	}
	for id, nick := range s.open[parent] {
		if nick != "" && nick == target {
			return id, true
		}
	}
	return "", false
}

// nickname is the name parent's open child id was spawned with.
func (s *Service) nickname(parent, id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[parent][id]
}

// closeChild removes an open child; it reports whether it was open.
func (s *Service) closeChild(parent, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.open[parent][id]; !ok {
		return false
	}
	delete(s.open[parent], id)
	if len(s.open[parent]) == 0 {
		delete(s.open, parent)
	}
	return true
}

// ThreadUnloaded forgets the open children of a thread that left memory;
// the thread's next collaboration call counts them again (restore).
func (s *Service) ThreadUnloaded(threadID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open, threadID)
	delete(s.named, threadID)
	delete(s.news, threadID)
}

// Open is the number of open children of every thread.
func (s *Service) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, kids := range s.open {
		n += len(kids)
	}
	return n
}

// Running is the number of children with a turn in progress, of owner
// ("" for every owner's).
func (s *Service) Running(owner string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if owner == "" {
		return len(s.running)
	}
	return s.runningBy[owner]
}

// handler runs the namespace's calls for one turn.
type handler struct {
	s      *Service
	parent string
	owner  string // the principal of the parent's threads, "" the operator
	th     Threads
	items  Items
}

// collabTools are the item names of the tools.
var collabTools = map[string]api.CollabAgentTool{
	SpawnAgentName: api.CollabSpawnAgent, SendInputName: api.CollabSendInput, WaitAgentName: api.CollabWait,
	CloseAgentName: api.CollabCloseAgent, ResumeName: api.CollabResumeAgent,
}

// report is what a call tells its item: the agents it is about and their
// states when it ended.
type report struct {
	receivers []string
	states    map[string]api.CollabAgentState
	// prompt is the call's input as the item shows it, once parsed.
	prompt *string
	// model and effort are a spawned child's.
	model, effort *string
	// start launches a spawned child's turn once the item completed.
	start func()
}

// note adds an agent and its state to the report.
func (r *report) note(id string, st State, closed bool) {
	if !slices.Contains(r.receivers, id) {
		r.receivers = append(r.receivers, id)
	}
	if r.states == nil {
		r.states = map[string]api.CollabAgentState{}
	}
	r.states[id] = collabState(st, closed)
}

// collabState is a state as collabAgentToolCall items carry it.
func collabState(st State, closed bool) api.CollabAgentState {
	switch {
	case closed:
		return api.CollabAgentState{Status: api.CollabShutdown}
	case st.Running:
		return api.CollabAgentState{Status: api.CollabRunning}
	}
	switch st.Status {
	case "completed":
		return api.CollabAgentState{Status: api.CollabCompleted, Message: st.Answer}
	case "interrupted":
		return api.CollabAgentState{Status: api.CollabInterrupted}
	case "failed":
		msg := st.Error
		return api.CollabAgentState{Status: api.CollabErrored, Message: &msg}
	}
	return api.CollabAgentState{Status: api.CollabPendingInit}
}

// Kind returns registry.PayloadFunction.
func (*handler) Kind() registry.PayloadKind { return registry.PayloadFunction }

// IsMutating returns false: the children's own tools ask for what they do.
func (*handler) IsMutating(context.Context, registry.Invocation) bool { return false }

// Handle runs one collaboration call between its collabAgentToolCall
// item's start and completion.
func (h *handler) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	p, ok := inv.Payload.(registry.FunctionPayload)
	if !ok {
		return registry.Output{}, fmt.Errorf("%s received an unsupported payload", inv.DisplayName())
	}
	tool, ok := collabTools[inv.Name]
	if !ok {
		return registry.Output{}, fmt.Errorf("unknown tool %s", inv.DisplayName())
	}
	item := &api.CollabAgentToolCallItem{
		ID: inv.CallID, Tool: tool, Status: api.StatusInProgress, SenderThreadID: h.parent,
		ReceiverThreadIDs: api.List[string]{}, AgentsStates: map[string]api.CollabAgentState{},
	}
	var rep report
	defer func() {
		// Runs after the item completed, and on every way out: the
		// child's turn is stored and must run.
		if rep.start != nil {
			rep.start()
		}
	}()
	startMs := h.s.cfg.Now().UnixMilli()
	// Restored first, so that the started item names the agents a call
	// targets by nickname.
	err := h.s.restore(ctx, h.parent, h.th)
	if err != nil {
		err = fmt.Errorf("could not list this thread's agents: %s", apperr.MessageOf(err))
	}
	if h.items != nil {
		h.announce(item, inv.Name, p.Arguments)
		start := *item
		start.ReceiverThreadIDs = slices.Clone(item.ReceiverThreadIDs)
		h.items.ItemStarted(api.ThreadItem{Body: &start, StartedAtMs: &startMs})
	}
	var out any
	switch {
	case err != nil:
	case inv.Name == SpawnAgentName:
		out, err = h.spawn(ctx, p.Arguments, &rep)
	case inv.Name == SendInputName:
		out, err = h.send(ctx, p.Arguments, &rep)
	case inv.Name == WaitAgentName:
		out, err = h.wait(ctx, p.Arguments, &rep)
	case inv.Name == CloseAgentName:
		out, err = h.close(ctx, p.Arguments, &rep)
	case inv.Name == ResumeName:
		out, err = h.resume(ctx, p.Arguments, &rep)
	}
	var text []byte
	if err == nil {
		text, err = json.Marshal(out)
	}
	if h.items != nil {
		if rep.prompt != nil {
			item.Prompt = rep.prompt
		}
		if rep.model != nil {
			item.Model, item.ReasoningEffort = rep.model, rep.effort
		}
		for _, id := range rep.receivers {
			if !slices.Contains(item.ReceiverThreadIDs, id) {
				item.ReceiverThreadIDs = append(item.ReceiverThreadIDs, id)
			}
		}
		for id, st := range rep.states {
			item.AgentsStates[id] = st
		}
		switch {
		case ctx.Err() != nil:
			item.Status = api.StatusInterrupted
		case err != nil:
			item.Status = api.StatusFailed
		default:
			item.Status = api.StatusCompleted
		}
		doneMs := h.s.cfg.Now().UnixMilli()
		h.items.ItemCompleted(api.ThreadItem{Body: item, StartedAtMs: &startMs, CompletedAtMs: &doneMs})
	}
	if err != nil {
		return registry.Output{}, err
	}
	return registry.TextOutput(string(text), true), nil
}

// defaultEffort is the reasoning effort a spawn's item shows when neither
// the call nor the thread chose one: the models' default, which the
// reference shows too.
const defaultEffort = "medium"

// announce fills what a call's item shows when it starts, as the reference
// does: a spawn's prompt, requested model ("" for none) and effort, and
// the open agents the other calls name.
func (h *handler) announce(item *api.CollabAgentToolCallItem, name, raw string) {
	var a struct {
		Message         *string      `json:"message"`
		Items           []collabItem `json:"items"`
		Model           string       `json:"model"`
		ReasoningEffort string       `json:"reasoning_effort"`
		Target          string       `json:"target"`
		Targets         []string     `json:"targets"`
	}
	if json.Unmarshal([]byte(raw), &a) != nil {
		return
	}
	if in, err := collabInput(a.Message, a.Items); err == nil {
		item.Prompt = inputPreview(in)
	}
	if name == SpawnAgentName {
		effort := cmp.Or(a.ReasoningEffort, defaultEffort)
		item.Model, item.ReasoningEffort = &a.Model, &effort
		return
	}
	for _, target := range append(a.Targets, a.Target) {
		if id, ok := h.s.resolve(h.parent, target); ok && !slices.Contains(item.ReceiverThreadIDs, id) {
			item.ReceiverThreadIDs = append(item.ReceiverThreadIDs, id)
		}
	}
}

// decode parses a call's arguments, in the words the model reads.
func decode(args string, v any) error {
	dec := json.NewDecoder(strings.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("failed to parse function arguments: %v", err)
	}
	return nil
}

// textInput is a message as a turn's input.
func textInput(msg string) []api.UserInput {
	return []api.UserInput{{Type: api.UserInputText, Text: msg}}
}

// collabItem is one structured input item of spawn_agent and send_input.
type collabItem struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL string `json:"image_url"`
	AudioURL string `json:"audio_url"`
	Path     string `json:"path"`
	Name     string `json:"name"`
}

// collabInput is a call's input: its message or its items, exactly one of
// them.
func collabInput(message *string, items []collabItem) ([]api.UserInput, error) {
	switch {
	case message != nil && items != nil:
		return nil, errors.New("give message or items, not both")
	case message == nil && items == nil:
		return nil, errors.New("give message or items")
	case message != nil:
		if strings.TrimSpace(*message) == "" {
			return nil, errors.New("the message is empty: there is nothing to send")
		}
		return textInput(*message), nil
	case len(items) == 0:
		return nil, errors.New("items is empty: there is nothing to send")
	}
	out := make([]api.UserInput, 0, len(items))
	for i, it := range items {
		var in api.UserInput
		switch it.Type {
		case "text":
			in = api.UserInput{Type: api.UserInputText, Text: it.Text}
		case "image":
			in = api.UserInput{Type: api.UserInputImage, URL: it.ImageURL}
		case "local_image":
			in = api.UserInput{Type: api.UserInputLocalImage, Path: it.Path}
		case "audio":
			in = api.UserInput{Type: api.UserInputAudio, URL: it.AudioURL}
		case "local_audio":
			in = api.UserInput{Type: api.UserInputLocalAudio, Path: it.Path}
		case "skill":
			in = api.UserInput{Type: api.UserInputSkill, Name: it.Name, Path: it.Path}
		case "mention":
			in = api.UserInput{Type: api.UserInputMention, Name: it.Name, Path: it.Path}
		default:
			return nil, fmt.Errorf("items[%d]: unknown type %q (text, image, local_image, audio, local_audio, skill or mention)", i, it.Type)
		}
		out = append(out, in)
	}
	return out, nil
}

// inputPreview is a call's input as its item's prompt shows it: the text
// of its text items.
func inputPreview(in []api.UserInput) *string {
	var parts []string
	for _, it := range in {
		if it.Type == api.UserInputText {
			parts = append(parts, it.Text)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	s := strings.Join(parts, "\n")
	return &s
}

// defaultRole is the only agent_type this server knows: the caller's own
// settings.
const defaultRole = "default"

func (h *handler) spawn(ctx context.Context, raw string, rep *report) (any, error) {
	var a struct {
		Message         *string      `json:"message"`
		Items           []collabItem `json:"items"`
		AgentType       string       `json:"agent_type"`
		ForkContext     bool         `json:"fork_context"`
		Model           string       `json:"model"`
		ReasoningEffort string       `json:"reasoning_effort"`
	}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	input, err := collabInput(a.Message, a.Items)
	if err != nil {
		return nil, err
	}
	rep.prompt = inputPreview(input)
	if role := strings.TrimSpace(a.AgentType); role != "" && role != defaultRole {
		return nil, fmt.Errorf("unknown agent_type '%s'", role)
	}
	if a.ForkContext && (a.Model != "" || a.ReasoningEffort != "" || strings.TrimSpace(a.AgentType) != "") {
		// A forked agent continues the caller's context, in its model.
		return nil, errors.New("fork_context cannot be combined with agent_type, model or reasoning_effort: a forked agent keeps the caller's settings")
	}
	if d := h.th.Depth(); d >= h.s.cfg.MaxDepth {
		return nil, fmt.Errorf("agent depth limit reached: an agent at depth %d cannot spawn agents (at most %d levels)", d, h.s.cfg.MaxDepth)
	}
	if err := h.s.reserve(h.parent, h.owner, true, true); err != nil {
		return nil, err
	}
	nick := h.s.nextNickname(h.parent)
	child, err := h.th.Spawn(ctx, Spawn{
		Input: input, Nickname: nick, Model: a.Model, ReasoningEffort: a.ReasoningEffort, ForkContext: a.ForkContext,
	})
	id := child.ID
	rep.start = child.Start
	if id != "" {
		// A child created whose first turn failed to start is still
		// open: send_input can start it again.
		h.s.settle(h.parent, id, nick)
	}
	// The child's turn, if it started, was reported by ChildTurn.
	h.s.release(h.parent, h.owner, true, true)
	if err != nil && id == "" {
		return nil, fmt.Errorf("could not spawn the agent: %s", apperr.MessageOf(err))
	}
	// As in the reference, the new agent reads pendingInit: its turn has
	// only been handed over.
	rep.note(id, State{}, false)
	effort := cmp.Or(child.ReasoningEffort, defaultEffort)
	rep.model, rep.effort = &child.Model, &effort
	return struct {
		AgentID  string  `json:"agent_id"`
		Nickname *string `json:"nickname"`
	}{id, &nick}, nil
}

// openTarget returns the id of the caller's open child named target (by
// id or nickname).
func (h *handler) openTarget(target string) (string, error) {
	id, ok := h.s.resolve(h.parent, target)
	if !ok {
		return "", fmt.Errorf("agent %s is not open: spawn it, or resume it with resume_agent", target)
	}
	return id, nil
}

func (h *handler) send(ctx context.Context, raw string, rep *report) (any, error) {
	var a struct {
		Target    string       `json:"target"`
		Message   *string      `json:"message"`
		Items     []collabItem `json:"items"`
		Interrupt bool         `json:"interrupt"`
	}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	input, err := collabInput(a.Message, a.Items)
	if err != nil {
		return nil, err
	}
	rep.prompt = inputPreview(input)
	id, err := h.openTarget(a.Target)
	if err != nil {
		return nil, err
	}
	// Input for an idle child starts a turn: it needs a slot. A running
	// one takes it into its turn (or, interrupted, into the next one,
	// which its slot carries over).
	start := !h.s.isRunning(id)
	if start {
		if err := h.s.reserve(h.parent, h.owner, false, true); err != nil {
			return nil, err
		}
	}
	err = h.th.SendInput(ctx, id, input, a.Interrupt)
	if start {
		h.s.release(h.parent, h.owner, false, true)
	}
	if err != nil {
		return nil, errors.New(apperr.MessageOf(err))
	}
	rep.note(id, State{Running: true}, false)
	return struct {
		SubmissionID string `json:"submission_id"`
	}{id}, nil
}

// statusJSON is a state in the model's words: "running", "pending_init",
// "interrupted", "shutdown", {"completed": answer} or {"errored": message}.
func statusJSON(st State, closed bool) any {
	switch {
	case closed:
		return "shutdown"
	case st.Running:
		return "running"
	}
	switch st.Status {
	case "completed":
		return map[string]*string{"completed": st.Answer}
	case "interrupted":
		return "interrupted"
	case "failed":
		return map[string]string{"errored": st.Error}
	}
	return "pending_init"
}

// EndNote is what a parent's model is told when its child's turn ended
// in st. A multi_agent_v1 child (no task path) is a <subagent_notification>
// holding the child's id (under the reference's key agent_path) and its
// status as wait_agent words it; a collaboration child (path) is the
// reference's FINAL_ANSWER message from the child to its parent.
func EndNote(childID, path string, st State) string {
	status := statusJSON(State{Status: st.Status, Answer: st.Answer, Error: st.Error}, false)
	if path != "" {
		return finalAnswer(path, status)
	}
	note, err := json.Marshal(struct {
		AgentPath string `json:"agent_path"`
		Status    any    `json:"status"`
	}{childID, status})
	if err != nil {
		return ""
	}
	return "<subagent_notification>\n" + string(note) + "\n</subagent_notification>"
}

// final reports whether a state is one wait_agent returns.
func final(st State) bool { return !st.Running && st.Status != "" }

func (h *handler) wait(ctx context.Context, raw string, rep *report) (any, error) {
	var a struct {
		Targets   []string `json:"targets"`
		TimeoutMs *float64 `json:"timeout_ms"`
	}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	if len(a.Targets) == 0 {
		return nil, errors.New("targets must name at least one agent id")
	}
	ids := make([]string, 0, len(a.Targets))
	for _, target := range a.Targets {
		id, err := h.openTarget(target)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	timeout := h.s.cfg.DefaultWait
	if a.TimeoutMs != nil {
		timeout = time.Duration(*a.TimeoutMs * float64(time.Millisecond))
	}
	timeout = min(max(timeout, h.s.cfg.MinWait), h.s.cfg.MaxWait)

	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// One waiter per target; the first to see its child finish ends the
	// wait for all. Each waiter returns once wctx is cancelled.
	type result struct {
		id  string
		st  State
		err error
	}
	results := make(chan result, len(ids))
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := h.th.Wait(wctx, id)
			results <- result{id, st, err}
		}()
	}
	var firstErr error
	for range ids {
		r := <-results
		if r.err == nil && final(r.st) {
			cancel()
			break
		}
		if r.err != nil && wctx.Err() == nil && firstErr == nil {
			firstErr = r.err
			cancel()
			break
		}
	}
	cancel()
	wg.Wait()
	if firstErr != nil {
		return nil, errors.New(apperr.MessageOf(firstErr))
	}
	if ctx.Err() != nil {
		// The caller's turn was interrupted: it reads nothing.
		return nil, ctx.Err()
	}
	status := map[string]any{}
	for _, id := range ids {
		st, err := h.th.State(ctx, id)
		if err != nil {
			continue
		}
		rep.note(id, st, false)
		if final(st) {
			status[id] = statusJSON(st, false)
		}
	}
	return struct {
		Status   map[string]any `json:"status"`
		TimedOut bool           `json:"timed_out"`
	}{status, len(status) == 0}, nil
}

func (h *handler) close(ctx context.Context, raw string, rep *report) (any, error) {
	var a struct {
		Target string `json:"target"`
	}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	id, err := h.openTarget(a.Target)
	if err != nil {
		return nil, err
	}
	st, err := h.th.Interrupt(ctx, id)
	if err != nil {
		return nil, errors.New(apperr.MessageOf(err))
	}
	if err := h.th.SetClosed(ctx, id, true); err != nil {
		return nil, fmt.Errorf("could not close the agent: %s", apperr.MessageOf(err))
	}
	h.s.closeChild(h.parent, id)
	rep.note(id, st, true)
	return struct {
		PreviousStatus any `json:"previous_status"`
	}{statusJSON(st, false)}, nil
}

func (h *handler) resume(ctx context.Context, raw string, rep *report) (any, error) {
	var a struct {
		ID string `json:"id"`
	}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	if h.s.isOpen(h.parent, a.ID) {
		st, err := h.th.State(ctx, a.ID)
		if err != nil {
			return nil, errors.New(apperr.MessageOf(err))
		}
		rep.note(a.ID, st, false)
		return struct {
			Status any `json:"status"`
		}{statusJSON(st, false)}, nil
	}
	// Only a child of the caller can be reopened; State checks that.
	st, err := h.th.State(ctx, a.ID)
	if err != nil {
		return nil, errors.New(apperr.MessageOf(err))
	}
	if err := h.s.reserve(h.parent, h.owner, true, false); err != nil {
		return nil, err
	}
	if err := h.th.SetClosed(ctx, a.ID, false); err != nil {
		h.s.release(h.parent, h.owner, true, false)
		return nil, fmt.Errorf("could not resume the agent: %s", apperr.MessageOf(err))
	}
	h.s.settle(h.parent, a.ID, h.nicknameOf(ctx, a.ID))
	h.s.release(h.parent, h.owner, true, false)
	rep.note(a.ID, st, false)
	return struct {
		Status any `json:"status"`
	}{statusJSON(st, false)}, nil
}

// nicknameOf returns the nickname child id was spawned with, "" when the
// thread table cannot say.
func (h *handler) nicknameOf(ctx context.Context, id string) string {
	kids, err := h.th.Children(ctx)
	if err != nil {
		return ""
	}
	for _, k := range kids {
		if k.ID == id {
			return k.Nickname
		}
	}
	return ""
}
