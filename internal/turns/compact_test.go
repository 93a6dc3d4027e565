package turns_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// compactManager is a Manager on st answering with client; limit is the
// auto-compact limit (0: none).
func compactManager(t *testing.T, st store.Store, client model.Client, notes *noteLog, limit int64) *turns.Manager {
	t.Helper()
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(notes), Models: oneProvider{client},
		Tools: func(tc turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			return noArgTools(false, map[string]registry.Handler{"noop": noopTool{}})
		},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir(), AutoCompactLimit: limit},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	return m
}

// compactEnv is a thread on a Manager whose model answers script.
type compactEnv struct {
	st     store.Store
	fake   *fakemodel.Server
	client model.Client
	notes  *noteLog
	m      *turns.Manager
	id     string
}

func compactSetup(t *testing.T, script string, limit int64) compactEnv {
	t.Helper()
	st, fake, client := storeAndModel(t, script)
	notes := &noteLog{ch: make(chan string, 1024)}
	m := compactManager(t, st, client, notes, limit)
	return compactEnv{st: st, fake: fake, client: client, notes: notes, m: m, id: startThread(t, m)}
}

// startThread starts a thread and returns its id.
func startThread(t testing.TB, m *turns.Manager) string {
	t.Helper()
	th, after, err := m.StartThread(context.Background(), turns.Caller{Conn: 1}, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	return th.Thread.ID
}

// say runs a turn with text on thread and waits for its end.
func say(t *testing.T, m *turns.Manager, notes *noteLog, thread, text string) {
	t.Helper()
	_, after, err := m.StartTurn(context.Background(), turns.Caller{Conn: 1}, api.TurnStartParams{
		ThreadID: thread, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: text}},
	})
	require.NoError(t, err)
	after()
	notes.wait(t, "turn/completed")
}

// compactScript answers the summarization request (it ends with the
// compaction prompt, which asks for a "handoff note") with SUMMARY-7.
const compactScript = `{"steps":[
	{"match":{"user_text":"first question"},"text":"first answer"},
	{"match":{"user_text":"handoff note"},"text":"SUMMARY-7"},
	{"match":{"user_text":"second question"},"text":"second answer"},
	{"match":{"user_text":"third question"},"text":"third answer"}]}`

// thread/compact/start asks the model for a summary of the history, and
// the requests after it carry the summary and the user's messages instead
// of the history; thread/read still shows every item, the compaction
// included; a reloaded thread goes on from the summary.
func TestCompactThreadReplacesHistory(t *testing.T) {
	e := compactSetup(t, compactScript, 0)
	st, fake, client, notes, m, id := e.st, e.fake, e.client, e.notes, e.m, e.id
	say(t, m, notes, id, "first question")

	before := len(notes.snapshot())
	_, after, err := m.CompactThread(context.Background(), turns.Caller{Conn: 1}, api.ThreadCompactStartParams{ThreadID: id})
	require.NoError(t, err)
	after()
	notes.wait(t, "turn/completed")
	lines := notes.snapshot()[before:]
	require.Contains(t, lines, "item/started")
	require.Contains(t, lines, "item/completed")
	require.NotContains(t, lines, "thread/compacted", "the reference sends only the item")
	require.Equal(t, []string{"thread/status/changed active[]", "turn/started", "item/started", "thread/tokenUsage/updated", "item/completed", "thread/readState/changed", "thread/status/changed idle[]", "turn/completed"}, lines)
	require.Equal(t, api.TurnCompleted, notes.lastEnded(t).Status)

	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	summarize := string(reqs[1].Body)
	require.Contains(t, summarize, "first answer", "the summary request carries the history")
	require.Contains(t, summarize, "handoff note")

	say(t, m, notes, id, "second question")
	reqs = fake.Requests()
	require.Len(t, reqs, 3)
	next := string(reqs[2].Body)
	require.Contains(t, next, "SUMMARY-7")
	require.Contains(t, next, "first question", "recent user messages are kept")
	require.NotContains(t, next, "first answer", "the compacted history is gone")
	require.NotContains(t, next, "handoff note", "the compaction prompt is not history")

	types := itemTypes(t, m, id)
	require.Contains(t, types, api.ItemContextCompaction)
	require.Equal(t, 2, countType(types, api.ItemAgentMessage), "thread/read keeps the items before the compaction: %v", types)

	// A fork carries the compacted history too.
	fork, after, err := m.ForkThread(context.Background(), turns.Caller{Conn: 1}, api.ThreadForkParams{ThreadID: id})
	require.NoError(t, err)
	after()
	say(t, m, notes, fork.Thread.ID, "third question")
	reqs = fake.Requests()
	require.Len(t, reqs, 4)
	forked := string(reqs[3].Body)
	require.Contains(t, forked, "SUMMARY-7")
	require.NotContains(t, forked, "first answer", "a fork goes on from the summary")
	fake.Reset()

	// A new Manager on the same store reloads the compacted history.
	m.Stop()
	notes2 := &noteLog{ch: make(chan string, 1024)}
	m2 := compactManager(t, st, client, notes2, 0)
	say(t, m2, notes2, id, "third question")
	reqs = fake.Requests()
	require.Len(t, reqs, 1)
	last := string(reqs[0].Body)
	require.Contains(t, last, "SUMMARY-7")
	require.Contains(t, last, "second answer")
	require.NotContains(t, last, "first answer", "a reloaded thread goes on from the summary")
}

// A turn whose context reaches the auto-compact limit compacts before its
// next request and goes on from the summary in the same turn.
func TestAutoCompactPastLimit(t *testing.T) {
	e := compactSetup(t, `{"steps":[
		{"match":{"user_text":"first question"},"text":"first answer","usage":{"input_tokens":40,"output_tokens":10,"total_tokens":50}},
		{"match":{"user_text":"go on"},"tool_calls":[{"call_id":"c1","name":"noop","arguments":{}}],"usage":{"input_tokens":900,"output_tokens":100,"total_tokens":1000}},
		{"match":{"user_text":"handoff note"},"text":"SUMMARY-8"},
		{"text":"done after compaction"}]}`, 500)
	fake, notes, m, id := e.fake, e.notes, e.m, e.id
	say(t, m, notes, id, "first question")
	require.Len(t, fake.Requests(), 1, "50 tokens are under the limit: no compaction")

	before := len(notes.snapshot())
	say(t, m, notes, id, "go on")
	reqs := fake.Requests()
	require.Equal(t, 4, len(reqs), "requests: the first turn's, the tool round, the summary, the one after it")
	require.Contains(t, string(reqs[2].Body), "handoff note")
	require.Contains(t, string(reqs[2].Body), "c1", "the summary covers the tool round")
	last := string(reqs[3].Body)
	require.Contains(t, last, "SUMMARY-8")
	require.Contains(t, last, "go on")
	require.NotContains(t, last, "first answer")
	lines := notes.snapshot()[before:]
	require.Equal(t, 1, countOf(lines, "turn/started"), "compaction happens inside the turn: %v", lines)
	require.Equal(t, []api.ThreadItemType{api.ItemUserMessage, api.ItemAgentMessage, api.ItemUserMessage, api.ItemContextCompaction, api.ItemAgentMessage}, itemTypes(t, m, id))
	require.Equal(t, api.TurnCompleted, notes.lastEnded(t).Status)
}

// A request the model refuses as too long for its window compacts the
// context and is made again.
func TestOverflowCompactsAndContinues(t *testing.T) {
	e := compactSetup(t, `{"steps":[
		{"match":{"user_text":"first question"},"text":"first answer"},
		{"match":{"user_text":"second question"},"error":{"status":400,"code":"context_length_exceeded","message":"too long"}},
		{"match":{"user_text":"handoff note"},"text":"SUMMARY-9"},
		{"text":"answered after compaction"}]}`, 0)
	fake, notes, m, id := e.fake, e.notes, e.m, e.id
	say(t, m, notes, id, "first question")
	say(t, m, notes, id, "second question")
	require.Equal(t, api.TurnCompleted, notes.lastEnded(t).Status)
	reqs := fake.Requests()
	require.Equal(t, 4, len(reqs), "requests: first turn, refused, summary, again")
	require.Contains(t, string(reqs[3].Body), "SUMMARY-9")
	require.Contains(t, string(reqs[3].Body), "second question")
}

// itemTypes lists the types of a thread's items, in order.
func itemTypes(t *testing.T, m *turns.Manager, id string) []api.ThreadItemType {
	t.Helper()
	read, err := m.ReadThread(context.Background(), api.ThreadReadParams{ThreadID: id, IncludeTurns: ptr(true)})
	require.NoError(t, err)
	var types []api.ThreadItemType
	for _, turn := range read.Thread.Turns {
		for _, it := range turn.Items {
			types = append(types, it.Body.ItemType())
		}
	}
	return types
}

func countType(types []api.ThreadItemType, typ api.ThreadItemType) int {
	n := 0
	for _, t := range types {
		if t == typ {
			n++
		}
	}
	return n
}

func ptr[T any](v T) *T { return &v }

// The config's compact_prompt takes the place of appserver's own
// compaction instruction in the summary request.
func TestCompactUsesConfiguredPrompt(t *testing.T) {
	st, fake, client := storeAndModel(t, `{"steps":[
		{"match":{"user_text":"first question"},"text":"first answer"},
		{"match":{"user_text":"OPERATOR-PROMPT"},"text":"SUMMARY-10"}]}`)
	notes := &noteLog{ch: make(chan string, 1024)}
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(notes), Models: oneProvider{client},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir(), CompactPrompt: "OPERATOR-PROMPT: summarize."},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	id := startThread(t, m)
	say(t, m, notes, id, "first question")
	_, after, err := m.CompactThread(context.Background(), turns.Caller{Conn: 1}, api.ThreadCompactStartParams{ThreadID: id})
	require.NoError(t, err)
	after()
	notes.wait(t, "turn/completed")
	require.Equal(t, api.TurnCompleted, notes.lastEnded(t).Status)
	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	summarize := string(reqs[1].Body)
	require.Contains(t, summarize, "OPERATOR-PROMPT: summarize.")
	require.NotContains(t, summarize, "handoff note", "the built-in prompt is replaced")
}
