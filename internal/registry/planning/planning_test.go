package planning_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/registry/planning"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder is a real Emitter that keeps what it was given.
type recorder struct {
	mu     sync.Mutex
	events []registry.Event
}

func (r *recorder) Emit(_ context.Context, ev registry.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func setup(t *testing.T, h *planning.Handler) (*registry.Dispatcher, *recorder) {
	t.Helper()
	b := registry.NewBuilder(registry.Config{})
	require.NoError(t, planning.Register(b, h))
	specs, reg := b.Build()
	require.Len(t, specs, 1)
	assert.False(t, specs[0].SupportsParallelToolCalls, "update_plan is not parallel")
	rec := &recorder{}
	return reg.NewDispatcher(registry.DispatcherConfig{Turn: registry.TurnContext{TurnID: "turn-1", Emitter: rec}}), rec
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func call(args string) registry.Call {
	return registry.Call{CallID: "call-1", Name: planning.Name, Payload: registry.FunctionPayload{Arguments: args}}
}

func TestSpecWire(t *testing.T) {
	b, err := json.Marshal(planning.Spec())
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"type": "function",
		"name": "update_plan",
		"description": "Record your plan for the task, and keep it current as you work.\nSend the whole plan each time: every step with its status, and if you like a short note on what changed.\nKeep a single step in_progress at any time.\n",
		"strict": false,
		"parameters": {
			"type": "object",
			"properties": {
				"explanation": {"type": "string"},
				"plan": {
					"type": "array",
					"description": "Every step of the plan, in order",
					"items": {
						"type": "object",
						"properties": {
							"step": {"type": "string"},
							"status": {"type": "string", "description": "pending, in_progress or completed"}
						},
						"required": ["step", "status"],
						"additionalProperties": false
					}
				}
			},
			"required": ["plan"],
			"additionalProperties": false
		}
	}`, string(b))
}

func TestUpdatePlanValid(t *testing.T) {
	d, rec := setup(t, nil)
	it, err := d.Dispatch(ctx(t), call(`{"explanation":"Start with tests","plan":[
		{"step":"Write tests","status":"completed"},
		{"step":"Implement","status":"in_progress"},
		{"step":"Ship","status":"pending"}]}`))
	require.NoError(t, err)
	assert.Equal(t, planning.OutputText, it.Output.Text)
	assert.True(t, it.Output.Succeeded())
	b, err := json.Marshal(it)
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"function_call_output","call_id":"call-1","output":"Plan updated"}`, string(b))

	require.Len(t, rec.events, 1)
	ev := rec.events[0]
	assert.Equal(t, "turn/plan/updated", ev.Method())
	params, err := json.Marshal(ev.Params("th", "tu"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"threadId":"th","turnId":"tu","explanation":"Start with tests","plan":[
		{"step":"Write tests","status":"completed"},
		{"step":"Implement","status":"inProgress"},
		{"step":"Ship","status":"pending"}]}`, string(params))
}

func TestUpdatePlanWithoutExplanation(t *testing.T) {
	d, rec := setup(t, nil)
	_, err := d.Dispatch(ctx(t), call(`{"plan":[]}`))
	require.NoError(t, err)
	require.Len(t, rec.events, 1)
	params, err := json.Marshal(rec.events[0].Params("th", "tu"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"threadId":"th","turnId":"tu","explanation":null,"plan":[]}`, string(params), "an empty plan clears it; a missing explanation is null")
}

func TestUpdatePlanSeveralInProgress(t *testing.T) {
	args := `{"plan":[{"step":"a","status":"in_progress"},{"step":"b","status":"in_progress"}]}`

	// Codex tells the model the rule but does not enforce it.
	d, rec := setup(t, nil)
	it, err := d.Dispatch(ctx(t), call(args))
	require.NoError(t, err)
	assert.Equal(t, "Plan updated", it.Output.Text)
	assert.Len(t, rec.events, 1)

	d, rec = setup(t, &planning.Handler{RejectMultipleInProgress: true})
	it, err = d.Dispatch(ctx(t), call(args))
	require.NoError(t, err)
	assert.Equal(t, "failed to parse function arguments: at most one step can be in_progress, found 2", it.Output.Text)
	assert.False(t, it.Output.Succeeded())
	assert.Empty(t, rec.events)
}

func TestUpdatePlanInvalid(t *testing.T) {
	cases := []struct {
		name, args, want string
	}{
		{"not JSON", `{"plan":[`, "failed to parse function arguments: unexpected EOF"},
		{"empty arguments", ``, "failed to parse function arguments: unexpected EOF"},
		{"missing plan", `{"explanation":"x"}`, "failed to parse function arguments: missing field `plan`"},
		{"null plan", `{"plan":null}`, "failed to parse function arguments: missing field `plan`"},
		{"plan not an array", `{"plan":"do it"}`,
			"failed to parse function arguments: json: cannot unmarshal string into Go struct field args.plan of type []planning.itemArg"},
		{"missing step", `{"plan":[{"status":"pending"}]}`, "failed to parse function arguments: plan[0]: missing field `step`"},
		{"missing status", `{"plan":[{"step":"a","status":"pending"},{"step":"b"}]}`, "failed to parse function arguments: plan[1]: missing field `status`"},
		{"unknown status", `{"plan":[{"step":"a","status":"done"}]}`,
			"failed to parse function arguments: unknown variant `done`, expected one of `pending`, `in_progress`, `completed`"},
		{"wire status is not accepted from the model", `{"plan":[{"step":"a","status":"inProgress"}]}`,
			"failed to parse function arguments: unknown variant `inProgress`, expected one of `pending`, `in_progress`, `completed`"},
		{"extra item key", `{"plan":[{"step":"a","status":"pending","owner":"me"}]}`,
			`failed to parse function arguments: json: unknown field "owner"`},
		{"extra top-level key", `{"plan":[],"force":true}`, `failed to parse function arguments: json: unknown field "force"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, rec := setup(t, nil)
			it, err := d.Dispatch(ctx(t), call(tc.args))
			require.NoError(t, err, "invalid arguments are answered to the model")
			assert.Equal(t, tc.want, it.Output.Text)
			assert.False(t, it.Output.Succeeded())
			assert.Empty(t, rec.events, "nothing is emitted for an invalid plan")
		})
	}
}

func TestUpdatePlanNotMutating(t *testing.T) {
	h := &planning.Handler{}
	assert.False(t, h.IsMutating(ctx(t), registry.Invocation{Call: call(`{}`)}))
	assert.Equal(t, registry.PayloadFunction, h.Kind())
}

func TestUpdatePlanRejectsOtherPayloads(t *testing.T) {
	d, _ := setup(t, nil)
	_, err := d.Dispatch(ctx(t), registry.Call{CallID: "c", Name: planning.Name, Payload: registry.CustomPayload{Input: "x"}})
	assert.ErrorIs(t, err, registry.ErrFatal)
	assert.EqualError(t, err, "tool update_plan invoked with incompatible payload")

	// Called directly (bypassing dispatch), the handler answers the model.
	_, err = (&planning.Handler{}).Handle(ctx(t), registry.Invocation{Call: registry.Call{Payload: registry.CustomPayload{}}})
	assert.EqualError(t, err, "update_plan handler received unsupported payload")
}

func TestUpdatePlanWithoutEmitter(t *testing.T) {
	b := registry.NewBuilder(registry.Config{})
	require.NoError(t, planning.Register(b, nil))
	_, reg := b.Build()
	d := reg.NewDispatcher(registry.DispatcherConfig{})
	it, err := d.Dispatch(ctx(t), call(`{"plan":[{"step":"a","status":"pending"}]}`))
	require.NoError(t, err)
	assert.Equal(t, "Plan updated", it.Output.Text)
}
