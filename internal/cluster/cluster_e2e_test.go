package cluster_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/cluster"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/pgnotify"
	"github.com/appserver/appserver/internal/store/pgtest"
)

// clusterLeaseTTL is the daemons' lease_ttl in the cluster tests: short,
// so that failover is quick, yet three heartbeats long enough for a -race
// build on a loaded machine.
const clusterLeaseTTL = 2 * time.Second

// clusterScript drives the cluster tests; every step matches its input.
const clusterScript = `{"steps":[
	{"name":"first","match":{"user_text":"First"},"text":"First answer."},
	{"name":"slow","match":{"user_text":"Slow"},"event_delay_ms":150,"text":"A slow answer that takes seconds to stream in full.","chunks":30},
	{"name":"dies","match":{"user_text":"Dies"},"text":"This answer never finishes.","chunks":4,"fail":{"kind":"stall","after_events":5}},
	{"name":"paused","match":{"user_text":"Paused"},"event_delay_ms":200,"text":"Written by a node that lost its lease.","chunks":8},
	{"name":"next","match":{"user_text":"Next"},"text":"Next answer."},
	{"name":"steered","match":{"user_text":"Steered"},"times":2,"event_delay_ms":150,"text":"An answer to the steered input, streamed slowly enough to be interrupted.","chunks":30}
]}`

// Step index of "steered" in clusterScript.
const clusterStepSteered = 5

// TestClusterDaemons runs two daemons as subprocesses on one Postgres
// database, as a deployment with several replicas does.
func TestClusterDaemons(t *testing.T) {
	apptest.BuildBinary()
	start := func(t *testing.T, url string, fake *fakemodel.Server, node string, extra ...string) *apptest.Proc {
		t.Helper()
		args := append([]string{"--database-url", url, "--migrate", "--data-dir", t.TempDir(),
			"-c", `node_id="` + node + `"`, "-c", `lease_ttl="` + clusterLeaseTTL.String() + `"`}, apptest.FakeArgs(fake, "responses")...)
		args = append(args, extra...)
		p := apptest.StartProc(t, args...)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("daemon %s stderr:\n%s", node, p.Stderr)
			}
		})
		return p
	}
	client := func(t *testing.T, p *apptest.Proc) *apptest.Client {
		r := p.RPC(t)
		t.Cleanup(func() { _ = r.WS.CloseNow() })
		return r
	}

	// approvalPair starts daemons A and B on a fresh database with the
	// model playing script, a client of each, and a thread created on A
	// whose commands need approval.
	approvalPair := func(t *testing.T, script string, extra ...string) (b *apptest.Proc, ra, rb *apptest.Client, ws, threadID string) {
		url, fake := pgtest.URL(t), apptest.StartFake(t, script)
		a := start(t, url, fake, "a", extra...)
		b = start(t, url, fake, "b", extra...)
		ra, rb = client(t, a), client(t, b)
		ws = apptest.Workspace(t)
		return b, ra, rb, ws, apptest.StartThread(t, ra, apptest.ApprovalThread(ws))
	}

	t.Run("restarting one daemon leaves the other's turn running", func(t *testing.T) {
		url, fake := pgtest.URL(t), apptest.StartFake(t, clusterScript)
		a := start(t, url, fake, "a")
		b := start(t, url, fake, "b")
		ra := client(t, a)
		threadID := apptest.StartThread(t, ra, nil)
		turnID := apptest.StartTurn(t, ra, threadID, "Slow")
		ra.Until("item/agentMessage/delta")

		// B restarts while A streams: its start-up recovery sees A's live
		// lease and leaves the turn alone, and so do its periodic scans.
		b.Terminate(t)
		b = start(t, url, fake, "b")
		rb := client(t, b)
		turns := apptest.ReadTurns(t, rb, threadID)
		require.Len(t, turns, 1)
		require.Equal(t, "inProgress", turns[0].Status, "B's start-up recovery must not touch a turn running on A")
		for _, f := range ra.Seen {
			require.NotEqual(t, "turn/completed", f.Method, "A's turn must still run while B restarts")
		}

		done := ra.Until("turn/completed")
		var tr apptest.TurnResult
		require.NoError(t, json.Unmarshal(done.Params, &tr))
		require.Equal(t, turnID, tr.Turn.ID)
		require.Equal(t, "completed", tr.Turn.Status)
		turns = apptest.ReadTurns(t, rb, threadID)
		require.Equal(t, "completed", turns[0].Status)
		require.Len(t, turns[0].Items, 2, "the user message and the whole answer")
		require.Contains(t, string(turns[0].Items[1]), "A slow answer that takes seconds to stream in full.")
	})

	t.Run("a killed daemon's thread is taken over within the lease", func(t *testing.T) {
		url, fake := pgtest.URL(t), apptest.StartFake(t, clusterScript)
		a := start(t, url, fake, "a")
		b := start(t, url, fake, "b")
		ra := client(t, a)
		rb := client(t, b)
		threadID := apptest.StartThread(t, ra, nil)
		// B loads the thread before A runs its turns: its copy goes stale.
		rb.Call("thread/resume", map[string]any{"threadId": threadID})
		require.Equal(t, "completed", apptest.RunTurn(t, ra, threadID, "First").Turn.Status)
		// B's client hears A's turns through the event log: the first
		// turn's end must not pass for the dead turn's below.
		rb.Until("turn/completed")
		dead := apptest.StartTurn(t, ra, threadID, "Dies")
		ra.Until("item/agentMessage/delta")
		rb.Seen = nil
		a.Kill9(t)
		killed := time.Now()

		// B's failover scan interrupts the dead turn once the lease has
		// expired, and tells its clients. (B's client also hears A's own
		// notifications through the event log, the first turn's end among
		// them, possibly late: only the dead turn's end counts.)
		var completed apptest.Frame
		for {
			completed = rb.Until("turn/completed")
			if strings.Contains(string(completed.Params), dead) {
				break
			}
		}
		tookOver := time.Since(killed)
		require.Less(t, tookOver, clusterLeaseTTL+clusterLeaseTTL/4, "within lease_ttl, with slack")
		require.Contains(t, string(completed.Params), `"interrupted"`)
		turns := apptest.ReadTurns(t, rb, threadID)
		require.Len(t, turns, 2)
		require.Equal(t, "interrupted", turns[1].Status)
		rb.Seen = nil

		// B runs the next turn with the history A wrote.
		next := apptest.RunTurn(t, rb, threadID, "Next")
		require.Equal(t, "completed", next.Turn.Status)
		for _, f := range rb.Seen {
			require.NotEqual(t, "turn/completed", f.Method, "the dead turn is announced once")
		}
		reqs := fake.Requests()
		last := reqs[len(reqs)-1]
		var body struct {
			Input []json.RawMessage `json:"input"`
		}
		require.NoError(t, last.Decode(&body))
		require.Contains(t, string(apptest.JSON(t, body.Input)), "First answer.", "B read again the thread A ran turns of")
		t.Logf("takeover %v after kill -9 (lease_ttl %v)", tookOver, clusterLeaseTTL)
	})

	t.Run("a client of another daemon steers and interrupts the turn", func(t *testing.T) {
		url, fake := pgtest.URL(t), apptest.StartFake(t, clusterScript)
		a := start(t, url, fake, "a")
		b := start(t, url, fake, "b")
		clusterSteerAndInterrupt(t, fake, client(t, a), client(t, b))
	})

	// A client of B cannot see A's approval request until the event log
	// fans A's notifications out to B; the answer's way back is tested
	// at the cluster API, with the test as the other node.
	t.Run("an approval asked by one daemon's turn is answered through another node", func(t *testing.T) {
		url, fake := pgtest.URL(t), apptest.StartFake(t, apptest.RunScript)
		a := start(t, url, fake, "a")
		ra := client(t, a)
		ws := apptest.Workspace(t)
		threadID := apptest.StartThread(t, ra, apptest.ApprovalThread(ws))
		ra.Call("turn/start", apptest.Input(threadID, "go"))
		req := ra.UntilInTurn("item/commandExecution/requestApproval")
		var requestID int64
		require.NoError(t, json.Unmarshal(req.ID, &requestID))

		pool, err := pgxpool.New(t.Context(), url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		notes, err := pgnotify.New(pgnotify.Config{Pool: pool})
		require.NoError(t, err)
		b, err := cluster.New(cluster.Config{Pool: pool, Notifier: notes, Events: clusterNoEvents{}, NodeID: "b", LeaseTTL: clusterLeaseTTL})
		require.NoError(t, err)
		require.NoError(t, notes.Start(t.Context()))
		t.Cleanup(notes.Stop)
		require.NoError(t, b.Start(t.Context()))
		t.Cleanup(b.Stop)
		ok, err := b.AnswerRequest(t.Context(), cluster.Answer{ThreadID: threadID, RequestID: requestID + 1, Result: json.RawMessage(`{"decision":"accept"}`)})
		require.True(t, ok)
		require.ErrorContains(t, err, "no pending request", "A's answer to a request it does not have")
		ok, err = b.AnswerRequest(t.Context(), cluster.Answer{ThreadID: threadID, RequestID: requestID, Result: json.RawMessage(`{"decision":"accept"}`)})
		require.NoError(t, err)
		require.True(t, ok)

		require.JSONEq(t, string(req.ID), string(apptest.Resolved(t, ra)), "A's own client is told the request is settled")
		require.Equal(t, "completed", apptest.TurnCompleted(t, ra).Turn.Status)
		require.Equal(t, "completed", apptest.CommandItem(t, ra, "call_run").Status)
		require.Equal(t, 1, apptest.Runs(t, ws), "the command ran once, accepted by the forwarded answer")
	})

	// A client of B sees the approval A's turn asks, under B's id, and its
	// answer is the one A's turn uses; A's own client, which got the
	// request too, is told it is settled. A declined approval runs nothing.
	for _, tc := range []struct {
		name   string
		answer map[string]any
		status string
		runs   int
	}{
		{"accepted", apptest.Accept, "completed", 1},
		{"declined", apptest.Decline, "declined", 0},
	} {
		t.Run("an approval of one daemon's turn "+tc.name+" by a client of another", func(t *testing.T) {
			b, ra, rb, ws, threadID := approvalPair(t, apptest.RunScript)
			rb.Call("thread/resume", map[string]any{"threadId": threadID})
			ra.Call("turn/start", apptest.Input(threadID, "go"))

			onA := ra.UntilInTurn("item/commandExecution/requestApproval")
			onB := rb.UntilInTurn("item/commandExecution/requestApproval")
			require.JSONEq(t, string(onA.Params), string(onB.Params), "B presents A's request as it is")
			answered := time.Now()
			rb.Reply(onB.ID, tc.answer)

			require.JSONEq(t, string(onA.ID), string(apptest.Resolved(t, ra)), "A's client sees the request withdrawn")
			t.Logf("answer on B to withdrawal on A: %v", time.Since(answered))
			require.JSONEq(t, string(onB.ID), string(apptest.Resolved(t, rb)), "B's client is told under B's id")
			require.Equal(t, "completed", apptest.TurnCompleted(t, ra).Turn.Status)
			require.Equal(t, tc.status, apptest.CommandItem(t, ra, "call_run").Status)
			require.Equal(t, "completed", apptest.TurnCompleted(t, rb).Turn.Status)
			require.Equal(t, tc.runs, apptest.Runs(t, ws))

			// The log's entries that carry the request between daemons
			// reach no client, live or replayed.
			rc := client(t, b)
			rc.Call("thread/resume", map[string]any{"threadId": threadID, "afterSeq": 0})
			rc.Until("turn/completed")
			for _, f := range append(append(ra.Seen, rb.Seen...), rc.Seen...) {
				require.False(t, strings.HasPrefix(f.Method, "appserver/"), "a client got %s", f.Method)
			}
			require.Contains(t, apptest.MethodsOf(rc.Seen), "serverRequest/resolved", "the replay has what clients see")
		})
	}

	// A client that joins the thread on B while the approval is pending
	// gets it from A, and answers it.
	t.Run("a client joining on another daemon gets the pending approval", func(t *testing.T) {
		_, ra, rb, ws, threadID := approvalPair(t, apptest.RunScript)
		ra.Call("turn/start", apptest.Input(threadID, "go"))
		onA := ra.UntilInTurn("item/commandExecution/requestApproval")
		rb.Call("thread/resume", map[string]any{"threadId": threadID})
		onB := rb.UntilInTurn("item/commandExecution/requestApproval")
		require.JSONEq(t, string(onA.Params), string(onB.Params))
		rb.Reply(onB.ID, apptest.Accept)
		require.JSONEq(t, string(onA.ID), string(apptest.Resolved(t, ra)))
		require.Equal(t, "completed", apptest.TurnCompleted(t, ra).Turn.Status)
		require.Equal(t, 1, apptest.Runs(t, ws))
	})

	// Only a client of B holds the approval, and it answers after A's
	// no-client timeout: A waits for it, since B told A its client holds
	// the request.
	t.Run("an approval held only by a client of another daemon waits for its answer", func(t *testing.T) {
		const noClient = time.Second
		// The model asks after a pause, by when A's client has left.
		_, ra, rb, ws, threadID := approvalPair(t,
			`{"steps":[{"event_delay_ms":300,"tool_calls":[`+apptest.ShellCall("call_run", "echo run >> runs.txt")+`]},
			{"match":{"call_output":"call_run"},"text":"done"}]}`,
			"-c", `approval_client_timeout="`+noClient.String()+`"`)
		rb.Call("thread/resume", map[string]any{"threadId": threadID})
		ra.Call("turn/start", apptest.Input(threadID, "go"))
		ra.Call("thread/unsubscribe", map[string]any{"threadId": threadID})

		onB := rb.UntilInTurn("item/commandExecution/requestApproval")
		// Past the timeout, the behaviour under test.
		time.Sleep(2 * noClient)
		rb.Reply(onB.ID, apptest.Accept)
		require.JSONEq(t, string(onB.ID), string(apptest.Resolved(t, rb)))
		require.Equal(t, "completed", apptest.TurnCompleted(t, rb).Turn.Status)
		require.Equal(t, "completed", apptest.CommandItem(t, rb, "call_run").Status)
		require.Equal(t, 1, apptest.Runs(t, ws))
	})

	// A dynamic tool call of A's turn, with no live client on A (the
	// turn was started over HTTP), goes to the live client on B, whose
	// answer the model gets.
	t.Run("a dynamic tool call of one daemon's turn is answered by a client of another", func(t *testing.T) {
		url := pgtest.URL(t)
		fake := apptest.StartFake(t, `{"steps":[
			{"tool_calls":[{"call_id":"call_w1","name":"lookup_weather","arguments":{"city":"Paris"}}]},
			{"match":{"call_output":"call_w1"},"text":"It is sunny in Paris."}]}`)
		a := start(t, url, fake, "a")
		b := start(t, url, fake, "b")
		ra, rb := client(t, a), client(t, b)
		threadID := apptest.StartThread(t, ra, map[string]any{"dynamicTools": []any{apptest.WeatherTool}})
		ra.Call("thread/unsubscribe", map[string]any{"threadId": threadID})
		rb.Call("thread/resume", map[string]any{"threadId": threadID})
		resp := apptest.Do(t, "POST", a.URL("/v1/threads/"+threadID+"/turns"), "",
			map[string]any{"input": []any{map[string]any{"type": "text", "text": "weather?"}}})
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
		_ = resp.Body.Close()

		call := rb.UntilInTurn("item/tool/call")
		require.Contains(t, string(call.Params), `"callId":"call_w1"`)
		rb.Reply(call.ID, map[string]any{"contentItems": []any{map[string]any{"type": "inputText", "text": "Sunny, 21C"}}, "success": true})
		require.Equal(t, "completed", apptest.TurnCompleted(t, rb).Turn.Status)
		reqs := fake.Requests()
		require.Len(t, reqs, 2)
		require.Contains(t, string(reqs[1].Body), "Sunny, 21C", "the model got B's answer")
	})

	t.Run("a paused daemon that lost its lease writes nothing", func(t *testing.T) {
		url, fake := pgtest.URL(t), apptest.StartFake(t, clusterScript)
		a := start(t, url, fake, "a")
		b := start(t, url, fake, "b")
		ra := client(t, a)
		rb := client(t, b)
		threadID := apptest.StartThread(t, ra, nil)
		turnID := apptest.StartTurn(t, ra, threadID, "Paused")
		ra.Until("item/agentMessage/delta")
		require.NoError(t, syscall.Kill(-a.Cmd.Process.Pid, syscall.SIGSTOP))
		resumed := false
		resume := func() {
			if !resumed {
				resumed = true
				_ = syscall.Kill(-a.Cmd.Process.Pid, syscall.SIGCONT)
			}
		}
		t.Cleanup(resume)

		// Past its lease, B takes the thread over.
		deadline := time.Now().Add(3 * clusterLeaseTTL)
		var turns []apptest.ReadTurn
		for {
			turns = apptest.ReadTurns(t, rb, threadID)
			if turns[0].Status == "interrupted" || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		require.Equal(t, "interrupted", turns[0].Status)
		before := turns[0].Items
		require.Len(t, before, 1, "the user message only: the answer was streaming")

		// A wakes up, finishes streaming and ends its turn: the database
		// refuses every write it makes, its answer and the turn's end. A
		// tells its client the end B stored, not one it could not store.
		resume()
		done := ra.Until("turn/completed")
		var ended apptest.TurnResult
		require.NoError(t, json.Unmarshal(done.Params, &ended))
		require.Equal(t, turnID, ended.Turn.ID)
		require.Equal(t, "interrupted", ended.Turn.Status, "A announces the end the new owner stored")
		require.Nil(t, ended.Turn.Error)
		for _, f := range ra.Seen {
			require.NotEqual(t, "error", f.Method, "A reports no failure of its own: %s", f.Params)
		}
		// A ping through A: everything it did after waking is behind it;
		// and a retry of the refused end (the turn-end retrier starts at
		// 100 ms) must not come after it either, once the lease is gone.
		ra.Call("thread/loaded/list", map[string]any{})
		time.Sleep(500 * time.Millisecond)
		turns = apptest.ReadTurns(t, rb, threadID)
		require.Equal(t, "interrupted", turns[0].Status)
		require.Equal(t, before, turns[0].Items, "A wrote nothing after it lost the lease")
		require.NotContains(t, a.Stderr.String(), "DATA RACE")
	})
}

// clusterSteerAndInterrupt is the forwarding subtest: a client of B
// steers and interrupts the turn A runs.
func clusterSteerAndInterrupt(t *testing.T, fake *fakemodel.Server, ra, rb *apptest.Client) {
	threadID := apptest.StartThread(t, ra, nil)
	turnID := apptest.StartTurn(t, ra, threadID, "Slow")
	ra.Until("item/agentMessage/delta")

	// turn/start on a thread busy on A joins A's turn, as it would on A.
	require.Equal(t, turnID, apptest.StartTurn(t, rb, threadID, "Steered by start"))
	var steered struct {
		TurnID string `json:"turnId"`
	}
	require.NoError(t, json.Unmarshal(rb.Call("turn/steer", map[string]any{
		"threadId": threadID, "expectedTurnId": turnID,
		"input": []any{map[string]any{"type": "text", "text": "Steered more"}},
	}), &steered))
	require.Equal(t, turnID, steered.TurnID)
	// A's errors come back with their message.
	bad := rb.CallRaw("turn/steer", map[string]any{
		"threadId": threadID, "expectedTurnId": "not-the-turn",
		"input": []any{map[string]any{"type": "text", "text": "Lost"}},
	})
	require.NotNil(t, bad.Error)
	require.Contains(t, bad.Error.Message, "expected active turn id `not-the-turn` but found `"+turnID+"`")

	// A takes the steered input into its next model request (the first
	// steer may have been sent in a request of its own already).
	for {
		f := ra.Until("item/completed")
		if strings.Contains(string(f.Params), `"userMessage"`) && strings.Contains(string(f.Params), "Steered more") {
			break
		}
	}
	// The input is in the history once its item completed, and goes out
	// with the next model request, after the one streaming now: wait for
	// that request before interrupting.
	carrying := func() (fakemodel.RecordedRequest, bool) {
		for _, r := range slices.Backward(fake.Requests()) {
			var body struct {
				Input []json.RawMessage `json:"input"`
			}
			if r.Decode(&body) == nil && strings.Contains(string(apptest.JSON(t, body.Input)), "Steered more") {
				return r, true
			}
		}
		return fakemodel.RecordedRequest{}, false
	}
	require.Eventually(t, func() bool { _, ok := carrying(); return ok }, 20*time.Second, 20*time.Millisecond,
		"no model request carries the steered input")
	rb.Call("turn/interrupt", map[string]any{"threadId": threadID, "turnId": turnID})
	var done apptest.TurnResult
	require.NoError(t, json.Unmarshal(ra.Until("turn/completed").Params, &done))
	require.Equal(t, turnID, done.Turn.ID)
	require.Equal(t, "interrupted", done.Turn.Status)

	last, _ := carrying()
	require.Equal(t, clusterStepSteered, last.Step)
	var body struct {
		Input []json.RawMessage `json:"input"`
	}
	require.NoError(t, last.Decode(&body))
	input := string(apptest.JSON(t, body.Input))
	require.Contains(t, input, "Steered by start")
	require.Contains(t, input, "Steered more")
	require.NotContains(t, input, "Lost")
}

// clusterNoEvents is the Events of a node the test plays: it runs no
// turns, so it is never told anything nor forwarded a request.
type clusterNoEvents struct{}

func (clusterNoEvents) LeaseLost(string)             {}
func (clusterNoEvents) TurnRecovered(string, string) {}
func (clusterNoEvents) Command(context.Context, string, json.RawMessage) (any, error) {
	return nil, apperr.New(apperr.Invalid, "the test's node runs no requests")
}
