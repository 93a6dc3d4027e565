package turns_test

// Behaviour tests of threads and turns through real parts: a websocket
// client, the in-process daemon, the scripted fake model server and a real
// store (embedded and Postgres). Synchronisation is by notifications only;
// "mid-stream" is made deterministic by fake steps that stall after their
// first deltas until the client goes away.

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/model/fakemodel"
)

// --- harness additions (prefixed bh to stay clear of other test files) ---

func bhIsResponse(id string) func(apptest.Frame) bool {
	return func(f apptest.Frame) bool { return f.Method == "" && string(f.ID) == id }
}

func bhIsNote(method string) func(apptest.Frame) bool {
	return func(f apptest.Frame) bool { return f.Method == method && f.ID == nil }
}

// bhIsStatus matches thread/status/changed of threadID to the status type.
func bhIsStatus(t *testing.T, threadID, typ string) func(apptest.Frame) bool {
	return func(f apptest.Frame) bool {
		if f.Method != "thread/status/changed" {
			return false
		}
		var p bhStatusNote
		require.NoError(t, json.Unmarshal(f.Params, &p))
		return p.ThreadID == threadID && p.Status.Type == typ
	}
}

type bhStatusNote struct {
	ThreadID string `json:"threadId"`
	Status   struct {
		Type        string   `json:"type"`
		ActiveFlags []string `json:"activeFlags"`
	} `json:"status"`
}

type bhItemNote struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	ItemID   string `json:"itemId"`
	Item     struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Text    string `json:"text"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"item"`
}

type bhTurnNote struct {
	ThreadID string `json:"threadId"`
	Turn     struct {
		ID        string          `json:"id"`
		Status    string          `json:"status"`
		Error     json.RawMessage `json:"error"`
		ItemsView string          `json:"itemsView"`
		Items     []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"items"`
	} `json:"turn"`
}

type bhThread struct {
	ID           string  `json:"id"`
	ForkedFromID *string `json:"forkedFromId"`
	Preview      string  `json:"preview"`
	Ephemeral    bool    `json:"ephemeral"`
	Path         *string `json:"path"`
	Name         *string `json:"name"`
	Status       struct {
		Type string `json:"type"`
	} `json:"status"`
	Turns []struct {
		ID        string `json:"id"`
		Status    string `json:"status"`
		ItemsView string `json:"itemsView"`
		Items     []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"items"`
	} `json:"turns"`
}

type bhThreadResult struct {
	Thread bhThread `json:"thread"`
}

func bhText(text string) []any {
	return []any{map[string]any{"type": "text", "text": text}}
}

// bhStartTurn sends turn/start and returns the turn id of the response.
func bhStartTurn(t *testing.T, r *apptest.Client, threadID, text string) string {
	t.Helper()
	res := apptest.Decode[apptest.TurnResult](t, r.Call("turn/start", map[string]any{"threadId": threadID, "input": bhText(text)}))
	require.Equal(t, "inProgress", res.Turn.Status)
	return res.Turn.ID
}

// bhError calls method and returns its error (failing if it succeeded).
func bhError(t *testing.T, r *apptest.Client, method string, params any) (int, string) {
	t.Helper()
	f := r.CallRaw(method, params)
	require.NotNil(t, f.Error, "%s unexpectedly succeeded: %s", method, f.Result)
	return f.Error.Code, f.Error.Message
}

// bhNewRPCCaps is a client initialized as another client, with caps.
func bhNewRPCCaps(t *testing.T, d *apptest.Daemon, caps map[string]any) *apptest.Client {
	t.Helper()
	r := apptest.MustDial(t, d.Addr, nil)
	r.Call("initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "other-client", "title": nil, "version": "1.0"},
		"capabilities": caps,
	})
	return r
}

// bhProviderArgs configures the daemon with the fake model as provider
// "fake" (no retries) and "retry1" (one retry), and "dead", a provider
// whose port refuses connections.
func bhProviderArgs(t *testing.T, fake *fakemodel.Server, wire string) []string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String() + "/v1"
	require.NoError(t, ln.Close())
	prov := func(id, url string, retries int) []string {
		return []string{"-c", fmt.Sprintf(`model_providers.%s={name="%s", base_url="%s", wire_api="%s", request_max_retries=%d}`, id, id, url, wire, retries)}
	}
	args := []string{"-c", `model="fake-model"`, "-c", `model_provider="fake"`}
	args = append(args, prov("fake", fake.URL(), 0)...)
	args = append(args, prov("retry1", fake.URL(), 1)...)
	return append(args, prov("dead", dead, 0)...)
}

// bhToolOutput is a tool result as the model received it.
type bhToolOutput struct{ CallID, Output string }

// bhRequestHistory extracts, from a recorded model request of either wire
// format, the tool call ids, the tool outputs and the texts of the user
// messages, in order.
func bhRequestHistory(t *testing.T, body []byte) (calls []string, outs []bhToolOutput, users []string) {
	t.Helper()
	var req struct {
		Input    []map[string]json.RawMessage `json:"input"`
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(body, &req))
	str := func(raw json.RawMessage) string {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		var parts []struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(raw, &parts)
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	for _, it := range req.Input {
		switch str(it["type"]) {
		case "function_call", "custom_tool_call":
			calls = append(calls, str(it["call_id"]))
		case "function_call_output", "custom_tool_call_output":
			outs = append(outs, bhToolOutput{str(it["call_id"]), str(it["output"])})
		case "message", "":
			if str(it["role"]) == "user" {
				users = append(users, str(it["content"]))
			}
		}
	}
	for _, m := range req.Messages {
		switch str(m["role"]) {
		case "assistant":
			var tcs []struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(m["tool_calls"], &tcs)
			for _, tc := range tcs {
				calls = append(calls, tc.ID)
			}
		case "tool":
			outs = append(outs, bhToolOutput{str(m["tool_call_id"]), str(m["content"])})
		case "user":
			users = append(users, str(m["content"]))
		}
	}
	return calls, outs, users
}

// bhWellFormed checks that every tool call of a request is answered
// by exactly one output that follows it.
func bhWellFormed(t *testing.T, body []byte) {
	t.Helper()
	calls, outs, _ := bhRequestHistory(t, body)
	answered := map[string]int{}
	for _, o := range outs {
		answered[o.CallID]++
	}
	for _, c := range calls {
		require.Equal(t, 1, answered[c], "call %s answered %d times in %s", c, answered[c], body)
	}
	require.Len(t, outs, len(calls), "outputs without calls in %s", body)
}

// --- 1, 2: update_plan and parallel calls ---

func TestBehaviourUpdatePlanTool(t *testing.T) {
	const args = `{"explanation":"Three steps","plan":[{"step":"Read","status":"completed"},{"step":"Write","status":"in_progress"},{"step":"Test","status":"pending"}]}`
	for name, storeArgs := range apptest.StoreBackends(t) {
		for _, wire := range []string{"responses", "chat"} {
			t.Run(name+"/"+wire, func(t *testing.T) {
				fake := apptest.StartFake(t, `{"steps":[
					{"text":"Planning.","tool_calls":[{"call_id":"call_plan","name":"update_plan","arguments":`+args+`,"chunks":3}]},
					{"match":{"call_output":"call_plan"},"text":"All planned."}]}`)
				d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, wire)...)...)
				r := d.RPC(t)
				threadID := apptest.StartThread(t, r, nil)
				turnID := bhStartTurn(t, r, threadID, "make a plan")
				frames := r.Through(bhIsNote("turn/completed"))

				var plan []apptest.Frame
				for _, f := range frames {
					if f.Method == "turn/plan/updated" {
						plan = append(plan, f)
					}
				}
				require.Len(t, plan, 1, "%v", apptest.MethodsOf(frames))
				require.JSONEq(t, `{"threadId":"`+threadID+`","turnId":"`+turnID+`","explanation":"Three steps",
					"plan":[{"step":"Read","status":"completed"},{"step":"Write","status":"inProgress"},{"step":"Test","status":"pending"}]}`,
					string(plan[0].Params))

				done := apptest.Decode[bhTurnNote](t, frames[len(frames)-1].Params)
				require.Equal(t, "completed", done.Turn.Status)
				require.Len(t, done.Turn.Items, 1)
				require.Equal(t, "All planned.", done.Turn.Items[0].Text)

				reqs := fake.Requests()
				require.Len(t, reqs, 2)
				calls, outs, _ := bhRequestHistory(t, reqs[1].Body)
				require.Equal(t, []string{"call_plan"}, calls)
				require.Equal(t, []bhToolOutput{{"call_plan", "Plan updated"}}, outs)
				require.Equal(t, 1, reqs[1].Step, "the follow-up request matched the call_output step")
			})
		}
	}
}

func TestBehaviourTwoCallsInOneResponse(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		for _, wire := range []string{"responses", "chat"} {
			t.Run(name+"/"+wire, func(t *testing.T) {
				fake := apptest.StartFake(t, `{"steps":[
					{"tool_calls":[
						{"call_id":"call_a","name":"update_plan","arguments":{"explanation":"first","plan":[{"step":"A","status":"in_progress"}]},"chunks":2},
						{"call_id":"call_b","name":"update_plan","arguments":{"explanation":"second","plan":[{"step":"A","status":"completed"}]},"chunks":2}]},
					{"match":{"call_output":"call_b"},"text":"Both done."}]}`)
				d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, wire)...)...)
				r := d.RPC(t)
				threadID := apptest.StartThread(t, r, nil)
				bhStartTurn(t, r, threadID, "two calls")
				frames := r.Through(bhIsNote("turn/completed"))
				var explanations []string
				for _, f := range frames {
					if f.Method == "turn/plan/updated" {
						explanations = append(explanations, apptest.Decode[struct {
							Explanation string `json:"explanation"`
						}](t, f.Params).Explanation)
					}
				}
				require.Equal(t, []string{"first", "second"}, explanations)
				require.Equal(t, "completed", apptest.Decode[bhTurnNote](t, frames[len(frames)-1].Params).Turn.Status)

				reqs := fake.Requests()
				require.Len(t, reqs, 2)
				calls, outs, _ := bhRequestHistory(t, reqs[1].Body)
				require.Equal(t, []string{"call_a", "call_b"}, calls)
				require.Equal(t, []bhToolOutput{{"call_a", "Plan updated"}, {"call_b", "Plan updated"}}, outs)
				bhWellFormed(t, reqs[1].Body)
			})
		}
	}
}

// --- 3: steering ---

// bhStallScript's first step streams one delta of a message and then stalls
// until the client abandons it; the second answers a request whose last
// user message contains next.
func bhStallScript(next, answer string) string {
	return `{"steps":[
		{"name":"slow","text":"partial words that never finish","chunks":4,"fail":{"kind":"stall","after_events":4}},
		{"name":"after","match":{"user_text":"` + next + `"},"text":"` + answer + `"}]}`
}

// bhFirstDelta waits for the first agentMessage delta of the turn and
// returns the id of the streaming message.
func bhFirstDelta(t *testing.T, r *apptest.Client, turnID string) string {
	t.Helper()
	frames := r.Through(func(f apptest.Frame) bool {
		return f.Method == "item/agentMessage/delta" && apptest.Decode[bhItemNote](t, f.Params).TurnID == turnID
	})
	delta := apptest.Decode[bhItemNote](t, frames[len(frames)-1].Params)
	require.NotEmpty(t, delta.ItemID)
	return delta.ItemID
}

// bhCheckSteered checks the rest of a turn that was given extra input
// mid-stream: the input shows up as a userMessage in the same turn, no
// second turn starts, the abandoned message never completes, and the turn
// completes with the answer to the fresh request.
func bhCheckSteered(t *testing.T, r *apptest.Client, fake *fakemodel.Server, threadID, turnID, partialID, steerText, answer string) {
	t.Helper()
	frames := r.Through(bhIsNote("turn/completed"))
	sawSteer := false
	for _, f := range frames {
		require.NotEqual(t, "turn/started", f.Method, "steering must not start a turn")
		switch f.Method {
		case "item/started", "item/completed":
			n := apptest.Decode[bhItemNote](t, f.Params)
			require.Equal(t, turnID, n.TurnID)
			require.NotEqual(t, partialID, n.Item.ID, "the abandoned message must not complete")
			if n.Item.Type == "userMessage" && f.Method == "item/completed" {
				require.Len(t, n.Item.Content, 1)
				require.Equal(t, steerText, n.Item.Content[0].Text)
				sawSteer = true
			}
		}
	}
	require.True(t, sawSteer, "steer input appears as a userMessage: %v", apptest.MethodsOf(frames))
	done := apptest.Decode[bhTurnNote](t, frames[len(frames)-1].Params)
	require.Equal(t, turnID, done.Turn.ID)
	require.Equal(t, "completed", done.Turn.Status)
	require.Len(t, done.Turn.Items, 1)
	require.Equal(t, answer, done.Turn.Items[0].Text)

	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	require.Equal(t, 1, reqs[1].Step)
	_, _, users := bhRequestHistory(t, reqs[1].Body)
	require.Equal(t, []string{"start the work", steerText}, users)
	require.NotContains(t, string(reqs[1].Body), "partial words")

	// The steer is durable: items/list has both user messages in the turn.
	il := apptest.Decode[struct {
		Data []struct {
			TurnID string `json:"turnId"`
			Item   struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"item"`
		} `json:"data"`
	}](t, r.Call("thread/items/list", map[string]any{"threadId": threadID}))
	var types []string
	for _, e := range il.Data {
		require.Equal(t, turnID, e.TurnID)
		types = append(types, e.Item.Type)
	}
	require.Equal(t, []string{"userMessage", "userMessage", "agentMessage"}, types)
}

func TestBehaviourSteer(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, bhStallScript("STEER-TEXT", "Answer after steer."))
			d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, "responses")...)...)
			r := d.RPC(t)
			threadID := apptest.StartThread(t, r, nil)

			code, msg := bhError(t, r, "turn/steer", map[string]any{"threadId": threadID, "expectedTurnId": "x", "input": bhText("hi")})
			require.Equal(t, -32600, code)
			require.Equal(t, "no active turn to steer", msg)

			turnID := bhStartTurn(t, r, threadID, "start the work")
			partialID := bhFirstDelta(t, r, turnID)

			code, msg = bhError(t, r, "turn/steer", map[string]any{"threadId": threadID, "expectedTurnId": "wrong-id", "input": bhText("nope")})
			require.Equal(t, -32600, code)
			require.Equal(t, "expected active turn id `wrong-id` but found `"+turnID+"`", msg)

			res := r.Call("turn/steer", map[string]any{"threadId": threadID, "expectedTurnId": turnID, "input": bhText("STEER-TEXT please")})
			require.JSONEq(t, `{"turnId":"`+turnID+`"}`, string(res))
			bhCheckSteered(t, r, fake, threadID, turnID, partialID, "STEER-TEXT please", "Answer after steer.")

			code, msg = bhError(t, r, "turn/steer", map[string]any{"threadId": threadID, "expectedTurnId": turnID, "input": bhText("late")})
			require.Equal(t, -32600, code)
			require.Equal(t, "no active turn to steer", msg)
		})
	}
}

func TestBehaviourTurnStartWhileRunning(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, bhStallScript("MORE-INPUT", "Answer with more input."))
			d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, "responses")...)...)
			r := d.RPC(t)
			threadID := apptest.StartThread(t, r, nil)
			turnID := bhStartTurn(t, r, threadID, "start the work")
			partialID := bhFirstDelta(t, r, turnID)

			res := apptest.Decode[apptest.TurnResult](t, r.Call("turn/start", map[string]any{"threadId": threadID, "input": bhText("MORE-INPUT now")}))
			require.Equal(t, turnID, res.Turn.ID, "turn/start during a turn describes the active turn")
			require.Equal(t, "inProgress", res.Turn.Status)
			bhCheckSteered(t, r, fake, threadID, turnID, partialID, "MORE-INPUT now", "Answer with more input.")
		})
	}
}

// --- 4: interrupt ---

func TestBehaviourInterrupt(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			// A plan call first, so that the interrupted turn has a tool
			// round in its history; then a stalled answer.
			fake := apptest.StartFake(t, `{"steps":[
				{"tool_calls":[{"call_id":"call_p","name":"update_plan","arguments":{"plan":[{"step":"A","status":"pending"}]}}]},
				{"match":{"call_output":"call_p"},"text":"partial words that never finish","chunks":4,"fail":{"kind":"stall","after_events":4}},
				{"match":{"user_text":"next question"},"text":"Fresh answer."}]}`)
			d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, "responses")...)...)
			r := d.RPC(t)
			threadID := apptest.StartThread(t, r, nil)

			code, msg := bhError(t, r, "turn/interrupt", map[string]any{"threadId": threadID, "turnId": "whatever"})
			require.Equal(t, -32600, code)
			require.Equal(t, "no active turn to interrupt", msg)

			turnID := bhStartTurn(t, r, threadID, "first question")
			partialID := bhFirstDelta(t, r, turnID)

			id := r.Request("turn/interrupt", map[string]any{"threadId": threadID, "turnId": turnID})
			before := r.Through(bhIsResponse(id))
			resp := before[len(before)-1]
			require.Nil(t, resp.Error)
			require.JSONEq(t, `{}`, string(resp.Result))
			for _, f := range before[:len(before)-1] {
				require.NotEqual(t, "turn/completed", f.Method, "the response comes first")
				require.NotEqual(t, "thread/status/changed", f.Method, "the response comes first")
			}
			// Exactly §8.2: the read state, status idle, then turn/completed
			// interrupted.
			f := r.Take()
			require.Equal(t, "thread/readState/changed", f.Method, "%s", f.Params)
			f = r.Take()
			require.True(t, bhIsStatus(t, threadID, "idle")(f), "%s %s", f.Method, f.Params)
			f = r.Take()
			require.Equal(t, "turn/completed", f.Method, "%s", f.Params)
			done := apptest.Decode[bhTurnNote](t, f.Params)
			require.Equal(t, turnID, done.Turn.ID)
			require.Equal(t, "interrupted", done.Turn.Status)
			require.Equal(t, "null", string(done.Turn.Error))

			code, msg = bhError(t, r, "turn/interrupt", map[string]any{"threadId": threadID, "turnId": turnID})
			require.Equal(t, -32600, code)
			require.Equal(t, "no active turn to interrupt", msg)

			// The persisted turn is interrupted and has no partial message.
			read := apptest.Decode[bhThreadResult](t, r.Call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true}))
			require.Equal(t, "idle", read.Thread.Status.Type)
			require.Len(t, read.Thread.Turns, 1)
			require.Equal(t, "interrupted", read.Thread.Turns[0].Status)
			for _, it := range read.Thread.Turns[0].Items {
				require.NotEqual(t, "agentMessage", it.Type)
			}

			// The thread is usable and the next request's history is
			// well-formed: the interrupted turn's call and output, no
			// partial text.
			tr := apptest.RunTurn(t, r, threadID, "next question")
			require.Equal(t, "completed", tr.Turn.Status)
			require.Equal(t, "Fresh answer.", tr.Turn.Items[0].Text)
			reqs := fake.Requests()
			require.Len(t, reqs, 3)
			require.Equal(t, 2, reqs[2].Step)
			calls, outs, users := bhRequestHistory(t, reqs[2].Body)
			require.Equal(t, []string{"call_p"}, calls)
			require.Equal(t, []bhToolOutput{{"call_p", "Plan updated"}}, outs)
			require.Equal(t, []string{"first question", "next question"}, users)
			require.NotContains(t, string(reqs[2].Body), "partial words")
			require.NotContains(t, string(reqs[2].Body), partialID)
			bhWellFormed(t, reqs[2].Body)
		})
	}
}

// --- 5: model errors ---

func TestBehaviourModelErrors(t *testing.T) {
	cases := []struct {
		name     string
		provider string
		step     string
		attempts int // model requests the failing turn makes
		message  string
		info     string
	}{
		{name: "unreachable", provider: "dead", attempts: 0,
			message: "Connection failed: ", info: `{"httpConnectionFailed":{"httpStatusCode":null}}`},
		{name: "unauthorized", provider: "fake", step: `{"error":{"status":401,"message":"bad key","type":"invalid_request_error"}}`, attempts: 1,
			message: "unexpected status 401 Unauthorized: bad key", info: `"unauthorized"`},
		{name: "rate-limited", provider: "retry1", step: `{"error":{"status":429,"message":"Rate limit reached","type":"rate_limit_error","code":"rate_limit_exceeded","retry_after":"0"},"times":2}`, attempts: 2,
			message: "exceeded retry limit, last status: 429 Too Many Requests: Rate limit reached", info: `{"responseTooManyFailedAttempts":{"httpStatusCode":429}}`},
		{name: "malformed", provider: "fake", step: `{"text":"some text here","chunks":2,"fail":{"kind":"malformed","after_events":3}}`, attempts: 1,
			message: "malformed response from the model provider: ", info: `"other"`},
		{name: "cut", provider: "fake", step: `{"text":"some text here","chunks":3,"fail":{"kind":"cut","after_events":4}}`, attempts: 1,
			message: "stream disconnected before completion: ", info: `"other"`},
	}
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[]}`)
			d := apptest.Start(t, append(storeArgs, bhProviderArgs(t, fake, "responses")...)...)
			r := d.RPC(t)
			other := d.RPC(t) // not subscribed: sees status broadcasts only
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					steps := []string{`{"match":{"user_text":"try again"},"text":"Recovered."}`}
					if tc.step != "" {
						steps = append([]string{tc.step}, steps...)
					}
					apptest.SetScript(t, fake, `{"steps":[`+strings.Join(steps, ",")+`]}`)
					threadID := apptest.StartThread(t, r, map[string]any{"modelProvider": tc.provider})
					turnID := bhStartTurn(t, r, threadID, "fail please")
					frames := r.Through(bhIsNote("turn/completed"))
					ms := apptest.MethodsOf(frames)
					require.Equal(t, "thread/status/changed", ms[0])
					require.Equal(t, "turn/started", ms[1])
					n := len(ms)
					require.Equal(t, []string{"thread/status/changed", "error", "turn/completed"}, ms[n-3:], "%v", ms)
					require.True(t, bhIsStatus(t, threadID, "systemError")(frames[n-3]))

					errNote := apptest.Decode[struct {
						Error     map[string]json.RawMessage `json:"error"`
						WillRetry *bool                      `json:"willRetry"`
						ThreadID  string                     `json:"threadId"`
						TurnID    string                     `json:"turnId"`
					}](t, frames[n-2].Params)
					require.NotNil(t, errNote.WillRetry)
					require.False(t, *errNote.WillRetry)
					require.Equal(t, threadID, errNote.ThreadID)
					require.Equal(t, turnID, errNote.TurnID)
					var message string
					require.NoError(t, json.Unmarshal(errNote.Error["message"], &message))
					require.True(t, strings.HasPrefix(message, tc.message), "message %q", message)
					require.JSONEq(t, tc.info, string(errNote.Error["codexErrorInfo"]))
					for _, k := range []string{"additionalDetails", "misalignment"} {
						require.Contains(t, errNote.Error, k, "TurnError carries all four keys")
					}

					done := apptest.Decode[bhTurnNote](t, frames[n-1].Params)
					require.Equal(t, "failed", done.Turn.Status)
					require.Equal(t, turnID, done.Turn.ID)
					require.Equal(t, "notLoaded", done.Turn.ItemsView)
					require.Empty(t, done.Turn.Items)
					require.JSONEq(t, string(bhJSON(t, errNote.Error)), string(done.Turn.Error), "turn/completed carries the same TurnError")
					require.Equal(t, tc.attempts, len(fake.Requests()))

					// The unsubscribed client saw the status changes but no
					// error or turn notifications.
					seen := other.Through(bhIsStatus(t, threadID, "systemError"))
					for _, f := range seen {
						require.False(t, f.Method == "error" || strings.HasPrefix(f.Method, "turn/") || strings.HasPrefix(f.Method, "item/"), "%s leaked to an unsubscribed client", f.Method)
					}

					// systemError until the next turn.
					read := apptest.Decode[bhThreadResult](t, r.Call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true}))
					require.Equal(t, "systemError", read.Thread.Status.Type)
					require.Equal(t, "failed", read.Thread.Turns[0].Status)

					if tc.provider != "fake" {
						r.Call("thread/resume", map[string]any{"threadId": threadID, "modelProvider": "fake"})
					}
					turn2 := bhStartTurn(t, r, threadID, "try again")
					frames = r.Through(bhIsNote("turn/completed"))
					require.True(t, bhIsStatus(t, threadID, "active")(frames[0]), "%s", frames[0].Params)
					require.True(t, bhIsStatus(t, threadID, "idle")(frames[len(frames)-2]))
					done = apptest.Decode[bhTurnNote](t, frames[len(frames)-1].Params)
					require.Equal(t, turn2, done.Turn.ID)
					require.Equal(t, "completed", done.Turn.Status)
					require.Equal(t, "Recovered.", done.Turn.Items[0].Text)
					read = apptest.Decode[bhThreadResult](t, r.Call("thread/read", map[string]any{"threadId": threadID}))
					require.Equal(t, "idle", read.Thread.Status.Type)
					reqs := fake.Requests()
					bhWellFormed(t, reqs[len(reqs)-1].Body)
					_, _, users := bhRequestHistory(t, reqs[len(reqs)-1].Body)
					require.Equal(t, []string{"fail please", "try again"}, users)
					other.Through(bhIsStatus(t, threadID, "idle"))
				})
			}
		})
	}
}

func bhJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// --- 6: fork ---

func TestBehaviourFork(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[
				{"match":{"user_text":"one"},"text":"Answer one."},
				{"match":{"user_text":"two"},"text":"Answer two."},
				{"match":{"user_text":"fork question"},"text":"Fork answer.","times":2},
				{"match":{"user_text":"three"},"text":"partial words that never finish","chunks":4,"fail":{"kind":"stall","after_events":4}}],
				"exhausted_text":"Fork answer."}`)
			d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, "responses")...)...)
			r := d.RPC(t)
			src := apptest.StartThread(t, r, nil)
			t1 := apptest.RunTurn(t, r, src, "question one")
			require.Equal(t, "completed", t1.Turn.Status)
			t2 := apptest.RunTurn(t, r, src, "question two")
			require.Equal(t, "completed", t2.Turn.Status)
			r.Methods()

			fork := func(params map[string]any) bhThread {
				t.Helper()
				id := r.Request("thread/fork", params)
				before := r.Through(bhIsResponse(id))
				resp := before[len(before)-1]
				require.Nil(t, resp.Error, "%+v", resp.Error)
				for _, f := range before {
					require.NotEqual(t, "thread/started", f.Method, "thread/started follows the response")
				}
				res := apptest.Decode[bhThreadResult](t, resp.Result)
				started := r.Through(bhIsNote("thread/started"))
				require.Equal(t, res.Thread.ID, apptest.Decode[bhThreadResult](t, started[len(started)-1].Params).Thread.ID)
				return res.Thread
			}

			all := fork(map[string]any{"threadId": src})
			require.NotEqual(t, src, all.ID)
			require.NotNil(t, all.ForkedFromID)
			require.Equal(t, src, *all.ForkedFromID)
			require.Len(t, all.Turns, 2)
			require.Equal(t, t1.Turn.ID, all.Turns[0].ID)
			require.Equal(t, t2.Turn.ID, all.Turns[1].ID)
			require.Equal(t, "Answer two.", all.Turns[1].Items[len(all.Turns[1].Items)-1].Text)

			part := fork(map[string]any{"threadId": src, "lastTurnId": t1.Turn.ID})
			require.NotEqual(t, all.ID, part.ID)
			require.Equal(t, src, *part.ForkedFromID)
			require.Len(t, part.Turns, 1)
			require.Equal(t, t1.Turn.ID, part.Turns[0].ID)

			// The forks run turns on the copied history.
			tr := apptest.RunTurn(t, r, all.ID, "fork question")
			require.Equal(t, "completed", tr.Turn.Status)
			reqs := fake.Requests()
			body := string(reqs[len(reqs)-1].Body)
			_, _, users := bhRequestHistory(t, reqs[len(reqs)-1].Body)
			require.Equal(t, []string{"question one", "question two", "fork question"}, users)
			require.Contains(t, body, "Answer one.")
			require.Contains(t, body, "Answer two.")

			tr = apptest.RunTurn(t, r, part.ID, "partial fork question")
			require.Equal(t, "completed", tr.Turn.Status)
			reqs = fake.Requests()
			body = string(reqs[len(reqs)-1].Body)
			_, _, users = bhRequestHistory(t, reqs[len(reqs)-1].Body)
			require.Equal(t, []string{"question one", "partial fork question"}, users)
			require.Contains(t, body, "Answer one.")
			require.NotContains(t, body, "Answer two.")

			// The source is untouched.
			read := apptest.Decode[bhThreadResult](t, r.Call("thread/read", map[string]any{"threadId": src, "includeTurns": true}))
			require.Len(t, read.Thread.Turns, 2)
			require.Nil(t, read.Thread.ForkedFromID)

			code, msg := bhError(t, r, "thread/fork", map[string]any{"threadId": src, "lastTurnId": "no-such-turn"})
			require.Equal(t, -32600, code)
			require.Contains(t, msg, "no-such-turn")

			// Forking mid-turn: the copy ends as if the running turn had
			// been interrupted; forking through the running turn fails.
			t3 := bhStartTurn(t, r, src, "question three")
			bhFirstDelta(t, r, t3)
			code, msg = bhError(t, r, "thread/fork", map[string]any{"threadId": src, "lastTurnId": t3})
			require.Equal(t, -32600, code)
			require.Equal(t, "cannot fork through turn "+t3+": it is still running", msg)
			mid := fork(map[string]any{"threadId": src})
			require.Len(t, mid.Turns, 3)
			require.Equal(t, t3, mid.Turns[2].ID)
			require.Equal(t, "interrupted", mid.Turns[2].Status)
			r.Call("turn/interrupt", map[string]any{"threadId": src, "turnId": t3})
			r.Through(bhIsNote("turn/completed"))
			tr = apptest.RunTurn(t, r, mid.ID, "after mid fork")
			require.Equal(t, "completed", tr.Turn.Status)
			reqs = fake.Requests()
			_, _, users = bhRequestHistory(t, reqs[len(reqs)-1].Body)
			require.Equal(t, []string{"question one", "question two", "question three", "after mid fork"}, users)
			bhWellFormed(t, reqs[len(reqs)-1].Body)
			require.NotContains(t, string(reqs[len(reqs)-1].Body), "partial words")
		})
	}
}

// --- 7: archive, unarchive, list ---

type bhListResult struct {
	Data []struct {
		ID     string `json:"id"`
		Status struct {
			Type string `json:"type"`
		} `json:"status"`
	} `json:"data"`
	NextCursor *string `json:"nextCursor"`
}

func bhListIDs(t *testing.T, r *apptest.Client, params map[string]any) []string {
	t.Helper()
	res := apptest.Decode[bhListResult](t, r.Call("thread/list", params))
	var ids []string
	for _, th := range res.Data {
		ids = append(ids, th.ID)
	}
	return ids
}

func TestBehaviourArchiveAndList(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[],"exhausted_text":"ok"}`)
			d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, "responses")...)...)
			r := d.RPC(t)
			watcher := d.RPC(t) // subscribed to nothing
			var ids []string
			for i := range 5 {
				id := apptest.StartThread(t, r, nil)
				tr := apptest.RunTurn(t, r, id, fmt.Sprintf("thread number %d", i))
				require.Equal(t, "completed", tr.Turn.Status)
				ids = append(ids, id)
			}
			r.Methods()
			require.ElementsMatch(t, ids, bhListIDs(t, r, map[string]any{}))

			// Pagination visits each thread exactly once.
			visited := map[string]int{}
			var cursor any
			pages := 0
			for {
				res := apptest.Decode[bhListResult](t, r.Call("thread/list", map[string]any{"limit": 2, "cursor": cursor}))
				require.LessOrEqual(t, len(res.Data), 2)
				pages++
				for _, th := range res.Data {
					visited[th.ID]++
				}
				if res.NextCursor == nil {
					break
				}
				cursor = *res.NextCursor
				require.Less(t, pages, 10)
			}
			require.Equal(t, 3, pages)
			require.Len(t, visited, 5)
			for _, id := range ids {
				require.Equal(t, 1, visited[id], id)
			}
			// Descending creation order by default.
			require.Equal(t, []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, bhListIDs(t, r, map[string]any{}))

			code, msg := bhError(t, r, "thread/list", map[string]any{"cursor": "garbage!!"})
			require.Equal(t, -32600, code)
			require.True(t, strings.HasPrefix(msg, "invalid cursor: "), msg)

			// Archive a loaded thread: notLoaded before the response,
			// thread/archived after it, to every connection.
			victim := ids[2]
			id := r.Request("thread/archive", map[string]any{"threadId": victim})
			before := r.Through(bhIsResponse(id))
			require.Nil(t, before[len(before)-1].Error)
			require.JSONEq(t, `{}`, string(before[len(before)-1].Result))
			notLoaded := false
			for _, f := range before {
				require.NotEqual(t, "thread/archived", f.Method)
				notLoaded = notLoaded || bhIsStatus(t, victim, "notLoaded")(f)
			}
			require.True(t, notLoaded, "%v", apptest.MethodsOf(before))
			archived := r.Through(bhIsNote("thread/archived"))
			require.JSONEq(t, `{"threadId":"`+victim+`"}`, string(archived[len(archived)-1].Params))
			ws := watcher.Through(bhIsNote("thread/archived"))
			require.JSONEq(t, `{"threadId":"`+victim+`"}`, string(ws[len(ws)-1].Params))

			require.NotContains(t, bhListIDs(t, r, map[string]any{}), victim)
			require.Len(t, bhListIDs(t, r, map[string]any{}), 4)
			require.Equal(t, []string{victim}, bhListIDs(t, r, map[string]any{"archived": true}))
			require.NotContains(t, apptest.Decode[[]string](t, apptest.Decode[map[string]json.RawMessage](t, r.Call("thread/loaded/list", map[string]any{}))["data"]), victim)

			// Unarchive: {thread} notLoaded, then thread/unarchived.
			id = r.Request("thread/unarchive", map[string]any{"threadId": victim})
			before = r.Through(bhIsResponse(id))
			resp := before[len(before)-1]
			require.Nil(t, resp.Error)
			for _, f := range before {
				require.NotEqual(t, "thread/unarchived", f.Method)
			}
			un := apptest.Decode[bhThreadResult](t, resp.Result)
			require.Equal(t, victim, un.Thread.ID)
			require.Equal(t, "notLoaded", un.Thread.Status.Type)
			unarchived := r.Through(bhIsNote("thread/unarchived"))
			require.JSONEq(t, `{"threadId":"`+victim+`"}`, string(unarchived[len(unarchived)-1].Params))
			watcher.Through(bhIsNote("thread/unarchived"))
			require.Contains(t, bhListIDs(t, r, map[string]any{}), victim)
			require.Empty(t, bhListIDs(t, r, map[string]any{"archived": true}))

			// The unarchived thread loads again and works.
			r.Call("thread/resume", map[string]any{"threadId": victim})
			tr := apptest.RunTurn(t, r, victim, "back again")
			require.Equal(t, "completed", tr.Turn.Status)

			// Archiving a thread mid-turn interrupts the turn first.
			apptest.SetScript(t, fake, `{"steps":[{"text":"partial words that never finish","chunks":4,"fail":{"kind":"stall","after_events":4}}]}`)
			busy := ids[0]
			r.Call("thread/resume", map[string]any{"threadId": busy})
			turnID := bhStartTurn(t, r, busy, "long work")
			bhFirstDelta(t, r, turnID)
			before = r.Through(bhIsResponse(r.Request("thread/archive", map[string]any{"threadId": busy})))
			require.Nil(t, before[len(before)-1].Error)
			var order []string
			for _, f := range before {
				switch {
				case f.Method == "turn/completed":
					require.Equal(t, "interrupted", apptest.Decode[bhTurnNote](t, f.Params).Turn.Status)
					order = append(order, "turn/completed")
				case bhIsStatus(t, busy, "notLoaded")(f):
					order = append(order, "notLoaded")
				}
			}
			require.Equal(t, []string{"turn/completed", "notLoaded"}, order)
			r.Through(bhIsNote("thread/archived"))
			require.Equal(t, []string{busy}, bhListIDs(t, r, map[string]any{"archived": true}))
			read := apptest.Decode[bhThreadResult](t, r.Call("thread/read", map[string]any{"threadId": busy, "includeTurns": true}))
			require.Equal(t, "notLoaded", read.Thread.Status.Type)
			require.Equal(t, "interrupted", read.Thread.Turns[len(read.Thread.Turns)-1].Status)
		})
	}
}

// --- 8: two clients on one thread ---

// bhTurnStream is the turn and item notifications of frames, with the
// emission timestamp removed, in order.
func bhTurnStream(frames []apptest.Frame) []string {
	var out []string
	for _, f := range frames {
		if strings.HasPrefix(f.Method, "turn/") || strings.HasPrefix(f.Method, "item/") || f.Method == "thread/tokenUsage/updated" {
			out = append(out, f.Method+" "+string(f.Params))
		}
	}
	return out
}

func TestBehaviourTwoClientsOneThread(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[{"reasoning":{"summary":["Thinking."],"chunks":2},"text":"Shared answer for all.","chunks":4,
				"tool_calls":[{"call_id":"call_s","name":"update_plan","arguments":{"plan":[{"step":"S","status":"completed"}]}}]},
				{"text":"Done, shared.","chunks":2}]}`)
			d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, "responses")...)...)
			a := d.RPC(t)
			b := d.RPC(t)
			c := d.RPC(t)
			threadID := apptest.StartThread(t, a, nil)
			b.Through(bhIsNote("thread/started"))
			c.Through(bhIsNote("thread/started"))
			res := apptest.Decode[bhThreadResult](t, b.Call("thread/resume", map[string]any{"threadId": threadID}))
			require.Equal(t, threadID, res.Thread.ID)
			a.Methods()

			turnID := bhStartTurn(t, a, threadID, "shared work")
			fa := a.Through(bhIsNote("turn/completed"))
			fb := b.Through(bhIsNote("turn/completed"))
			sa, sb := bhTurnStream(fa), bhTurnStream(fb)
			require.Equal(t, sa, sb, "both subscribers see the same ordered stream")
			require.True(t, strings.HasPrefix(sa[0], "turn/started "), sa[0])
			require.Contains(t, strings.Join(apptest.MethodsOf(fa), ","), "item/agentMessage/delta")
			require.Contains(t, strings.Join(apptest.MethodsOf(fa), ","), "turn/plan/updated")
			require.Equal(t, apptest.MethodsOf(fa), apptest.MethodsOf(fb))
			require.Equal(t, turnID, apptest.Decode[bhTurnNote](t, fa[len(fa)-1].Params).Turn.ID)

			// C sees the status and read state broadcasts (as the
			// reference sends them to every connection), and nothing else of
			// the turn.
			fc := c.Through(bhIsStatus(t, threadID, "idle"))
			active := false
			for _, f := range fc {
				require.Contains(t, []string{"thread/status/changed", "thread/readState/changed"}, f.Method, "%s reached an unsubscribed client", f.Method)
				active = active || bhIsStatus(t, threadID, "active")(f)
			}
			require.True(t, active)

			// After unsubscribing, B stops getting turn notifications but
			// still gets the status and read state broadcasts.
			require.JSONEq(t, `{"status":"unsubscribed"}`, string(b.Call("thread/unsubscribe", map[string]any{"threadId": threadID})))
			bhStartTurn(t, a, threadID, "again")
			a.Through(bhIsNote("turn/completed"))
			fb = b.Through(bhIsStatus(t, threadID, "idle"))
			for _, f := range fb {
				require.Contains(t, []string{"thread/status/changed", "thread/readState/changed"}, f.Method)
			}
		})
	}
}

// A connection that does not follow a thread gets its status broadcasts
// before anything it is sent after them: here the answer to a request
// made once they were broadcast, which must not overtake them though the
// broadcasts may wait for the connection's next frame (docs/protocol.md
// §2.5).
func TestBehaviourDistantBroadcastsGoBeforeALaterAnswer(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"text":"One.","chunks":2},{"text":"Two.","chunks":2},{"text":"Three.","chunks":2}]}`)
	d := apptest.Start(t, apptest.FakeArgs(fake, "responses")...)
	a, c := d.RPC(t), d.RPC(t)
	threadID := apptest.StartThread(t, a, nil)
	c.Through(bhIsNote("thread/started"))
	// Within the broadcasts' delay (20 ms at least) the answer would come
	// first if it could overtake them; on a machine slow enough to take
	// longer, the check passes either way. Three turns make that less
	// likely.
	for i := range 3 {
		bhStartTurn(t, a, threadID, fmt.Sprint("work ", i))
		a.Through(bhIsStatus(t, threadID, "idle")) // broadcast to c too by now
		id := c.Request("thread/loaded/list", map[string]any{})
		frames := c.Through(bhIsResponse(id))
		var seen []string
		for _, f := range frames {
			if bhIsStatus(t, threadID, "active")(f) {
				seen = append(seen, "active")
			}
			if bhIsStatus(t, threadID, "idle")(f) {
				seen = append(seen, "idle")
			}
		}
		require.Equal(t, []string{"active", "idle"}, seen, "turn %d: frames before the answer: %v", i, apptest.MethodsOf(frames))
	}
}

// --- 9: reading threads and turns ---

func TestBehaviourReadAndListTurns(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[
				{"text":"First, a plan.","tool_calls":[{"call_id":"call_r","name":"update_plan","arguments":{"plan":[{"step":"R","status":"completed"}]}}]},
				{"match":{"call_output":"call_r"},"reasoning":{"summary":["Summing up."]},"text":"Final of turn one."},
				{"text":"Final of turn two."}]}`)
			d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, "responses")...)...)
			r := d.RPC(t)
			other := d.RPC(t)
			threadID := apptest.StartThread(t, r, nil)

			code, msg := bhError(t, r, "thread/turns/list", map[string]any{"threadId": threadID})
			require.Equal(t, -32600, code)
			require.Equal(t, "thread "+threadID+" is not materialized yet; thread/turns/list is unavailable before first user message", msg)

			t1 := apptest.RunTurn(t, r, threadID, "turn one")
			require.Equal(t, "completed", t1.Turn.Status)
			t2 := apptest.RunTurn(t, r, threadID, "turn two")
			require.Equal(t, "completed", t2.Turn.Status)

			read := apptest.Decode[bhThreadResult](t, r.Call("thread/read", map[string]any{"threadId": threadID}))
			require.Empty(t, read.Thread.Turns)
			require.Equal(t, "turn one", read.Thread.Preview)
			require.Equal(t, "idle", read.Thread.Status.Type)
			read = apptest.Decode[bhThreadResult](t, r.Call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true}))
			require.Len(t, read.Thread.Turns, 2)
			var types []string
			for _, it := range read.Thread.Turns[0].Items {
				types = append(types, it.Type)
			}
			require.Equal(t, []string{"userMessage", "agentMessage", "reasoning", "agentMessage"}, types)

			type turnsPage struct {
				Data []struct {
					ID        string `json:"id"`
					ItemsView string `json:"itemsView"`
					Items     []struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"items"`
				} `json:"data"`
				NextCursor *string `json:"nextCursor"`
			}
			page := apptest.Decode[turnsPage](t, r.Call("thread/turns/list", map[string]any{"threadId": threadID}))
			require.Len(t, page.Data, 2)
			require.Equal(t, t2.Turn.ID, page.Data[0].ID, "newest first by default")
			require.Equal(t, t1.Turn.ID, page.Data[1].ID)
			first := page.Data[1]
			require.Equal(t, "summary", first.ItemsView)
			require.Len(t, first.Items, 2)
			require.Equal(t, "userMessage", first.Items[0].Type)
			require.Equal(t, "agentMessage", first.Items[1].Type)
			require.Equal(t, "Final of turn one.", first.Items[1].Text)

			page = apptest.Decode[turnsPage](t, r.Call("thread/turns/list", map[string]any{"threadId": threadID, "itemsView": "full", "sortDirection": "asc"}))
			require.Equal(t, t1.Turn.ID, page.Data[0].ID)
			require.Equal(t, "full", page.Data[0].ItemsView)
			require.Len(t, page.Data[0].Items, 4)
			page = apptest.Decode[turnsPage](t, r.Call("thread/turns/list", map[string]any{"threadId": threadID, "itemsView": "notLoaded", "limit": 1}))
			require.Len(t, page.Data, 1)
			require.Equal(t, "notLoaded", page.Data[0].ItemsView)
			require.Empty(t, page.Data[0].Items)
			require.NotNil(t, page.NextCursor)
			page = apptest.Decode[turnsPage](t, r.Call("thread/turns/list", map[string]any{"threadId": threadID, "limit": 1, "cursor": *page.NextCursor}))
			require.Len(t, page.Data, 1)
			require.Equal(t, t1.Turn.ID, page.Data[0].ID)

			// thread/name/set: {} and a broadcast to every connection.
			id := r.Request("thread/name/set", map[string]any{"threadId": threadID, "name": "My thread"})
			before := r.Through(bhIsResponse(id))
			require.JSONEq(t, `{}`, string(before[len(before)-1].Result))
			for _, f := range before {
				require.NotEqual(t, "thread/name/updated", f.Method)
			}
			want := `{"threadId":"` + threadID + `","threadName":"My thread"}`
			got := r.Through(bhIsNote("thread/name/updated"))
			require.JSONEq(t, want, string(got[len(got)-1].Params))
			got = other.Through(bhIsNote("thread/name/updated"))
			require.JSONEq(t, want, string(got[len(got)-1].Params))
			read = apptest.Decode[bhThreadResult](t, r.Call("thread/read", map[string]any{"threadId": threadID}))
			require.Equal(t, "My thread", *read.Thread.Name)

			// thread/loaded/list and thread/unsubscribe.
			loaded := apptest.Decode[struct {
				Data []string `json:"data"`
			}](t, r.Call("thread/loaded/list", map[string]any{}))
			require.Contains(t, loaded.Data, threadID)
			require.JSONEq(t, `{"status":"notSubscribed"}`, string(other.Call("thread/unsubscribe", map[string]any{"threadId": threadID})))
			require.JSONEq(t, `{"status":"unsubscribed"}`, string(r.Call("thread/unsubscribe", map[string]any{"threadId": threadID})))
			require.JSONEq(t, `{"status":"notSubscribed"}`, string(r.Call("thread/unsubscribe", map[string]any{"threadId": threadID})))
			require.JSONEq(t, `{"status":"notLoaded"}`, string(r.Call("thread/unsubscribe", map[string]any{"threadId": uuid.Must(uuid.NewV7()).String()})))

			// Ephemeral threads: not listed, readable while loaded.
			res := apptest.Decode[bhThreadResult](t, r.Call("thread/start", map[string]any{"cwd": t.TempDir(), "ephemeral": true}))
			eph := res.Thread
			require.True(t, eph.Ephemeral)
			require.Nil(t, eph.Path)
			r.Until("thread/started")
			tr := apptest.RunTurn(t, r, eph.ID, "ephemeral question")
			require.Equal(t, "completed", tr.Turn.Status)
			require.NotContains(t, bhListIDs(t, r, map[string]any{}), eph.ID)
			require.Contains(t, bhListIDs(t, r, map[string]any{}), threadID)
			read = apptest.Decode[bhThreadResult](t, r.Call("thread/read", map[string]any{"threadId": eph.ID, "includeTurns": true}))
			require.True(t, read.Thread.Ephemeral)
			require.Equal(t, "ephemeral question", read.Thread.Preview)
			require.Len(t, read.Thread.Turns, 1)
			items := apptest.Decode[struct {
				Data []struct {
					TurnID string `json:"turnId"`
					Item   struct {
						Type string `json:"type"`
					} `json:"item"`
				} `json:"data"`
			}](t, r.Call("thread/items/list", map[string]any{"threadId": eph.ID}))
			require.Len(t, items.Data, 2)
			require.Equal(t, "userMessage", items.Data[0].Item.Type)
			require.Equal(t, "agentMessage", items.Data[1].Item.Type)
			require.Equal(t, tr.Turn.ID, items.Data[1].TurnID)
			page = apptest.Decode[turnsPage](t, r.Call("thread/turns/list", map[string]any{"threadId": eph.ID}))
			require.Len(t, page.Data, 1)
		})
	}
}

// --- 10: params errors ---

func TestBehaviourParamsErrors(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	r := d.RPC(t)
	unknown := uuid.Must(uuid.NewV7()).String()
	cases := []struct {
		method string
		params any
		want   string
		prefix bool
	}{
		{"thread/resume", map[string]any{}, "Invalid request: missing field `threadId`", false},
		{"thread/resume", map[string]any{"threadId": "not-a-uuid"}, "invalid thread id: ", true},
		{"thread/read", map[string]any{"threadId": "zzz"}, "invalid thread id: ", true},
		{"turn/start", map[string]any{"threadId": "1234", "input": []any{}}, "invalid thread id: ", true},
		{"turn/start", map[string]any{"threadId": unknown, "input": bhText("hi")}, "thread not found: " + unknown, false},
		{"thread/read", map[string]any{"threadId": unknown}, "thread not loaded: " + unknown, false},
		{"thread/resume", map[string]any{"threadId": unknown}, "thread not found: " + unknown, false},
		{"thread/name/set", map[string]any{"threadId": unknown, "name": "x"}, "no rollout found for thread id " + unknown, false},
		{"turn/steer", map[string]any{"threadId": unknown, "input": bhText("x")}, "Invalid request: missing field `expectedTurnId`", false},
		{"turn/interrupt", map[string]any{"threadId": unknown}, "Invalid request: missing field `turnId`", false},
	}
	for _, tc := range cases {
		code, msg := bhError(t, r, tc.method, tc.params)
		require.Equal(t, -32600, code, "%s %v: %s", tc.method, tc.params, msg)
		if tc.prefix {
			require.True(t, strings.HasPrefix(msg, tc.want), "%s: %q", tc.method, msg)
		} else {
			require.Equal(t, tc.want, msg, tc.method)
		}
	}

	plain := bhNewRPCCaps(t, d, map[string]any{})
	code, msg := bhError(t, plain, "thread/start", map[string]any{"cwd": t.TempDir(), "dynamicTools": []any{}})
	require.Equal(t, -32600, code)
	require.Equal(t, "thread/start.dynamicTools requires experimentalApi capability", msg)
	// null is treated as absent.
	plain.Call("thread/start", map[string]any{"cwd": t.TempDir(), "dynamicTools": nil})
}

// Input that arrives as the model's last response ends (after its
// tokenUsage, while the turn is being settled) is never accepted and then
// dropped: turn/steer either adds it to the turn or is rejected, and
// turn/start either adds it to the turn or starts a new turn with it.
func TestBehaviourInputAtTurnEnd(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[],"exhausted_text":"Quick answer."}`)
			d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, "responses")...)...)
			r := d.RPC(t)
			threadID := apptest.StartThread(t, r, nil)
			joined := 0
			for i := range 16 {
				turnID := bhStartTurn(t, r, threadID, fmt.Sprintf("question %d", i))
				r.Through(bhIsNote("thread/tokenUsage/updated"))
				text := fmt.Sprintf("late input %d", i)
				target := turnID
				if i%2 == 0 {
					f := r.CallRaw("turn/steer", map[string]any{"threadId": threadID, "expectedTurnId": turnID, "input": bhText(text)})
					if f.Error != nil {
						require.Equal(t, "no active turn to steer", f.Error.Message)
						r.Through(bhIsNote("turn/completed"))
						continue
					}
					require.JSONEq(t, `{"turnId":"`+turnID+`"}`, string(f.Result))
				} else {
					target = apptest.Decode[apptest.TurnResult](t, r.Call("turn/start", map[string]any{"threadId": threadID, "input": bhText(text)})).Turn.ID
				}
				if target == turnID {
					joined++
				}
				frames := r.Through(func(f apptest.Frame) bool {
					return f.Method == "turn/completed" && apptest.Decode[bhTurnNote](t, f.Params).Turn.ID == target
				})
				found := false
				for _, fr := range frames {
					if fr.Method == "item/completed" {
						n := apptest.Decode[bhItemNote](t, fr.Params)
						if n.TurnID == target && n.Item.Type == "userMessage" && len(n.Item.Content) == 1 && n.Item.Content[0].Text == text {
							found = true
						}
					}
				}
				require.True(t, found, "round %d: input accepted but it never reached turn %s: %v", i, target, apptest.MethodsOf(frames))
				reqs := fake.Requests()
				_, _, users := bhRequestHistory(t, reqs[len(reqs)-1].Body)
				require.Equal(t, text, users[len(users)-1], "round %d: the model was asked again with the input", i)
				require.Equal(t, "completed", apptest.Decode[bhTurnNote](t, frames[len(frames)-1].Params).Turn.Status)
			}
			t.Logf("%d of 16 late inputs joined the running turn", joined)
		})
	}
}
