package orchestrate

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/tools/agents"
	"github.com/appserver/appserver/internal/turns"
)

// turnEnds is the parent's client (connection 1 of the rig's hub): it
// collects the turn/completed notifications it gets, its completed
// collabAgentToolCall items and the archived threads, and answers the
// server requests it is offered with req (none taken without one).
type turnEnds struct {
	ch  chan api.TurnCompletedNotification
	req *approvals

	mu       sync.Mutex
	collab   []*api.CollabAgentToolCallItem
	archived []string // thread/archived thread ids, in order
}

func (n *turnEnds) Notify(note *hub.Notification) {
	switch p := note.Params.(type) {
	case api.ThreadArchivedNotification:
		n.mu.Lock()
		n.archived = append(n.archived, p.ThreadID)
		n.mu.Unlock()
	case api.TurnCompletedNotification:
		n.ch <- p
	case api.ItemCompletedNotification:
		if it, ok := p.Item.Body.(*api.CollabAgentToolCallItem); ok {
			n.mu.Lock()
			n.collab = append(n.collab, it)
			n.mu.Unlock()
		}
	}
}

func (n *turnEnds) Request(r *hub.Request, _ int64) bool {
	if n.req == nil {
		return false
	}
	n.req.record(r)
	r.Answer(1, json.RawMessage(`{"decision":"decline"}`), nil)
	return true
}

func (n *turnEnds) Settled(*hub.Request) {}

// collabItems are the completed collabAgentToolCall items seen so far.
func (n *turnEnds) collabItems() []*api.CollabAgentToolCallItem {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.collab)
}

type fixedModel struct{ c model.Client }

func (p fixedModel) Client(string) (model.Client, error) { return p.c, nil }

// agentsRig is a real turns.Manager on the embedded store whose tools are
// the Service's, with a fake model serving parent and children.
type agentsRig struct {
	m    *turns.Manager
	st   *sqlite.Store
	fake *fakemodel.Server
	ends *turnEnds
	// multi is the thread's features.multi_agent override, nil for none.
	multi *bool
	// approval is the parent thread's approval policy, nil for the
	// default (never).
	approval *api.AskForApproval
	// others are the turn/completed of other threads the parent's client
	// got.
	others []api.TurnCompletedNotification
}

func newAgentsRig(t *testing.T, script string, cfg agents.Config) *agentsRig {
	t.Helper()
	return newAgentsRigWith(t, script, cfg, nil)
}

// newAgentsRigWith is newAgentsRig whose server requests req answers.
func newAgentsRigWith(t *testing.T, script string, cfg agents.Config, req *approvals) *agentsRig {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db"), Migrate: true})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	sc, err := fakemodel.ParseScript([]byte(script))
	require.NoError(t, err)
	fake, err := fakemodel.Start(sc)
	require.NoError(t, err)
	t.Cleanup(fake.Close)
	client, err := model.New(model.ProviderConfig{BaseURL: fake.URL(), MaxRetries: -1}, nil)
	require.NoError(t, err)
	s := newService(t, Config{MultiAgent: cfg})
	ends := &turnEnds{ch: make(chan api.TurnCompletedNotification, 64), req: req}
	h := hub.New(hub.Config{})
	t.Cleanup(h.Close)
	h.Attach(h.NewConnID(), ends, hub.AttachOptions{}) // connection 1
	m, err := turns.New(turns.Config{
		Store: st, Sink: h, Models: fixedModel{client}, Tools: s.Build,
		ThreadUnloaded: s.ThreadUnloaded, ChildTurn: s.ChildTurn,
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir(), ApprovalPolicy: "never", SandboxMode: "read-only"},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	return &agentsRig{m: m, st: st, fake: fake, ends: ends, multi: ptr(true)}
}

// startParent starts a thread with the rig's features.multi_agent override
// and a turn on text; it returns the thread and turn ids.
func (r *agentsRig) startParent(t *testing.T, text string) (string, string) {
	t.Helper()
	return r.startParentAs(t, principal.Operator(), text)
}

// startParentAs is startParent for a principal's thread.
func (r *agentsRig) startParentAs(t *testing.T, who principal.Principal, text string) (string, string) {
	t.Helper()
	ctx := context.Background()
	cfg := map[string]json.RawMessage{}
	if r.multi != nil {
		cfg["features.multi_agent"], _ = json.Marshal(*r.multi)
	}
	c := turns.Caller{Conn: 1, ClientName: who.ClientName(""), Principal: who}
	th, after, err := r.m.StartThread(ctx, c, api.ThreadStartParams{Config: cfg, ApprovalPolicy: r.approval})
	require.NoError(t, err)
	after()
	return th.Thread.ID, r.turn(t, who, th.Thread.ID, text)
}

// turn starts a turn of who on the thread; it returns its id.
func (r *agentsRig) turn(t *testing.T, who principal.Principal, threadID, text string) string {
	t.Helper()
	tu, after, err := r.m.StartTurn(context.Background(), turns.Caller{Conn: 1, ClientName: who.ClientName(""), Principal: who}, api.TurnStartParams{
		ThreadID: threadID, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: text}},
	})
	require.NoError(t, err)
	after()
	return tu.Turn.ID
}

// parentEnd waits for the parent's turn/completed; the ends of other
// threads' turns the parent's client got before are kept in r.others.
func (r *agentsRig) parentEnd(t *testing.T, threadID string) api.TurnCompletedNotification {
	t.Helper()
	for {
		select {
		case n := <-r.ends.ch:
			if n.ThreadID == threadID {
				return n
			}
			r.others = append(r.others, n)
		case <-time.After(20 * time.Second):
			t.Fatal("the parent's turn did not complete")
		}
	}
}

// callOutput is the output of callID the model was sent, from the
// recorded requests.
func (r *agentsRig) callOutput(t *testing.T, callID string) string {
	t.Helper()
	out, ok := r.output(callID)
	if !ok {
		t.Fatalf("the model never got the output of %s", callID)
	}
	return out
}

// sawOutput reports whether the model was sent the output of callID.
func (r *agentsRig) sawOutput(callID string) bool {
	_, ok := r.output(callID)
	return ok
}

func (r *agentsRig) output(callID string) (string, bool) {
	for _, req := range r.fake.Requests() {
		var body struct {
			Input []struct {
				Type   string          `json:"type"`
				CallID string          `json:"call_id"`
				Output json.RawMessage `json:"output"`
			} `json:"input"`
		}
		if req.Decode(&body) != nil {
			continue
		}
		for _, in := range body.Input {
			if in.Type == "function_call_output" && in.CallID == callID {
				var s string
				if json.Unmarshal(in.Output, &s) == nil {
					return s, true
				}
				return string(in.Output), true
			}
		}
	}
	return "", false
}

// children lists the stored threads whose parent is parentID.
func (r *agentsRig) children(t *testing.T, parentID string) []api.Thread {
	t.Helper()
	var out []api.Thread
	for _, id := range r.m.Loaded() {
		res, err := r.m.ReadThread(context.Background(), api.ThreadReadParams{ThreadID: id})
		require.NoError(t, err)
		if p := res.Thread.ParentThreadID; p != nil && *p == parentID {
			out = append(out, res.Thread)
		}
	}
	return out
}

func call(id, name, args string) string {
	return `{"call_id":"` + id + `","name":"multi_agent_v1.` + name + `","arguments":` + args + `}`
}

// spawn_agent starts a child thread on the task and answers at once; a
// wait_agent on it returns the child's final answer to the parent's model;
// the child is persisted with its parent, depth and source.
func TestSpawnThenWaitReturnsTheChildsAnswer(t *testing.T) {
	r := newAgentsRig(t, `{"steps":[
		{"match":{"user_text":"parent task"},"tool_calls":[`+call("c1", "spawn_agent", `{"message":"child task"}`)+`]},
		{"match":{"user_text":"child task"},"text":"the child's answer"},
		{"match":{"call_output":"c1"},"tool_calls":[`+call("c2", "wait_agent", `{"targets":["Ada"],"timeout_ms":20000}`)+`]},
		{"match":{"call_output":"c2"},"text":"parent done"}
	]}`, agents.Config{})
	parent, parentTurn := r.startParent(t, "parent task")
	end := r.parentEnd(t, parent)
	require.Equal(t, api.TurnCompleted, end.Turn.Status)

	var spawned struct {
		AgentID  string  `json:"agent_id"`
		Nickname *string `json:"nickname"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.callOutput(t, "c1")), &spawned))
	require.NotEmpty(t, spawned.AgentID)
	require.Equal(t, "Ada", *spawned.Nickname)

	var waited struct {
		Status   map[string]json.RawMessage `json:"status"`
		TimedOut bool                       `json:"timed_out"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.callOutput(t, "c2")), &waited))
	require.False(t, waited.TimedOut)
	require.JSONEq(t, `{"completed":"the child's answer"}`, string(waited.Status[spawned.AgentID]))

	// The child is a thread of its own, stored with its parent.
	kids := r.children(t, parent)
	require.Len(t, kids, 1)
	kid := kids[0]
	require.Equal(t, spawned.AgentID, kid.ID)
	require.Equal(t, "subagent", *kid.ThreadSource)
	require.Equal(t, "Ada", *kid.AgentNickname)
	src, err := json.Marshal(kid.Source)
	require.NoError(t, err)
	var source struct {
		SubAgent struct {
			ThreadSpawn struct {
				ParentThreadID string `json:"parent_thread_id"`
				Depth          int    `json:"depth"`
			} `json:"thread_spawn"`
		} `json:"subAgent"`
	}
	require.NoError(t, json.Unmarshal(src, &source), string(src))
	require.Equal(t, parent, source.SubAgent.ThreadSpawn.ParentThreadID)
	require.Equal(t, 1, source.SubAgent.ThreadSpawn.Depth)

	rec, err := r.st.GetThread(context.Background(), kid.ID)
	require.NoError(t, err)
	require.Contains(t, string(rec.Meta), parent, "the parent is in the stored record, not only in memory")

	// The parent's client saw each call as a collabAgentToolCall item.
	items := r.ends.collabItems()
	require.Len(t, items, 2)
	spawnItem, waitItem := items[0], items[1]
	require.Equal(t, api.CollabSpawnAgent, spawnItem.Tool)
	require.Equal(t, "c1", spawnItem.ID)
	require.Equal(t, api.StatusCompleted, spawnItem.Status)
	require.Equal(t, parent, spawnItem.SenderThreadID)
	require.Equal(t, api.List[string]{kid.ID}, spawnItem.ReceiverThreadIDs)
	require.Equal(t, "child task", *spawnItem.Prompt)
	require.Equal(t, api.CollabWait, waitItem.Tool)
	require.Equal(t, api.CollabAgentState{Status: api.CollabCompleted, Message: ptr("the child's answer")}, waitItem.AgentsStates[kid.ID])

	// The parent's client saw the child's turn end.
	require.Len(t, r.others, 1)
	require.Equal(t, kid.ID, r.others[0].ThreadID)
	require.Equal(t, api.TurnCompleted, r.others[0].Turn.Status)
	// The child's turn names the parent's turn as its root, live and as
	// stored.
	require.Equal(t, parentTurn, *r.others[0].Turn.RootTurnID)
	stored, err := r.m.ReadThread(context.Background(), api.ThreadReadParams{ThreadID: kid.ID, IncludeTurns: ptr(true)})
	require.NoError(t, err)
	require.Len(t, stored.Thread.Turns, 1)
	require.Equal(t, parentTurn, *stored.Thread.Turns[0].RootTurnID)
	require.Equal(t, parentTurn, *end.Turn.RootTurnID, "the parent's own turn is its root")

	// thread/list shows the child only when asked for sub-agents, and
	// sourceKinds keep only the kinds they name.
	listed := func(kinds ...api.ThreadSourceKind) []string {
		res, err := r.m.ListThreads(context.Background(), principal.Operator(), api.ThreadListParams{SourceKinds: kinds})
		require.NoError(t, err)
		var ids []string
		for _, th := range res.Data {
			ids = append(ids, th.ID)
		}
		return ids
	}
	require.Equal(t, []string{parent}, listed())
	require.Equal(t, []string{kid.ID}, listed(api.SourceKindSubAgentThreadSpawn))
	require.ElementsMatch(t, []string{parent, kid.ID}, listed(api.SourceKindVscode, api.SourceKindSubAgent))
	// The TUI's /subagents asks for a thread's descendants.
	for _, p := range []api.ThreadListParams{{AncestorThreadID: &parent}, {ParentThreadID: &parent}, {AncestorThreadID: &parent, SourceKinds: []api.ThreadSourceKind{api.SourceKindSubAgentThreadSpawn}}} {
		res, err := r.m.ListThreads(context.Background(), principal.Operator(), p)
		require.NoError(t, err)
		require.Len(t, res.Data, 1)
		require.Equal(t, kid.ID, res.Data[0].ID)
	}
	kidID := kid.ID
	res, err := r.m.ListThreads(context.Background(), principal.Operator(), api.ThreadListParams{AncestorThreadID: &kidID})
	require.NoError(t, err)
	require.Empty(t, res.Data, "the child has no descendants")
}

// Two children run at once: while one still works, the other's answer
// comes back from wait_agent; close_agent then stops the one still
// running, whose turn ends interrupted.
func TestTwoChildrenConcurrentlyAndCloseStopsARunningOne(t *testing.T) {
	r := newAgentsRig(t, `{"steps":[
		{"match":{"user_text":"parent task"},"tool_calls":[`+call("c1", "spawn_agent", `{"message":"slow task"}`)+`]},
		{"match":{"user_text":"slow task"},"text":"never finishes","fail":{"kind":"stall","after_events":2}},
		{"match":{"call_output":"c1"},"tool_calls":[`+call("c2", "spawn_agent", `{"message":"quick task"}`)+`]},
		{"match":{"user_text":"quick task"},"text":"quick answer"},
		{"match":{"call_output":"c2"},"tool_calls":[`+call("c3", "wait_agent", `{"targets":["Ada","Boole"],"timeout_ms":20000}`)+`]},
		{"match":{"call_output":"c3"},"tool_calls":[`+call("c4", "close_agent", `{"target":"Ada"}`)+`]},
		{"match":{"call_output":"c4"},"text":"parent done"}
	]}`, agents.Config{})
	parent, _ := r.startParent(t, "parent task")
	end := r.parentEnd(t, parent)
	require.Equal(t, api.TurnCompleted, end.Turn.Status)

	ids := map[string]string{}
	for _, c := range []string{"c1", "c2"} {
		var spawned struct {
			AgentID  string `json:"agent_id"`
			Nickname string `json:"nickname"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.callOutput(t, c)), &spawned))
		ids[spawned.Nickname] = spawned.AgentID
	}
	require.Len(t, ids, 2)
	waited := r.callOutput(t, "c3")
	require.JSONEq(t, `{"status":{"`+ids["Boole"]+`":{"completed":"quick answer"}},"timed_out":false}`, waited,
		"the quick child finished while the slow one still ran")
	require.JSONEq(t, `{"previous_status":"running"}`, r.callOutput(t, "c4"))

	require.Eventually(t, func() bool {
		res, err := r.m.ReadThread(context.Background(), api.ThreadReadParams{ThreadID: ids["Ada"], IncludeTurns: ptr(true)})
		return err == nil && len(res.Thread.Turns) == 1 && res.Thread.Turns[0].Status == api.TurnInterrupted
	}, 10*time.Second, 10*time.Millisecond, "close_agent interrupts the running child")
}

// send_input reaches a running child: its turn takes the new input (the
// stream in flight is abandoned) and its answer is the one to it.
func TestSendInputSteersARunningChild(t *testing.T) {
	r := newAgentsRig(t, `{"steps":[
		{"match":{"user_text":"parent task"},"tool_calls":[`+call("c1", "spawn_agent", `{"message":"slow task"}`)+`]},
		{"match":{"user_text":"slow task"},"text":"never finishes","fail":{"kind":"stall","after_events":2}},
		{"match":{"call_output":"c1"},"tool_calls":[`+call("c2", "send_input", `{"target":"Ada","message":"more input"}`)+`]},
		{"match":{"user_text":"more input"},"text":"steered answer"},
		{"match":{"call_output":"c2"},"tool_calls":[`+call("c3", "wait_agent", `{"targets":["Ada"],"timeout_ms":20000}`)+`]},
		{"match":{"call_output":"c3"},"text":"parent done"}
	]}`, agents.Config{})
	parent, _ := r.startParent(t, "parent task")
	require.Equal(t, api.TurnCompleted, r.parentEnd(t, parent).Turn.Status)
	require.Contains(t, r.callOutput(t, "c3"), `{"completed":"steered answer"}`)
	kids := r.children(t, parent)
	require.Len(t, kids, 1)
	res, err := r.m.ReadThread(context.Background(), api.ThreadReadParams{ThreadID: kids[0].ID, IncludeTurns: ptr(true)})
	require.NoError(t, err)
	require.Len(t, res.Thread.Turns, 1, "the input joined the running turn")
}

// approvals records the server requests and declines them.
type approvals struct {
	mu   sync.Mutex
	seen []string // "thread id|method|params thread id"
}

func (a *approvals) record(r *hub.Request) {
	p, _ := r.Params.(*api.CommandExecutionRequestApprovalParams)
	a.mu.Lock()
	defer a.mu.Unlock()
	if p != nil {
		a.seen = append(a.seen, r.ThreadID+"|"+r.Method+"|"+p.ThreadID)
	}
}

// A child nobody watches asks its approvals of the parent's clients, the
// request naming the child's thread; inherited untrusted, its command
// needs one.
func TestChildApprovalGoesToTheParentsClients(t *testing.T) {
	req := &approvals{}
	r := newAgentsRigWith(t, `{"steps":[
		{"match":{"user_text":"parent task"},"tool_calls":[`+call("c1", "spawn_agent", `{"message":"child task"}`)+`]},
		{"match":{"user_text":"child task"},"tool_calls":[{"call_id":"k1","name":"shell_command","arguments":{"command":"touch made.txt"}}]},
		{"match":{"call_output":"k1"},"text":"child done"},
		{"match":{"call_output":"c1"},"tool_calls":[`+call("c2", "wait_agent", `{"targets":["Ada"],"timeout_ms":20000}`)+`]},
		{"match":{"call_output":"c2"},"text":"parent done"}
	]}`, agents.Config{}, req)
	r.approval = &api.AskForApproval{Policy: api.ApprovalUntrusted}
	parent, _ := r.startParent(t, "parent task")
	require.Equal(t, api.TurnCompleted, r.parentEnd(t, parent).Turn.Status)
	kids := r.children(t, parent)
	require.Len(t, kids, 1)
	req.mu.Lock()
	defer req.mu.Unlock()
	require.Equal(t, []string{parent + "|item/commandExecution/requestApproval|" + kids[0].ID}, req.seen)
	require.Contains(t, r.callOutput(t, "c2"), "child done")
}

// A child (depth 1) cannot spawn: with the default depth limit its
// spawn_agent call is refused in words the model reads, and no grandchild
// thread exists.
func TestDepthLimitRefusesGrandchildren(t *testing.T) {
	r := newAgentsRig(t, `{"steps":[
		{"match":{"user_text":"parent task"},"tool_calls":[`+call("c1", "spawn_agent", `{"message":"child task"}`)+`]},
		{"match":{"user_text":"child task"},"tool_calls":[`+call("g1", "spawn_agent", `{"message":"grandchild task"}`)+`]},
		{"match":{"call_output":"g1"},"text":"child done"},
		{"match":{"call_output":"c1"},"tool_calls":[`+call("c2", "wait_agent", `{"targets":["Ada"],"timeout_ms":20000}`)+`]},
		{"match":{"call_output":"c2"},"text":"parent done"}
	]}`, agents.Config{})
	parent, _ := r.startParent(t, "parent task")
	r.parentEnd(t, parent)
	require.Contains(t, r.callOutput(t, "g1"), "agent depth limit reached")
	kids := r.children(t, parent)
	require.Len(t, kids, 1)
	require.Empty(t, r.children(t, kids[0].ID), "no grandchild was created")
	require.Contains(t, r.callOutput(t, "c2"), "child done")
}

// Interrupting the parent's turn interrupts its running child.
func TestInterruptingTheParentInterruptsItsChildren(t *testing.T) {
	r := newAgentsRig(t, `{"steps":[
		{"match":{"user_text":"parent task"},"tool_calls":[`+call("c1", "spawn_agent", `{"message":"slow task"}`)+`]},
		{"match":{"user_text":"slow task"},"text":"never finishes","fail":{"kind":"stall","after_events":2}},
		{"match":{"call_output":"c1"},"tool_calls":[`+call("c2", "wait_agent", `{"targets":["Ada"],"timeout_ms":60000}`)+`]}
	]}`, agents.Config{})
	parent, turnID := r.startParent(t, "parent task")
	// Once the model has read spawn_agent's answer, the child's turn runs.
	require.Eventually(t, func() bool { return r.sawOutput("c1") }, 10*time.Second, 5*time.Millisecond)
	kids := r.children(t, parent)
	require.Len(t, kids, 1)
	child := kids[0].ID
	after, err := r.m.InterruptTurn(context.Background(), api.TurnInterruptParams{ThreadID: parent, TurnID: turnID})
	require.NoError(t, err)
	after()
	require.Equal(t, api.TurnInterrupted, r.parentEnd(t, parent).Turn.Status)
	require.Eventually(t, func() bool {
		res, err := r.m.ReadThread(context.Background(), api.ThreadReadParams{ThreadID: child, IncludeTurns: ptr(true)})
		return err == nil && len(res.Thread.Turns) == 1 && res.Thread.Turns[0].Status == api.TurnInterrupted
	}, 10*time.Second, 10*time.Millisecond, "the child's turn ends interrupted")
}

// The tools are offered when the daemon's features.multi_agent is on or
// the thread's own override says so; the thread's override wins.
func TestMultiAgentToolsAreOptIn(t *testing.T) {
	for _, tc := range []struct {
		daemon bool
		thread *bool
		want   bool
	}{
		{false, nil, false},
		{false, ptr(true), true},
		{true, nil, true},
		{true, ptr(false), false},
	} {
		r := newAgentsRig(t, `{"steps":[{"text":"ok"}]}`, agents.Config{Enabled: tc.daemon})
		r.multi = tc.thread
		parent, _ := r.startParent(t, "hi")
		r.parentEnd(t, parent)
		reqs := r.fake.Requests()
		require.Len(t, reqs, 1)
		require.Equal(t, tc.want, strings.Contains(string(reqs[0].Body), `"multi_agent_v1"`), "daemon %v, thread %v", tc.daemon, tc.thread)
	}
}

// A configuration write that turns features.multi_agent on applies to the
// next turn of every thread of its writer, one started before included,
// and to no one else's; a thread's own override still wins.
func TestMultiAgentFollowsTheLiveConfiguration(t *testing.T) {
	r := newAgentsRig(t, `{"steps":[{"text":"ok"}]}`, agents.Config{Enabled: false})
	r.multi = nil
	rules, err := principal.New(principal.Config{Roots: map[string][]string{"alice": nil}, WorkspacesDir: t.TempDir()})
	require.NoError(t, err)
	alice, _ := rules.Get("alice")
	offered := func() bool {
		t.Helper()
		reqs := r.fake.Requests()
		return strings.Contains(string(reqs[len(reqs)-1].Body), `"multi_agent_v1"`)
	}
	before, _ := r.startParent(t, "hi")
	r.parentEnd(t, before)
	require.False(t, offered(), "off by default")

	live := turns.LiveDefaults{Model: "fake", ModelProvider: "fake", ApprovalPolicy: "never", SandboxMode: "read-only",
		Features: map[string]bool{"multi_agent": true}}
	r.m.UpdateDefaults("", live)
	r.turn(t, principal.Operator(), before, "again")
	r.parentEnd(t, before)
	require.True(t, offered(), "the next turn of a thread started before the write")
	after, _ := r.startParent(t, "hi")
	r.parentEnd(t, after)
	require.True(t, offered(), "a thread started after the write")

	r.m.UpdateDefaults("alice", turns.LiveDefaults{Features: map[string]bool{"multi_agent": false}})
	theirs, _ := r.startParentAs(t, alice, "hi")
	r.parentEnd(t, theirs)
	require.False(t, offered(), "a principal's own configuration wins for its threads")
	r.turn(t, principal.Operator(), after, "again")
	r.parentEnd(t, after)
	require.True(t, offered(), "and for its threads only")

	r.multi = ptr(false)
	own, _ := r.startParent(t, "hi")
	r.parentEnd(t, own)
	require.False(t, offered(), "the thread's own override wins")
}

func ptr[T any](v T) *T { return &v }

// A child is listed under its parent and runs the model spawn_agent asked
// for; archiving the parent archives the child too, the parent announced
// first, as the reference does; unarchiving restores only the thread
// named.
func TestChildrenAreListedAndArchivedWithTheirParent(t *testing.T) {
	r := newAgentsRig(t, `{"steps":[
		{"match":{"user_text":"parent task"},"tool_calls":[`+call("c1", "spawn_agent", `{"message":"child task","model":"small-model"}`)+`]},
		{"match":{"user_text":"child task"},"text":"the child's answer"},
		{"match":{"call_output":"c1"},"tool_calls":[`+call("c2", "wait_agent", `{"targets":["Ada"],"timeout_ms":20000}`)+`]},
		{"match":{"call_output":"c2"},"text":"parent done"}
	]}`, agents.Config{})
	ctx := context.Background()
	parent, _ := r.startParent(t, "parent task")
	require.Equal(t, api.TurnCompleted, r.parentEnd(t, parent).Turn.Status)

	kids, err := r.m.ListChildren(ctx, parent)
	require.NoError(t, err)
	require.Len(t, kids, 1)
	child := kids[0]
	require.Equal(t, parent, *child.ParentThreadID)
	require.Equal(t, "small-model", *child.Model)
	var childModel string
	for _, req := range r.fake.Requests() {
		var body struct {
			Model string `json:"model"`
			Input []struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"input"`
		}
		require.NoError(t, req.Decode(&body))
		for _, in := range body.Input {
			for _, c := range in.Content {
				if c.Text == "child task" {
					childModel = body.Model
				}
			}
		}
	}
	require.Equal(t, "small-model", childModel, "the child's model request used the override")
	none, err := r.m.ListChildren(ctx, child.ID)
	require.NoError(t, err)
	require.Empty(t, none)

	after, err := r.m.ArchiveThread(ctx, api.ThreadArchiveParams{ThreadID: parent})
	require.NoError(t, err)
	after()
	r.ends.mu.Lock()
	require.Equal(t, []string{parent, child.ID}, r.ends.archived)
	r.ends.mu.Unlock()
	for _, id := range []string{parent, child.ID} {
		rec, err := r.st.GetThread(ctx, id)
		require.NoError(t, err)
		require.True(t, rec.Archived, id)
	}
	require.Empty(t, r.m.Loaded(), "archiving unloads the parent and its child")

	_, after, err = r.m.UnarchiveThread(ctx, api.ThreadUnarchiveParams{ThreadID: parent})
	require.NoError(t, err)
	after()
	rec, err := r.st.GetThread(ctx, child.ID)
	require.NoError(t, err)
	require.True(t, rec.Archived, "unarchiving the parent leaves its child archived, as the reference does")
}

// With fork_context the child starts from a copy of the parent's
// transcript: its model sees the parent's earlier turns before its task,
// and thread/read of the child shows them; a child without it sees only
// its task.
func TestForkContextCopiesTheParentsTranscript(t *testing.T) {
	r := newAgentsRig(t, `{"steps":[
		{"match":{"user_text":"first question"},"text":"first answer"},
		{"match":{"user_text":"parent task"},"tool_calls":[`+call("c1", "spawn_agent", `{"message":"forked task","fork_context":true}`)+`,`+call("c2", "spawn_agent", `{"message":"plain task"}`)+`]},
		{"match":{"user_text":"forked task"},"text":"forked answer"},
		{"match":{"user_text":"plain task"},"text":"plain answer"},
		{"match":{"call_output":"c2"},"tool_calls":[`+call("c3", "wait_agent", `{"targets":["Ada"],"timeout_ms":20000}`)+`]},
		{"match":{"call_output":"c3"},"tool_calls":[`+call("c4", "wait_agent", `{"targets":["Boole"],"timeout_ms":20000}`)+`]},
		{"match":{"call_output":"c4"},"text":"parent done"}
	]}`, agents.Config{})
	ctx := context.Background()
	parent, _ := r.startParent(t, "first question")
	require.Equal(t, api.TurnCompleted, r.parentEnd(t, parent).Turn.Status)
	tu, after, err := r.m.StartTurn(ctx, turns.Caller{Conn: 1}, api.TurnStartParams{
		ThreadID: parent, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "parent task"}},
	})
	require.NoError(t, err)
	after()
	require.Equal(t, api.TurnCompleted, r.parentEnd(t, parent).Turn.Status, tu.Turn.ID)

	// texts are the message texts of the request whose last user text is
	// last.
	texts := func(last string) []string {
		for _, req := range r.fake.Requests() {
			var body struct {
				Input []struct {
					Type    string `json:"type"`
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"input"`
			}
			require.NoError(t, req.Decode(&body))
			var out []string
			for _, in := range body.Input {
				if in.Type == "message" {
					for _, c := range in.Content {
						out = append(out, c.Text)
					}
				}
			}
			if len(out) > 0 && out[len(out)-1] == last {
				return out
			}
		}
		t.Fatalf("no request ended with %q", last)
		return nil
	}
	forked := texts("forked task")
	require.Contains(t, forked, "first question")
	require.Contains(t, forked, "first answer")
	require.Less(t, slices.Index(forked, "first answer"), slices.Index(forked, "forked task"))
	plain := texts("plain task")
	require.NotContains(t, plain, "first question", "without fork_context the child sees only its task")

	kids, err := r.m.ListChildren(ctx, parent)
	require.NoError(t, err)
	require.Len(t, kids, 2)
	read, err := r.m.ReadThread(ctx, api.ThreadReadParams{ThreadID: kids[0].ID, IncludeTurns: ptr(true)})
	require.NoError(t, err)
	require.Len(t, read.Thread.Turns, 3, "the parent's two turns, then the child's own")
	require.Equal(t, api.TurnCompleted, read.Thread.Turns[0].Status)
	require.Equal(t, api.TurnInterrupted, read.Thread.Turns[1].Status, "the parent's running turn ends, in the copy, as interrupted")
	require.Equal(t, api.TurnCompleted, read.Thread.Turns[2].Status)
	require.Equal(t, "forked answer", r.callOutputStatus(t, "c3", kids[0].ID))
}

// callOutputStatus is the completed answer of agent id in wait_agent call
// callID's output.
func (r *agentsRig) callOutputStatus(t *testing.T, callID, id string) string {
	t.Helper()
	var waited struct {
		Status map[string]struct {
			Completed string `json:"completed"`
		} `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.callOutput(t, callID)), &waited))
	return waited.Status[id].Completed
}

// One principal cannot take another's sub-agent slots: alice, at her
// limit of one running child, is refused a second while bob spawns his;
// once her child's turn has ended (interrupted, not closed: it stays
// open), she may spawn again.
func TestPrincipalSubAgentSlots(t *testing.T) {
	r := newAgentsRig(t, `{"steps":[
		{"match":{"user_text":"alice go"},"tool_calls":[`+call("c1", "spawn_agent", `{"message":"alice slow"}`)+`]},
		{"match":{"user_text":"alice slow"},"text":"never finishes","fail":{"kind":"stall","after_events":2}},
		{"match":{"call_output":"c1"},"tool_calls":[`+call("c2", "spawn_agent", `{"message":"alice again"}`)+`]},
		{"match":{"call_output":"c2"},"text":"alice paused"},
		{"match":{"user_text":"bob go"},"tool_calls":[`+call("c3", "spawn_agent", `{"message":"bob quick"}`)+`]},
		{"match":{"user_text":"bob quick"},"text":"bob's child done"},
		{"match":{"call_output":"c3"},"text":"bob done"},
		{"match":{"user_text":"alice more"},"tool_calls":[`+call("c4", "spawn_agent", `{"message":"alice later"}`)+`]},
		{"match":{"user_text":"alice later"},"text":"alice's child done"},
		{"match":{"call_output":"c4"},"text":"alice done"}
	]}`, agents.Config{MaxPerPrincipal: 1})
	rules, err := principal.New(principal.Config{Roots: map[string][]string{"alice": nil, "bob": nil}, WorkspacesDir: t.TempDir()})
	require.NoError(t, err)
	alice, _ := rules.Get("alice")
	bob, _ := rules.Get("bob")
	agentID := func(callID string) string {
		t.Helper()
		var v struct {
			AgentID string `json:"agent_id"`
		}
		out := r.callOutput(t, callID)
		require.NoError(t, json.Unmarshal([]byte(out), &v), out)
		require.NotEmpty(t, v.AgentID, out)
		return v.AgentID
	}

	parentA, _ := r.startParentAs(t, alice, "alice go")
	require.Equal(t, api.TurnCompleted, r.parentEnd(t, parentA).Turn.Status)
	slow := agentID("c1")
	require.Contains(t, r.callOutput(t, "c2"), "this principal's threads run 1 agents (at most 1)")

	parentB, _ := r.startParentAs(t, bob, "bob go")
	require.Equal(t, api.TurnCompleted, r.parentEnd(t, parentB).Turn.Status)
	agentID("c3")

	// alice's child is still running: its turn ends, the child stays open.
	res, err := r.m.ReadThread(context.Background(), api.ThreadReadParams{ThreadID: slow, IncludeTurns: ptr(true)})
	require.NoError(t, err)
	require.Len(t, res.Thread.Turns, 1)
	after, err := r.m.InterruptTurn(context.Background(), api.TurnInterruptParams{ThreadID: slow, TurnID: res.Thread.Turns[0].ID})
	require.NoError(t, err)
	after()
	require.Eventually(t, func() bool {
		res, err := r.m.ReadThread(context.Background(), api.ThreadReadParams{ThreadID: slow})
		return err == nil && res.Thread.Status.Type != api.ThreadActive
	}, 10*time.Second, 10*time.Millisecond)

	r.turn(t, alice, parentA, "alice more")
	require.Equal(t, api.TurnCompleted, r.parentEnd(t, parentA).Turn.Status)
	agentID("c4")
}
