package turns_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/store/pgtest"
)

// queueScript: the first turn calls the client's lookup_weather tool and
// waits for its answer, so that entries are queued while it runs; each
// queued message gets its own answer.
const queueScript = `{"steps":[
	{"match":{"user_text":"first"},"tool_calls":[{"call_id":"call_q","name":"lookup_weather","arguments":{"city":"Paris"}}]},
	{"match":{"call_output":"call_q"},"text":"first done"},
	{"match":{"user_text":"queued a"},"text":"answer a"},
	{"match":{"user_text":"queued b"},"text":"answer b"},
	{"match":{"user_text":"queued c"},"text":"answer c"}
]}`

func queueText(text string) []any {
	return []any{map[string]any{"type": "text", "text": text, "text_elements": []any{}}}
}

func queueAdd(t *testing.T, c *apptest.Client, threadID, clientID, text string) api.QueuedSubmission {
	t.Helper()
	res := apptest.Decode[api.ThreadQueueAddResult](t, c.Call("thread/queue/add", map[string]any{
		"threadId": threadID, "clientUserMessageId": clientID, "input": queueText(text)}))
	return res.QueuedSubmission
}

func queueList(t *testing.T, c *apptest.Client, threadID string) []api.QueuedSubmission {
	t.Helper()
	return apptest.Decode[api.ThreadQueueListResult](t, c.Call("thread/queue/list", map[string]any{"threadId": threadID})).Data
}

func queueTexts(subs []api.QueuedSubmission) []string {
	out := []string{}
	for _, s := range subs {
		out = append(out, s.Input[0].Text)
	}
	return out
}

// queueRefError is an error answer of the reference in queue.jsonl.
type queueRefError struct {
	method string
	params map[string]any
	code   int
	msg    string
}

// queueRefErrors reads the reference's error answers to thread/queue/*
// requests from testdata/golden/reference/queue.jsonl.
func queueRefErrors(t *testing.T) []queueRefError {
	t.Helper()
	type frame struct {
		ID     *int           `json:"id"`
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	sent := map[int]frame{}
	var out []queueRefError
	for _, l := range apptest.ReferenceFrames(t, "queue.jsonl") {
		var f frame
		require.NoError(t, json.Unmarshal(l.Frame, &f))
		switch {
		case f.ID == nil:
		case l.Dir == "send":
			sent[*f.ID] = f
		case f.Error != nil && strings.HasPrefix(sent[*f.ID].Method, "thread/queue/"):
			req := sent[*f.ID]
			out = append(out, queueRefError{method: req.Method, params: req.Params, code: f.Error.Code, msg: f.Error.Message})
		}
	}
	return out
}

// requireRefError requires that our answer is the reference's to the
// request of method whose params match.
func requireRefError(t *testing.T, ref []queueRefError, method string, match func(map[string]any) bool, code int, msg string) {
	t.Helper()
	for _, e := range ref {
		if e.method == method && match(e.params) {
			require.Equal(t, e.code, code, "%s: the reference answered %q", method, e.msg)
			if strings.HasPrefix(e.msg, "invalid queue pagination cursor: ") {
				// The rest is the parser's own words.
				require.True(t, strings.HasPrefix(msg, "invalid queue pagination cursor: "), msg)
				return
			}
			require.Equal(t, e.msg, msg)
			return
		}
	}
	t.Fatalf("no %s error in the reference capture", method)
}

func hasParam(name string, want any) func(map[string]any) bool {
	return func(p map[string]any) bool {
		if want == nil {
			_, ok := p[name]
			return !ok
		}
		v, ok := p[name]
		return ok && (want == "" || v == want)
	}
}

// TestQueue drives thread/queue/* on both stores: entries queued while a
// turn runs (a duplicate client id adds nothing), reordered, edited and
// deleted, then started one turn each, in order, when the turn ends; the
// errors of the reference (testdata/golden/reference/queue.jsonl) for
// unknown entries, a busy thread and an empty queue.
func TestQueue(t *testing.T) {
	ref := queueRefErrors(t)
	for name, args := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fake := apptest.StartFake(t, queueScript)
			d := apptest.Start(t, append(args, apptest.FakeArgs(fake, "responses")...)...)
			c := d.RPC(t)
			threadID := apptest.StartThread(t, c, map[string]any{"dynamicTools": []any{apptest.WeatherTool}})
			require.Empty(t, queueList(t, c, threadID))

			c.Call("turn/start", apptest.Input(threadID, "first"))
			callID, _ := apptest.ToolCall(t, c)

			a := queueAdd(t, c, threadID, "client-a", "queued a")
			c.Until("thread/queue/changed")
			b := queueAdd(t, c, threadID, "client-b", "queued b")
			x := queueAdd(t, c, threadID, "client-x", "queued x")
			again := queueAdd(t, c, threadID, "client-b", "queued b again")
			require.Equal(t, b, again, "a second add with the same client id answers the first entry")
			require.Equal(t, []string{"queued a", "queued b", "queued x"}, queueTexts(queueList(t, c, threadID)))

			page := apptest.Decode[api.ThreadQueueListResult](t, c.Call("thread/queue/list", map[string]any{"threadId": threadID, "limit": 2}))
			require.Len(t, page.Data, 2)
			require.NotNil(t, page.NextCursor)
			page = apptest.Decode[api.ThreadQueueListResult](t, c.Call("thread/queue/list", map[string]any{"threadId": threadID, "cursor": *page.NextCursor}))
			require.Equal(t, []string{"queued x"}, queueTexts(page.Data))
			require.Nil(t, page.NextCursor)
			code, msg := c.CallError("thread/queue/list", map[string]any{"threadId": threadID, "cursor": "bogus"})
			requireRefError(t, ref, "thread/queue/list", hasParam("cursor", "bogus"), code, msg)

			code, msg = c.CallError("thread/queue/reorder", map[string]any{"threadId": threadID, "queuedSubmissionIds": []string{b.ID, a.ID}})
			requireRefError(t, ref, "thread/queue/reorder", hasParam("queuedSubmissionIds", ""), code, msg)
			c.Call("thread/queue/reorder", map[string]any{"threadId": threadID, "queuedSubmissionIds": []string{x.ID, b.ID, a.ID}})
			upd := apptest.Decode[api.ThreadQueueUpdateResult](t, c.Call("thread/queue/update", map[string]any{
				"threadId": threadID, "queuedSubmissionId": x.ID, "input": queueText("queued c"), "responsesapiClientMetadata": map[string]string{"k": "v"}}))
			require.Equal(t, "queued c", upd.QueuedSubmission.Input[0].Text)
			require.Equal(t, map[string]string{"k": "v"}, upd.QueuedSubmission.ResponsesapiClientMetadata)
			require.Equal(t, []string{"queued c", "queued b", "queued a"}, queueTexts(queueList(t, c, threadID)))

			code, msg = c.CallError("thread/queue/update", map[string]any{"threadId": threadID, "queuedSubmissionId": "no-such-id", "input": queueText("x")})
			requireRefError(t, ref, "thread/queue/update", hasParam("queuedSubmissionId", "no-such-id"), code, msg)
			code, msg = c.CallError("thread/queue/start", map[string]any{"threadId": threadID, "queuedSubmissionId": "no-such-id"})
			requireRefError(t, ref, "thread/queue/start", hasParam("queuedSubmissionId", "no-such-id"), code, msg)
			code, msg = c.CallError("thread/queue/start", map[string]any{"threadId": threadID, "queuedSubmissionId": a.ID})
			requireRefError(t, ref, "thread/queue/start", func(p map[string]any) bool {
				id, _ := p["queuedSubmissionId"].(string)
				return id != "" && id != "no-such-id"
			}, code, msg)
			code, msg = c.CallError("thread/queue/add", map[string]any{"threadId": threadID, "clientUserMessageId": "e", "input": []any{}})
			requireRefError(t, ref, "thread/queue/add", func(p map[string]any) bool { in, _ := p["input"].([]any); return len(in) == 0 }, code, msg)
			require.Equal(t, map[string]any{"deleted": false}, apptest.Decode[map[string]any](t, c.Call("thread/queue/delete", map[string]any{"threadId": threadID, "queuedSubmissionId": "no-such-id"})))

			// The turn ends: the entries start one after the other, in
			// the queue's order, each once, with its client id.
			c.Reply(callID, apptest.ToolAnswer("sunny", true))
			var got []string
			for range 4 {
				tr := apptest.TurnCompleted(t, c)
				require.Equal(t, "completed", tr.Turn.Status)
				got = append(got, tr.Turn.Items[len(tr.Turn.Items)-1].Text)
			}
			require.Equal(t, []string{"first done", "answer c", "answer b", "answer a"}, got)
			require.Empty(t, queueList(t, c, threadID))
			require.Equal(t, map[string]any{"deleted": false}, apptest.Decode[map[string]any](t, c.Call("thread/queue/delete", map[string]any{"threadId": threadID, "queuedSubmissionId": a.ID})))
			// A retried add of a message that became a turn answers its
			// entry and starts nothing.
			require.Equal(t, a.ID, queueAdd(t, c, threadID, "client-a", "queued a").ID)
			require.Empty(t, queueList(t, c, threadID))
			code, msg = c.CallError("thread/queue/start", map[string]any{"threadId": threadID})
			requireRefError(t, ref, "thread/queue/start", hasParam("queuedSubmissionId", nil), code, msg)

			_, texts := apptest.ThreadTexts(t, c, threadID)
			require.Equal(t, []string{"user:first", "agent:first done", "user:queued c", "agent:answer c",
				"user:queued b", "agent:answer b", "user:queued a", "agent:answer a"}, texts)
			var read struct {
				Thread struct {
					Turns []struct {
						Items []struct {
							Type     string  `json:"type"`
							ClientID *string `json:"clientId"`
						} `json:"items"`
					} `json:"turns"`
				} `json:"thread"`
			}
			require.NoError(t, json.Unmarshal(c.Call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true}), &read))
			var clientIDs []string
			for _, tu := range read.Thread.Turns[1:] {
				require.Equal(t, "userMessage", tu.Items[0].Type)
				require.NotNil(t, tu.Items[0].ClientID)
				clientIDs = append(clientIDs, *tu.Items[0].ClientID)
			}
			require.Equal(t, []string{"client-x", "client-b", "client-a"}, clientIDs)
			require.Len(t, fake.Requests(), 5, "one model request per turn (two for the tool round), none twice")
		})
	}
}

// TestQueueAddWhileIdleStarts: an entry added to an idle thread starts at
// once, as the reference's does, and the thread's subscribers hear the
// queue change before the turn.
func TestQueueAddWhileIdleStarts(t *testing.T) {
	_, _, c := apptest.StartWithFake(t, `{"steps":[{"match":{"user_text":"queued a"},"text":"answer a"}]}`)
	threadID := apptest.StartThread(t, c, nil)
	c.Seen = nil
	queueAdd(t, c, threadID, "client-a", "queued a")
	tr := apptest.TurnCompleted(t, c)
	require.Equal(t, "completed", tr.Turn.Status)
	require.Equal(t, "answer a", tr.Turn.Items[0].Text)
	methods := apptest.MethodsOf(c.Seen)
	require.Less(t, indexOf(methods, "thread/queue/changed"), indexOf(methods, "turn/started"))
	require.Empty(t, queueList(t, c, threadID))
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// queueCrashScript: the first turn stalls until its daemon dies; the
// queued message is answered by the restarted daemon.
const queueCrashScript = `{"steps":[
	{"match":{"user_text":"first"},"text":"never finishes","chunks":4,"fail":{"kind":"stall","after_events":4}},
	{"match":{"user_text":"queued after"},"text":"queued answer"}
]}`

// TestQueueKillNine: a daemon killed with -9 after an entry's commit and
// before its turn started; the restarted daemon starts it as exactly one
// turn, and a third start of the daemon starts nothing more.
func TestQueueKillNine(t *testing.T) {
	apptest.BuildBinary()
	backends := []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"embedded", func(t *testing.T) []string { return []string{"--data-dir", t.TempDir()} }},
		{"postgres", func(t *testing.T) []string {
			return []string{"--database-url", pgtest.URL(t), "--migrate", "--data-dir", t.TempDir(), "-c", `node_id="queue-crash"`}
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fake := apptest.StartFake(t, queueCrashScript)
			args := append(b.args(t), apptest.FakeArgs(fake, "responses")...)
			testQueueKillNine(t, fake, args)
		})
	}
}

func testQueueKillNine(t *testing.T, fake *fakemodel.Server, args []string) {
	d1 := apptest.StartProc(t, args...)
	c := d1.RPC(t)
	threadID := apptest.StartThread(t, c, nil)
	c.Call("turn/start", apptest.Input(threadID, "first"))
	c.Until("item/agentMessage/delta")
	entry := queueAdd(t, c, threadID, "client-after", "queued after")
	require.Len(t, queueList(t, c, threadID), 1, "queued behind the running turn")
	d1.Kill9(t)

	d2 := apptest.StartProc(t, args...)
	c2 := d2.RPC(t)
	statuses, texts := queueWaitTurns(t, c2, threadID, 2)
	require.Equal(t, []string{"interrupted", "completed"}, statuses)
	require.Equal(t, []string{"user:first", "user:queued after", "agent:queued answer"}, texts)
	require.Empty(t, queueList(t, c2, threadID))
	code, _ := c2.CallError("thread/queue/start", map[string]any{"threadId": threadID, "queuedSubmissionId": entry.ID})
	require.Equal(t, -32600, code, "the entry is gone once it became a turn")
	d2.Terminate(t)

	d3 := apptest.StartProc(t, args...)
	c3 := d3.RPC(t)
	apptest.Sync(c3)
	statuses, _ = apptest.ThreadTexts(t, c3, threadID)
	require.Len(t, statuses, 2, "a restart after the entry's turn starts it no more")
	n := 0
	for _, r := range fake.Requests() {
		if strings.Contains(string(r.Body), "queued after") {
			n++
		}
	}
	require.Equal(t, 1, n, "the queued message reached the model once")
}

// queueWaitTurns polls the thread until it has n turns, none in progress.
func queueWaitTurns(t *testing.T, c *apptest.Client, threadID string, n int) (statuses, texts []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		statuses, texts = apptest.ThreadTexts(t, c, threadID)
		if len(statuses) >= n && !contains(statuses, "inProgress") {
			return statuses, texts
		}
		require.True(t, time.Now().Before(deadline), "thread has turns %v, want %d", statuses, n)
		time.Sleep(50 * time.Millisecond)
	}
}

func contains(list []string, s string) bool { return indexOf(list, s) >= 0 }

// TestQueueTwoDaemonsRace: two daemons on one Postgres start the same
// entry at once; it becomes one turn.
func TestQueueTwoDaemonsRace(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"first"},"tool_calls":[{"call_id":"call_r","name":"lookup_weather","arguments":{"city":"Oslo"}}]},
		{"match":{"user_text":"raced"},"text":"raced answer"}
	]}`)
	url := pgtest.URL(t)
	daemon := func(node string) *apptest.Daemon {
		return apptest.Start(t, append([]string{"--database-url", url, "--migrate", "--data-dir", t.TempDir(), "-c", `node_id="` + node + `"`},
			apptest.FakeArgs(fake, "responses")...)...)
	}
	d1, d2 := daemon("queue-a"), daemon("queue-b")
	c1, c2 := d1.RPC(t), d2.RPC(t)
	threadID := apptest.StartThread(t, c1, map[string]any{"dynamicTools": []any{apptest.WeatherTool}})
	// The entry waits behind a turn that is then interrupted: an
	// interrupted turn leaves the queue to thread/queue/start.
	turnID := apptest.StartTurn(t, c1, threadID, "first")
	apptest.ToolCall(t, c1)
	entry := queueAdd(t, c1, threadID, "client-raced", "raced")
	c1.Call("turn/interrupt", map[string]any{"threadId": threadID, "turnId": turnID})
	require.Equal(t, "interrupted", apptest.TurnCompleted(t, c1).Turn.Status)
	require.Len(t, queueList(t, c2, threadID), 1)

	var wg sync.WaitGroup
	frames := make([]apptest.Frame, 2)
	for i, c := range []*apptest.Client{c1, c2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			frames[i] = c.CallRaw("thread/queue/start", map[string]any{"threadId": threadID, "queuedSubmissionId": entry.ID})
		}()
	}
	wg.Wait()
	ok := 0
	for _, f := range frames {
		if f.Error == nil {
			ok++
		}
	}
	require.Equal(t, 1, ok, "one start wins: %+v", frames)
	statuses, texts := queueWaitTurns(t, c1, threadID, 2)
	require.Equal(t, []string{"interrupted", "completed"}, statuses)
	require.Equal(t, []string{"user:first", "user:raced", "agent:raced answer"}, texts)
	require.Empty(t, queueList(t, c2, threadID))
}
