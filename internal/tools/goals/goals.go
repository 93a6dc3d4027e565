package goals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
)

// The tool names, as the reference names them.
const (
	GetName    = "get_goal"
	CreateName = "create_goal"
	UpdateName = "update_goal"
)

// Goals is the calling thread's goal.
type Goals interface {
	// Get returns the goal, or nil when the thread has none.
	Get(ctx context.Context) (*api.ThreadGoal, error)
	// Create starts an active goal; it fails when the thread has one.
	Create(ctx context.Context, objective string, tokenBudget *int64) (api.ThreadGoal, error)
	// SetStatus changes the goal's status; it fails without a goal.
	SetStatus(ctx context.Context, status api.ThreadGoalStatus) (api.ThreadGoal, error)
}

// Specs are the three tools' specs, in the order they are offered. Each
// is built once and shared (registry.Static).
func Specs() []registry.FunctionSpec {
	return []registry.FunctionSpec{getSpec(), createSpec(), updateSpec()}
}

// The three specs, built once by buildSpecs.
var (
	builtSpecs = sync.OnceValue(buildSpecs)
	getSpec    = registry.Static(func() registry.FunctionSpec { return builtSpecs()[0] })
	createSpec = registry.Static(func() registry.FunctionSpec { return builtSpecs()[1] })
	updateSpec = registry.Static(func() registry.FunctionSpec { return builtSpecs()[2] })
)

// buildSpecs builds the three specs.
func buildSpecs() []registry.FunctionSpec {
	none := registry.Object(nil, []string{}, registry.AllowAdditional(false))
	create := registry.Object(map[string]*registry.Schema{
		"objective": registry.String("Required. What the goal is to achieve, concretely. " +
			"A goal is created only when the thread has none; when it has one this tool fails."),
		"token_budget": registry.Integer("Optional. A positive number of tokens the goal may spend."),
	}, []string{"objective"}, registry.AllowAdditional(false))
	status := registry.String("Required. `complete` when the objective is met and nothing required is left; " +
		"`blocked` when the same obstacle has stopped progress for at least three goal turns in a row.")
	status.Enum = []any{string(api.GoalComplete), string(api.GoalBlocked)}
	update := registry.Object(map[string]*registry.Schema{"status": status}, []string{"status"}, registry.AllowAdditional(false))
	return []registry.FunctionSpec{
		{Name: GetName, Parameters: none, Description: "Read this thread's goal: its objective, status, " +
			"token budget, the tokens used so far and the tokens left."},
		{Name: CreateName, Parameters: create, Description: "Create a goal for this thread, only when the user " +
			"or the system/developer instructions ask for one; an ordinary task is not a goal. Give token_budget " +
			"only when a budget was asked for. Fails when the thread has a goal already; " + UpdateName +
			" changes only the status."},
		{Name: UpdateName, Parameters: update, Description: `Set this thread's goal to complete or blocked.
complete: the objective is reached and no required work is left. A budget running low, or stopping work, does not make a goal complete.
blocked: one and the same obstacle has stopped you in at least three goal turns in a row (the user's turn and the automatic continuations count) and nothing useful can be done until the user acts or something outside changes. Hard, slow, uncertain or unfinished work is not blocked.
This tool does not pause or resume a goal, nor change its budget: those belong to the user and the system.
Once a goal that had a token budget is complete, tell the user how many tokens it used in the end, from this tool's answer.`},
	}
}

// Register adds the goal tools for a thread whose goal g reaches; none are
// parallel, as in the reference.
func Register(b *registry.Builder, g Goals) error {
	h := handler{g: g}
	for _, spec := range Specs() {
		if err := b.Register(spec, h, false); err != nil {
			return err
		}
	}
	return nil
}

// handler serves the three tools; the call's name picks the operation.
type handler struct{ g Goals }

// Kind returns registry.PayloadFunction.
func (handler) Kind() registry.PayloadKind { return registry.PayloadFunction }

// IsMutating returns false: a goal is thread state, not the workspace.
func (handler) IsMutating(context.Context, registry.Invocation) bool { return false }

// Handle runs one goal call; a refused call is answered to the model.
func (h handler) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	p, ok := inv.Payload.(registry.FunctionPayload)
	if !ok {
		return registry.Output{}, errors.New("goal tools accept function calls only")
	}
	var goal *api.ThreadGoal
	var err error
	switch inv.Name {
	case GetName:
		goal, err = h.g.Get(ctx)
	case CreateName:
		var a struct {
			Objective   string `json:"objective"`
			TokenBudget *int64 `json:"token_budget"`
		}
		if err := decode(p.Arguments, &a); err != nil {
			return registry.Output{}, err
		}
		if strings.TrimSpace(a.Objective) == "" {
			return registry.Output{}, errors.New("objective must not be empty")
		}
		var g api.ThreadGoal
		g, err = h.g.Create(ctx, a.Objective, a.TokenBudget)
		goal = &g
	case UpdateName:
		var a struct {
			Status api.ThreadGoalStatus `json:"status"`
		}
		if err := decode(p.Arguments, &a); err != nil {
			return registry.Output{}, err
		}
		if a.Status != api.GoalComplete && a.Status != api.GoalBlocked {
			return registry.Output{}, fmt.Errorf("update_goal can only set status complete or blocked; "+
				"pausing, resuming and limits are the user's and the system's (got %q)", a.Status)
		}
		var g api.ThreadGoal
		g, err = h.g.SetStatus(ctx, a.Status)
		goal = &g
	default:
		return registry.Output{}, fmt.Errorf("unknown goal tool: %s", inv.Name)
	}
	if err != nil {
		return registry.Output{}, err
	}
	return answer(goal, inv.Name == UpdateName)
}

func decode(args string, v any) error {
	if err := json.Unmarshal([]byte(args), v); err != nil {
		return fmt.Errorf("failed to parse function arguments: %v", err)
	}
	return nil
}

// response is what every goal call answers: the goal (null when there is
// none), the tokens its budget has left, and, for a budgeted goal marked
// complete, the usage the model is to report.
type response struct {
	Goal                   *api.ThreadGoal `json:"goal"`
	RemainingTokens        *int64          `json:"remainingTokens"`
	CompletionBudgetReport *string         `json:"completionBudgetReport,omitempty"`
}

func answer(goal *api.ThreadGoal, update bool) (registry.Output, error) {
	r := response{Goal: goal}
	if goal != nil && goal.TokenBudget != nil {
		left := max(*goal.TokenBudget-goal.TokensUsed, 0)
		r.RemainingTokens = &left
		if update && goal.Status == api.GoalComplete {
			report := fmt.Sprintf("Goal achieved. Report final budget usage to the user: tokens used: %d of %d.", goal.TokensUsed, *goal.TokenBudget)
			r.CompletionBudgetReport = &report
		}
	}
	out, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return registry.Output{}, err
	}
	return registry.TextOutput(string(out), true), nil
}
