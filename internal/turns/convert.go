package turns

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store"
)

// userInputToModel turns a user's input into one user message for the
// model. Text and remote images map directly; inputs the model cannot take
// as content (local files, skills, mentions) are described in text.
func userInputToModel(input []api.UserInput) model.InputItem {
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

// previewOf is the thread preview: the first text of the first message.
func previewOf(input []api.UserInput) string {
	for _, in := range input {
		if in.Type == api.UserInputText && strings.TrimSpace(in.Text) != "" {
			return in.Text
		}
	}
	return ""
}

// responseItemToModel converts a tool output to its history item.
func responseItemToModel(r registry.ResponseItem) model.InputItem {
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

// storeItem encodes a completed ThreadItem for the store.
func storeItem(threadID, turnID string, item api.ThreadItem, now time.Time) (*store.Item, error) {
	payload, err := json.Marshal(item)
	if err != nil {
		return nil, fmt.Errorf("encode item: %w", err)
	}
	return &store.Item{
		ThreadID: threadID, TurnID: turnID, ItemID: item.Body.ItemID(),
		Type: string(item.Body.ItemType()), Payload: payload, CreatedAt: now,
	}, nil
}

// uniqueItemID keeps upstream ids (as the reference does) unless one was
// already used in this thread, which a restarted or fake provider can do.
// Ids taken since the history was loaded are in memory; older ones are
// looked up in the store, so that a loaded thread does not hold the ids of
// its whole transcript.
func (t *thread) uniqueItemID(ctx context.Context, id, prefix string) string {
	if id == "" {
		return prefix + "_" + newID()
	}
	t.mu.Lock()
	_, dup := t.itemIDs[id]
	inMemory := t.allIDsInMemory
	t.mu.Unlock()
	if !dup && !inMemory {
		// Any failure but "not found" takes a fresh id: a conflict would
		// fail the commit.
		_, err := t.store.GetItem(ctx, t.id, id)
		dup = !apperr.Is(err, apperr.NotFound)
	}
	if dup {
		id = id + "_" + newID()
	}
	t.mu.Lock()
	if t.itemIDs == nil {
		t.itemIDs = map[string]struct{}{}
	}
	t.itemIDs[id] = struct{}{}
	t.mu.Unlock()
	return id
}

// threadToAPI renders a thread record.
func threadToAPI(rec store.Thread, meta threadMeta, status api.ThreadStatus, ephemeral bool) api.Thread {
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
		th.Source = api.SessionSource{SubAgent: sa.threadSpawnSource()}
		if sa.Nickname != "" {
			nick := sa.Nickname
			th.AgentNickname = &nick
		}
	}
	return th
}

// turnToAPI renders a stored turn with the items of the requested view.
func turnToAPI(tr store.Turn, items []store.Item, view api.TurnItemsView) (api.Turn, error) {
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
