package store_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/store/pgtest"
)

// A NUL byte in a command's output, in a model's call arguments and in a
// model's message never fails a turn, on either store: the turn completes,
// its items are stored as clients saw them (NUL included), the next turn
// completes, and after a restart the model gets the history back with the
// NUL in it.
func TestNULInTurnsIsStored(t *testing.T) {
	backends := map[string]func(t *testing.T) []string{
		"embedded": func(t *testing.T) []string { return []string{"--data-dir", t.TempDir()} },
		"postgres": func(t *testing.T) []string { return []string{"--database-url", pgtest.URL(t), "--migrate"} },
	}
	for name, storeArgs := range backends {
		t.Run(name, func(t *testing.T) {
			nulArgs, err := json.Marshal(map[string]any{"call_id": "call_arg", "name": "shell_command", "arguments": map[string]any{"command": "echo x\x00y"}})
			require.NoError(t, err)
			script := `{"steps":[
				{"match":{"user_text":"one"},"tool_calls":[` + apptest.ShellCall("call_nul", `printf 'a\0b'`) + `,` + string(nulArgs) + `]},
				{"match":{"call_output":"call_arg"},"text":"said \u0000 back","message_id":"msg\u0000id"},
				{"match":{"user_text":"two"},"text":"done two"},
				{"match":{"user_text":"three"},"text":"done three"}]}`
			fake := apptest.StartFake(t, script)
			args := append(storeArgs(t), apptest.FakeArgs(fake, "responses")...)
			d := apptest.Start(t, args...)
			r := d.RPC(t)
			threadID := apptest.StartThread(t, r, map[string]any{"sandbox": "workspace-write", "approvalPolicy": "never"})

			frames := apptest.Turn(t, r, apptest.Input(threadID, "one"), nil)
			var end apptest.TurnResult
			require.NoError(t, json.Unmarshal(frames[len(frames)-1].Params, &end))
			require.Equal(t, "completed", end.Turn.Status, "%+v", end.Turn.Error)
			done := apptest.Items(t, frames, "completed")
			require.Equal(t, referenceNULOutput(t), *done["call_nul"].AggregatedOutput, "clients get the NUL as the reference sends it")
			require.Contains(t, apptest.ModelOutput(t, fake, 1, "call_nul"), "a\x00b")

			tr := apptest.RunTurn(t, r, threadID, "two")
			require.Equal(t, "completed", tr.Turn.Status)

			// Stored as seen: the output, the message and its text.
			read := func(r *apptest.Client) []struct {
				Status string            `json:"status"`
				Items  []json.RawMessage `json:"items"`
			} {
				var res struct {
					Thread struct {
						Turns []struct {
							Status string            `json:"status"`
							Items  []json.RawMessage `json:"items"`
						} `json:"turns"`
					} `json:"thread"`
				}
				require.NoError(t, json.Unmarshal(r.Call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true}), &res))
				return res.Thread.Turns
			}
			turns := read(r)
			require.Len(t, turns, 2)
			require.Equal(t, "completed", turns[0].Status)
			var stored []string
			for _, raw := range turns[0].Items {
				stored = append(stored, string(raw))
			}
			all := strings.Join(stored, "\n")
			require.Contains(t, all, `"aggregatedOutput":"a\u0000b"`)
			require.Contains(t, all, `"text":"said \u0000 back"`)
			require.NotContains(t, all, "␀", "no escape reaches clients")

			// After a restart the history comes from the store: the model
			// gets the NUL back.
			d.Stop(t)
			d = apptest.Start(t, args...)
			r = d.RPC(t)
			r.Call("thread/resume", map[string]any{"threadId": threadID})
			tr = apptest.RunTurn(t, r, threadID, "three")
			require.Equal(t, "completed", tr.Turn.Status)
			reqs := fake.Requests()
			last := string(reqs[len(reqs)-1].Body)
			require.Contains(t, last, `a\u0000b`, "the command output replayed")
			require.Contains(t, last, `said \u0000 back`, "the message replayed")
			require.Contains(t, last, `x\\u0000y`, "the call arguments replayed")
			require.NotContains(t, last, "␀")
		})
	}
}

// referenceNULOutput is the aggregatedOutput codex 0.171.0 announced for
// `printf 'a\0b'` (nul_output.jsonl, made by nul_output_capture.js).
func referenceNULOutput(t *testing.T) string {
	t.Helper()
	for _, l := range apptest.ReferenceFrames(t, "nul_output.jsonl") {
		var f apptest.Frame
		require.NoError(t, json.Unmarshal(l.Frame, &f))
		if f.Method != "item/completed" {
			continue
		}
		var p struct {
			Item apptest.Item `json:"item"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &p))
		if p.Item.Type == "commandExecution" {
			require.Equal(t, "a\x00b", *p.Item.AggregatedOutput)
			return *p.Item.AggregatedOutput
		}
	}
	t.Fatal("no command item in the capture")
	return ""
}
