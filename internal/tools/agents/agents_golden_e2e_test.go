package agents_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// agentsGoldenScript is the flow of testdata/golden/reference/agents_turns.jsonl
// (see agents_capture.js there) for appserver's fake model: the parent
// spawns a child, waits for it, then answers (its request then ends with
// the note of the child's end, as the reference's did; the call_wait step
// answers a request without it). The child answers once the parent waits. The reference's capture
// waited with the child's id, which a script cannot know; the nickname
// names the same child here.
const agentsGoldenScript = `{"steps":[
	{"match":{"user_text":"<subagent_notification>"},"text":"Parent done."},
	{"match":{"user_text":"Spawn a helper"},"tool_calls":[{"call_id":"call_spawn","name":"multi_agent_v1.spawn_agent","arguments":{"message":"child task"}}]},
	{"match":{"user_text":"child task"},"delay_ms":300,"text":"The child answer."},
	{"match":{"call_output":"call_spawn"},"tool_calls":[{"call_id":"call_wait","name":"multi_agent_v1.wait_agent","arguments":{"targets":["Ada"],"timeout_ms":20000}}]},
	{"match":{"call_output":"call_wait"},"text":"Parent done."}
]}`

// agentsWireFrames picks, from one run's frames, what the test compares,
// in order: the collabAgentToolCall items as started and completed, the
// child's turn/started and any thread/started after the parent's turn
// began (the reference sends none for the child), normalised (the parent's thread is <thread>,
// its turn <turn>, the child's thread <child>).
func agentsWireFrames(t *testing.T, raw []string) []string {
	t.Helper()
	n := apptest.NewNormaliser()
	var picked []map[string]any
	parent := ""
	for _, data := range raw {
		var f map[string]any
		require.NoError(t, json.Unmarshal([]byte(data), &f), data)
		p, _ := f["params"].(map[string]any)
		switch f["method"] {
		case "turn/started":
			thread := p["threadId"].(string)
			if parent == "" {
				// The first turn is the parent's.
				parent = thread
				n.Name(thread, "<thread>")
				n.Name(p["turn"].(map[string]any)["id"].(string), "<turn>")
				continue
			}
			if thread == parent {
				continue
			}
			n.Name(thread, "<child>")
		case "item/started", "item/completed":
			if p["item"].(map[string]any)["type"] != "collabAgentToolCall" {
				continue
			}
		case "thread/started":
			if parent == "" {
				continue // the parent's own
			}
		default:
			continue
		}
		picked = append(picked, f)
	}
	var out []string
	for _, f := range picked {
		delete(f, "emittedAtMs")
		if it, ok := f["params"].(map[string]any)["item"].(map[string]any); ok {
			// The states are keyed by thread id, which the normaliser
			// leaves alone in keys.
			states := map[string]any{}
			for id, st := range it["agentsStates"].(map[string]any) {
				states[n.Names[id]] = st
			}
			it["agentsStates"] = states
		}
		out = append(out, n.Frame(f))
	}
	return out
}

// The collaboration items and the child's turn as the parent's client sees
// them match codex 0.169.0's for the same flow (spawn, wait, answer): the
// same fields, nulls and statuses, and the child's turn names the parent's
// turn as its rootTurnId.
func TestSubAgentWireMatchesReference(t *testing.T) {
	ref := agentsWireFrames(t, readGoldenRecv(t, filepath.Join("testdata", "golden", "reference", "agents_turns.jsonl")))
	require.Len(t, ref, 5, "spawn started and completed, the child's turn started, wait started and completed")

	fake := apptest.StartFake(t, agentsGoldenScript)
	// The capture's model slug, so that the spawn's item names the same
	// model.
	d := apptest.Start(t, append(append([]string{"--data-dir", t.TempDir(), "-c", "features.multi_agent=true"}, apptest.FakeArgs(fake, "responses")...),
		"-c", `model="fake-agents-model"`)...)
	r := d.RPC(t)
	parent := apptest.StartThread(t, r, nil)
	r.Seen = nil
	r.Call("turn/start", map[string]any{"threadId": parent, "input": []any{map[string]any{"type": "text", "text": "Spawn a helper", "text_elements": []any{}}}})
	agentsTurnEnd(t, r, parent)
	if d := apptest.DiffTranscripts(ref, agentsWireFrames(t, seenNotifications(t, r))); d != "" {
		t.Errorf("the sub-agent frames differ from the codex 0.169.0 reference (- reference, + appserver):\n%s", d)
	}

	// The parent's model is told of the child's end: its request after
	// wait_agent ends with the reference's note, after the wait's output.
	var golden struct {
		Last []apptest.ModelInput `json:"requests_last_input"`
	}
	readGoldenJSON(t, filepath.Join("testdata", "golden", "reference", "agents_model.json"), &golden)
	child := spawnedChild(t, r)
	reqs := apptest.ModelRequests(t, fake)
	last := reqs[len(reqs)-1].Input
	require.GreaterOrEqual(t, len(last), 2)
	require.Equal(t, "function_call_output", last[len(last)-2].Type)
	require.Equal(t, "call_wait", last[len(last)-2].CallID)
	want := golden.Last[len(golden.Last)-1]
	want.Content[0].Text = withNoteChild(t, want.Content[0].Text, child)
	require.Equal(t, want, last[len(last)-1])
}

// A parent that ended its turn before its child did is not woken: the
// note of the child's end waits in its history and comes before the
// user's message of its next turn, as codex 0.171.0 does
// (testdata/golden/reference/notify_idle_model.json).
func TestIdleParentHearsOfChildEndInItsNextTurn(t *testing.T) {
	var golden struct {
		Inputs []apptest.ModelInput `json:"second_turn_last_inputs"`
	}
	readGoldenJSON(t, filepath.Join("testdata", "golden", "reference", "notify_idle_model.json"), &golden)
	require.Len(t, golden.Inputs, 2)
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"Second prompt"},"text":"Second done."},
		{"match":{"user_text":"Spawn a helper"},"tool_calls":[{"call_id":"call_spawn","name":"multi_agent_v1.spawn_agent","arguments":{"message":"child task"}}]},
		{"match":{"user_text":"child task"},"delay_ms":300,"text":"The child answer."},
		{"match":{"call_output":"call_spawn"},"text":"Parent done."}
	]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir(), "-c", "features.multi_agent=true"}, apptest.FakeArgs(fake, "responses")...)...)
	r := d.RPC(t)
	parent := apptest.StartThread(t, r, nil)
	r.Call("turn/start", map[string]any{"threadId": parent, "input": []any{map[string]any{"type": "text", "text": "Spawn a helper", "text_elements": []any{}}}})
	agentsTurnEnd(t, r, parent)
	child := spawnedChild(t, r)
	agentsTurnEnd(t, r, child)
	require.Len(t, fake.Requests(), 3, "no turn of the parent's for the note")

	r.Call("turn/start", map[string]any{"threadId": parent, "input": []any{map[string]any{"type": "text", "text": "Second prompt", "text_elements": []any{}}}})
	agentsTurnEnd(t, r, parent)
	reqs := apptest.ModelRequests(t, fake)
	require.Len(t, reqs, 4)
	in := reqs[3].Input
	got := in[len(in)-2:]
	golden.Inputs[0].Content[0].Text = withNoteChild(t, golden.Inputs[0].Content[0].Text, child)
	require.Equal(t, golden.Inputs, got)
}

// spawnedChild is the thread id of the child the first spawn's item named.
func spawnedChild(t *testing.T, r *apptest.Client) string {
	t.Helper()
	for _, f := range r.Seen {
		if f.Method != "item/completed" {
			continue
		}
		var p struct {
			Item struct {
				Type      string   `json:"type"`
				Tool      string   `json:"tool"`
				Receivers []string `json:"receiverThreadIds"`
			} `json:"item"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &p))
		if p.Item.Type == "collabAgentToolCall" && p.Item.Tool == "spawnAgent" && len(p.Item.Receivers) == 1 {
			return p.Item.Receivers[0]
		}
	}
	t.Fatal("no spawn item")
	return ""
}

// withNoteChild puts child in place of the reference's child id in the
// text of a <subagent_notification>.
func withNoteChild(t *testing.T, note, child string) string {
	t.Helper()
	m := regexp.MustCompile(`"agent_path":"([^"]+)"`).FindStringSubmatch(note)
	require.NotNil(t, m, note)
	return strings.ReplaceAll(note, m[1], child)
}

// readGoldenJSON decodes a golden JSON file into v.
func readGoldenJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v))
}

// seenNotifications are the notifications r received, as the frames a
// capture keeps.
func seenNotifications(t *testing.T, r *apptest.Client) []string {
	t.Helper()
	var raw []string
	for _, f := range r.Seen {
		if f.Method == "" {
			continue // responses
		}
		b, err := json.Marshal(map[string]any{"method": f.Method, "params": f.Params})
		require.NoError(t, err)
		raw = append(raw, string(b))
	}
	return raw
}

// readGoldenRecv returns the frames a capture received, in order.
func readGoldenRecv(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, line := range apptest.ReadLines(t, path) {
		var rec struct {
			Dir   string          `json:"dir"`
			Frame json.RawMessage `json:"frame"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		if rec.Dir == "recv" {
			out = append(out, string(rec.Frame))
		}
	}
	return out
}
