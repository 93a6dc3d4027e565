package turns_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/store/pgtest"
)

// crashScript drives TestKillNineMidTurnAndResume. Every step matches its
// request explicitly, so a request that reaches the wrong step fails loudly.
//
//   - turn 1 calls update_plan (call id call_plan_1), then answers;
//   - turn 2 streams slowly (event_delay_ms): it completes a reasoning item,
//     starts a message, sends two of its four deltas and then stalls until
//     the daemon goes away (after_events 11 = response.created, the six
//     reasoning events, output_item.added and content_part.added of the
//     message, two deltas). The test kills the daemon after the first
//     delta, so the kill always lands mid-message, with no timing involved;
//   - turn 3 runs on the restarted daemon.
const crashScript = `{"steps":[
	{"name":"t1-plan","match":{"user_text":"Make a plan"},
	 "reasoning":{"id":"rs_turn1","summary":["Planning first."]},
	 "tool_calls":[{"call_id":"call_plan_1","name":"update_plan",
		"arguments":{"explanation":"Survive a crash.","plan":[{"step":"Plan","status":"completed"},{"step":"Crash","status":"in_progress"}]}}],
	 "usage":{"input_tokens":100,"output_tokens":10,"total_tokens":110}},
	{"name":"t1-answer","match":{"call_output":"call_plan_1"},"text":"Plan recorded.","chunks":2,
	 "usage":{"input_tokens":120,"output_tokens":5,"total_tokens":125}},
	{"name":"t2-slow","match":{"user_text":"Now stream slowly"},"event_delay_ms":5,
	 "reasoning":{"id":"rs_turn2","summary":["Thinking about the slow part."],"chunks":1},
	 "text":"This answer never finishes.","chunks":4,
	 "fail":{"kind":"stall","after_events":11}},
	{"name":"t3","match":{"user_text":"After the crash"},"text":"Back again."}
]}`

// Step indexes of crashScript, as recorded in RecordedRequest.Step.
const (
	stepT1Plan = iota
	stepT1Answer
	stepT2Slow
	stepT3
)

func TestKillNineMidTurnAndResume(t *testing.T) {
	// The build runs while the subtests set up (the Postgres cluster takes
	// a while to start); they wait for it before starting a daemon.
	apptest.BuildBinary()
	backends := []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"embedded", func(t *testing.T) []string { return []string{"--data-dir", t.TempDir()} }},
		{"postgres", func(t *testing.T) []string {
			// A fixed node id: the restarted daemon settles the turns
			// its previous process left at once, rather than when their
			// leases expire.
			return []string{"--database-url", pgtest.URL(t), "--migrate", "--data-dir", t.TempDir(), "-c", `node_id="crash-test"`}
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fake := apptest.StartFake(t, crashScript)
			// The database (dropped at cleanup) is created before the
			// daemons, so their cleanups run first.
			args := append(b.args(t), apptest.FakeArgs(fake, "responses")...)
			testKillNineMidTurnAndResume(t, fake, args)
		})
	}
}

// crashSeenItem is an item/completed as the client received it.
type crashSeenItem struct {
	TurnID string          `json:"turnId"`
	Item   json.RawMessage `json:"item"`
}

func (s crashSeenItem) id(t *testing.T) string {
	var v struct{ ID string }
	require.NoError(t, json.Unmarshal(s.Item, &v))
	return v.ID
}

func (s crashSeenItem) typ(t *testing.T) string {
	var v struct{ Type string }
	require.NoError(t, json.Unmarshal(s.Item, &v))
	return v.Type
}

// crashTakeCompleted returns the item/completed notifications recorded so far
// and forgets every recorded notification.
func crashTakeCompleted(t *testing.T, r *apptest.Client) []crashSeenItem {
	t.Helper()
	var out []crashSeenItem
	for _, f := range r.Seen {
		if f.Method == "item/completed" {
			var s crashSeenItem
			require.NoError(t, json.Unmarshal(f.Params, &s))
			out = append(out, s)
		}
	}
	r.Seen = nil
	return out
}

func testKillNineMidTurnAndResume(t *testing.T, fake *fakemodel.Server, args []string) {
	d1 := apptest.StartProc(t, args...)
	r := d1.RPC(t)
	threadID := apptest.StartThread(t, r, nil)
	r.Seen = nil

	// Turn 1 completes normally with a tool round.
	tr1 := apptest.RunTurn(t, r, threadID, "Make a plan")
	require.Equal(t, "completed", tr1.Turn.Status)
	turn1ID := tr1.Turn.ID
	usageBefore := crashLastUsage(t, r)
	seen1 := crashTakeCompleted(t, r)
	require.Equal(t, []string{"userMessage", "reasoning", "agentMessage"}, crashItemTypes(t, seen1),
		"update_plan emits turn/plan/updated, not an item")

	// An HTTP event stream follows the thread live through turn 2.
	stream := apptest.OpenEvents(t, d1.URL("/v1/threads/"+threadID+"/events"), "")

	// Turn 2 is killed mid-message: after the first delta of its agent
	// message, once its user message and reasoning have completed.
	var started apptest.TurnResult
	require.NoError(t, json.Unmarshal(r.Call("turn/start", map[string]any{
		"threadId": threadID,
		"input":    []any{map[string]any{"type": "text", "text": "Now stream slowly"}},
	}), &started))
	turn2ID := started.Turn.ID
	r.Until("item/agentMessage/delta")
	for _, f := range r.Seen {
		require.NotEqual(t, "turn/completed", f.Method, "turn 2 must still be running when the daemon is killed")
	}
	seen2 := crashTakeCompleted(t, r)
	require.Equal(t, []string{"userMessage", "reasoning"}, crashItemTypes(t, seen2))
	lastSeen := stream.UntilSSE("item/agentMessage/delta").ID
	d1.Kill9(t)

	// Restart on the same store. Before anyone loads it the thread is
	// notLoaded and turn 2 is already settled as interrupted.
	d2 := apptest.StartProc(t, args...)
	r2 := d2.RPC(t)

	// The stream, resumed after the last event it got (a delta the killed
	// daemon sent), learns that turn 2 ended interrupted, under a number
	// past every number the killed daemon sent: the restarted daemon logs
	// that end whether it settles the turn as it starts (embedded store)
	// or in the cluster's scan (Postgres), followed or not.
	again := apptest.OpenEvents(t, d2.URL("/v1/threads/"+threadID+"/events?until=turnCompleted&after="+lastSeen), "")
	end := again.UntilSSE("turn/completed")
	require.Greater(t, crashPosition(t, end.ID), crashPosition(t, lastSeen))
	var ended struct {
		Params struct {
			Turn struct{ ID, Status string } `json:"turn"`
		} `json:"params"`
	}
	require.NoError(t, json.Unmarshal([]byte(end.Data), &ended))
	require.Equal(t, turn2ID, ended.Params.Turn.ID)
	require.Equal(t, "interrupted", ended.Params.Turn.Status)

	var read struct {
		Thread apptest.ReadThread `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(r2.Call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true}), &read))
	require.Equal(t, "notLoaded", read.Thread.Status.Type)
	crashRequireTurns(t, read.Thread.Turns, turn1ID, seen1, turn2ID, seen2)

	var resumed struct {
		Thread apptest.ReadThread `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(r2.Call("thread/resume", map[string]any{"threadId": threadID}), &resumed))
	require.Equal(t, "idle", resumed.Thread.Status.Type, "a thread whose turn died with the daemon resumes idle")
	crashRequireTurns(t, resumed.Thread.Turns, turn1ID, seen1, turn2ID, seen2)
	// Resume replays the last token usage the client saw before the kill
	// (turn 2 never finished a model response).
	usageAfter := r2.Until("thread/tokenUsage/updated")
	require.JSONEq(t, usageBefore, string(usageAfter.Params))
	for _, f := range r2.Seen {
		if f.Method == "thread/status/changed" {
			require.NotContains(t, string(f.Params), `"active"`, "no turn runs after the restart until turn 3")
		}
	}
	r2.Seen = nil

	// Turn 3 runs on the restarted daemon with the full prior history.
	tr3 := apptest.RunTurn(t, r2, threadID, "After the crash")
	require.Equal(t, "completed", tr3.Turn.Status)
	require.Equal(t, "Back again.", tr3.Turn.Items[0].Text)
	reqs := fake.Requests()
	require.Len(t, reqs, 4, "one request per model round: two in turn 1, one each in turns 2 and 3")
	for i, want := range []int{stepT1Plan, stepT1Answer, stepT2Slow, stepT3} {
		require.Equal(t, want, reqs[i].Step, "request %d answered by the wrong script step", i)
	}
	inputs := make([][]json.RawMessage, len(reqs))
	for i, rq := range reqs {
		var body struct {
			Input []json.RawMessage `json:"input"`
		}
		require.NoError(t, rq.Decode(&body))
		inputs[i] = body.Input
	}
	// Before the crash: turn 1's second request carries the call and its
	// output; turn 2's request carries all of turn 1 plus turn 2's input.
	crashRequireInputPrefix(t, "turn 1 round 2 repeats round 1", inputs[stepT1Plan], inputs[stepT1Answer])
	call := crashFindInput(t, inputs[stepT1Answer], "function_call", "call_plan_1")
	require.NotNil(t, call, "turn 1's function_call is in the history")
	require.Contains(t, call["arguments"], "Survive a crash.")
	out := crashFindInput(t, inputs[stepT1Answer], "function_call_output", "call_plan_1")
	require.NotNil(t, out, "turn 1's function_call_output is in the history")
	require.Equal(t, "Plan updated", out["output"])
	crashRequireInputPrefix(t, "turn 2 repeats turn 1", inputs[stepT1Answer], inputs[stepT2Slow])
	crashRequireLastUserText(t, inputs[stepT2Slow], "Now stream slowly")
	require.Len(t, inputs[stepT2Slow], len(inputs[stepT1Answer])+2, "turn 2 = turn 1 + its answer + the new user message")

	// After the crash: turn 3 replays exactly what was sent before it
	// (same call ids, same outputs, same items in the same order), then
	// what turn 2 completed before the kill, then its own input.
	crashRequireInputPrefix(t, "turn 3 repeats everything sent before the crash", inputs[stepT2Slow], inputs[stepT3])
	crashRequireLastUserText(t, inputs[stepT3], "After the crash")
	between := inputs[stepT3][len(inputs[stepT2Slow]) : len(inputs[stepT3])-1]
	var replayed []string
	for _, it := range between {
		require.NotContains(t, string(it), "This answer", "the message cut by the kill never completed; it must not be replayed as if it had")
		var v struct {
			Type    string `json:"type"`
			Summary []struct {
				Text string `json:"text"`
			} `json:"summary"`
		}
		require.NoError(t, json.Unmarshal(it, &v))
		if v.Type == "reasoning" && len(v.Summary) == 1 {
			replayed = append(replayed, v.Summary[0].Text)
		}
	}
	require.Equal(t, []string{"Thinking about the slow part."}, replayed,
		"turn 2's reasoning completed (and was shown) before the kill, so the model gets it back")

	// The client leaves first, so shutdown does not wait out its close
	// handshake.
	_ = r2.WS.CloseNow()
	d2.Terminate(t)
}

// crashPosition reads an SSE id.
func crashPosition(t *testing.T, id string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(id, 10, 64)
	require.NoError(t, err)
	return n
}

// crashLastUsage returns the params of the last thread/tokenUsage/updated
// recorded.
func crashLastUsage(t *testing.T, r *apptest.Client) string {
	t.Helper()
	for i := len(r.Seen) - 1; i >= 0; i-- {
		if r.Seen[i].Method == "thread/tokenUsage/updated" {
			return string(r.Seen[i].Params)
		}
	}
	t.Fatal("no thread/tokenUsage/updated received")
	return ""
}

func crashItemTypes(t *testing.T, items []crashSeenItem) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, it.typ(t))
	}
	return out
}

// crashRequireTurns checks the stored transcript against what the client saw
// before the kill: every item/completed is stored, byte for byte (as
// JSON), in order, and nothing else; turn 2 is settled.
func crashRequireTurns(t *testing.T, turns []apptest.ReadTurn, turn1ID string, seen1 []crashSeenItem, turn2ID string, seen2 []crashSeenItem) {
	t.Helper()
	require.Len(t, turns, 2)
	for i, want := range []struct {
		id     string
		status string
		seen   []crashSeenItem
	}{
		{turn1ID, "completed", seen1},
		{turn2ID, "interrupted", seen2},
	} {
		got := turns[i]
		require.Equal(t, want.id, got.ID)
		require.Equal(t, want.status, got.Status, "turn %d", i+1)
		require.NotNil(t, got.CompletedAt, "turn %d is settled", i+1)
		require.Equal(t, "full", got.ItemsView)
		var wantIDs, gotIDs []string
		for _, s := range want.seen {
			wantIDs = append(wantIDs, s.typ(t)+" "+s.id(t))
		}
		for _, raw := range got.Items {
			s := crashSeenItem{Item: raw}
			gotIDs = append(gotIDs, s.typ(t)+" "+s.id(t))
		}
		require.Equal(t, wantIDs, gotIDs, "turn %d: stored items vs item/completed seen by the client", i+1)
		for j, s := range want.seen {
			require.Equal(t, want.id, s.TurnID)
			require.JSONEq(t, string(s.Item), string(got.Items[j]), "turn %d item %d (%s)", i+1, j, s.id(t))
		}
	}
	require.JSONEq(t, "null", string(turns[1].Error), "an interrupted turn has no error")
}

// crashRequireInputPrefix asserts that full starts with prefix, item by item.
func crashRequireInputPrefix(t *testing.T, what string, prefix, full []json.RawMessage) {
	t.Helper()
	require.GreaterOrEqual(t, len(full), len(prefix), "%s: the later request has fewer input items", what)
	for i := range prefix {
		require.JSONEq(t, string(prefix[i]), string(full[i]), "%s: input[%d] differs", what, i)
	}
}

// crashFindInput returns the input item of the given type and call id.
func crashFindInput(t *testing.T, input []json.RawMessage, typ, callID string) map[string]any {
	t.Helper()
	for _, raw := range input {
		var v map[string]any
		require.NoError(t, json.Unmarshal(raw, &v))
		if v["type"] == typ && v["call_id"] == callID {
			return v
		}
	}
	return nil
}

func crashRequireLastUserText(t *testing.T, input []json.RawMessage, text string) {
	t.Helper()
	require.NotEmpty(t, input)
	last := input[len(input)-1]
	var v struct {
		Role    string `json:"role"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	require.NoError(t, json.Unmarshal(last, &v))
	require.Equal(t, "user", v.Role, "%s", last)
	require.Len(t, v.Content, 1, "%s", last)
	require.Equal(t, text, v.Content[0].Text)
}

// A daemon killed right after answering that a turn completed (POST
// …/turns?wait=true) leaves the turn's end in the thread's event log: the
// notifications of an end ride the end's own commit, so a client resuming
// the thread's events after a restart learns how every turn it was told
// about ended. (Written after the end, they waited up to a few
// milliseconds for a commit, and the kill lost the last turn's.)
func TestKillNineRightAfterATurnKeepsItsEndInTheLog(t *testing.T) {
	apptest.BuildBinary()
	fake := apptest.StartFake(t, `{"steps":[],"exhausted_text":"done"}`)
	args := append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)
	d1 := apptest.StartProc(t, args...)
	resp := apptest.Do(t, http.MethodPost, d1.URL("/v1/threads"), "", map[string]any{})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var created struct {
		Thread struct{ ID string } `json:"thread"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&created))
	const turns = 3
	for range turns {
		resp := apptest.Do(t, http.MethodPost, d1.URL("/v1/threads/"+created.Thread.ID+"/turns?wait=true"), "",
			map[string]any{"input": []any{map[string]any{"type": "text", "text": "hi"}}})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var turn struct{ Status string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&turn))
		require.Equal(t, "completed", turn.Status)
	}
	d1.Kill9(t)

	d2 := apptest.StartProc(t, args...)
	stream := apptest.OpenEvents(t, d2.URL("/v1/threads/"+created.Thread.ID+"/events?after=0"), "")
	for range turns {
		stream.UntilSSE("turn/completed")
	}
	d2.Terminate(t)
}
