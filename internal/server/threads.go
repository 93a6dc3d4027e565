package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/server/rpcws"
	"github.com/appserver/appserver/internal/turns"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// experimentalFields lists, per method, the params that need the
// experimentalApi capability (present and not null).
var experimentalFields = map[string][]string{
	"thread/start": {"dynamicTools", "historyMode", "environments", "permissions", "runtimeWorkspaceRoots",
		"multiAgentMode", "projectId", "selectedCapabilityRoots", "daybreakEnabled", "experimentalRawEvents",
		"allowProviderModelFallback", "mockExperimentalField"},
	"thread/resume": {"history", "path", "initialTurnsPage", "permissions", "runtimeWorkspaceRoots", "afterSeq"},
	"thread/fork":   {"path", "permissions", "runtimeWorkspaceRoots"},
	"turn/start": {"collaborationMode", "additionalContext", "environments", "permissions", "runtimeWorkspaceRoots",
		"multiAgentMode", "cyberAccessProgram", "responsesapiClientMetadata", "responsesapiClientMetadataPatch"},
	"turn/steer": {"additionalContext", "responsesapiClientMetadata", "responsesapiClientMetadataPatch"},
}

// gateFields rejects experimental params from a client that did not opt in,
// with the reference's `<method>.<field> requires experimentalApi
// capability`. A field counts when present and not null, the last of
// repeated keys counting, as decoding into a map does.
func gateFields(c *Call) error {
	fields := experimentalFields[c.Method]
	if len(fields) == 0 || c.Session.experimental || len(c.Params) == 0 {
		return nil
	}
	members, ok := c.members()
	if !ok {
		return gateFieldsDecoded(c, fields)
	}
	for _, f := range fields {
		if v, ok := lastMember(members, f); ok && string(v) != "null" {
			return InvalidRequest("%s.%s requires experimentalApi capability", c.Method, f)
		}
	}
	return nil
}

// gateFieldsDecoded is gateFields for params the scan left alone.
func gateFieldsDecoded(c *Call, fields []string) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(c.Params, &obj); err != nil {
		return nil // the decode that follows reports it
	}
	for _, f := range fields {
		if v, ok := obj[f]; ok && string(v) != "null" {
			return InvalidRequest("%s.%s requires experimentalApi capability", c.Method, f)
		}
	}
	return nil
}

// textFields lists, per method, the params the store compares or keeps as
// text (search terms, filters, names, paths, metadata): a NUL character,
// which the store cannot keep or compare, is refused in them.
var textFields = map[string][]string{
	"thread/start":             {"cwd", "model", "modelProvider"},
	"thread/resume":            {"cwd", "model", "modelProvider"},
	"thread/fork":              {"cwd", "model", "modelProvider"},
	"thread/list":              {"searchTerm", "cwd", "modelProviders", "cursor"},
	"thread/search":            {"searchTerm", "cursor"},
	"thread/search/stream":     {"searchTerm", "cursor"},
	"thread/name/set":          {"name"},
	"thread/metadata/update":   {"gitInfo", "projectId"},
	"thread/items/list":        {"turnId", "cursor"},
	"thread/items/read":        {"turnId", "itemIds"},
	"thread/searchOccurrences": {"searchTerm", "cursor"},
	"thread/readState/update":  {"expectedRevision"},
	"thread/turns/list":        {"cursor"},
	"turn/start":               {"cwd", "model"},
}

// refuseNUL answers -32602 naming the first field of textFields[c.Method]
// that holds a NUL character anywhere in its value.
func refuseNUL(c *Call) error {
	fields := textFields[c.Method]
	if len(fields) == 0 || !bytes.Contains(c.Params, []byte(`\u0000`)) {
		return nil
	}
	var obj map[string]any
	if json.Unmarshal(c.Params, &obj) != nil {
		return nil // the decode that follows reports it
	}
	for _, f := range fields {
		if holdsNUL(obj[f]) {
			return InvalidParams("Invalid params: %s contains a NUL character", f)
		}
	}
	return nil
}

// holdsNUL reports whether a decoded JSON value has a string (or key)
// holding a NUL character.
func holdsNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.IndexByte(v, 0) >= 0
	case []any:
		return slices.ContainsFunc(v, holdsNUL)
	case map[string]any:
		for k, e := range v {
			if strings.IndexByte(k, 0) >= 0 || holdsNUL(e) {
				return true
			}
		}
	}
	return false
}

// threadMethod adapts a typed manager call to a Method: required fields,
// experimental fields and text fields are checked, params decoded, and the
// manager's After runs once the response is queued.
func threadMethod[P any, R any](required []string, f func(ctx context.Context, c *Call, p P) (R, turns.After, error)) Method {
	return func(ctx context.Context, c *Call) (any, error) {
		if err := gateFields(c); err != nil {
			return nil, err
		}
		if err := refuseNUL(c); err != nil {
			return nil, err
		}
		var p P
		if err := DecodeParams(c, &p, required...); err != nil {
			return nil, err
		}
		res, after, err := f(ctx, c, p)
		if err != nil {
			return nil, err
		}
		if after != nil {
			c.After(after)
		}
		return res, nil
	}
}

// checkInputText refuses text input holding a NUL byte, which no store can
// keep (PostgreSQL text cannot hold it): refused here, it is the client's
// -32602 rather than a turn failing later with an internal error.
func checkInputText(input api.List[api.UserInput]) error {
	for i, in := range input {
		if in.Type == api.UserInputText && strings.IndexByte(in.Text, 0) >= 0 {
			return InvalidParams("Invalid params: input[%d].text contains a NUL character", i)
		}
	}
	return nil
}

func caller(c *Call) turns.Caller {
	who := c.Session.who
	return turns.Caller{Conn: turns.ConnID(c.Session.id), ClientName: who.ClientName(c.Session.clientName), Principal: who}
}

// attach makes an initialized session a subscriber of the hub, until it
// closes; the hub then drops its subscriptions too.
func (s *Server) attach(sess *Session) {
	w := newWSSub(sess)
	sess.sub.Store(w)
	id := turns.ConnID(sess.id)
	s.hub.Attach(id, w, hub.AttachOptions{OptOut: sess.optOut})
	sess.OnClose(func() { s.hub.Detach(id) })
}

// A thread/read, thread/resume or thread/fork with its turns is written
// while its reply is sent.
var _ rpcws.StreamedResult = (*transcript.ThreadStream)(nil)

// withTurns reports whether a thread/resume or thread/fork answers with
// the thread's turns, which are then streamed (rpcws.StreamedResult).
func withTurns(excludeTurns *bool) bool { return excludeTurns == nil || !*excludeTurns }

// Threads is what the sessions ask of the thread table (turns.Manager) to
// serve the thread and turn methods: the table and the threads' settings,
// the turns, and the read side.
type Threads interface {
	ThreadTable
	TurnRunner
	Reader
	Queue
}

// Queue is the threads' queues of user messages: thread/queue/*.
type Queue interface {
	QueueAdd(ctx context.Context, p api.ThreadQueueAddParams) (api.ThreadQueueAddResult, turns.After, error)
	QueueList(ctx context.Context, p api.ThreadQueueListParams) (api.ThreadQueueListResult, error)
	QueueUpdate(ctx context.Context, p api.ThreadQueueUpdateParams) (api.ThreadQueueUpdateResult, turns.After, error)
	QueueDelete(ctx context.Context, p api.ThreadQueueDeleteParams) (api.ThreadQueueDeleteResult, turns.After, error)
	QueueReorder(ctx context.Context, p api.ThreadQueueReorderParams) (api.ThreadQueueReorderResult, turns.After, error)
	QueueStart(ctx context.Context, c turns.Caller, p api.ThreadQueueStartParams) (api.TurnStartResult, turns.After, error)
}

// ThreadTable is the thread table and the threads' settings: the
// thread/* methods that load, create, fork, archive, delete or change a
// thread.
type ThreadTable interface {
	// Loaded lists the ids of the threads in memory.
	Loaded() []string
	StartThread(ctx context.Context, c turns.Caller, p api.ThreadStartParams) (api.ThreadStartResult, turns.After, error)
	ResumeThread(ctx context.Context, c turns.Caller, p api.ThreadResumeParams) (api.ThreadResumeResult, turns.After, error)
	StreamResume(ctx context.Context, c turns.Caller, p api.ThreadResumeParams) (*transcript.ThreadStream, turns.After, error)
	ForkThread(ctx context.Context, c turns.Caller, p api.ThreadForkParams) (api.ThreadStartResult, turns.After, error)
	StreamFork(ctx context.Context, c turns.Caller, p api.ThreadForkParams) (*transcript.ThreadStream, turns.After, error)
	ArchiveThread(ctx context.Context, p api.ThreadArchiveParams) (turns.After, error)
	UnarchiveThread(ctx context.Context, p api.ThreadUnarchiveParams) (api.ThreadUnarchiveResult, turns.After, error)
	DeleteThread(ctx context.Context, p api.ThreadDeleteParams) (turns.After, error)
	SetName(ctx context.Context, p api.ThreadNameSetParams) (turns.After, error)
	UpdateMetadata(ctx context.Context, p api.ThreadMetadataUpdateParams) (api.ThreadMetadataUpdateResult, error)
	UpdateSettings(ctx context.Context, c turns.Caller, p api.ThreadSettingsUpdateParams) (api.ThreadSettingsUpdateResult, turns.After, error)
	UpdateReadState(ctx context.Context, p api.ThreadReadStateUpdateParams) (api.ThreadReadStateUpdateResult, *turns.ReadStateConflict, turns.After, error)
	RevertThread(ctx context.Context, p api.ThreadRevertParams) (api.ThreadRevertResult, turns.After, error)
	SetGoal(ctx context.Context, p api.ThreadGoalSetParams) (api.ThreadGoalSetResult, turns.After, error)
	Goal(ctx context.Context, p api.ThreadGoalGetParams) (api.ThreadGoalGetResult, error)
	ClearGoal(ctx context.Context, p api.ThreadGoalClearParams) (api.ThreadGoalClearResult, turns.After, error)
	Unsubscribe(c turns.Caller, p api.ThreadUnsubscribeParams) (api.ThreadUnsubscribeResult, error)
	// ThreadFeatures is the feature switches a thread's config sets.
	ThreadFeatures(ctx context.Context, threadID string) (map[string]bool, error)
}

// TurnRunner runs turns: turn/*, thread/compact/start, review/start and
// thread/shellCommand.
type TurnRunner interface {
	StartTurn(ctx context.Context, c turns.Caller, p api.TurnStartParams) (api.TurnStartResult, turns.After, error)
	SteerTurn(ctx context.Context, c turns.Caller, p api.TurnSteerParams) (api.TurnSteerResult, error)
	InterruptTurn(ctx context.Context, p api.TurnInterruptParams) (turns.After, error)
	UpdateTurnSettings(ctx context.Context, p api.TurnSettingsUpdateParams) (api.TurnSettingsUpdateResult, error)
	CompactThread(ctx context.Context, c turns.Caller, p api.ThreadCompactStartParams) (api.ThreadCompactStartResult, turns.After, error)
	StartReview(ctx context.Context, c turns.Caller, p api.ReviewStartParams) (api.ReviewStartResult, turns.After, error)
	ShellCommand(ctx context.Context, c turns.Caller, p api.ThreadShellCommandParams) (api.ThreadShellCommandResult, turns.After, error)
	InjectItems(ctx context.Context, p api.ThreadInjectItemsParams) (api.ThreadInjectItemsResult, error)
}

// Reader is the read side: thread/read, thread/list, thread/search and
// the turn and item pages.
type Reader interface {
	ReadThread(ctx context.Context, p api.ThreadReadParams) (api.ThreadReadResult, error)
	StreamThread(ctx context.Context, p api.ThreadReadParams) (*transcript.ThreadStream, error)
	ListThreads(ctx context.Context, who principal.Principal, p api.ThreadListParams) (api.ThreadListResult, error)
	SearchThreads(ctx context.Context, who principal.Principal, p api.ThreadSearchParams) (api.ThreadSearchResult, error)
	ListTurns(ctx context.Context, p api.ThreadTurnsListParams) (api.TurnsPage, error)
	ListItems(ctx context.Context, p api.ThreadItemsListParams) (api.ThreadItemsListResult, error)
	ReadItems(ctx context.Context, p api.ThreadItemsReadParams) (api.ThreadItemsReadResult, error)
	SearchOccurrences(ctx context.Context, p api.ThreadSearchOccurrencesParams) (api.ThreadSearchOccurrencesResult, error)
	StreamSearchThreads(ctx context.Context, who principal.Principal, p api.ThreadSearchParams, partial func(api.List[api.ThreadSearchHit])) (api.ThreadSearchResult, error)
	// RateLimits are the providers' last rate limits, by provider.
	RateLimits() map[string]api.RateLimitSnapshot
	// Counts are the loaded threads and the running turns.
	Counts() (loaded, running int)
}

// registerThreads serves the thread and turn methods with m.
func (s *Server) registerThreads(m Threads) {
	if s.cfg.LoadedThreads == nil {
		s.cfg.LoadedThreads = m.Loaded
	}
	id := []string{"threadId"}
	s.Handle("thread/start", threadMethod(nil, func(ctx context.Context, c *Call, p api.ThreadStartParams) (api.ThreadStartResult, turns.After, error) {
		return m.StartThread(ctx, caller(c), p)
	}))
	// With its turns, the reply is written as they are read from the
	// store, a page of items at a time; it is queued before the
	// notifications After sends, so it still precedes them on the wire.
	resume := func(ctx context.Context, c *Call, p api.ThreadResumeParams) (any, turns.After, error) {
		if withTurns(p.ExcludeTurns) {
			return m.StreamResume(ctx, caller(c), p)
		}
		return m.ResumeThread(ctx, caller(c), p)
	}
	s.Handle("thread/resume", threadMethod(id, func(ctx context.Context, c *Call, p api.ThreadResumeParams) (any, turns.After, error) {
		if p.AfterSeq != nil && *p.AfterSeq < 0 {
			// A position in the event log: 0 is before its first event.
			return nil, nil, InvalidParams("Invalid params: afterSeq must be an event sequence number (0 or more), got %d", *p.AfterSeq)
		}
		sub := c.Session.sub.Load()
		if p.AfterSeq == nil || sub == nil {
			return resume(ctx, c, p)
		}
		// Live notifications of the thread wait while the log is replayed.
		sub.hold(p.ThreadID)
		res, after, err := resume(ctx, c, p)
		if err != nil {
			sub.replay(context.WithoutCancel(ctx), s.hub, p.ThreadID, -1)
			return res, after, err
		}
		return res, func() {
			if after != nil {
				after()
			}
			sub.replay(c.Session.Context(), s.hub, p.ThreadID, *p.AfterSeq)
		}, nil
	}))
	s.Handle("thread/fork", threadMethod(id, func(ctx context.Context, c *Call, p api.ThreadForkParams) (any, turns.After, error) {
		if withTurns(p.ExcludeTurns) {
			return m.StreamFork(ctx, caller(c), p)
		}
		return m.ForkThread(ctx, caller(c), p)
	}))
	s.Handle("thread/archive", threadMethod(id, func(ctx context.Context, _ *Call, p api.ThreadArchiveParams) (api.ThreadArchiveResult, turns.After, error) {
		after, err := m.ArchiveThread(ctx, p)
		return api.ThreadArchiveResult{}, after, err
	}))
	s.Handle("thread/delete", threadMethod(id, func(ctx context.Context, _ *Call, p api.ThreadDeleteParams) (api.ThreadDeleteResult, turns.After, error) {
		after, err := m.DeleteThread(ctx, p)
		return api.ThreadDeleteResult{}, after, err
	}))
	s.Handle("thread/unarchive", threadMethod(id, func(ctx context.Context, _ *Call, p api.ThreadUnarchiveParams) (api.ThreadUnarchiveResult, turns.After, error) {
		return m.UnarchiveThread(ctx, p)
	}))
	s.Handle("thread/list", threadMethod(nil, func(ctx context.Context, c *Call, p api.ThreadListParams) (api.ThreadListResult, turns.After, error) {
		res, err := m.ListThreads(ctx, c.Session.who, p)
		return res, nil, err
	}))
	s.Handle("thread/metadata/update", threadMethod(id, func(ctx context.Context, _ *Call, p api.ThreadMetadataUpdateParams) (api.ThreadMetadataUpdateResult, turns.After, error) {
		res, err := m.UpdateMetadata(ctx, p)
		return res, nil, err
	}))
	s.Handle("thread/goal/set", threadMethod(id, func(ctx context.Context, _ *Call, p api.ThreadGoalSetParams) (api.ThreadGoalSetResult, turns.After, error) {
		return m.SetGoal(ctx, p)
	}))
	s.Handle("thread/goal/get", threadMethod(id, func(ctx context.Context, _ *Call, p api.ThreadGoalGetParams) (api.ThreadGoalGetResult, turns.After, error) {
		res, err := m.Goal(ctx, p)
		return res, nil, err
	}))
	s.Handle("thread/goal/clear", threadMethod(id, func(ctx context.Context, _ *Call, p api.ThreadGoalClearParams) (api.ThreadGoalClearResult, turns.After, error) {
		return m.ClearGoal(ctx, p)
	}))
	s.Handle("thread/read", threadMethod(id, func(ctx context.Context, _ *Call, p api.ThreadReadParams) (any, turns.After, error) {
		if p.IncludeTurns != nil && *p.IncludeTurns {
			// Written while the reply is sent, a page of items at a time
			// (rpcws.StreamedResult): a big thread is never held whole.
			res, err := m.StreamThread(ctx, p)
			return res, nil, err
		}
		res, err := m.ReadThread(ctx, p)
		return res, nil, err
	}))
	s.Handle("thread/turns/list", threadMethod(id, func(ctx context.Context, _ *Call, p api.ThreadTurnsListParams) (api.TurnsPage, turns.After, error) {
		res, err := m.ListTurns(ctx, p)
		return res, nil, err
	}))
	s.Handle("thread/items/list", threadMethod(id, func(ctx context.Context, _ *Call, p api.ThreadItemsListParams) (api.ThreadItemsListResult, turns.After, error) {
		res, err := m.ListItems(ctx, p)
		return res, nil, err
	}))
	s.Handle("thread/items/read", threadMethod([]string{"threadId", "turnId", "itemIds"}, func(ctx context.Context, _ *Call, p api.ThreadItemsReadParams) (api.ThreadItemsReadResult, turns.After, error) {
		res, err := m.ReadItems(ctx, p)
		return res, nil, err
	}))
	s.Handle("thread/searchOccurrences", threadMethod([]string{"threadId", "searchTerm"}, func(ctx context.Context, _ *Call, p api.ThreadSearchOccurrencesParams) (api.ThreadSearchOccurrencesResult, turns.After, error) {
		res, err := m.SearchOccurrences(ctx, p)
		return res, nil, err
	}))
	s.Handle("thread/readState/update", threadMethod([]string{"threadId", "expectedRevision", "operation"}, func(ctx context.Context, _ *Call, p api.ThreadReadStateUpdateParams) (api.ThreadReadStateUpdateResult, turns.After, error) {
		res, conflict, after, err := m.UpdateReadState(ctx, p)
		if conflict != nil {
			return res, nil, &RPCError{Code: CodeInvalidRequest, Message: turns.ErrReadStateConflict, Data: conflict}
		}
		return res, after, err
	}))
	s.Handle("thread/revert", threadMethod([]string{"threadId", "beforeTurnId"}, func(ctx context.Context, _ *Call, p api.ThreadRevertParams) (api.ThreadRevertResult, turns.After, error) {
		return m.RevertThread(ctx, p)
	}))
	s.Handle("thread/name/set", threadMethod([]string{"threadId", "name"}, func(ctx context.Context, _ *Call, p api.ThreadNameSetParams) (api.ThreadNameSetResult, turns.After, error) {
		after, err := m.SetName(ctx, p)
		return api.ThreadNameSetResult{}, after, err
	}))
	s.Handle("thread/unsubscribe", threadMethod(id, func(_ context.Context, c *Call, p api.ThreadUnsubscribeParams) (api.ThreadUnsubscribeResult, turns.After, error) {
		res, err := m.Unsubscribe(caller(c), p)
		return res, nil, err
	}))
	s.Handle("thread/settings/update", threadMethod(id, func(ctx context.Context, c *Call, p api.ThreadSettingsUpdateParams) (api.ThreadSettingsUpdateResult, turns.After, error) {
		return m.UpdateSettings(ctx, caller(c), p)
	}))
	s.Handle("thread/shellCommand", threadMethod([]string{"threadId", "command"}, func(ctx context.Context, c *Call, p api.ThreadShellCommandParams) (api.ThreadShellCommandResult, turns.After, error) {
		if strings.IndexByte(p.Command, 0) >= 0 {
			return api.ThreadShellCommandResult{}, nil, InvalidParams("Invalid params: command contains a NUL character")
		}
		return m.ShellCommand(ctx, caller(c), p)
	}))
	s.Handle("thread/compact/start", threadMethod(id, func(ctx context.Context, c *Call, p api.ThreadCompactStartParams) (api.ThreadCompactStartResult, turns.After, error) {
		return m.CompactThread(ctx, caller(c), p)
	}))
	s.Handle("thread/inject_items", threadMethod([]string{"threadId", "items"}, func(ctx context.Context, _ *Call, p api.ThreadInjectItemsParams) (api.ThreadInjectItemsResult, turns.After, error) {
		res, err := m.InjectItems(ctx, p)
		return res, nil, err
	}))
	s.Handle("review/start", threadMethod([]string{"threadId", "target"}, func(ctx context.Context, c *Call, p api.ReviewStartParams) (api.ReviewStartResult, turns.After, error) {
		if strings.IndexByte(p.Target.Instructions, 0) >= 0 {
			return api.ReviewStartResult{}, nil, InvalidParams("Invalid params: target.instructions contains a NUL character")
		}
		return m.StartReview(ctx, caller(c), p)
	}))
	s.Handle("turn/start", threadMethod([]string{"threadId", "input"}, func(ctx context.Context, c *Call, p api.TurnStartParams) (api.TurnStartResult, turns.After, error) {
		if err := checkInputText(p.Input); err != nil {
			return api.TurnStartResult{}, nil, err
		}
		res, after, err := m.StartTurn(ctx, caller(c), p)
		return res, after, notSteerable(err)
	}))
	s.Handle("turn/steer", threadMethod([]string{"threadId", "input", "expectedTurnId"}, func(ctx context.Context, c *Call, p api.TurnSteerParams) (api.TurnSteerResult, turns.After, error) {
		if err := checkInputText(p.Input); err != nil {
			return api.TurnSteerResult{}, nil, err
		}
		res, err := m.SteerTurn(ctx, caller(c), p)
		return res, nil, notSteerable(err)
	}))
	s.Handle("turn/settings/update", threadMethod([]string{"threadId", "turnId"}, func(ctx context.Context, _ *Call, p api.TurnSettingsUpdateParams) (api.TurnSettingsUpdateResult, turns.After, error) {
		res, err := m.UpdateTurnSettings(ctx, p)
		return res, nil, err
	}))
	s.Handle("thread/queue/add", threadMethod([]string{"threadId", "clientUserMessageId", "input"}, func(ctx context.Context, _ *Call, p api.ThreadQueueAddParams) (api.ThreadQueueAddResult, turns.After, error) {
		if err := checkInputText(p.Input); err != nil {
			return api.ThreadQueueAddResult{}, nil, err
		}
		return m.QueueAdd(ctx, p)
	}))
	s.Handle("thread/queue/list", threadMethod(id, func(ctx context.Context, _ *Call, p api.ThreadQueueListParams) (api.ThreadQueueListResult, turns.After, error) {
		res, err := m.QueueList(ctx, p)
		return res, nil, err
	}))
	s.Handle("thread/queue/update", threadMethod([]string{"threadId", "queuedSubmissionId", "input"}, func(ctx context.Context, _ *Call, p api.ThreadQueueUpdateParams) (api.ThreadQueueUpdateResult, turns.After, error) {
		if err := checkInputText(p.Input); err != nil {
			return api.ThreadQueueUpdateResult{}, nil, err
		}
		return m.QueueUpdate(ctx, p)
	}))
	s.Handle("thread/queue/delete", threadMethod([]string{"threadId", "queuedSubmissionId"}, func(ctx context.Context, _ *Call, p api.ThreadQueueDeleteParams) (api.ThreadQueueDeleteResult, turns.After, error) {
		return m.QueueDelete(ctx, p)
	}))
	s.Handle("thread/queue/reorder", threadMethod([]string{"threadId", "queuedSubmissionIds"}, func(ctx context.Context, _ *Call, p api.ThreadQueueReorderParams) (api.ThreadQueueReorderResult, turns.After, error) {
		return m.QueueReorder(ctx, p)
	}))
	s.Handle("thread/queue/start", threadMethod(id, func(ctx context.Context, c *Call, p api.ThreadQueueStartParams) (api.ThreadQueueStartResult, turns.After, error) {
		return m.QueueStart(ctx, caller(c), p)
	}))
	s.Handle("turn/interrupt", threadMethod([]string{"threadId", "turnId"}, func(ctx context.Context, _ *Call, p api.TurnInterruptParams) (api.TurnInterruptResult, turns.After, error) {
		after, err := m.InterruptTurn(ctx, p)
		return api.TurnInterruptResult{}, after, err
	}))
}

// Hub returns the hub the server's sessions are attached to.
func (s *Server) Hub() *hub.Hub { return s.hub }

// sessionIndex finds initialized sessions by id.
type sessionIndex struct {
	mu sync.RWMutex
	m  map[uint64]*Session
}

func (x *sessionIndex) put(s *Session) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = map[uint64]*Session{}
	}
	x.m[s.id] = s
}

func (x *sessionIndex) del(id uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.m, id)
}

func (x *sessionIndex) get(id uint64) *Session {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.m[id]
}

// notSteerable answers input for a turn that takes none as the reference
// does: turn/steer with -32600 and the activeTurnNotSteerable error info,
// turn/start with its internal error.
func notSteerable(err error) error {
	var ns *turns.NotSteerableError
	if !errors.As(err, &ns) {
		return err
	}
	if ns.Start {
		kind := strings.ToUpper(ns.TurnKind[:1]) + ns.TurnKind[1:]
		return &RPCError{Code: CodeInternal, Message: "failed to submit turn input: ActiveTurnNotSteerable { turn_kind: " + kind + " }"}
	}
	return &RPCError{Code: CodeInvalidRequest, Message: ns.Error(), Data: api.TurnError{
		Message:        ns.Error(),
		CodexErrorInfo: &api.CodexErrorInfo{Code: api.ErrActiveTurnNotSteerable, TurnKind: ns.TurnKind},
	}}
}
