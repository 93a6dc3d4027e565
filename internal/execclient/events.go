package execclient

import (
	"encoding/json"
	"io"
	"strings"
	"unicode"

	"github.com/appserver/appserver/api"
)

// The JSONL stream of --json: one object per line, each with a "type".
// The names and shapes follow `codex exec --json` where the two agree
// (thread.started, turn.started, item.started/updated/completed with
// snake_case items, error, turn.completed, turn.failed); what codex does
// not have is ours: turn.interrupted, approval.requested and
// approval.answered, and the ended turn on the last line. docs/ci.md
// describes every event.
const (
	evThreadStarted     = "thread.started"
	evTurnStarted       = "turn.started"
	evItemStarted       = "item.started"
	evItemUpdated       = "item.updated"
	evItemCompleted     = "item.completed"
	evError             = "error"
	evApprovalRequested = "approval.requested"
	evApprovalAnswered  = "approval.answered"
	evTurnCompleted     = "turn.completed"
	evTurnFailed        = "turn.failed"
	evTurnInterrupted   = "turn.interrupted"
)

// output is where a run's stdout goes: the agent's text, or the JSONL
// stream. Progress lines go to stderr in both cases, written by the run.
type output interface {
	threadStarted(threadID string)
	turnStarted(turnID string)
	// notification is one notification of the run's own turn.
	notification(method string, params json.RawMessage)
	// requested is an approval or user-input request shown on the stream.
	requested(r *request)
	// answered is exec's answer to it: the decision and who made it
	// ("terminal" or "rule").
	answered(r *request, decision, by string)
	// turnEnded is the ended turn, as the API reports it.
	turnEnded(t api.HTTPTurn)
}

// jsonlOutput writes the JSONL stream.
type jsonlOutput struct {
	w io.Writer
	// todo is the id of the turn's to-do list item once its plan was
	// shown, so that later plans update it; plan is its last state.
	todo string
	plan []todo
}

func (o *jsonlOutput) emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(errorEvent{Type: evError, Message: "exec could not encode an event: " + err.Error()})
	}
	_, _ = o.w.Write(append(b, '\n'))
}

type threadStartedEvent struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
}

type turnStartedEvent struct {
	Type   string `json:"type"`
	TurnID string `json:"turn_id"`
}

type itemEvent struct {
	Type string `json:"type"`
	Item any    `json:"item"`
}

type errorEvent struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// usage is a turn's token usage in codex's names.
type usage struct {
	InputTokens           int64 `json:"input_tokens"`
	CachedInputTokens     int64 `json:"cached_input_tokens"`
	CacheWriteInputTokens int64 `json:"cache_write_input_tokens"`
	OutputTokens          int64 `json:"output_tokens"`
	ReasoningOutputTokens int64 `json:"reasoning_output_tokens"`
}

// turnEndedEvent is the last line: how the turn ended, and the turn as
// GET /v1/threads/{id}/turns/{turnId} answers it (items, finalMessage,
// usage, error).
type turnEndedEvent struct {
	Type   string        `json:"type"`
	TurnID string        `json:"turn_id"`
	Usage  usage         `json:"usage"`
	Error  *errorMessage `json:"error,omitempty"`
	Turn   api.HTTPTurn  `json:"turn"`
}

type errorMessage struct {
	Message string `json:"message"`
}

type approvalRequestedEvent struct {
	Type      string `json:"type"`
	RequestID string `json:"request_id"`
	// Kind is command_execution, file_change, user_input, mcp_elicitation
	// or, for a request exec does not know, its method.
	Kind      string                             `json:"kind"`
	ThreadID  string                             `json:"thread_id,omitempty"`
	TurnID    string                             `json:"turn_id,omitempty"`
	ItemID    string                             `json:"item_id,omitempty"`
	Command   string                             `json:"command,omitempty"`
	Cwd       string                             `json:"cwd,omitempty"`
	Reason    string                             `json:"reason,omitempty"`
	Changes   []fileChangeDiff                   `json:"changes,omitempty"`
	Questions []api.ToolRequestUserInputQuestion `json:"questions,omitempty"`
	Server    string                             `json:"server,omitempty"`
	Message   string                             `json:"message,omitempty"`
}

type fileChangeDiff struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	Diff string `json:"diff"`
}

type approvalAnsweredEvent struct {
	Type      string `json:"type"`
	RequestID string `json:"request_id"`
	Decision  string `json:"decision"`
	// By is "terminal" (a person answered) or "rule" (--on-approval).
	By string `json:"by"`
}

func (o *jsonlOutput) threadStarted(id string) {
	o.emit(threadStartedEvent{Type: evThreadStarted, ThreadID: id})
}

func (o *jsonlOutput) turnStarted(id string) {
	o.emit(turnStartedEvent{Type: evTurnStarted, TurnID: id})
}

func (o *jsonlOutput) notification(method string, params json.RawMessage) {
	switch method {
	case api.MethodItemStarted, api.MethodItemCompleted:
		var p struct {
			Item api.ThreadItem `json:"item"`
		}
		if json.Unmarshal(params, &p) != nil || p.Item.Body == nil {
			return
		}
		started := method == api.MethodItemStarted
		if started {
			// As codex: messages and reasoning are shown once, complete.
			switch p.Item.Body.(type) {
			case *api.AgentMessageItem, *api.ReasoningItem:
				return
			}
		}
		if it, ok := execItem(p.Item.Body); ok {
			t := evItemCompleted
			if started {
				t = evItemStarted
			}
			o.emit(itemEvent{Type: t, Item: it})
		}
	case api.MethodFileChangePatchUpdated:
		var p struct {
			ItemID  string                 `json:"itemId"`
			Changes []api.FileUpdateChange `json:"changes"`
		}
		if json.Unmarshal(params, &p) == nil {
			o.emit(itemEvent{Type: evItemUpdated, Item: fileChangeItem{ID: p.ItemID, Type: "file_change", Changes: changeKinds(p.Changes), Status: "in_progress"}})
		}
	case api.MethodTurnPlanUpdated:
		var p struct {
			TurnID string             `json:"turnId"`
			Plan   []api.TurnPlanStep `json:"plan"`
		}
		if json.Unmarshal(params, &p) != nil {
			return
		}
		t := evItemUpdated
		if o.todo == "" {
			o.todo, t = "todo_"+p.TurnID, evItemStarted
		}
		o.plan = todos(p.Plan)
		o.emit(itemEvent{Type: t, Item: todoListItem{ID: o.todo, Type: "todo_list", Items: o.plan}})
	case api.MethodError:
		var p api.ErrorNotification
		if json.Unmarshal(params, &p) == nil {
			o.emit(errorEvent{Type: evError, Message: errorText(p.Error)})
		}
	}
}

func (o *jsonlOutput) requested(r *request) {
	ev := approvalRequestedEvent{
		Type: evApprovalRequested, RequestID: r.id, Kind: r.kind,
		ThreadID: r.threadID, TurnID: r.turnID, ItemID: r.itemID,
		Command: r.command, Cwd: r.cwd, Reason: r.reason,
		Questions: r.questions, Server: r.server, Message: r.message,
	}
	for _, c := range r.changes {
		ev.Changes = append(ev.Changes, fileChangeDiff{Path: c.Path, Kind: string(c.Kind.Type), Diff: c.Diff})
	}
	o.emit(ev)
}

func (o *jsonlOutput) answered(r *request, decision, by string) {
	o.emit(approvalAnsweredEvent{Type: evApprovalAnswered, RequestID: r.id, Decision: decision, By: by})
}

func (o *jsonlOutput) turnEnded(t api.HTTPTurn) {
	if o.todo != "" {
		// The plan's last state completes its item, as codex does at the
		// turn's end.
		o.emit(itemEvent{Type: evItemCompleted, Item: todoListItem{ID: o.todo, Type: "todo_list", Items: o.plan}})
	}
	ev := turnEndedEvent{TurnID: t.ID, Turn: t}
	if t.Usage != nil {
		ev.Usage = usage{
			InputTokens: t.Usage.InputTokens, CachedInputTokens: t.Usage.CachedInputTokens,
			CacheWriteInputTokens: t.Usage.CacheWriteInputTokens,
			OutputTokens:          t.Usage.OutputTokens, ReasoningOutputTokens: t.Usage.ReasoningOutputTokens,
		}
	}
	switch t.Status {
	case api.TurnCompleted:
		ev.Type = evTurnCompleted
	case api.TurnInterrupted:
		ev.Type = evTurnInterrupted
	default:
		ev.Type = evTurnFailed
		msg := "turn " + string(t.Status)
		if t.Error != nil {
			msg = errorText(*t.Error)
		}
		ev.Error = &errorMessage{Message: msg}
	}
	o.emit(ev)
}

// errorText is an error's message with its details, as codex prints it.
func errorText(e api.TurnError) string {
	if e.AdditionalDetails != nil && *e.AdditionalDetails != "" {
		return e.Message + " (" + *e.AdditionalDetails + ")"
	}
	return e.Message
}

// The items of the stream, in codex's snake_case shapes.
type (
	textItem struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Text string `json:"text"`
	}
	commandItem struct {
		ID               string `json:"id"`
		Type             string `json:"type"`
		Command          string `json:"command"`
		AggregatedOutput string `json:"aggregated_output"`
		ExitCode         *int32 `json:"exit_code"`
		Status           string `json:"status"`
	}
	fileChangeItem struct {
		ID      string       `json:"id"`
		Type    string       `json:"type"`
		Changes []fileChange `json:"changes"`
		Status  string       `json:"status"`
	}
	fileChange struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	}
	mcpToolCallItem struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Server    string          `json:"server"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		Result    *mcpResult      `json:"result"`
		Error     *errorMessage   `json:"error"`
		Status    string          `json:"status"`
	}
	mcpResult struct {
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structured_content"`
	}
	dynamicToolCallItem struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		Success   *bool           `json:"success"`
		Status    string          `json:"status"`
	}
	webSearchItem struct {
		ID     string               `json:"id"`
		Type   string               `json:"type"`
		Query  string               `json:"query"`
		Action *api.WebSearchAction `json:"action"`
	}
	collabToolCallItem struct {
		ID                string                 `json:"id"`
		Type              string                 `json:"type"`
		Tool              string                 `json:"tool"`
		SenderThreadID    string                 `json:"sender_thread_id"`
		ReceiverThreadIDs []string               `json:"receiver_thread_ids"`
		Prompt            *string                `json:"prompt"`
		AgentsStates      map[string]collabState `json:"agents_states"`
		Status            string                 `json:"status"`
	}
	collabState struct {
		Status  string  `json:"status"`
		Message *string `json:"message"`
	}
	todoListItem struct {
		ID    string `json:"id"`
		Type  string `json:"type"`
		Items []todo `json:"items"`
	}
	todo struct {
		Text      string `json:"text"`
		Completed bool   `json:"completed"`
	}
)

// execItem maps a protocol item to the stream's shape; items the stream
// does not show (the user's message, context compaction, …) are false.
func execItem(body api.ThreadItemBody) (any, bool) {
	switch it := body.(type) {
	case *api.AgentMessageItem:
		return textItem{ID: it.ID, Type: "agent_message", Text: it.Text}, true
	case *api.ReasoningItem:
		text := strings.Join(it.Summary, "\n")
		if strings.TrimSpace(text) == "" {
			return nil, false
		}
		return textItem{ID: it.ID, Type: "reasoning", Text: text}, true
	case *api.PlanItem:
		return textItem{ID: it.ID, Type: "plan", Text: it.Text}, true
	case *api.CommandExecutionItem:
		out := ""
		if it.AggregatedOutput != nil {
			out = *it.AggregatedOutput
		}
		return commandItem{ID: it.ID, Type: "command_execution", Command: it.Command, AggregatedOutput: out, ExitCode: it.ExitCode, Status: snake(string(it.Status))}, true
	case *api.FileChangeItem:
		status := snake(string(it.Status))
		if it.Status == api.StatusDeclined {
			status = "failed" // codex's file changes have no declined status
		}
		return fileChangeItem{ID: it.ID, Type: "file_change", Changes: changeKinds(it.Changes), Status: status}, true
	case *api.McpToolCallItem:
		m := mcpToolCallItem{ID: it.ID, Type: "mcp_tool_call", Server: it.Server, Tool: it.Tool, Arguments: it.Arguments, Status: snake(string(it.Status))}
		if len(m.Arguments) == 0 {
			m.Arguments = json.RawMessage("null")
		}
		if it.Result != nil {
			m.Result = &mcpResult{Content: it.Result.Content, StructuredContent: it.Result.StructuredContent}
			if m.Result.Content == nil {
				m.Result.Content = []json.RawMessage{}
			}
			if len(m.Result.StructuredContent) == 0 {
				m.Result.StructuredContent = json.RawMessage("null")
			}
		}
		if it.Error != nil {
			m.Error = &errorMessage{Message: it.Error.Message}
		}
		return m, true
	case *api.DynamicToolCallItem:
		args := it.Arguments
		if len(args) == 0 {
			args = json.RawMessage("null")
		}
		return dynamicToolCallItem{ID: it.ID, Type: "dynamic_tool_call", Tool: it.Tool, Arguments: args, Success: it.Success, Status: snake(string(it.Status))}, true
	case *api.WebSearchItem:
		return webSearchItem{ID: it.ID, Type: "web_search", Query: it.Query, Action: it.Action}, true
	case *api.CollabAgentToolCallItem:
		c := collabToolCallItem{
			ID: it.ID, Type: "collab_tool_call", Tool: snake(string(it.Tool)),
			SenderThreadID: it.SenderThreadID, ReceiverThreadIDs: it.ReceiverThreadIDs,
			Prompt: it.Prompt, AgentsStates: map[string]collabState{}, Status: snake(string(it.Status)),
		}
		if c.ReceiverThreadIDs == nil {
			c.ReceiverThreadIDs = []string{}
		}
		for id, s := range it.AgentsStates {
			c.AgentsStates[id] = collabState{Status: snake(string(s.Status)), Message: s.Message}
		}
		return c, true
	}
	return nil, false
}

func changeKinds(changes []api.FileUpdateChange) []fileChange {
	out := make([]fileChange, 0, len(changes))
	for _, c := range changes {
		out = append(out, fileChange{Path: c.Path, Kind: string(c.Kind.Type)})
	}
	return out
}

func todos(plan []api.TurnPlanStep) []todo {
	out := make([]todo, 0, len(plan))
	for _, s := range plan {
		out = append(out, todo{Text: s.Step, Completed: s.Status == api.PlanStepCompleted})
	}
	return out
}

// snake turns the protocol's camelCase values into the stream's
// snake_case: inProgress is in_progress.
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
