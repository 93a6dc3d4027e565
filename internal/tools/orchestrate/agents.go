package orchestrate

import (
	"context"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/tools/agents"
	"github.com/appserver/appserver/internal/turns"
	"github.com/appserver/appserver/internal/turns/subagents"
)

// childThreads adapts a turn's subagents.Children to agents.Threads.
type childThreads struct{ c *subagents.Children }

func agentState(st subagents.State) agents.State {
	return agents.State{Running: st.Running, Status: string(st.Status), Answer: st.Answer, Error: st.Error}
}

func (t childThreads) Depth() int { return t.c.Depth() }

func (t childThreads) AgentPath() string { return t.c.AgentPath() }

func (t childThreads) Spawn(ctx context.Context, sp agents.Spawn) (agents.Spawned, error) {
	child, err := t.c.Spawn(ctx, subagents.SpawnParams{
		Input: sp.Input, Nickname: sp.Nickname, AgentPath: sp.AgentPath,
		Model: sp.Model, ReasoningEffort: sp.ReasoningEffort, ForkContext: sp.ForkContext,
	})
	return agents.Spawned{ID: child.ID, Model: child.Model, ReasoningEffort: child.ReasoningEffort, Start: child.Start}, err
}

func (t childThreads) Children(ctx context.Context) ([]agents.Child, error) {
	kids, err := t.c.List(ctx)
	out := make([]agents.Child, len(kids))
	for i, k := range kids {
		out[i] = agents.Child(k)
	}
	return out, err
}

func (t childThreads) SetClosed(ctx context.Context, id string, closed bool) error {
	return t.c.SetClosed(ctx, id, closed)
}

func (t childThreads) SendInput(ctx context.Context, id string, input []api.UserInput, interrupt bool) error {
	return t.c.SendInput(ctx, id, input, interrupt)
}

func (t childThreads) Message(ctx context.Context, id, text string) error {
	return t.c.Message(ctx, id, text)
}

func (t childThreads) Wait(ctx context.Context, id string) (agents.State, error) {
	st, err := t.c.Wait(ctx, id)
	return agentState(st), err
}

func (t childThreads) State(ctx context.Context, id string) (agents.State, error) {
	st, err := t.c.State(ctx, id)
	return agentState(st), err
}

func (t childThreads) Interrupt(ctx context.Context, id string) (agents.State, error) {
	st, err := t.c.Interrupt(ctx, id)
	return agentState(st), err
}

// registerAgents adds the collaboration tools: the v2 namespace when the
// thread turned features.multi_agent_v2 on, else multi_agent_v1 when it
// turned features.multi_agent on.
func (s *Service) registerAgents(b *registry.Builder, tc turns.ToolContext, sw switches) error {
	if tc.Children == nil {
		return nil
	}
	switch {
	case sw.multiAgentV2:
		return s.agents.RegisterV2(b, tc.ThreadID, principal.NameOf(tc.Originator), childThreads{tc.Children}, tc.Sink)
	case sw.multiAgent:
		return s.agents.Register(b, tc.ThreadID, principal.NameOf(tc.Originator), childThreads{tc.Children}, tc.Sink)
	}
	return nil
}
