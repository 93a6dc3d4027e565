package transcript

import (
	"encoding/json"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
)

// ThreadMeta is the part of a thread's settings kept in store.Thread.Meta.
type ThreadMeta struct {
	// Cwd and ModelProvider repeat the record's columns so that changes
	// made by resume and turn/start survive a reload.
	Cwd               string             `json:"cwd,omitempty"`
	ModelProvider     string             `json:"modelProvider,omitempty"`
	ApprovalPolicy    api.AskForApproval `json:"approvalPolicy"`
	ApprovalsReviewer string             `json:"approvalsReviewer,omitempty"`
	Sandbox           api.SandboxPolicy  `json:"sandbox"`
	// PermissionProfile is the built-in permission profile that chose
	// Sandbox (permissions, config.default_permissions), "" when none did.
	PermissionProfile     string                   `json:"permissionProfile,omitempty"`
	ReasoningEffort       *string                  `json:"reasoningEffort,omitempty"`
	ReasoningSummary      string                   `json:"reasoningSummary,omitempty"`
	BaseInstructions      *string                  `json:"baseInstructions,omitempty"`
	DeveloperInstructions *string                  `json:"developerInstructions,omitempty"`
	Originator            *string                  `json:"originator,omitempty"`
	ThreadSource          *string                  `json:"threadSource,omitempty"`
	CLIVersion            string                   `json:"cliVersion"`
	ServiceTier           *string                  `json:"serviceTier,omitempty"`
	TokenTotal            *api.TokenUsageBreakdown `json:"tokenTotal,omitempty"`
	LastTurnID            string                   `json:"lastTurnId,omitempty"`
	LastUsage             *api.TokenUsageBreakdown `json:"lastUsage,omitempty"`
	// BudgetCostMicros is the cost of the thread's model responses at the
	// configured prices, in millionths (internal/budget).
	BudgetCostMicros int64 `json:"budgetCostMicros,omitempty"`
	// ContextTokens is how many tokens the last model request and its
	// response took, which the next request carries again; a compaction
	// sets it to 0. Reaching the auto-compact limit compacts the context.
	ContextTokens int64 `json:"contextTokens,omitempty"`
	// Verbosity is the thread's model_verbosity when it started ("" for
	// none): the turns of models that take one send it.
	Verbosity string `json:"verbosity,omitempty"`
	// DynamicTools is the client's tool registration, validated.
	DynamicTools json.RawMessage `json:"dynamicTools,omitempty"`
	// Config is the thread's config overrides (thread/start and
	// thread/fork `config`), flattened to dotted keys; the ToolsFactory
	// reads the ones that shape the tool set.
	Config map[string]json.RawMessage `json:"config,omitempty"`
	// SubAgent is set on a child thread spawned by a parent's turn.
	SubAgent *SubAgent `json:"subAgent,omitempty"`
	// Spawned are the children this thread's turns spawned, in order.
	Spawned []SpawnEdge `json:"spawned,omitempty"`
	// GitInfo and DaybreakEnabled are what clients saved with
	// thread/metadata/update.
	GitInfo         *api.GitInfo `json:"gitInfo,omitempty"`
	DaybreakEnabled *bool        `json:"daybreakEnabled,omitempty"`
	// Goal is the thread's goal (thread/goal/set), or nil.
	Goal *Goal `json:"goal,omitempty"`
	// Injected are items thread/inject_items added while the thread was
	// idle: its next turn's model history has them before its input.
	Injected []model.InputItem `json:"injected,omitempty"`
	// Reverted is set once thread/revert dropped turns: a thread whose
	// every turn was dropped is still materialized (thread/turns/list
	// answers an empty page rather than an error).
	Reverted bool `json:"reverted,omitempty"`
}

// DecodeThreadMeta reads a thread record's meta: an empty one is the zero
// meta, one that does not decode is Internal (corrupt).
func DecodeThreadMeta(raw json.RawMessage) (ThreadMeta, error) {
	var meta ThreadMeta
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return ThreadMeta{}, apperr.Wrap(apperr.Internal, err, "corrupt thread metadata")
		}
	}
	return meta, nil
}

// Parent is the thread whose turn spawned this one, "" for a thread a
// client started.
func (m *ThreadMeta) Parent() string {
	if m.SubAgent == nil {
		return ""
	}
	return m.SubAgent.ParentThreadID
}

// TurnMeta is kept in store.Turn.Meta: the exact model history the turn
// added (its user input, every output item and every tool output, in
// order), so that the next request replays it byte for byte.
type TurnMeta struct {
	// Compacted means the turn compacted the context: History is then
	// the whole model history from this turn on, the summary first.
	Compacted bool `json:"compacted,omitempty"`
	// RootTurnID is the turn that led to this one, when not itself.
	RootTurnID string            `json:"rootTurnId,omitempty"`
	History    []model.InputItem `json:"history"`
}

// SubAgent is what a child thread keeps about its spawn and its last
// turn, in its thread meta: the parent and depth name it in thread/read,
// the last status and answer serve wait_agent after the child unloaded.
type SubAgent struct {
	ParentThreadID string `json:"parentThreadId"`
	Depth          int    `json:"depth"`
	AgentPath      string `json:"agentPath,omitempty"`
	Nickname       string `json:"nickname,omitempty"`
	// LastStatus and LastAnswer are the end of the child's last turn:
	// its status and its last agent message.
	LastStatus api.TurnStatus `json:"lastStatus,omitempty"`
	LastAnswer *string        `json:"lastAnswer,omitempty"`
	LastError  string         `json:"lastError,omitempty"`
	// EndedTurnID is the turn whose end LastStatus records.
	EndedTurnID string `json:"endedTurnId,omitempty"`
}

// SpawnSource is the SessionSource payload of a spawned child:
// {"thread_spawn": {parent_thread_id, depth, agent_path, ...}}, as the
// reference writes it.
func (s *SubAgent) SpawnSource() json.RawMessage {
	type spawn struct {
		ParentThreadID string  `json:"parent_thread_id"`
		Depth          int     `json:"depth"`
		AgentPath      *string `json:"agent_path"`
		AgentNickname  *string `json:"agent_nickname"`
		AgentRole      *string `json:"agent_role"`
	}
	sp := spawn{ParentThreadID: s.ParentThreadID, Depth: s.Depth}
	if s.AgentPath != "" {
		sp.AgentPath = &s.AgentPath
	}
	if s.Nickname != "" {
		sp.AgentNickname = &s.Nickname
	}
	b, _ := json.Marshal(map[string]spawn{"thread_spawn": sp})
	return b
}

// SpawnEdge is one child in its parent's meta: the parent keeps the list
// of its children, so that they are found from it (archiving it archives
// them, the HTTP API lists them) and so that the collaboration tools know
// after a restart which of them are still open.
type SpawnEdge struct {
	ID       string `json:"id"`
	Nickname string `json:"nickname,omitempty"`
	// Closed is set by close_agent and cleared by resume_agent.
	Closed bool `json:"closed,omitempty"`
}

// Goal is a thread's goal as kept in its metadata; TokensBase is the
// thread's token total when the goal was set, so that the goal reports the
// tokens spent since. TimeUsedMs is the time turns ran while it was
// active, up to the last time the goal clock stopped (the thread table
// keeps the clock).
type Goal struct {
	Objective   string               `json:"objective"`
	Status      api.ThreadGoalStatus `json:"status"`
	TokenBudget *int64               `json:"tokenBudget,omitempty"`
	TokensBase  int64                `json:"tokensBase"`
	TimeUsedMs  int64                `json:"timeUsedMs,omitempty"`
	CreatedAt   int64                `json:"createdAt"`
	UpdatedAt   int64                `json:"updatedAt"`
}
