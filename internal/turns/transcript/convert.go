package transcript

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store"
)

// UserInputToModel turns a user's input into one user message for the
// model. Text and remote images map directly; inputs the model cannot take
// as content (local files, skills, mentions) are described in text.
func UserInputToModel(input []api.UserInput) model.InputItem {
	parts := make([]model.ContentPart, 0, len(input))
	for _, in := range input {
		switch in.Type {
		case api.UserInputText:
			parts = append(parts, model.ContentPart{Type: model.PartInputText, Text: in.Text})
		case api.UserInputImage:
			if in.URL != "" {
				parts = append(parts, model.ContentPart{Type: model.PartInputImage, ImageURL: in.URL, Detail: detailOf(in)})
			}
		case api.UserInputLocalImage:
			parts = append(parts, model.ContentPart{Type: model.PartInputText, Text: fmt.Sprintf("<image path=%q />", in.Path)})
		case api.UserInputSkill:
			parts = append(parts, model.ContentPart{Type: model.PartInputText, Text: fmt.Sprintf("<skill name=%q path=%q />", in.Name, in.Path)})
		case api.UserInputMention:
			parts = append(parts, model.ContentPart{Type: model.PartInputText, Text: fmt.Sprintf("<mention name=%q path=%q />", in.Name, in.Path)})
		}
	}
	if len(parts) == 0 {
		parts = append(parts, model.ContentPart{Type: model.PartInputText, Text: ""})
	}
	return model.InputItem{Type: model.ItemMessage, Role: model.RoleUser, Content: parts}
}

func detailOf(in api.UserInput) string {
	if in.Detail == nil {
		return ""
	}
	return string(*in.Detail)
}

// PreviewOf is the thread preview: the first text of the first message.
func PreviewOf(input []api.UserInput) string {
	for _, in := range input {
		if in.Type == api.UserInputText && strings.TrimSpace(in.Text) != "" {
			return in.Text
		}
	}
	return ""
}

// ResponseItemToModel converts a tool output to its history item.
func ResponseItemToModel(r registry.ResponseItem) model.InputItem {
	if r.Type == registry.ToolSearchOutput {
		// Replayed as encoded; the specs it carries have no other form.
		raw, err := json.Marshal(r)
		if err != nil {
			raw, _ = json.Marshal(registry.ResponseItem{Type: r.Type, CallID: r.CallID})
		}
		return model.InputItem{Type: model.ItemToolSearchOutput, CallID: r.CallID, Raw: raw}
	}
	out := model.ToolOutput{Text: r.Output.Text}
	if r.Output.Content != nil && r.Type == registry.FunctionCallOutput {
		out.Content = make([]model.ContentPart, 0, len(r.Output.Content))
		for _, c := range r.Output.Content {
			switch c.Type {
			case registry.ContentInputImage:
				out.Content = append(out.Content, model.ContentPart{Type: model.PartInputImage, ImageURL: c.ImageURL})
			default:
				out.Content = append(out.Content, model.ContentPart{Type: model.PartInputText, Text: c.Text})
			}
		}
	}
	typ := model.ItemFunctionCallOutput
	if r.Type == registry.CustomToolCallOutput {
		typ = model.ItemCustomToolCallOutput
		out = model.ToolOutput{Text: r.Output.PlainText()}
	}
	return model.InputItem{Type: typ, CallID: r.CallID, Output: out}
}

// StoreItem encodes a completed ThreadItem for the store.
func StoreItem(threadID, turnID string, item api.ThreadItem, now time.Time) (*store.Item, error) {
	payload, err := json.Marshal(item)
	if err != nil {
		return nil, fmt.Errorf("encode item: %w", err)
	}
	return &store.Item{
		ThreadID: threadID, TurnID: turnID, ItemID: item.Body.ItemID(),
		Type: string(item.Body.ItemType()), Payload: payload, CreatedAt: now,
	}, nil
}

// LocalEnvironments are a thread's execution environments: the daemon's
// own machine ("local"), working in the thread's cwd, which is also its
// one workspace root, as the reference reports a thread that names none.
func LocalEnvironments(cwd string) api.List[api.ThreadEnvironment] {
	return api.List[api.ThreadEnvironment]{{EnvironmentID: "local", Cwd: cwd, RuntimeWorkspaceRoots: api.List[string]{cwd}}}
}

// ThreadToAPI renders a thread record with its meta, as loaded or as
// stored (status says which).
func ThreadToAPI(rec store.Thread, meta ThreadMeta, status api.ThreadStatus, ephemeral bool) api.Thread {
	created, updated, recency := rec.CreatedAt.Unix(), rec.UpdatedAt.Unix(), rec.RecencyAt.Unix()
	model := rec.Model
	cli := meta.CLIVersion
	th := api.Thread{
		ID:              rec.ID,
		SessionID:       rec.ID,
		ForkedFromID:    rec.ForkedFromID,
		Preview:         rec.Preview,
		Ephemeral:       ephemeral,
		HistoryMode:     "paginated",
		ModelProvider:   rec.ModelProvider,
		Model:           model,
		ReasoningEffort: meta.ReasoningEffort,
		CreatedAt:       created,
		UpdatedAt:       updated,
		RecencyAt:       &recency,
		Status:          status,
		Cwd:             rec.Cwd,
		Environments:    LocalEnvironments(rec.Cwd),
		CliVersion:      cli,
		Originator:      meta.Originator,
		Source:          api.SessionSource{Name: rec.Source},
		ThreadSource:    meta.ThreadSource,
		Name:            rec.Name,
		GitInfo:         meta.GitInfo,
		DaybreakEnabled: meta.DaybreakEnabled,
		Turns:           api.List[api.Turn]{},
	}
	if sa := meta.SubAgent; sa != nil {
		parent := sa.ParentThreadID
		th.ParentThreadID = &parent
		th.Source = api.SessionSource{SubAgent: sa.SpawnSource()}
		if sa.Nickname != "" {
			nick := sa.Nickname
			th.AgentNickname = &nick
		}
	}
	return th
}

// TurnToAPI renders a stored turn with the items of the requested view.
func TurnToAPI(tr store.Turn, items []store.Item, view api.TurnItemsView) (api.Turn, error) {
	id := tr.ID
	root := id
	if r := rootTurnOf(tr.Meta); r != "" {
		root = r
	}
	turn := api.Turn{ID: id, RootTurnID: &root, Items: api.List[api.ThreadItem]{}, ItemsView: view, Status: api.TurnStatus(tr.Status)}
	if tr.StartedAt != nil {
		s := tr.StartedAt.Unix()
		turn.StartedAt = &s
	}
	if tr.CompletedAt != nil {
		c := tr.CompletedAt.Unix()
		turn.CompletedAt = &c
		if tr.StartedAt != nil {
			d := tr.CompletedAt.Sub(*tr.StartedAt).Milliseconds()
			turn.DurationMs = &d
		}
	}
	if len(tr.Error) > 0 && string(tr.Error) != "null" {
		var te api.TurnError
		if err := json.Unmarshal(tr.Error, &te); err == nil {
			turn.Error = &te
		}
	}
	if view == api.ItemsNotLoaded {
		return turn, nil
	}
	decoded := make([]api.ThreadItem, 0, len(items))
	for _, it := range items {
		var ti api.ThreadItem
		if err := json.Unmarshal(it.Payload, &ti); err != nil {
			return turn, fmt.Errorf("decode item %s: %w", it.ItemID, err)
		}
		decoded = append(decoded, ti)
	}
	if view == api.ItemsSummary {
		decoded = summaryItems(decoded)
	}
	turn.Items = decoded
	return turn, nil
}

// summaryItems keeps what the reference's summary view shows: the user
// messages and the final agent message.
func summaryItems(items []api.ThreadItem) []api.ThreadItem {
	out := make([]api.ThreadItem, 0, 2)
	lastAgent := -1
	for i, it := range items {
		if it.Body.ItemType() == api.ItemAgentMessage {
			lastAgent = i
		}
	}
	for i, it := range items {
		if it.Body.ItemType() == api.ItemUserMessage || i == lastAgent {
			out = append(out, it)
		}
	}
	return out
}
