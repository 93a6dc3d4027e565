package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// agentsGoldenScript is the flow of testdata/golden/reference/agents_turns.jsonl
// (see agents_capture.js there) for appserver's fake model: the parent
// spawns a child, waits for it, then answers. The reference's capture
// waited with the child's id, which a script cannot know; the nickname
// names the same child here.
const agentsGoldenScript = `{"steps":[
	{"match":{"user_text":"Spawn a helper"},"tool_calls":[{"call_id":"call_spawn","name":"multi_agent_v1.spawn_agent","arguments":{"message":"child task"}}]},
	{"match":{"user_text":"child task"},"text":"The child answer."},
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
	n := &goldenNormaliser{names: map[string]string{}}
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
				n.name(thread, "<thread>")
				n.name(p["turn"].(map[string]any)["id"].(string), "<turn>")
				continue
			}
			if thread == parent {
				continue
			}
			n.name(thread, "<child>")
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
				states[n.names[id]] = st
			}
			it["agentsStates"] = states
		}
		out = append(out, n.frame(f))
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

	fake := startFake(t, agentsGoldenScript)
	// The capture's model slug, so that the spawn's item names the same
	// model.
	d := startDaemon(t, append(append([]string{"--data-dir", t.TempDir(), "-c", "features.multi_agent=true"}, fakeArgs(fake, "responses")...),
		"-c", `model="fake-agents-model"`)...)
	r := newRPC(t, d)
	parent := startThread(t, r, nil)
	r.seen = nil
	r.call("turn/start", map[string]any{"threadId": parent, "input": []any{map[string]any{"type": "text", "text": "Spawn a helper", "text_elements": []any{}}}})
	agentsTurnEnd(t, r, parent)
	var raw []string
	for _, f := range r.seen {
		if f.Method == "" {
			continue // responses
		}
		b, err := json.Marshal(map[string]any{"method": f.Method, "params": f.Params})
		require.NoError(t, err)
		raw = append(raw, string(b))
	}
	if d := diffGoldenTranscripts(ref, agentsWireFrames(t, raw)); d != "" {
		t.Errorf("the sub-agent frames differ from the codex 0.169.0 reference (- reference, + appserver):\n%s", d)
	}
}

// readGoldenRecv returns the frames a capture received, in order.
func readGoldenRecv(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, line := range readGoldenLines(t, path) {
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
