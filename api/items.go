package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
)

// ThreadItemType is the discriminator of ThreadItem.
type ThreadItemType string

// The ThreadItem variants. appserver emits the first eleven; the rest are
// only decoded (as *RawThreadItem).
const (
	ItemUserMessage         ThreadItemType = "userMessage"
	ItemAgentMessage        ThreadItemType = "agentMessage"
	ItemReasoning           ThreadItemType = "reasoning"
	ItemPlan                ThreadItemType = "plan"
	ItemCommandExecution    ThreadItemType = "commandExecution"
	ItemFileChange          ThreadItemType = "fileChange"
	ItemMcpToolCall         ThreadItemType = "mcpToolCall"
	ItemDynamicToolCall     ThreadItemType = "dynamicToolCall"
	ItemWebSearch           ThreadItemType = "webSearch"
	ItemImageView           ThreadItemType = "imageView"
	ItemContextCompaction   ThreadItemType = "contextCompaction"
	ItemEnteredReviewMode   ThreadItemType = "enteredReviewMode"
	ItemExitedReviewMode    ThreadItemType = "exitedReviewMode"
	ItemCollabAgentToolCall ThreadItemType = "collabAgentToolCall"
	ItemSubAgentActivity    ThreadItemType = "subAgentActivity"
	ItemHookPrompt          ThreadItemType = "hookPrompt"
	ItemFunctionCallOutput  ThreadItemType = "functionCallOutput"
	ItemSleep               ThreadItemType = "sleep"
	ItemImageGeneration     ThreadItemType = "imageGeneration"
)

// ThreadItemBody is one ThreadItem variant. It is implemented by pointers to
// the *Item structs of this package and by *RawThreadItem.
type ThreadItemBody interface {
	// ItemType is the variant's type tag.
	ItemType() ThreadItemType
	// ItemID is the item's id.
	ItemID() string
}

// ThreadItem is one unit of a turn (docs/protocol.md §6): a tagged union on
// "type" whose variant lives in Body, plus the startedAtMs / completedAtMs
// keys common to every variant.
//
// MarshalJSON writes {"type": …, <Body's keys>, "startedAtMs", "completedAtMs"},
// both timestamps always present (null when nil) as 0.169.0 does. A
// *RawThreadItem body is written back verbatim (its timestamps included) and
// the wrapper's timestamps are then informational only.
type ThreadItem struct {
	// Body is the variant: a pointer to one of the *Item structs, or *RawThreadItem.
	Body ThreadItemBody
	// StartedAtMs is when the item started (Unix ms), or nil.
	StartedAtMs *int64
	// CompletedAtMs is when the item completed (Unix ms), or nil.
	CompletedAtMs *int64
}

// errNoItemBody reports a ThreadItem without a variant.
var errNoItemBody = errors.New("api: ThreadItem has no Body")

// MarshalJSON writes the variant with its type tag and timestamps.
func (it ThreadItem) MarshalJSON() ([]byte, error) {
	if it.Body == nil {
		return nil, errNoItemBody
	}
	if raw, ok := it.Body.(*RawThreadItem); ok {
		if len(raw.JSON) == 0 {
			return nil, errNoItemBody
		}
		return raw.JSON, nil
	}
	// Every item/started and item/completed encodes an item. The body is
	// encoded straight after the type tag into a pooled buffer and its
	// opening brace turned into the comma that joins them: one allocation
	// (the result) instead of the body's own encoding, the tag's and a
	// buffer to join them.
	e := itemEncoders.Get().(*itemEncoder)
	defer e.put()
	buf := &e.buf
	buf.Reset()
	buf.WriteString(`{"type":`)
	if err := e.str(string(it.Body.ItemType())); err != nil {
		return nil, err
	}
	mark := buf.Len()
	if err := e.enc.Encode(it.Body); err != nil {
		return nil, err
	}
	body := buf.Bytes()[mark : buf.Len()-1] // Encode ends the value with a newline
	if len(body) < 2 || body[0] != '{' {
		return nil, fmt.Errorf("api: ThreadItem body %T did not encode as an object", it.Body)
	}
	if len(body) == 2 { // {}
		buf.Truncate(mark)
	} else {
		body[0] = ','
		buf.Truncate(buf.Len() - 2) // the body's closing brace and the newline
	}
	buf.WriteString(`,"startedAtMs":`)
	writeOptInt(buf, it.StartedAtMs)
	buf.WriteString(`,"completedAtMs":`)
	writeOptInt(buf, it.CompletedAtMs)
	buf.WriteByte('}')
	return append([]byte(nil), buf.Bytes()...), nil
}

// itemEncoder is a scratch buffer with a JSON encoder writing into it.
type itemEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var itemEncoders = sync.Pool{New: func() any {
	e := new(itemEncoder)
	e.enc = json.NewEncoder(&e.buf)
	return e
}}

func (e *itemEncoder) put() {
	if e.buf.Cap() <= 64<<10 { // do not keep a huge item's buffer
		itemEncoders.Put(e)
	}
}

// str writes s as json.Marshal does. Type tags are plain ASCII, which
// needs no escaping; anything else goes through the encoder.
func (e *itemEncoder) str(s string) error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			if err := e.enc.Encode(s); err != nil {
				return err
			}
			e.buf.Truncate(e.buf.Len() - 1)
			return nil
		}
	}
	e.buf.WriteByte('"')
	e.buf.WriteString(s)
	e.buf.WriteByte('"')
	return nil
}

// writeOptInt writes n or null.
func writeOptInt(buf *bytes.Buffer, n *int64) {
	if n == nil {
		buf.WriteString("null")
		return
	}
	buf.Write(strconv.AppendInt(buf.AvailableBuffer(), *n, 10))
}

// UnmarshalJSON decodes the variant named by "type"; variants appserver does
// not emit (and unknown ones) become *RawThreadItem.
func (it *ThreadItem) UnmarshalJSON(b []byte) error {
	var head struct {
		Type          *ThreadItemType `json:"type"`
		ID            string          `json:"id"`
		StartedAtMs   *int64          `json:"startedAtMs"`
		CompletedAtMs *int64          `json:"completedAtMs"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	if head.Type == nil {
		return errors.New("missing field `type`")
	}
	var body ThreadItemBody
	switch *head.Type {
	case ItemUserMessage:
		body = new(UserMessageItem)
	case ItemAgentMessage:
		body = new(AgentMessageItem)
	case ItemReasoning:
		body = new(ReasoningItem)
	case ItemPlan:
		body = new(PlanItem)
	case ItemCommandExecution:
		body = new(CommandExecutionItem)
	case ItemFileChange:
		body = new(FileChangeItem)
	case ItemMcpToolCall:
		body = new(McpToolCallItem)
	case ItemDynamicToolCall:
		body = new(DynamicToolCallItem)
	case ItemWebSearch:
		body = new(WebSearchItem)
	case ItemImageView:
		body = new(ImageViewItem)
	case ItemContextCompaction:
		body = new(ContextCompactionItem)
	case ItemCollabAgentToolCall:
		body = new(CollabAgentToolCallItem)
	case ItemSubAgentActivity:
		body = new(SubAgentActivityItem)
	case ItemEnteredReviewMode:
		body = new(ReviewModeItem)
	case ItemExitedReviewMode:
		body = &ReviewModeItem{Exited: true}
	default:
		body = &RawThreadItem{Type: *head.Type, ID: head.ID, JSON: append(json.RawMessage(nil), bytes.TrimSpace(b)...)}
	}
	if _, raw := body.(*RawThreadItem); !raw {
		if err := json.Unmarshal(b, body); err != nil {
			return err
		}
	}
	*it = ThreadItem{Body: body, StartedAtMs: head.StartedAtMs, CompletedAtMs: head.CompletedAtMs}
	return nil
}

// RawThreadItem is a variant appserver does not model (sub-agent activity,
// hook prompts, function call
// output, sleep, image generation, or a future type), kept verbatim.
type RawThreadItem struct {
	// Type is the item's type tag.
	Type ThreadItemType
	// ID is the item's id.
	ID string
	// JSON is the complete item object as received.
	JSON json.RawMessage
}

// ItemType implements ThreadItemBody.
func (r *RawThreadItem) ItemType() ThreadItemType { return r.Type }

// ItemID implements ThreadItemBody.
func (r *RawThreadItem) ItemID() string { return r.ID }

// UserMessageItem is user input recorded in a turn.
type UserMessageItem struct {
	// ID is a fresh UUIDv7.
	ID string `json:"id"`
	// ClientID echoes turn/start's clientUserMessageId, or null.
	ClientID *string `json:"clientId"`
	// Content is the input.
	Content List[UserInput] `json:"content"`
}

// ItemType implements ThreadItemBody.
func (*UserMessageItem) ItemType() ThreadItemType { return ItemUserMessage }

// ItemID implements ThreadItemBody.
func (i *UserMessageItem) ItemID() string { return i.ID }

// MessagePhase labels an agent message (snake_case values).
type MessagePhase string

// The message phases.
const (
	PhaseCommentary    MessagePhase = "commentary"
	PhasePartialAnswer MessagePhase = "partial_answer"
	PhaseFinalAnswer   MessagePhase = "final_answer"
)

// AgentMessageItem is text from the model.
type AgentMessageItem struct {
	// Moderation is moderation metadata, or null.
	Moderation *AgentMessageModeration `json:"moderation"`
	// ID reuses the upstream output item id.
	ID string `json:"id"`
	// Text is the message ("" in item/started).
	Text string `json:"text"`
	// Phase labels the message, or null.
	Phase *MessagePhase `json:"phase"`
	// MemoryCitation cites memories, or null.
	MemoryCitation *MemoryCitation `json:"memoryCitation"`
	// Delivery is "async", or null.
	Delivery *string `json:"delivery"`
	// Questions are follow-up questions, or null.
	Questions []AsyncUserInputQuestion `json:"questions"`
}

// ItemType implements ThreadItemBody.
func (*AgentMessageItem) ItemType() ThreadItemType { return ItemAgentMessage }

// ItemID implements ThreadItemBody.
func (i *AgentMessageItem) ItemID() string { return i.ID }

// AgentMessageModeration is moderation metadata of an agent message.
type AgentMessageModeration struct {
	// Moderated tells whether the message was moderated.
	Moderated bool `json:"moderated"`
	// Display says how to display it, or null.
	Display *AgentMessageDisplay `json:"display"`
}

// AgentMessageDisplay says how to display a moderated message.
type AgentMessageDisplay struct {
	// Action is the display action.
	Action string `json:"action"`
	// BlockType is the block type, or null.
	BlockType *string `json:"blockType"`
	// CyberTrustedAccess is a policy flag, or null.
	CyberTrustedAccess *bool `json:"cyberTrustedAccess"`
	// CheckTrustedContacts is a policy flag, or null.
	CheckTrustedContacts *bool `json:"checkTrustedContacts"`
}

// MemoryCitation cites memories used by an agent message.
type MemoryCitation struct {
	// Entries are the cited memory spans.
	Entries List[MemoryCitationEntry] `json:"entries"`
	// ThreadIDs are the cited threads.
	ThreadIDs List[string] `json:"threadIds"`
}

// MemoryCitationEntry is one cited memory span.
type MemoryCitationEntry struct {
	// Path is the memory file.
	Path string `json:"path"`
	// LineStart is the first line.
	LineStart uint32 `json:"lineStart"`
	// LineEnd is the last line.
	LineEnd uint32 `json:"lineEnd"`
	// Note explains the citation.
	Note string `json:"note"`
}

// AsyncUserInputQuestion is a follow-up question of an agent message.
type AsyncUserInputQuestion struct {
	// Title is the question.
	Title string `json:"title"`
	// Options are suggested answers, or null.
	Options []string `json:"options"`
}

// ReasoningItem is model reasoning.
type ReasoningItem struct {
	// ID reuses the upstream output item id.
	ID string `json:"id"`
	// Summary has one string per summary part.
	Summary List[string] `json:"summary"`
	// Content is raw reasoning, for models that expose it.
	Content List[string] `json:"content"`
}

// ItemType implements ThreadItemBody.
func (*ReasoningItem) ItemType() ThreadItemType { return ItemReasoning }

// ItemID implements ThreadItemBody.
func (i *ReasoningItem) ItemID() string { return i.ID }

// PlanItem is plan-mode text.
type PlanItem struct {
	// ID identifies the item.
	ID string `json:"id"`
	// Text is the plan.
	Text string `json:"text"`
}

// ItemType implements ThreadItemBody.
func (*PlanItem) ItemType() ThreadItemType { return ItemPlan }

// ItemID implements ThreadItemBody.
func (i *PlanItem) ItemID() string { return i.ID }

// CommandExecutionSource says who started a command.
type CommandExecutionSource string

// The command sources.
const (
	CommandSourceAgent                  CommandExecutionSource = "agent"
	CommandSourceUserShell              CommandExecutionSource = "userShell"
	CommandSourceUnifiedExecStartup     CommandExecutionSource = "unifiedExecStartup"
	CommandSourceUnifiedExecInteraction CommandExecutionSource = "unifiedExecInteraction"
)

// ToolStatus is the status of a command, file change or tool call item.
type ToolStatus string

// The tool item statuses (declined: commands and file changes only).
const (
	StatusInProgress ToolStatus = "inProgress"
	StatusCompleted  ToolStatus = "completed"
	StatusFailed     ToolStatus = "failed"
	StatusDeclined   ToolStatus = "declined"
	// StatusInterrupted ends a collabAgentToolCall item whose turn was
	// interrupted.
	StatusInterrupted ToolStatus = "interrupted"
)

// CommandExecutionItem is a shell command run for the model.
type CommandExecutionItem struct {
	// ID reuses the model's call id.
	ID string `json:"id"`
	// PluginID is the plugin that ran it, or null.
	PluginID *string `json:"pluginId"`
	// ScriptPath is the script run, or null.
	ScriptPath *string `json:"scriptPath"`
	// Command is the full shell invocation, e.g. "/bin/bash -lc 'ls'".
	Command string `json:"command"`
	// Cwd is the working directory.
	Cwd string `json:"cwd"`
	// ProcessID is the process id once known, or null.
	ProcessID *string `json:"processId"`
	// Source says who started the command.
	Source CommandExecutionSource `json:"source"`
	// Status is inProgress, completed, failed or declined.
	Status ToolStatus `json:"status"`
	// CommandActions classify what the command does.
	CommandActions List[CommandAction] `json:"commandActions"`
	// AggregatedOutput is the complete output, or null.
	AggregatedOutput *string `json:"aggregatedOutput"`
	// ExitCode is the exit status, or null.
	ExitCode *int32 `json:"exitCode"`
	// DurationMs is the run time, or null.
	DurationMs *int64 `json:"durationMs"`
}

// ItemType implements ThreadItemBody.
func (*CommandExecutionItem) ItemType() ThreadItemType { return ItemCommandExecution }

// ItemID implements ThreadItemBody.
func (i *CommandExecutionItem) ItemID() string { return i.ID }

// CommandActionType is the discriminator of CommandAction.
type CommandActionType string

// The command action kinds.
const (
	ActionRead      CommandActionType = "read"
	ActionListFiles CommandActionType = "listFiles"
	ActionSearch    CommandActionType = "search"
	ActionUnknown   CommandActionType = "unknown"
)

// CommandAction classifies a command, tagged by type: read {command, name,
// path}, listFiles {command, path|null}, search {command, query|null,
// path|null}, unknown {command}.
type CommandAction struct {
	// Type selects the variant.
	Type CommandActionType
	// Command is the (sub)command.
	Command string
	// Name is the file name read (read).
	Name string
	// Path is the path involved; required for read, nullable otherwise.
	Path *string
	// Query is the search query (search), or nil.
	Query *string
}

// MarshalJSON writes the keys of the selected variant.
func (a CommandAction) MarshalJSON() ([]byte, error) {
	switch a.Type {
	case ActionRead:
		path := ""
		if a.Path != nil {
			path = *a.Path
		}
		return json.Marshal(struct {
			Type    CommandActionType `json:"type"`
			Command string            `json:"command"`
			Name    string            `json:"name"`
			Path    string            `json:"path"`
		}{a.Type, a.Command, a.Name, path})
	case ActionListFiles:
		return json.Marshal(struct {
			Type    CommandActionType `json:"type"`
			Command string            `json:"command"`
			Path    *string           `json:"path"`
		}{a.Type, a.Command, a.Path})
	case ActionSearch:
		return json.Marshal(struct {
			Type    CommandActionType `json:"type"`
			Command string            `json:"command"`
			Query   *string           `json:"query"`
			Path    *string           `json:"path"`
		}{a.Type, a.Command, a.Query, a.Path})
	default:
		return json.Marshal(struct {
			Type    CommandActionType `json:"type"`
			Command string            `json:"command"`
		}{a.Type, a.Command})
	}
}

// UnmarshalJSON decodes any variant.
func (a *CommandAction) UnmarshalJSON(b []byte) error {
	var w struct {
		Type    CommandActionType `json:"type"`
		Command string            `json:"command"`
		Name    string            `json:"name"`
		Path    *string           `json:"path"`
		Query   *string           `json:"query"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*a = CommandAction(w)
	return nil
}

// FileChangeItem is a set of file edits (apply_patch).
type FileChangeItem struct {
	// ID reuses the model's call id.
	ID string `json:"id"`
	// Changes are the edits, one per file.
	Changes List[FileUpdateChange] `json:"changes"`
	// Status is inProgress, completed, failed or declined.
	Status ToolStatus `json:"status"`
}

// ItemType implements ThreadItemBody.
func (*FileChangeItem) ItemType() ThreadItemType { return ItemFileChange }

// ItemID implements ThreadItemBody.
func (i *FileChangeItem) ItemID() string { return i.ID }

// FileUpdateChange is the edit of one file.
type FileUpdateChange struct {
	// Path is the absolute file path.
	Path string `json:"path"`
	// Kind is add, delete or update.
	Kind PatchChangeKind `json:"kind"`
	// Diff is the new body for add, hunks for update.
	Diff string `json:"diff"`
}

// PatchChangeKindType is the discriminator of PatchChangeKind.
type PatchChangeKindType string

// The patch change kinds.
const (
	PatchAdd    PatchChangeKindType = "add"
	PatchDelete PatchChangeKindType = "delete"
	PatchUpdate PatchChangeKindType = "update"
)

// PatchChangeKind is {type:"add"}, {type:"delete"} or
// {type:"update", move_path: string|null} (snake_case key).
type PatchChangeKind struct {
	// Type selects the variant.
	Type PatchChangeKindType
	// MovePath is the rename target of an update, or nil.
	MovePath *string
}

// MarshalJSON writes move_path only for update.
func (k PatchChangeKind) MarshalJSON() ([]byte, error) {
	if k.Type == PatchUpdate {
		return json.Marshal(struct {
			Type     PatchChangeKindType `json:"type"`
			MovePath *string             `json:"move_path"`
		}{k.Type, k.MovePath})
	}
	return json.Marshal(struct {
		Type PatchChangeKindType `json:"type"`
	}{k.Type})
}

// UnmarshalJSON decodes any variant.
func (k *PatchChangeKind) UnmarshalJSON(b []byte) error {
	var w struct {
		Type     PatchChangeKindType `json:"type"`
		MovePath *string             `json:"move_path"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*k = PatchChangeKind(w)
	return nil
}

// McpToolCallItem is a call of an MCP tool.
type McpToolCallItem struct {
	// ID reuses the model's call id.
	ID string `json:"id"`
	// Server is the MCP server name.
	Server string `json:"server"`
	// Tool is the tool name.
	Tool string `json:"tool"`
	// Status is inProgress, completed or failed.
	Status ToolStatus `json:"status"`
	// Arguments are the call arguments (any JSON; nil is null).
	Arguments json.RawMessage `json:"arguments"`
	// AppContext describes a connector app, or null.
	AppContext *McpToolCallAppContext `json:"appContext"`
	// McpAppResourceURI is the MCP app resource, omitted when unset.
	McpAppResourceURI *string `json:"mcpAppResourceUri,omitempty"`
	// McpAppUI describes the MCP app UI, or null.
	McpAppUI *McpAppUI `json:"mcpAppUi"`
	// PluginID is the providing plugin, or null.
	PluginID *string `json:"pluginId"`
	// ReadOnlyHint is the tool's read-only annotation, or null.
	ReadOnlyHint *bool `json:"readOnlyHint"`
	// Result is the tool result, or null.
	Result *McpToolCallResult `json:"result"`
	// Error is the call error, or null.
	Error *McpToolCallError `json:"error"`
	// DurationMs is the run time, or null.
	DurationMs *int64 `json:"durationMs"`
}

// ItemType implements ThreadItemBody.
func (*McpToolCallItem) ItemType() ThreadItemType { return ItemMcpToolCall }

// ItemID implements ThreadItemBody.
func (i *McpToolCallItem) ItemID() string { return i.ID }

// McpToolCallAppContext describes the connector app of an MCP call.
type McpToolCallAppContext struct {
	// ConnectorID identifies the connector.
	ConnectorID string `json:"connectorId"`
	// LinkID is the link, or null.
	LinkID *string `json:"linkId"`
	// ResourceURI is the resource, or null.
	ResourceURI *string `json:"resourceUri"`
	// AppName is the app's name, or null.
	AppName *string `json:"appName"`
	// ActionName is the action's name, or null.
	ActionName *string `json:"actionName"`
}

// McpAppUI describes the UI of an MCP app.
type McpAppUI struct {
	// ResourceURI is the UI resource.
	ResourceURI string `json:"resourceUri"`
	// PreferredModelDisplayMode is "inline" or "fullscreen".
	PreferredModelDisplayMode string `json:"preferredModelDisplayMode"`
}

// McpToolCallResult is an MCP CallToolResult as shown in items.
type McpToolCallResult struct {
	// Content are the MCP content blocks.
	Content List[json.RawMessage] `json:"content"`
	// StructuredContent is structured output, or null.
	StructuredContent json.RawMessage `json:"structuredContent"`
	// Meta is the _meta object, or null.
	Meta json.RawMessage `json:"_meta"`
}

// McpToolCallError is the error of a failed MCP call.
type McpToolCallError struct {
	// Message is the error text.
	Message string `json:"message"`
}

// DynamicToolCallItem is a call of a client-registered dynamic tool.
type DynamicToolCallItem struct {
	// ID is the model's call id (= item/tool/call callId).
	ID string `json:"id"`
	// Namespace is the tool's namespace, or null.
	Namespace *string `json:"namespace"`
	// Tool is the tool name.
	Tool string `json:"tool"`
	// Arguments are the parsed call arguments (nil is null).
	Arguments json.RawMessage `json:"arguments"`
	// Status is inProgress, completed or failed.
	Status ToolStatus `json:"status"`
	// ContentItems are the client's output, or null while running.
	ContentItems []DynamicToolCallOutputContentItem `json:"contentItems"`
	// Success is the client's verdict, or null while running.
	Success *bool `json:"success"`
	// DurationMs is the run time, or null.
	DurationMs *int64 `json:"durationMs"`
}

// ItemType implements ThreadItemBody.
func (*DynamicToolCallItem) ItemType() ThreadItemType { return ItemDynamicToolCall }

// ItemID implements ThreadItemBody.
func (i *DynamicToolCallItem) ItemID() string { return i.ID }

// WebSearchItem is a web search by the model.
type WebSearchItem struct {
	// ID identifies the item.
	ID string `json:"id"`
	// Query is the search query.
	Query string `json:"query"`
	// Action is what the search did, or null.
	Action *WebSearchAction `json:"action"`
	// Results are the raw results, or null.
	Results []json.RawMessage `json:"results"`
}

// ItemType implements ThreadItemBody.
func (*WebSearchItem) ItemType() ThreadItemType { return ItemWebSearch }

// ItemID implements ThreadItemBody.
func (i *WebSearchItem) ItemID() string { return i.ID }

// WebSearchActionType is the discriminator of WebSearchAction.
type WebSearchActionType string

// The web search actions.
const (
	WebSearchSearch     WebSearchActionType = "search"
	WebSearchOpenPage   WebSearchActionType = "openPage"
	WebSearchFindInPage WebSearchActionType = "findInPage"
	WebSearchOther      WebSearchActionType = "other"
)

// WebSearchAction is search {query|null, queries|null}, openPage {url|null},
// findInPage {url|null, pattern|null} or other, tagged by type.
type WebSearchAction struct {
	// Type selects the variant.
	Type WebSearchActionType
	// Query is the search query (search), or nil.
	Query *string
	// Queries are the search queries (search), or nil.
	Queries []string
	// URL is the page (openPage, findInPage), or nil.
	URL *string
	// Pattern is the searched pattern (findInPage), or nil.
	Pattern *string
}

// MarshalJSON writes the keys of the selected variant.
func (a WebSearchAction) MarshalJSON() ([]byte, error) {
	switch a.Type {
	case WebSearchSearch:
		return json.Marshal(struct {
			Type    WebSearchActionType `json:"type"`
			Query   *string             `json:"query"`
			Queries []string            `json:"queries"`
		}{a.Type, a.Query, a.Queries})
	case WebSearchOpenPage:
		return json.Marshal(struct {
			Type WebSearchActionType `json:"type"`
			URL  *string             `json:"url"`
		}{a.Type, a.URL})
	case WebSearchFindInPage:
		return json.Marshal(struct {
			Type    WebSearchActionType `json:"type"`
			URL     *string             `json:"url"`
			Pattern *string             `json:"pattern"`
		}{a.Type, a.URL, a.Pattern})
	default:
		return json.Marshal(struct {
			Type WebSearchActionType `json:"type"`
		}{a.Type})
	}
}

// UnmarshalJSON decodes any variant.
func (a *WebSearchAction) UnmarshalJSON(b []byte) error {
	var w struct {
		Type    WebSearchActionType `json:"type"`
		Query   *string             `json:"query"`
		Queries []string            `json:"queries"`
		URL     *string             `json:"url"`
		Pattern *string             `json:"pattern"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*a = WebSearchAction(w)
	return nil
}

// CollabAgentTool names a collaboration tool in a collabAgentToolCall item.
type CollabAgentTool string

// The collaboration tools.
const (
	CollabSpawnAgent  CollabAgentTool = "spawnAgent"
	CollabSendInput   CollabAgentTool = "sendInput"
	CollabResumeAgent CollabAgentTool = "resumeAgent"
	CollabWait        CollabAgentTool = "wait"
	CollabCloseAgent  CollabAgentTool = "closeAgent"
)

// CollabAgentStatus is a sub-agent's status in a collabAgentToolCall item.
type CollabAgentStatus string

// The sub-agent statuses.
const (
	CollabPendingInit CollabAgentStatus = "pendingInit"
	CollabRunning     CollabAgentStatus = "running"
	CollabInterrupted CollabAgentStatus = "interrupted"
	CollabCompleted   CollabAgentStatus = "completed"
	CollabErrored     CollabAgentStatus = "errored"
	CollabShutdown    CollabAgentStatus = "shutdown"
	CollabNotFound    CollabAgentStatus = "notFound"
)

// CollabAgentState is the last known state of one sub-agent.
type CollabAgentState struct {
	// Status is the agent's status.
	Status CollabAgentStatus `json:"status"`
	// Message is its final answer or error, or null.
	Message *string `json:"message"`
}

// CollabAgentToolCallItem is one call of a collaboration tool
// (spawn_agent, send_input, wait_agent, close_agent, resume_agent).
type CollabAgentToolCallItem struct {
	// ID identifies the item (the tool call id).
	ID string `json:"id"`
	// Tool is the tool called.
	Tool CollabAgentTool `json:"tool"`
	// Status is inProgress, completed, failed or interrupted.
	Status ToolStatus `json:"status"`
	// SenderThreadID is the calling thread.
	SenderThreadID string `json:"senderThreadId"`
	// ReceiverThreadIDs are the agents' threads the call is about (the
	// new child's for a spawn).
	ReceiverThreadIDs List[string] `json:"receiverThreadIds"`
	// Prompt is the text sent to the agent, or null.
	Prompt *string `json:"prompt"`
	// Model is the model requested for a spawned agent, or null.
	Model *string `json:"model"`
	// ReasoningEffort is the effort requested for a spawned agent, or null.
	ReasoningEffort *string `json:"reasoningEffort"`
	// AgentsStates are the last known states of the receivers, by thread
	// id; nil is written as {}.
	AgentsStates Map[CollabAgentState] `json:"agentsStates"`
}

// ItemType implements ThreadItemBody.
func (*CollabAgentToolCallItem) ItemType() ThreadItemType { return ItemCollabAgentToolCall }

// ItemID implements ThreadItemBody.
func (i *CollabAgentToolCallItem) ItemID() string { return i.ID }

// SubAgentActivityKind is what happened to a sub-agent of the v2
// collaboration tools.
type SubAgentActivityKind string

// The SubAgentActivityKind values of the reference schema.
const (
	SubAgentStarted     SubAgentActivityKind = "started"
	SubAgentInteracted  SubAgentActivityKind = "interacted"
	SubAgentInterrupted SubAgentActivityKind = "interrupted"
	SubAgentCompleted   SubAgentActivityKind = "completed"
)

// SubAgentActivityItem is an event of a v2 sub-agent on its parent's turn
// (collaboration.spawn_agent started it, its turn completed).
type SubAgentActivityItem struct {
	// Model is the child's model when it was created, null for the other
	// activities.
	Model *string `json:"model"`
	// ReasoningEffort is the child's effort when it was created, or null.
	ReasoningEffort *ReasoningEffort `json:"reasoningEffort"`
	// ID identifies the item (a spawn's tool call id).
	ID string `json:"id"`
	// Kind is what happened.
	Kind SubAgentActivityKind `json:"kind"`
	// AgentThreadID is the child's thread.
	AgentThreadID string `json:"agentThreadId"`
	// AgentPath is the child's task path ("/root/helper").
	AgentPath string `json:"agentPath"`
}

// ItemType implements ThreadItemBody.
func (*SubAgentActivityItem) ItemType() ThreadItemType { return ItemSubAgentActivity }

// ItemID implements ThreadItemBody.
func (i *SubAgentActivityItem) ItemID() string { return i.ID }

// ImageViewItem records that the model viewed a local image.
type ImageViewItem struct {
	// ID identifies the item.
	ID string `json:"id"`
	// Path is the image path.
	Path string `json:"path"`
}

// ItemType implements ThreadItemBody.
func (*ImageViewItem) ItemType() ThreadItemType { return ItemImageView }

// ItemID implements ThreadItemBody.
func (i *ImageViewItem) ItemID() string { return i.ID }

// ContextCompactionItem marks a context compaction.
type ContextCompactionItem struct {
	// ID identifies the item.
	ID string `json:"id"`
}

// ItemType implements ThreadItemBody.
func (*ContextCompactionItem) ItemType() ThreadItemType { return ItemContextCompaction }

// ItemID implements ThreadItemBody.
func (i *ContextCompactionItem) ItemID() string { return i.ID }

// DynamicToolCallOutputContentItemType is the discriminator of DynamicToolCallOutputContentItem.
type DynamicToolCallOutputContentItemType string

// The dynamic tool output content kinds.
const (
	ContentInputText  DynamicToolCallOutputContentItemType = "inputText"
	ContentInputImage DynamicToolCallOutputContentItemType = "inputImage"
	ContentInputAudio DynamicToolCallOutputContentItemType = "inputAudio"
)

// DynamicToolCallOutputContentItem is one piece of dynamic tool output:
// inputText {text}, inputImage {imageUrl} or inputAudio {audioUrl}.
type DynamicToolCallOutputContentItem struct {
	// Type selects the variant.
	Type DynamicToolCallOutputContentItemType
	// Text is the text of inputText.
	Text string
	// ImageURL is the URL or data URL of inputImage.
	ImageURL string
	// AudioURL is the URL or data URL of inputAudio.
	AudioURL string
}

// MarshalJSON writes the keys of the selected variant.
func (c DynamicToolCallOutputContentItem) MarshalJSON() ([]byte, error) {
	switch c.Type {
	case ContentInputImage:
		return json.Marshal(struct {
			Type     DynamicToolCallOutputContentItemType `json:"type"`
			ImageURL string                               `json:"imageUrl"`
		}{c.Type, c.ImageURL})
	case ContentInputAudio:
		return json.Marshal(struct {
			Type     DynamicToolCallOutputContentItemType `json:"type"`
			AudioURL string                               `json:"audioUrl"`
		}{c.Type, c.AudioURL})
	default:
		return json.Marshal(struct {
			Type DynamicToolCallOutputContentItemType `json:"type"`
			Text string                               `json:"text"`
		}{c.Type, c.Text})
	}
}

// UnmarshalJSON decodes any variant.
func (c *DynamicToolCallOutputContentItem) UnmarshalJSON(b []byte) error {
	var w struct {
		Type     DynamicToolCallOutputContentItemType `json:"type"`
		Text     string                               `json:"text"`
		ImageURL string                               `json:"imageUrl"`
		AudioURL string                               `json:"audioUrl"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*c = DynamicToolCallOutputContentItem(w)
	return nil
}
