package goals

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
)

// fakeGoals is a thread's goal in memory.
type fakeGoals struct{ goal *api.ThreadGoal }

func (f *fakeGoals) Get(context.Context) (*api.ThreadGoal, error) { return f.goal, nil }

func (f *fakeGoals) Create(_ context.Context, objective string, budget *int64) (api.ThreadGoal, error) {
	if f.goal != nil {
		return api.ThreadGoal{}, errors.New("already has a goal")
	}
	f.goal = &api.ThreadGoal{Objective: objective, Status: api.GoalActive, TokenBudget: budget}
	return *f.goal, nil
}

func (f *fakeGoals) SetStatus(_ context.Context, s api.ThreadGoalStatus) (api.ThreadGoal, error) {
	if f.goal == nil {
		return api.ThreadGoal{}, errors.New("no goal")
	}
	f.goal.Status = s
	return *f.goal, nil
}

func call(t *testing.T, g Goals, name, args string) (registry.Output, error) {
	t.Helper()
	return handler{g: g}.Handle(context.Background(), registry.Invocation{Call: registry.Call{CallID: "c", Name: name, Payload: registry.FunctionPayload{Arguments: args}}})
}

// The model may create a goal, read it, and mark it complete or blocked,
// never another status; the answers carry the goal and its budget.
func TestGoalCalls(t *testing.T) {
	g := &fakeGoals{}
	out, err := call(t, g, GetName, `{}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"goal":null,"remainingTokens":null}`, out.Text)

	_, err = call(t, g, CreateName, `{"objective":"  "}`)
	require.ErrorContains(t, err, "objective must not be empty")
	_, err = call(t, g, CreateName, `{"objective":`)
	require.ErrorContains(t, err, "failed to parse function arguments")

	out, err = call(t, g, CreateName, `{"objective":"Ship","token_budget":100}`)
	require.NoError(t, err)
	require.Contains(t, out.Text, `"remainingTokens": 100`)
	g.goal.TokensUsed = 130

	_, err = call(t, g, UpdateName, `{"status":"paused"}`)
	require.ErrorContains(t, err, "only set status complete or blocked")
	require.Equal(t, api.GoalActive, g.goal.Status)

	out, err = call(t, g, UpdateName, `{"status":"complete"}`)
	require.NoError(t, err)
	require.Contains(t, out.Text, `"remainingTokens": 0`, "an overspent budget has none left")
	require.Contains(t, out.Text, "tokens used: 130 of 100")

	out, err = call(t, g, GetName, `{}`)
	require.NoError(t, err)
	require.NotContains(t, out.Text, "completionBudgetReport", "only update_goal reports the final usage")
}

// The three specs register, none parallel, and update_goal offers only
// the two statuses the model may set.
func TestRegister(t *testing.T) {
	b := registry.NewBuilder(registry.Config{})
	require.NoError(t, Register(b, &fakeGoals{}))
	specs, _ := b.Build()
	require.Len(t, specs, 3)
	for _, s := range specs {
		require.False(t, s.SupportsParallelToolCalls)
	}
	require.Equal(t, []any{"complete", "blocked"}, Specs()[2].Parameters.Properties["status"].Enum)
}
