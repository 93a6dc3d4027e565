package agents_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/model/fakemodel"
)

// collabGoldenScript is the flow of
// testdata/golden/reference/collab_turns.jsonl (see collab_capture.js
// there) for appserver's fake model: the parent spawns a child with the v2
// collaboration tools, waits, lists its agents once told of the child's
// answer, then answers. The child answers once the parent waits.
const collabGoldenScript = `{"steps":[
	{"match":{"user_text":"Spawn a helper"},"tool_calls":[{"call_id":"call_spawn","name":"collaboration.spawn_agent","arguments":{"task_name":"helper","message":"child task","fork_turns":"none"}}]},
	{"match":{"user_text":"child task"},"delay_ms":300,"text":"The child answer."},
	{"match":{"call_output":"call_spawn"},"tool_calls":[{"call_id":"call_wait","name":"collaboration.wait_agent","arguments":{"timeout_ms":20000}}]},
	{"match":{"user_text":"Message Type: FINAL_ANSWER"},"tool_calls":[{"call_id":"call_list","name":"collaboration.list_agents","arguments":{}}]},
	{"match":{"call_output":"call_list"},"text":"Parent done."}
]}`

// collabWireFrames picks, from one run's frames, the parent's
// subAgentActivity and collabAgentToolCall items and the child's
// turn/started, normalised (the parent's thread is <thread>, its turn
// <turn>, the child's thread <child>; the id of the item that shows the
// child's end names the child's turn, which becomes <childTurn>).
func collabWireFrames(t *testing.T, raw []string) []string {
	t.Helper()
	n := apptest.NewNormaliser()
	var out []string
	parent, childTurn := "", ""
	for _, data := range raw {
		var f map[string]any
		require.NoError(t, json.Unmarshal([]byte(data), &f), data)
		p, _ := f["params"].(map[string]any)
		switch f["method"] {
		case "turn/started":
			thread := p["threadId"].(string)
			if parent == "" {
				parent = thread
				n.Name(thread, "<thread>")
				n.Name(p["turn"].(map[string]any)["id"].(string), "<turn>")
				continue
			}
			if thread == parent {
				continue
			}
			n.Name(thread, "<child>")
			childTurn = p["turn"].(map[string]any)["id"].(string)
		case "item/started", "item/completed":
			it := p["item"].(map[string]any)
			switch it["type"] {
			case "subAgentActivity":
				n.Name(it["agentThreadId"].(string), "<child>")
				if it["kind"] == "completed" {
					require.Equal(t, "subagent-completed-"+childTurn, it["id"])
					it["id"] = "subagent-completed-<childTurn>"
				}
			case "collabAgentToolCall":
			default:
				continue
			}
		default:
			continue
		}
		delete(f, "emittedAtMs")
		out = append(out, n.Frame(f))
	}
	return out
}

// The v2 collaboration tools as the parent's client and model see them
// match codex 0.171.0's for the same flow (spawn, wait, list, answer): a
// spawn is a subAgentActivity item naming the child's thread and task
// path, a wait a collabAgentToolCall item with no receivers, the child's
// turn names the parent's as its root, and its end is a subAgentActivity
// item of kind completed on the parent's turn during the wait; the tools' outputs and the child's
// final answer in the parent's history carry the reference's words.
func TestCollaborationMatchesReference(t *testing.T) {
	ref := collabWireFrames(t, readGoldenRecv(t, filepath.Join("testdata", "golden", "reference", "collab_turns.jsonl")))
	require.Len(t, ref, 7, "spawn started and completed, the child's turn started, wait started, the child's end started and completed, wait completed")
	var golden struct {
		Tools struct {
			Name  string `json:"name"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"collaboration_tools"`
		Last [][]apptest.ModelInput `json:"requests_last_inputs"`
	}
	readGoldenJSON(t, filepath.Join("testdata", "golden", "reference", "collab_model.json"), &golden)

	fake, frames := runCollab(t, collabGoldenScript)
	if d := apptest.DiffTranscripts(ref, frames); d != "" {
		t.Errorf("the collaboration frames differ from the codex 0.171.0 reference (- reference, + appserver):\n%s", d)
	}
	reqs := apptest.ModelRequests(t, fake)

	// The namespace offered is the reference's.
	var offered []string
	for _, raw := range reqs[0].Tools {
		var ns struct {
			Name  string `json:"name"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		require.NoError(t, json.Unmarshal(raw, &ns))
		if ns.Name == golden.Tools.Name {
			for _, tool := range ns.Tools {
				offered = append(offered, tool.Name)
			}
		}
	}
	var want []string
	for _, tool := range golden.Tools.Tools {
		want = append(want, tool.Name)
	}
	require.ElementsMatch(t, want, offered)

	// The outputs of spawn, wait and list, and the child's final answer
	// after the wait's output, in the reference's words.
	for _, callID := range []string{"call_spawn", "call_wait", "call_list"} {
		require.JSONEq(t, refOutput(t, golden.Last, callID), agentsCallOutput(t, fake, callID), callID)
	}
	var note string
	for _, rq := range reqs {
		in := rq.Input
		if len(in) >= 2 && in[len(in)-2].CallID == "call_wait" {
			require.Equal(t, "user", in[len(in)-1].Role)
			note = in[len(in)-1].Content[0].Text
		}
	}
	require.Equal(t, refFinalAnswer(t, golden.Last), note)
}

// refOutput is the output the reference's model was sent for callID.
func refOutput(t *testing.T, last [][]apptest.ModelInput, callID string) string {
	t.Helper()
	for _, in := range last {
		for _, it := range in {
			if it.Type == "function_call_output" && it.CallID == callID {
				var s string
				require.NoError(t, json.Unmarshal(it.Output, &s))
				return s
			}
		}
	}
	t.Fatalf("no output of %s in the reference", callID)
	return ""
}

// refFinalAnswer is the text of the child's final answer the reference's
// parent was sent (an agent_message item there).
func refFinalAnswer(t *testing.T, last [][]apptest.ModelInput) string {
	t.Helper()
	for _, in := range last {
		for _, it := range in {
			if it.Type == "agent_message" && strings.HasPrefix(it.Content[0].Text, "Message Type: FINAL_ANSWER") {
				return it.Content[0].Text
			}
		}
	}
	t.Fatal("no agent_message in the reference")
	return ""
}

// runCollab runs one parent turn ("Spawn a helper") on script with the v2
// tools on, and returns the fake model and the frames collabWireFrames
// picks.
func runCollab(t *testing.T, script string) (*fakemodel.Server, []string) {
	t.Helper()
	fake := apptest.StartFake(t, script)
	d := apptest.Start(t, append(append([]string{"--data-dir", t.TempDir(), "-c", "features.multi_agent_v2=true"}, apptest.FakeArgs(fake, "responses")...),
		"-c", `model="gpt-5.5"`)...)
	r := d.RPC(t)
	parent := apptest.StartThread(t, r, nil)
	r.Seen = nil
	r.Call("turn/start", map[string]any{"threadId": parent, "input": []any{map[string]any{"type": "text", "text": "Spawn a helper", "text_elements": []any{}}}})
	agentsTurnEnd(t, r, parent)
	return fake, collabWireFrames(t, seenNotifications(t, r))
}

// collabMoreScript is the flow of collab_more_turns.jsonl: the parent
// interrupts its working child, gives it a follow-up task, sends it a
// message, waits, then answers. The child answers its follow-up once the
// parent waits (again if the message reaches its running turn).
const collabMoreScript = `{"steps":[
	{"match":{"user_text":"Spawn a helper"},"tool_calls":[{"call_id":"call_spawn","name":"collaboration.spawn_agent","arguments":{"task_name":"helper","message":"child task","fork_turns":"none"}}]},
	{"match":{"user_text":"child task"},"delay_ms":3000,"text":"first answer"},
	{"match":{"call_output":"call_spawn"},"tool_calls":[{"call_id":"call_int","name":"collaboration.interrupt_agent","arguments":{"target":"helper"}}]},
	{"match":{"call_output":"call_int"},"tool_calls":[{"call_id":"call_follow","name":"collaboration.followup_task","arguments":{"target":"helper","message":"more work"}}]},
	{"match":{"user_text":"more work"},"delay_ms":1000,"text":"The child answer."},
	{"match":{"user_text":"a note"},"text":"The child answer."},
	{"match":{"call_output":"call_follow"},"tool_calls":[{"call_id":"call_send","name":"collaboration.send_message","arguments":{"target":"helper","message":"a note"}}]},
	{"match":{"call_output":"call_send"},"tool_calls":[{"call_id":"call_wait","name":"collaboration.wait_agent","arguments":{"timeout_ms":20000}}]},
	{"match":{"user_text":"Message Type: FINAL_ANSWER"},"text":"Parent done."}
]}`

// interrupt_agent, followup_task and send_message as codex 0.171.0 shows
// and answers them: a subAgentActivity item each (interrupted,
// interacted, interacted), the status from before (running) for the
// interrupt and nothing for the others; the interrupted turn tells the
// parent nothing, the follow-up's end is shown and told as a spawn's.
func TestCollaborationInteractionsMatchReference(t *testing.T) {
	ref := collabWireFrames(t, readGoldenRecv(t, filepath.Join("testdata", "golden", "reference", "collab_more_turns.jsonl")))
	var golden struct {
		Last [][]apptest.ModelInput `json:"requests_last_inputs"`
	}
	readGoldenJSON(t, filepath.Join("testdata", "golden", "reference", "collab_more_model.json"), &golden)
	fake, frames := runCollab(t, collabMoreScript)
	if d := apptest.DiffTranscripts(ref, frames); d != "" {
		t.Errorf("the collaboration frames differ from the codex 0.171.0 reference (- reference, + appserver):\n%s", d)
	}
	for _, callID := range []string{"call_int", "call_follow", "call_send", "call_wait"} {
		want := refOutput(t, golden.Last, callID)
		got := agentsCallOutput(t, fake, callID)
		if want == "" {
			require.Empty(t, got, callID)
			continue
		}
		require.JSONEq(t, want, got, callID)
	}
}

// A child spawned by the v2 tools is driven by its parent only: a client's
// turn/start and turn/steer on it are refused with the reference's words
// (its loaded thread says canAcceptDirectInput false) and reach no model.
func TestCollaborationChildRefusesDirectInput(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"Spawn a helper"},"tool_calls":[{"call_id":"call_spawn","name":"collaboration.spawn_agent","arguments":{"task_name":"helper","message":"child task","fork_turns":"none"}}]},
		{"match":{"user_text":"child task"},"text":"child done"},
		{"match":{"call_output":"call_spawn"},"text":"Parent done."}
	]}`)
	d := apptest.Start(t, append(append([]string{"--data-dir", t.TempDir(), "-c", "features.multi_agent_v2=true"}, apptest.FakeArgs(fake, "responses")...),
		"-c", `model="gpt-5.5"`)...)
	r := d.RPC(t)
	parent := apptest.StartThread(t, r, nil)
	r.Call("turn/start", map[string]any{"threadId": parent, "input": []any{map[string]any{"type": "text", "text": "Spawn a helper", "text_elements": []any{}}}})
	agentsTurnEnd(t, r, parent)

	var listed struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.Call("thread/list", map[string]any{"parentThreadId": parent}), &listed))
	require.Len(t, listed.Data, 1)
	child := listed.Data[0].ID
	var read struct {
		Thread struct {
			CanAcceptDirectInput *bool `json:"canAcceptDirectInput"`
		} `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(r.Call("thread/resume", map[string]any{"threadId": child}), &read))
	require.NotNil(t, read.Thread.CanAcceptDirectInput)
	require.False(t, *read.Thread.CanAcceptDirectInput)

	input := []any{map[string]any{"type": "text", "text": "from a client", "text_elements": []any{}}}
	code, msg := r.CallError("turn/start", map[string]any{"threadId": child, "input": input})
	require.Equal(t, -32600, code)
	require.Equal(t, "direct app-server input is not allowed for multi-agent v2 sub-agents", msg)
	code, msg = r.CallError("turn/steer", map[string]any{"threadId": child, "input": input, "expectedTurnId": "00000000-0000-0000-0000-000000000000"})
	require.Equal(t, -32600, code)
	require.Equal(t, "direct app-server input is not allowed for multi-agent v2 sub-agents", msg)
	for _, req := range fake.Requests() {
		require.False(t, strings.Contains(string(req.Body), "from a client"), "the refused input reached no model")
	}
}
