package planning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
)

// Name is the tool name.
const Name = "update_plan"

// Description is the tool description sent to the model.
const Description = `Record your plan for the task, and keep it current as you work.
Send the whole plan each time: every step with its status, and if you like a short note on what changed.
Keep a single step in_progress at any time.
`

// OutputText is what the model gets back after a successful update.
const OutputText = "Plan updated"

// EventMethod is the notification the plan update is delivered as.
const EventMethod = "turn/plan/updated"

// buildSpec builds Spec's value.
func buildSpec() registry.FunctionSpec {
	item := registry.Object(map[string]*registry.Schema{
		"step":   registry.String(""),
		"status": registry.String("pending, in_progress or completed"),
	}, []string{"step", "status"}, registry.AllowAdditional(false))
	params := registry.Object(map[string]*registry.Schema{
		"explanation": registry.String(""),
		"plan":        registry.Array(item, "Every step of the plan, in order"),
	}, []string{"plan"}, registry.AllowAdditional(false))
	return registry.FunctionSpec{Name: Name, Description: Description, Parameters: params}
}

var specStatic = registry.Static(buildSpec)

// Spec returns the update_plan function spec (strict:false).
// It is built once and shared (registry.Static).
func Spec() registry.FunctionSpec { return specStatic() }

// Register adds update_plan to b: non-parallel, as in Codex.
func Register(b *registry.Builder, h *Handler) error {
	if h == nil {
		h = &Handler{}
	}
	return b.Register(Spec(), h, false)
}

// StepStatus is a plan step status as the client sees it (camelCase wire
// values of turn/plan/updated).
type StepStatus string

// The wire statuses.
const (
	// StatusPending is a step not started yet (model side: pending).
	StatusPending StepStatus = "pending"
	// StatusInProgress is the step being worked on (model side: in_progress).
	StatusInProgress StepStatus = "inProgress"
	// StatusCompleted is a finished step (model side: completed).
	StatusCompleted StepStatus = "completed"
)

// Step is one plan step in a PlanUpdated event.
type Step struct {
	// Step is the step text.
	Step string `json:"step"`
	// Status is the step's status.
	Status StepStatus `json:"status"`
}

// PlanUpdated is the turn/plan/updated event; Params gives it the turn's
// thread and turn ids.
type PlanUpdated struct {
	// Explanation is the model's optional note; nil is sent as null.
	Explanation *string `json:"explanation"`
	// Plan is the full plan, in order.
	Plan []Step `json:"plan"`
}

// Method returns "turn/plan/updated".
func (PlanUpdated) Method() string { return EventMethod }

// Params returns the notification of the turn turnID of thread threadID.
func (p PlanUpdated) Params(threadID, turnID string) any {
	steps := make(api.List[api.TurnPlanStep], len(p.Plan))
	for i, s := range p.Plan {
		steps[i] = api.TurnPlanStep{Step: s.Step, Status: api.TurnPlanStepStatus(s.Status)}
	}
	return api.TurnPlanUpdatedNotification{ThreadID: threadID, TurnID: turnID, Explanation: p.Explanation, Plan: steps}
}

// Handler runs update_plan calls. The zero value is ready to use.
type Handler struct {
	// RejectMultipleInProgress makes a plan with more than one in_progress
	// step an error to the model. Codex only tells the model the rule and
	// does not enforce it, so the default is false.
	RejectMultipleInProgress bool
}

// Kind returns registry.PayloadFunction.
func (*Handler) Kind() registry.PayloadKind { return registry.PayloadFunction }

// IsMutating returns false: a plan update does not touch the environment.
func (*Handler) IsMutating(context.Context, registry.Invocation) bool { return false }

// Handle validates the arguments, emits the plan update and answers
// "Plan updated". Invalid arguments are answered to the model as
// "failed to parse function arguments: <reason>".
func (h *Handler) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	p, ok := inv.Payload.(registry.FunctionPayload)
	if !ok {
		return registry.Output{}, errors.New("update_plan handler received unsupported payload")
	}
	ev, err := h.parse(p.Arguments)
	if err != nil {
		return registry.Output{}, err
	}
	inv.Turn.Emit(ctx, ev)
	return registry.TextOutput(OutputText, true), nil
}

// args mirrors Codex UpdatePlanArgs; pointers detect missing fields.
type args struct {
	Explanation *string    `json:"explanation"`
	Plan        *[]itemArg `json:"plan"`
}

type itemArg struct {
	Step   *string    `json:"step"`
	Status *argStatus `json:"status"`
}

// argStatus is a model-side status: pending, in_progress or completed.
type argStatus string

// UnmarshalJSON accepts the three model-side statuses and rejects anything
// else with a serde-like message.
func (s *argStatus) UnmarshalJSON(data []byte) error {
	var v string
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	switch v {
	case "pending", "in_progress", "completed":
		*s = argStatus(v)
		return nil
	}
	return fmt.Errorf("unknown variant `%s`, expected one of `pending`, `in_progress`, `completed`", v)
}

func (s argStatus) wire() StepStatus {
	switch s {
	case "in_progress":
		return StatusInProgress
	case "completed":
		return StatusCompleted
	default:
		return StatusPending
	}
}

func (h *Handler) parse(arguments string) (PlanUpdated, error) {
	var a args
	if err := registry.DecodeArgumentsStrict(arguments, &a); err != nil {
		return PlanUpdated{}, err
	}
	if a.Plan == nil {
		return PlanUpdated{}, registry.ArgumentsError(errors.New("missing field `plan`"))
	}
	ev := PlanUpdated{Explanation: a.Explanation, Plan: make([]Step, 0, len(*a.Plan))}
	inProgress := 0
	for i, it := range *a.Plan {
		if it.Step == nil {
			return PlanUpdated{}, registry.ArgumentsError(fmt.Errorf("plan[%d]: missing field `step`", i))
		}
		if it.Status == nil {
			return PlanUpdated{}, registry.ArgumentsError(fmt.Errorf("plan[%d]: missing field `status`", i))
		}
		if *it.Status == "in_progress" {
			inProgress++
		}
		ev.Plan = append(ev.Plan, Step{Step: *it.Step, Status: it.Status.wire()})
	}
	if h.RejectMultipleInProgress && inProgress > 1 {
		return PlanUpdated{}, registry.ArgumentsError(fmt.Errorf("at most one step can be in_progress, found %d", inProgress))
	}
	return ev, nil
}
