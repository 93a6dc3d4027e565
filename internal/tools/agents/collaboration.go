package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/registry"
)

// The v2 namespace (features.multi_agent_v2) and the names of its tools
// beside spawn_agent and wait_agent; the model calls them
// collaboration.spawn_agent and so on.
const (
	V2Namespace        = "collaboration"
	ListAgentsName     = "list_agents"
	SendMessageName    = "send_message"
	FollowupTaskName   = "followup_task"
	InterruptAgentName = "interrupt_agent"
)

// rootPath is the task path of a thread a client started.
const rootPath = "/root"

// taskName is what a v2 spawn may call its child.
var taskName = regexp.MustCompile(`^[a-z0-9_]+$`)

// RegisterV2 adds the collaboration namespace to b for one turn of the
// thread parentID, as Register does for multi_agent_v1: the same limits,
// the same children, named by task paths instead of nicknames.
func (s *Service) RegisterV2(b *registry.Builder, parentID, owner string, th Threads, items Items) error {
	return b.Register(s.SpecV2(), &v2Handler{handler{s: s, parent: parentID, owner: owner, th: th, items: items}}, false)
}

// SpecV2 is the collaboration namespace spec.
func (s *Service) SpecV2() registry.NamespaceSpec {
	noExtra := registry.AllowAdditional(false)
	spawn := registry.Object(map[string]*registry.Schema{
		"task_name":        registry.String("Name of the new agent's task: lowercase letters, digits and underscores. Its canonical name is your own task path followed by /task_name."),
		"message":          registry.String("The task for the new agent: what to do, its limits, and what to report back."),
		"fork_turns":       registry.String("How much of your history the agent starts with: all (the default) or none."),
		"model":            registry.String(modelDescription),
		"reasoning_effort": registry.String(effortDescription),
	}, []string{"task_name", "message"}, noExtra)
	wait := registry.Object(map[string]*registry.Schema{
		"timeout_ms": registry.Number(fmt.Sprintf("How long to wait in milliseconds: default %d, at least %d, at most %d.",
			s.cfg.DefaultWait.Milliseconds(), s.cfg.MinWait.Milliseconds(), s.cfg.MaxWait.Milliseconds())),
	}, nil, noExtra)
	message := registry.Object(map[string]*registry.Schema{
		"target":  registry.String("The agent's task name or canonical task path (from spawn_agent)."),
		"message": registry.String("Text for the agent."),
	}, []string{"target", "message"}, noExtra)
	target := registry.Object(map[string]*registry.Schema{
		"target": registry.String("The agent's task name or canonical task path (from spawn_agent)."),
	}, []string{"target"}, noExtra)
	list := registry.Object(map[string]*registry.Schema{
		"path_prefix": registry.String("List only the agents whose task path begins with this, written without a final slash; every agent when omitted."),
	}, nil, noExtra)
	return registry.NamespaceSpec{
		Name:        V2Namespace,
		Description: "Start and follow sub-agents that work in parallel with you.",
		Tools: []registry.FunctionSpec{
			{Name: SpawnAgentName, Parameters: spawn, Description: "Start a sub-agent on a task; it works in parallel, in its own thread, with the same tools as you. " +
				"Refer to it by its task name or its canonical task path. Its final answer is delivered to you when it finishes. " +
				"Delegate only when the user or the instructions ask for sub-agents or parallel work."},
			{Name: WaitAgentName, Parameters: wait, Description: "Wait until one of your agents has news (a final answer) or the timeout passes. " +
				"Returns a summary, not the content: the answers arrive as messages."},
			{Name: ListAgentsName, Parameters: list, Description: "List you and your live agents with their statuses."},
			{Name: SendMessageName, Parameters: message, Description: "Give an agent a message without starting work: its current turn reads it, or its next one."},
			{Name: FollowupTaskName, Parameters: message, Description: "Give an agent a new task: it starts work when idle, or reads the task while it works."},
			{Name: InterruptAgentName, Parameters: target, Description: "Stop an agent's current turn and return its status from before; it stays available for messages and tasks."},
		},
	}
}

// v2Handler runs the collaboration namespace's calls for one turn.
type v2Handler struct{ handler }

// Handle runs one call: a spawn is shown as a subAgentActivity item, a
// wait as a collabAgentToolCall item, a listing as no item, as in the
// reference.
func (h *v2Handler) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	p, ok := inv.Payload.(registry.FunctionPayload)
	if !ok {
		return registry.Output{}, fmt.Errorf("%s received an unsupported payload", inv.DisplayName())
	}
	if err := h.s.restore(ctx, h.parent, h.th); err != nil {
		return registry.Output{}, fmt.Errorf("could not list this thread's agents: %s", apperr.MessageOf(err))
	}
	var out any
	var err error
	switch inv.Name {
	case SpawnAgentName:
		out, err = h.spawnV2(ctx, inv.CallID, p.Arguments)
	case WaitAgentName:
		out, err = h.waitV2(ctx, inv.CallID, p.Arguments)
	case ListAgentsName:
		out, err = h.list(ctx, p.Arguments)
	case SendMessageName, FollowupTaskName, InterruptAgentName:
		return h.interact(ctx, inv.Name, inv.CallID, p.Arguments)
	default:
		return registry.Output{}, fmt.Errorf("unknown tool %s", inv.DisplayName())
	}
	if err != nil {
		return registry.Output{}, err
	}
	text, err := jsonText(out)
	if err != nil {
		return registry.Output{}, err
	}
	return registry.TextOutput(text, true), nil
}

// selfPath is the caller's own task path.
func (h *v2Handler) selfPath() string { return cmp.Or(h.th.AgentPath(), rootPath) }

func (h *v2Handler) spawnV2(ctx context.Context, callID, raw string) (any, error) {
	var a struct {
		TaskName        string  `json:"task_name"`
		Message         *string `json:"message"`
		ForkTurns       string  `json:"fork_turns"`
		Model           string  `json:"model"`
		ReasoningEffort string  `json:"reasoning_effort"`
	}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	if !taskName.MatchString(a.TaskName) {
		return nil, fmt.Errorf("task_name must use lowercase letters, digits and underscores, got %q", a.TaskName)
	}
	if a.Message == nil || strings.TrimSpace(*a.Message) == "" {
		return nil, errors.New("message must not be empty")
	}
	fork := false
	switch a.ForkTurns {
	case "", "all":
		fork = true
	case "none":
	default:
		return nil, fmt.Errorf("fork_turns must be all or none, got %q", a.ForkTurns)
	}
	if fork && (a.Model != "" || a.ReasoningEffort != "") {
		return nil, errors.New("fork_turns all cannot be combined with model or reasoning_effort: a forked agent keeps the caller's settings; use fork_turns none")
	}
	path := h.selfPath() + "/" + a.TaskName
	if _, taken := h.s.resolve(h.parent, path); taken {
		return nil, fmt.Errorf("an agent named %s exists already", path)
	}
	if d := h.th.Depth(); d >= h.s.cfg.MaxDepth {
		return nil, fmt.Errorf("agent depth limit reached: an agent at depth %d cannot spawn agents (at most %d levels)", d, h.s.cfg.MaxDepth)
	}
	if err := h.s.reserve(h.parent, h.owner, true, true); err != nil {
		return nil, err
	}
	startMs := h.s.cfg.Now().UnixMilli()
	child, err := h.th.Spawn(ctx, Spawn{
		Input: textInput(*a.Message), Nickname: path, AgentPath: path, Model: a.Model, ReasoningEffort: a.ReasoningEffort, ForkContext: fork,
	})
	if child.ID != "" {
		h.s.settle(h.parent, child.ID, path)
	}
	h.s.release(h.parent, h.owner, true, true)
	if err != nil && child.ID == "" {
		return nil, fmt.Errorf("could not spawn the agent: %s", apperr.MessageOf(err))
	}
	if h.items != nil {
		effort := cmp.Or(child.ReasoningEffort, defaultEffort)
		model := child.Model
		body := &api.SubAgentActivityItem{
			Model: &model, ReasoningEffort: &effort, ID: callID, Kind: api.SubAgentStarted, AgentThreadID: child.ID, AgentPath: path,
		}
		started := *body
		h.items.ItemStarted(api.ThreadItem{Body: &started, StartedAtMs: &startMs})
		h.items.ItemCompleted(api.ThreadItem{Body: body, StartedAtMs: &startMs, CompletedAtMs: &startMs})
	}
	// The child's turn starts once its spawn was announced, as in the
	// reference.
	if child.Start != nil {
		child.Start()
	}
	return struct {
		TaskName string `json:"task_name"`
	}{path}, nil
}

// interact runs send_message, followup_task and interrupt_agent, each
// shown as a subAgentActivity item on the caller's turn (interacted, or
// interrupted), as in the reference: the first two answer nothing, the
// last the agent's status from before.
func (h *v2Handler) interact(ctx context.Context, name, callID, raw string) (registry.Output, error) {
	var a struct {
		Target  string  `json:"target"`
		Message *string `json:"message"`
	}
	if err := decode(raw, &a); err != nil {
		return registry.Output{}, err
	}
	if name != InterruptAgentName && (a.Message == nil || strings.TrimSpace(*a.Message) == "") {
		return registry.Output{}, errors.New("message must not be empty")
	}
	id, ok := h.resolveV2(a.Target)
	if !ok {
		return registry.Output{}, fmt.Errorf("agent %s not found: name it by its task name or canonical task path", a.Target)
	}
	path := h.s.nickname(h.parent, id)
	show := func(kind api.SubAgentActivityKind) {
		if h.items == nil {
			return
		}
		ms := h.s.cfg.Now().UnixMilli()
		body := &api.SubAgentActivityItem{ID: callID, Kind: kind, AgentThreadID: id, AgentPath: path}
		started := *body
		h.items.ItemStarted(api.ThreadItem{Body: &started, StartedAtMs: &ms})
		h.items.ItemCompleted(api.ThreadItem{Body: body, StartedAtMs: &ms, CompletedAtMs: &ms})
	}
	text := ""
	var err error
	switch name {
	case SendMessageName:
		if err = h.th.Message(ctx, id, *a.Message); err == nil {
			show(api.SubAgentInteracted)
		}
	case FollowupTaskName:
		run := !h.s.isRunning(id)
		if err = h.s.reserve(h.parent, h.owner, false, run); err != nil {
			return registry.Output{}, err
		}
		// Shown before the task starts the agent's turn, in the
		// reference's order.
		show(api.SubAgentInteracted)
		err = h.th.SendInput(ctx, id, textInput(*a.Message), false)
		h.s.release(h.parent, h.owner, false, run)
	case InterruptAgentName:
		var prev State
		if prev, err = h.th.Interrupt(ctx, id); err == nil {
			show(api.SubAgentInterrupted)
			text, err = jsonText(struct {
				PreviousStatus any `json:"previous_status"`
			}{statusJSON(prev, false)})
		}
	}
	if err != nil {
		return registry.Output{}, errors.New(apperr.MessageOf(err))
	}
	return registry.TextOutput(text, true), nil
}

// resolveV2 returns the id of the caller's open child named target: its
// canonical task path, its path relative to the caller, or its id.
func (h *v2Handler) resolveV2(target string) (string, bool) {
	if id, ok := h.s.resolve(h.parent, target); ok {
		return id, true
	}
	return h.s.resolve(h.parent, h.selfPath()+"/"+strings.TrimPrefix(target, "/"))
}

func (h *v2Handler) waitV2(ctx context.Context, callID, raw string) (any, error) {
	var a struct {
		TimeoutMs *float64 `json:"timeout_ms"`
	}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	startMs := h.s.cfg.Now().UnixMilli()
	item := &api.CollabAgentToolCallItem{
		ID: callID, Tool: api.CollabWait, Status: api.StatusInProgress, SenderThreadID: h.parent,
		ReceiverThreadIDs: api.List[string]{}, AgentsStates: map[string]api.CollabAgentState{},
	}
	if h.items != nil {
		started := *item
		h.items.ItemStarted(api.ThreadItem{Body: &started, StartedAtMs: &startMs})
	}
	timeout := h.s.cfg.DefaultWait
	if a.TimeoutMs != nil {
		timeout = time.Duration(*a.TimeoutMs * float64(time.Millisecond))
	}
	timeout = min(max(timeout, h.s.cfg.MinWait), h.s.cfg.MaxWait)
	news, err := h.waitNews(ctx, timeout)
	if h.items != nil {
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
		return nil, err
	}
	msg := "Wait completed."
	if !news {
		msg = "Wait timed out."
	}
	return struct {
		Message  string `json:"message"`
		TimedOut bool   `json:"timed_out"`
	}{msg, !news}, nil
}

// waitNews waits until a child of the caller that had not ended when it
// was last asked has ended (its final answer is then in the caller's
// history), or the timeout passes; it reports whether one did.
func (h *v2Handler) waitNews(ctx context.Context, timeout time.Duration) (bool, error) {
	if h.s.takeNews(h.parent) {
		return true, nil
	}
	var running []string
	for _, id := range h.s.openChildren(h.parent) {
		if h.s.isRunning(id) {
			running = append(running, id)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if len(running) == 0 {
		<-wctx.Done()
		return h.s.takeNews(h.parent), ctx.Err()
	}
	ended := make(chan error, len(running))
	var wg sync.WaitGroup
	for _, id := range running {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := h.th.Wait(wctx, id)
			ended <- err
		}()
	}
	var err error
	select {
	case err = <-ended:
	case <-wctx.Done():
	}
	cancel()
	wg.Wait()
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil && wctx.Err() == nil {
		return false, errors.New(apperr.MessageOf(err))
	}
	return h.s.takeNews(h.parent), nil
}

func (h *v2Handler) list(ctx context.Context, raw string) (any, error) {
	var a struct {
		PathPrefix string `json:"path_prefix"`
	}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	type agent struct {
		Name   string `json:"agent_name"`
		Status any    `json:"agent_status"`
	}
	out := []agent{}
	keep := func(path string) bool {
		return a.PathPrefix == "" || path == a.PathPrefix || strings.HasPrefix(path, strings.TrimSuffix(a.PathPrefix, "/")+"/")
	}
	if self := h.selfPath(); keep(self) {
		out = append(out, agent{self, "running"})
	}
	kids, err := h.th.Children(ctx)
	if err != nil {
		return nil, fmt.Errorf("could not list this thread's agents: %s", apperr.MessageOf(err))
	}
	for _, k := range kids {
		if k.Closed || !strings.HasPrefix(k.Nickname, "/") || !keep(k.Nickname) {
			continue
		}
		st, err := h.th.State(ctx, k.ID)
		if err != nil {
			continue
		}
		out = append(out, agent{k.Nickname, statusJSON(st, false)})
	}
	return struct {
		Agents []agent `json:"agents"`
	}{out}, nil
}

// jsonText is v as the JSON text a tool answers.
func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// finalAnswer is a collaboration child's end in the words the reference
// sends its parent: a FINAL_ANSWER message from the child's path to its
// parent's.
func finalAnswer(path string, status any) string {
	parent := path[:max(strings.LastIndex(path, "/"), 0)]
	payload := ""
	if m, ok := status.(map[string]*string); ok && m["completed"] != nil {
		payload = *m["completed"]
	} else if text, err := jsonText(status); err == nil {
		payload = text
	}
	return "Message Type: FINAL_ANSWER\nTask name: " + cmp.Or(parent, rootPath) + "\nSender: " + path + "\nPayload:\n" + payload
}
