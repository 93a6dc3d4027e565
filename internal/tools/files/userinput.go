package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
)

// RequestUserInputName is the tool name.
const RequestUserInputName = "request_user_input"

// buildRequestUserInputSpec builds RequestUserInputSpec's value.
func buildRequestUserInputSpec() registry.FunctionSpec {
	option := registry.Object(map[string]*registry.Schema{
		"label":       registry.String("The choice as the user sees it, in five words or fewer."),
		"description": registry.String("One short sentence on what picking this choice implies."),
	}, []string{"label", "description"}, registry.AllowAdditional(false))
	question := registry.Object(map[string]*registry.Schema{
		"id":       registry.String("A snake_case key that the answer to this question comes back under."),
		"header":   registry.String("A title of at most 12 characters shown above the question."),
		"question": registry.String("The question itself, in one sentence."),
		"options": registry.Array(option, "Two or three choices that exclude each other. List the one you recommend first and end its label with \"(Recommended)\". "+
			"Leave out any \"Other\" choice: the client always offers the user a free-text answer of their own."),
	}, []string{"id", "header", "question", "options"}, registry.AllowAdditional(false))
	props := map[string]*registry.Schema{
		"questions": registry.Array(question, "The questions to ask: one is best, three at most."),
	}
	return registry.FunctionSpec{
		Name:        RequestUserInputName,
		Description: "Ask the user one to three short multiple-choice questions and wait for the answers. Offered in Plan mode only.",
		Parameters:  registry.Object(props, []string{"questions"}, registry.AllowAdditional(false)),
	}
}

var requestUserInputSpecStatic = registry.Static(buildRequestUserInputSpec)

// RequestUserInputSpec returns request_user_input's spec (strict:false), of
// the same shape as codex-cli 0.169's.
// It is built once and shared (registry.Static).
func RequestUserInputSpec() registry.FunctionSpec { return requestUserInputSpecStatic() }

// ErrCancelled is what an Asker returns when the question was dismissed or
// no client could answer; the model is told the request was cancelled.
var ErrCancelled = errors.New("request cancelled")

// Asker sends the item/tool/requestUserInput server request to the thread's
// client and returns its answer (docs/protocol.md §7.3). The integration fills
// params.ThreadID, sets the thread status flag waitingOnUserInput while the
// request is pending, and emits serverRequest/resolved once it is settled.
// No ThreadItem is emitted for this tool. AskUserInput must return when ctx
// ends (the turn was interrupted).
type Asker interface {
	// AskUserInput asks the questions and blocks for the answers.
	AskUserInput(ctx context.Context, params api.ToolRequestUserInputParams) (api.ToolRequestUserInputResult, error)
}

// AskerFunc adapts a function to Asker.
type AskerFunc func(ctx context.Context, params api.ToolRequestUserInputParams) (api.ToolRequestUserInputResult, error)

// AskUserInput calls f.
func (f AskerFunc) AskUserInput(ctx context.Context, p api.ToolRequestUserInputParams) (api.ToolRequestUserInputResult, error) {
	return f(ctx, p)
}

// RequestUserInput is the request_user_input handler.
type RequestUserInput struct {
	// Asker reaches the client; nil answers every call as cancelled.
	Asker Asker
	// Mode, when set, returns the display name of the thread's
	// collaboration mode ("Plan", "Default", …); calls outside AllowedModes
	// are refused with "request_user_input is unavailable in <Mode> mode".
	Mode func(inv registry.Invocation) string
	// AllowedModes lists the modes the tool works in; nil means ["Plan"].
	AllowedModes []string
}

var _ registry.Handler = (*RequestUserInput)(nil)

// Register adds request_user_input to b (not parallel-capable, as in Codex).
func (h *RequestUserInput) Register(b *registry.Builder) error {
	return b.Register(RequestUserInputSpec(), h, false)
}

// Kind returns registry.PayloadFunction.
func (*RequestUserInput) Kind() registry.PayloadKind { return registry.PayloadFunction }

// IsMutating returns false.
func (*RequestUserInput) IsMutating(context.Context, registry.Invocation) bool { return false }

type userInputArgs struct {
	Questions *[]struct {
		ID       string `json:"id"`
		Header   string `json:"header"`
		Question string `json:"question"`
		Options  []struct {
			Label       string `json:"label"`
			Description string `json:"description"`
		} `json:"options"`
	} `json:"questions"`
}

// Handle asks the client and answers the model with the client's answers as
// JSON text: {"answers":{"<id>":{"answers":["…"]}}}.
func (h *RequestUserInput) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	raw, err := functionArgs(RequestUserInputName, inv)
	if err != nil {
		return registry.Output{}, err
	}
	if h.Mode != nil {
		mode := h.Mode(inv)
		allowed := h.AllowedModes
		if allowed == nil {
			allowed = []string{"Plan"}
		}
		ok := false
		for _, m := range allowed {
			if strings.EqualFold(m, mode) {
				ok = true
			}
		}
		if !ok {
			return registry.Output{}, fmt.Errorf("request_user_input is unavailable in %s mode", mode)
		}
	}
	var a userInputArgs
	if err := registry.DecodeArguments(raw, &a); err != nil {
		return registry.Output{}, err
	}
	if a.Questions == nil {
		return registry.Output{}, registry.ArgumentsError(errors.New("missing field `questions`"))
	}
	params := api.ToolRequestUserInputParams{
		TurnID:     inv.Turn.TurnID,
		ItemID:     inv.CallID,
		IsBlocking: true,
	}
	for _, q := range *a.Questions {
		if len(q.Options) == 0 {
			return registry.Output{}, errors.New("request_user_input requires non-empty options for every question")
		}
		opts := make([]api.ToolRequestUserInputOption, len(q.Options))
		for i, o := range q.Options {
			opts[i] = api.ToolRequestUserInputOption{Label: o.Label, Description: o.Description}
		}
		// The client adds a free-text "Other" answer to every question.
		params.Questions = append(params.Questions, api.ToolRequestUserInputQuestion{
			ID: q.ID, Header: q.Header, Question: q.Question, IsOther: true, Options: opts,
		})
	}
	cancelled := errors.New("request_user_input was cancelled before receiving a response")
	if h.Asker == nil {
		return registry.Output{}, cancelled
	}
	res, err := h.Asker.AskUserInput(ctx, params)
	if err != nil {
		if ctx.Err() != nil {
			return registry.Output{}, ctx.Err()
		}
		return registry.Output{}, cancelled
	}
	body, err := json.Marshal(res)
	if err != nil {
		return registry.Output{}, registry.Fatalf("failed to serialize request_user_input response: %v", err)
	}
	return registry.TextOutput(string(body), true), nil
}
