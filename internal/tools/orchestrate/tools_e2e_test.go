package orchestrate_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// Built-in tools end to end: a real websocket client, the scripted fake
// model and a real temp workspace. Every wait is on a notification or a
// response, never on a sleep.

// teReferenceTurns reads the reference capture (codex-cli 0.169.0 driven
// by testdata/golden/reference/tools_capture.js with tools_script.json as
// the model) and returns each turn's received frames, from after the
// turn/start response to turn/completed.
func teReferenceTurns(t *testing.T) [][]apptest.Frame {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "golden", "reference", "tools_turns.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	var turns [][]apptest.Frame
	var cur []apptest.Frame
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Dir   string        `json:"dir"`
			Frame apptest.Frame `json:"frame"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		if line.Dir != "recv" {
			continue
		}
		fr := line.Frame
		if fr.Method == "" && len(fr.Result) > 0 && strings.Contains(string(fr.Result), `"turn"`) && !in {
			in, cur = true, nil // the turn/start response
			continue
		}
		if !in {
			continue
		}
		cur = append(cur, fr)
		if fr.Method == "turn/completed" {
			turns = append(turns, cur)
			in = false
		}
	}
	require.NoError(t, sc.Err())
	require.Len(t, turns, 3)
	return turns
}

// teScript is the reference script (tools_script.json) with our shell
// tool: shell_command instead of the reference model's exec_command, and
// read_file pointed at the test's workspace.
func teScript(t *testing.T, ws string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "golden", "reference", "tools_script.json"))
	require.NoError(t, err)
	s := strings.ReplaceAll(string(raw), `"name":"exec_command","arguments":{"cmd":`, `"name":"shell_command","arguments":{"command":`)
	return strings.ReplaceAll(s, "/home/dev/project", ws)
}

// TestToolsReferenceScript is the "done when" turn and the two
// approval turns of the reference capture, run with the same model script:
// the fake model runs `echo hi` with the shell tool, edits notes.txt with
// apply_patch and reads it back with read_file; then, under untrusted, a
// command and a patch are approved; then a command is declined. Each
// turn's item types and notification order equal the real Codex's.
func TestToolsReferenceScript(t *testing.T) {
	ws := apptest.Workspace(t)
	fake, _, r := apptest.StartWithFake(t, teScript(t, ws))
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws, "sandbox": "workspace-write", "approvalPolicy": "on-request"})
	ref := teReferenceTurns(t)

	// Turn 1: shell, apply_patch, read_file; no approval needed.
	frames := apptest.Turn(t, r, apptest.Input(threadID, "Run the tools"), nil)
	require.Equal(t, apptest.Outline(t, ref[0]), apptest.Outline(t, frames))
	done := apptest.Items(t, frames, "completed")
	echo := done["call_echo"]
	require.Equal(t, "commandExecution", echo.Type)
	require.Equal(t, "completed", echo.Status)
	require.Regexp(t, `^/\S+ -lc 'echo hi'$`, echo.Command)
	require.Equal(t, ws, echo.Cwd)
	require.Equal(t, "agent", echo.Source)
	require.JSONEq(t, `{"type":"unknown","command":"echo hi"}`, string(echo.CommandActions[0]))
	require.NotNil(t, echo.ExitCode)
	require.Equal(t, 0, *echo.ExitCode)
	require.Contains(t, *echo.AggregatedOutput, "hi\n")
	require.NotNil(t, echo.DurationMs)
	var deltas strings.Builder
	for _, f := range apptest.Find(frames, "item/commandExecution/outputDelta") {
		var p struct {
			ItemID string `json:"itemId"`
			Delta  string `json:"delta"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &p))
		require.Equal(t, "call_echo", p.ItemID)
		deltas.WriteString(p.Delta)
	}
	require.Equal(t, *echo.AggregatedOutput, deltas.String(), "the streamed deltas add up to aggregatedOutput")

	refDone := apptest.Items(t, ref[0], "completed")
	patch := done["call_patch"]
	require.Equal(t, "fileChange", patch.Type)
	require.Equal(t, "completed", patch.Status)
	require.Len(t, patch.Changes, 1)
	require.Equal(t, filepath.Join(ws, "notes.txt"), patch.Changes[0].Path)
	require.JSONEq(t, string(refDone["call_patch"].Changes[0].Kind), string(patch.Changes[0].Kind))
	require.Equal(t, refDone["call_patch"].Changes[0].Diff, patch.Changes[0].Diff)
	diffs := apptest.Find(frames, "turn/diff/updated")
	refDiffs := apptest.Find(ref[0], "turn/diff/updated")
	require.Len(t, diffs, len(refDiffs))
	var got, want struct {
		Diff string `json:"diff"`
	}
	require.NoError(t, json.Unmarshal(diffs[0].Params, &got))
	require.NoError(t, json.Unmarshal(refDiffs[0].Params, &want))
	require.Equal(t, want.Diff, got.Diff, "the turn diff is byte for byte the reference's")

	b, err := os.ReadFile(filepath.Join(ws, "notes.txt"))
	require.NoError(t, err)
	require.Equal(t, "two\n", string(b))
	require.Contains(t, apptest.ModelOutput(t, fake, 1, "call_echo"), "Exit code: 0")
	require.Contains(t, apptest.ModelOutput(t, fake, 1, "call_echo"), "hi")
	require.Contains(t, apptest.ModelOutput(t, fake, 2, "call_patch"), "Success. Updated the following files:\nM notes.txt")
	require.Equal(t, "L1: two", apptest.ModelOutput(t, fake, 3, "call_read"), "read_file reads the patched file back")

	// The items are durable.
	items := string(r.Call("thread/items/list", map[string]any{"threadId": threadID}))
	require.Contains(t, items, `"type":"commandExecution"`)
	require.Contains(t, items, `"type":"fileChange"`)

	// Turn 2 (untrusted): a command and a patch, both approved.
	p := apptest.Input(threadID, "Ask first")
	p["approvalPolicy"] = "untrusted"
	var cmdReq struct {
		Kind                        string            `json:"kind"`
		ThreadID                    string            `json:"threadId"`
		ItemID                      string            `json:"itemId"`
		StartedAtMs                 int64             `json:"startedAtMs"`
		EnvironmentID               string            `json:"environmentId"`
		Command                     string            `json:"command"`
		Cwd                         string            `json:"cwd"`
		CommandActions              []json.RawMessage `json:"commandActions"`
		ProposedExecpolicyAmendment []string          `json:"proposedExecpolicyAmendment"`
		AvailableDecisions          []json.RawMessage `json:"availableDecisions"`
	}
	frames = apptest.Turn(t, r, p, func(f apptest.Frame) any {
		if f.Method == "item/commandExecution/requestApproval" {
			require.NoError(t, json.Unmarshal(f.Params, &cmdReq))
		}
		return map[string]any{"decision": "accept"}
	})
	require.Equal(t, apptest.Outline(t, ref[1]), apptest.Outline(t, frames))
	require.Equal(t, "command", cmdReq.Kind)
	require.Equal(t, threadID, cmdReq.ThreadID)
	require.Equal(t, "call_touch", cmdReq.ItemID)
	require.Equal(t, "local", cmdReq.EnvironmentID)
	require.Regexp(t, `-lc 'touch approved.txt'$`, cmdReq.Command)
	require.Equal(t, ws, cmdReq.Cwd)
	require.Equal(t, []string{"touch", "approved.txt"}, cmdReq.ProposedExecpolicyAmendment)
	require.Len(t, cmdReq.AvailableDecisions, 3)
	require.JSONEq(t, `{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["touch","approved.txt"]}}`, string(cmdReq.AvailableDecisions[1]))
	started := apptest.Items(t, frames, "started")
	require.Equal(t, cmdReq.StartedAtMs > 0, true)
	require.Equal(t, "inProgress", started["call_touch"].Status)
	require.FileExists(t, filepath.Join(ws, "approved.txt"))
	require.FileExists(t, filepath.Join(ws, "added.txt"))
	for _, rf := range apptest.Find(frames, "serverRequest/resolved") {
		require.Contains(t, string(rf.Params), threadID)
	}

	// Turn 3: the command is declined; the model reads the rejection.
	frames = apptest.Turn(t, r, apptest.Input(threadID, "Decline this"), func(apptest.Frame) any { return map[string]any{"decision": "decline"} })
	require.Equal(t, apptest.Outline(t, ref[2]), apptest.Outline(t, frames))
	require.Equal(t, "declined", apptest.Items(t, frames, "completed")["call_decl"].Status)
	require.NoFileExists(t, filepath.Join(ws, "declined.txt"))
	require.Equal(t, "exec command rejected by user", apptest.ModelOutput(t, fake, 8, "call_decl"))
}

func TestToolsApprovalAcceptForSession(t *testing.T) {
	ws := apptest.Workspace(t)
	script := `{"steps":[
		{"tool_calls":[` + apptest.ShellCall("call_a", "touch session.txt") + `]},
		{"match":{"call_output":"call_a"},"tool_calls":[` + apptest.ShellCall("call_b", "touch session.txt") + `]},
		{"match":{"call_output":"call_b"},"text":"twice"},
		{"match":{"user_text":"again"},"tool_calls":[` + apptest.ShellCall("call_c", "touch session.txt") + `]},
		{"match":{"call_output":"call_c"},"text":"thrice"}]}`
	_, _, r := apptest.StartWithFake(t, script)
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws, "approvalPolicy": "untrusted", "sandbox": "workspace-write"})
	asked := 0
	frames := apptest.Turn(t, r, apptest.Input(threadID, "go"), func(f apptest.Frame) any {
		asked++
		return map[string]any{"decision": "acceptForSession"}
	})
	require.Equal(t, 1, asked, "the second identical command is not asked again")
	done := apptest.Items(t, frames, "completed")
	require.Equal(t, "completed", done["call_a"].Status)
	require.Equal(t, "completed", done["call_b"].Status)
	require.Len(t, apptest.Find(frames, "serverRequest/resolved"), 1)

	// The approval is remembered for the thread, in the next turn too.
	frames = apptest.Turn(t, r, apptest.Input(threadID, "again"), nil)
	require.Equal(t, "completed", apptest.Items(t, frames, "completed")["call_c"].Status)
}

func TestToolsApprovalCancelInterruptsTurn(t *testing.T) {
	ws := apptest.Workspace(t)
	_, _, r := apptest.StartWithFake(t, apptest.CallScript(`[`+apptest.ShellCall("call_x", "touch cancelled.txt")+`]`, "call_x", "unreachable"))
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws, "approvalPolicy": "untrusted"})
	frames := apptest.Turn(t, r, apptest.Input(threadID, "go"), func(apptest.Frame) any { return map[string]any{"decision": "cancel"} })
	var tr apptest.TurnResult
	require.NoError(t, json.Unmarshal(frames[len(frames)-1].Params, &tr))
	require.Equal(t, "interrupted", tr.Turn.Status)
	require.Equal(t, "declined", apptest.Items(t, frames, "completed")["call_x"].Status)
	require.NoFileExists(t, filepath.Join(ws, "cancelled.txt"))
	norm := apptest.Outline(t, frames)
	require.Equal(t, []string{
		"thread/status/changed active[]", "turn/started",
		"item/started userMessage", "item/completed userMessage",
		"thread/status/changed active[waitingOnApproval]",
		"item/started commandExecution inProgress",
		"item/commandExecution/requestApproval",
		"serverRequest/resolved",
		"item/completed commandExecution declined",
		"thread/tokenUsage/updated", // the response's usage, reported after its calls
		"thread/status/changed idle[]",
		"turn/completed",
	}, norm)
}

// A JSON-RPC error answer (or an undecodable decision) fails the item; the
// turn goes on and the model is told.
func TestToolsApprovalErrorAnswerFailsItem(t *testing.T) {
	ws := apptest.Workspace(t)
	fake, _, r := apptest.StartWithFake(t, `{"steps":[
		{"tool_calls":[`+apptest.ShellCall("call_e", "touch e.txt")+`]},
		{"match":{"call_output":"call_e"},"tool_calls":[`+apptest.ShellCall("call_f", "touch f.txt")+`]},
		{"match":{"call_output":"call_f"},"text":"carried on"}]}`)
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws, "approvalPolicy": "untrusted"})
	n := 0
	r.Seen = nil
	r.Call("turn/start", apptest.Input(threadID, "go"))
	for {
		f := r.Until("item/commandExecution/requestApproval")
		n++
		if n == 1 {
			r.Send(map[string]any{"id": json.RawMessage(f.ID), "error": map[string]any{"code": -32000, "message": "client broke"}})
			continue
		}
		r.Reply(f.ID, map[string]any{"decision": "maybe"})
		break
	}
	var tr apptest.TurnResult
	require.NoError(t, json.Unmarshal(r.Until("turn/completed").Params, &tr))
	require.Equal(t, "completed", tr.Turn.Status)
	require.Contains(t, apptest.ModelOutput(t, fake, 1, "call_e"), "approval request failed")
	require.Contains(t, apptest.ModelOutput(t, fake, 2, "call_f"), "undecodable approval decision")
	items := string(r.Call("thread/items/list", map[string]any{"threadId": threadID}))
	require.Equal(t, 2, strings.Count(items, `"status":"failed"`), items)
	require.NoFileExists(t, filepath.Join(ws, "e.txt"))
	require.NoFileExists(t, filepath.Join(ws, "f.txt"))
}

// When no subscribed client can answer an approval, the call is declined
// after approval_client_timeout with a message the model can read; the
// turn does not hang.
func TestToolsApprovalWithoutClientDeclines(t *testing.T) {
	ws := apptest.Workspace(t)
	fake, d, a := apptest.StartWithFake(t, apptest.CallScript(`[`+apptest.ShellCall("call_n", "touch nobody.txt")+`]`, "call_n", "understood"),
		"-c", `approval_client_timeout="300ms"`)
	watcher := d.RPC(t) // never subscribes: sees the broadcast status changes only
	threadID := apptest.StartThread(t, a, map[string]any{"cwd": ws, "approvalPolicy": "untrusted"})
	a.Call("turn/start", apptest.Input(threadID, "go"))
	require.NoError(t, a.WS.CloseNow()) // the only client leaves, holding the request or not

	for {
		f := watcher.Until("thread/status/changed")
		var p struct {
			ThreadID string `json:"threadId"`
			Status   struct {
				Type string `json:"type"`
			} `json:"status"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &p))
		if p.ThreadID == threadID && p.Status.Type == "idle" {
			break
		}
	}
	require.Contains(t, apptest.ModelOutput(t, fake, 1, "call_n"), "no client is connected")
	turns := apptest.ReadTurns(t, watcher, threadID)
	require.Len(t, turns, 1)
	require.Equal(t, "completed", turns[0].Status)
	var cmd *apptest.Item
	for _, it := range turns[0].ItemsOf(t) {
		if it.Type == "commandExecution" {
			cmd = &it
		}
	}
	require.NotNil(t, cmd)
	require.Equal(t, "declined", cmd.Status)
	require.NoFileExists(t, filepath.Join(ws, "nobody.txt"))
}

// A fileChange approval that is declined: item started, flag, request,
// then the item completes declined and nothing is written.
func TestToolsPatchApprovalDecline(t *testing.T) {
	ws := apptest.Workspace(t)
	patch := `{"type":"custom","call_id":"call_p","name":"apply_patch","input":"*** Begin Patch\n*** Add File: no.txt\n+no\n*** End Patch\n"}`
	fake, _, r := apptest.StartWithFake(t, apptest.CallScript(`[`+patch+`]`, "call_p", "ok"))
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws}) // read-only: a patch in the cwd asks
	frames := apptest.Turn(t, r, apptest.Input(threadID, "go"), func(f apptest.Frame) any {
		require.Equal(t, "item/fileChange/requestApproval", f.Method)
		return map[string]any{"decision": "decline"}
	})
	require.Equal(t, []string{
		"thread/status/changed active[]", "turn/started",
		"item/started userMessage", "item/completed userMessage",
		"item/started fileChange inProgress",
		"thread/status/changed active[waitingOnApproval]",
		"item/fileChange/requestApproval",
		"serverRequest/resolved",
		"item/completed fileChange declined",
		"thread/status/changed active[]",
		"thread/tokenUsage/updated",
		"item/started agentMessage", "item/agentMessage/delta", "item/completed agentMessage",
		"thread/tokenUsage/updated", "thread/status/changed idle[]", "turn/completed",
	}, apptest.Outline(t, frames))
	require.NoFileExists(t, filepath.Join(ws, "no.txt"))
	require.Equal(t, "patch rejected by user", apptest.ModelOutput(t, fake, 1, "call_p"))
}

// Sandbox boundary through the tool path (workspace-write without /tmp):
// writing outside the cwd fails and the model sees the denial; writing
// inside works.
func TestToolsSandboxBoundary(t *testing.T) {
	ws := apptest.Workspace(t)
	outside, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	target := filepath.Join(outside, "escape.txt")
	fake, _, r := apptest.StartWithFake(t, `{"steps":[
		{"tool_calls":[`+apptest.ShellCall("call_out", "echo x > "+target)+`]},
		{"match":{"call_output":"call_out"},"tool_calls":[`+apptest.ShellCall("call_in", "echo y > inside.txt")+`]},
		{"match":{"call_output":"call_in"},"text":"done"}]}`)
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws})
	p := apptest.Input(threadID, "go")
	p["approvalPolicy"] = "on-request"
	p["sandboxPolicy"] = map[string]any{"type": "workspaceWrite", "excludeSlashTmp": true, "excludeTmpdirEnvVar": true}
	frames := apptest.Turn(t, r, p, nil)
	done := apptest.Items(t, frames, "completed")
	require.Equal(t, "failed", done["call_out"].Status)
	require.NotEqual(t, 0, *done["call_out"].ExitCode)
	require.NoFileExists(t, target)
	denial := apptest.ModelOutput(t, fake, 1, "call_out")
	require.Regexp(t, `(?i)read-only file system|permission denied`, denial)
	require.Contains(t, denial, "Exit code: 1")
	require.Equal(t, "completed", done["call_in"].Status)
	b, err := os.ReadFile(filepath.Join(ws, "inside.txt"))
	require.NoError(t, err)
	require.Equal(t, "y\n", string(b))
}

// exec_command sessions outlive their call and are killed and reaped when
// the daemon stops.
func TestToolsExecSessionReapedOnShutdown(t *testing.T) {
	ws := apptest.Workspace(t)
	call := `{"call_id":"call_s","name":"exec_command","arguments":{"cmd":"echo pid=$$; exec sleep 60","yield_time_ms":500}}`
	fake, d, r := apptest.StartWithFake(t, apptest.CallScript(`[`+call+`]`, "call_s", "running"))
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws, "sandbox": "danger-full-access"})
	frames := apptest.Turn(t, r, apptest.Input(threadID, "go"), nil)
	started := apptest.Items(t, frames, "started")["call_s"]
	require.Equal(t, "commandExecution", started.Type)
	require.Equal(t, "unifiedExecStartup", started.Source)
	require.NotNil(t, started.ProcessID)
	out := apptest.ModelOutput(t, fake, 1, "call_s")
	require.Contains(t, out, "Process running with session ID "+*started.ProcessID)
	_, rest, ok := strings.Cut(out, "pid=")
	require.True(t, ok, out)
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, 0), "the session is alive after the call")

	d.Stop(t)
	require.True(t, errors.Is(syscall.Kill(pid, 0), syscall.ESRCH), "the session process is gone after shutdown")
}

// command/exec: buffered, streamed (base64 deltas, cap), timeout, and the
// refusals.
func TestToolsCommandExec(t *testing.T) {
	_, _, r := apptest.StartWithFake(t, `{"steps":[]}`)
	var res struct {
		ExitCode int    `json:"exitCode"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	require.NoError(t, json.Unmarshal(r.Call("command/exec", map[string]any{
		"command": []string{"sh", "-c", "echo out; echo err >&2; echo $GREETING; exit 3"},
		"env":     map[string]any{"GREETING": "hello"},
	}), &res))
	require.Equal(t, 3, res.ExitCode)
	require.Equal(t, "out\nhello\n", res.Stdout)
	require.Equal(t, "err\n", res.Stderr)

	// Streamed: the deltas come before the result, which repeats nothing.
	r.Seen = nil
	require.NoError(t, json.Unmarshal(r.Call("command/exec", map[string]any{
		"command": []string{"sh", "-c", "printf abcdef; printf xy >&2"}, "processId": "p1",
		"streamStdoutStderr": true, "outputBytesCap": 4,
	}), &res))
	require.Equal(t, 0, res.ExitCode)
	require.Empty(t, res.Stdout)
	require.Empty(t, res.Stderr)
	got := map[string]string{}
	capped := map[string]bool{}
	for _, f := range r.Seen {
		require.Equal(t, "command/exec/outputDelta", f.Method)
		var p struct {
			ProcessID   string `json:"processId"`
			Stream      string `json:"stream"`
			DeltaBase64 string `json:"deltaBase64"`
			CapReached  bool   `json:"capReached"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &p))
		require.Equal(t, "p1", p.ProcessID)
		b, err := base64.StdEncoding.DecodeString(p.DeltaBase64)
		require.NoError(t, err)
		got[p.Stream] += string(b)
		capped[p.Stream] = capped[p.Stream] || p.CapReached
	}
	require.Equal(t, map[string]string{"stdout": "abcd", "stderr": "xy"}, got)
	require.True(t, capped["stdout"])
	require.False(t, capped["stderr"])

	// Timeout: exit code 124.
	require.NoError(t, json.Unmarshal(r.Call("command/exec", map[string]any{
		"command": []string{"sleep", "30"}, "timeoutMs": 200,
	}), &res))
	require.Equal(t, 124, res.ExitCode)

	// The sandbox policy applies: read-only cannot write the cwd.
	dir := t.TempDir()
	require.NoError(t, json.Unmarshal(r.Call("command/exec", map[string]any{
		"command": []string{"sh", "-c", "echo x > f.txt"}, "cwd": dir,
		"sandboxPolicy": map[string]any{"type": "readOnly"},
	}), &res))
	require.NotEqual(t, 0, res.ExitCode)
	require.NoFileExists(t, filepath.Join(dir, "f.txt"))

	for _, tc := range []struct {
		params map[string]any
		code   int
		msg    string
	}{
		{map[string]any{"command": []string{}}, -32600, "command must not be empty"},
		{map[string]any{"command": []string{"true"}, "timeoutMs": 5, "disableTimeout": true}, -32602, "cannot set both timeoutMs and disableTimeout"},
		{map[string]any{"command": []string{"true"}, "streamStdoutStderr": true}, -32600, "requires a client-supplied processId"},
	} {
		f := r.CallRaw("command/exec", tc.params)
		require.NotNil(t, f.Error, "%v", tc.params)
		require.Equal(t, tc.code, f.Error.Code)
		require.Contains(t, f.Error.Message, tc.msg)
	}
}

// request_user_input in plan mode: the question reaches the client as
// item/tool/requestUserInput with the waitingOnUserInput flag, and the
// answer is the tool's output.
func TestToolsRequestUserInput(t *testing.T) {
	call := `{"call_id":"call_q","name":"request_user_input","arguments":{"questions":[{"id":"color","header":"Color","question":"Which color?","options":[{"label":"Red","description":"Warm."},{"label":"Blue","description":"Cool."}]}]}}`
	fake, _, r := apptest.StartWithFake(t, apptest.CallScript(`[`+call+`]`, "call_q", "noted"))
	threadID := apptest.StartThread(t, r, nil)
	p := apptest.Input(threadID, "ask me")
	p["collaborationMode"] = map[string]any{"mode": "plan", "settings": map[string]any{"model": "fake-model", "reasoning_effort": nil, "developer_instructions": nil}}
	var params struct {
		ThreadID  string `json:"threadId"`
		ItemID    string `json:"itemId"`
		Questions []struct {
			ID      string `json:"id"`
			IsOther bool   `json:"isOther"`
		} `json:"questions"`
	}
	frames := apptest.Turn(t, r, p, func(f apptest.Frame) any {
		require.Equal(t, "item/tool/requestUserInput", f.Method)
		require.NoError(t, json.Unmarshal(f.Params, &params))
		return map[string]any{"answers": map[string]any{"color": map[string]any{"answers": []string{"Blue"}}}}
	})
	require.Equal(t, threadID, params.ThreadID)
	require.Equal(t, "call_q", params.ItemID)
	require.True(t, params.Questions[0].IsOther)
	require.Contains(t, apptest.Outline(t, frames), "thread/status/changed active[waitingOnUserInput]")
	require.Len(t, apptest.Find(frames, "serverRequest/resolved"), 1)
	require.JSONEq(t, `{"answers":{"color":{"answers":["Blue"]}}}`, apptest.ModelOutput(t, fake, 1, "call_q"))
	require.Contains(t, string(fake.Requests()[0].Body), `"name":"request_user_input"`, "offered in plan mode")
}

// acceptWithExecpolicyAmendment allows the prefix for the rest of the
// thread; applyNetworkPolicyAmendment with "deny" declines.
func TestToolsApprovalAmendments(t *testing.T) {
	ws := apptest.Workspace(t)
	fake, _, r := apptest.StartWithFake(t, `{"steps":[
		{"tool_calls":[`+apptest.ShellCall("call_1", "touch one.txt")+`]},
		{"match":{"call_output":"call_1"},"tool_calls":[`+apptest.ShellCall("call_2", "touch two.txt")+`]},
		{"match":{"call_output":"call_2"},"tool_calls":[`+apptest.ShellCall("call_3", "mkdir three")+`]},
		{"match":{"call_output":"call_3"},"text":"done"}]}`)
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws, "approvalPolicy": "untrusted", "sandbox": "workspace-write"})
	var asked []string
	frames := apptest.Turn(t, r, apptest.Input(threadID, "go"), func(f apptest.Frame) any {
		var p struct {
			ItemID string `json:"itemId"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &p))
		asked = append(asked, p.ItemID)
		if p.ItemID == "call_1" {
			return map[string]any{"decision": map[string]any{"acceptWithExecpolicyAmendment": map[string]any{"execpolicy_amendment": []string{"touch"}}}}
		}
		return map[string]any{"decision": map[string]any{"applyNetworkPolicyAmendment": map[string]any{"network_policy_amendment": map[string]any{"host": "example.com", "action": "deny"}}}}
	})
	require.Equal(t, []string{"call_1", "call_3"}, asked, "touch is allowed by the amendment; mkdir still asks")
	done := apptest.Items(t, frames, "completed")
	require.Equal(t, "completed", done["call_1"].Status)
	require.Equal(t, "completed", done["call_2"].Status)
	require.Equal(t, "declined", done["call_3"].Status)
	require.FileExists(t, filepath.Join(ws, "one.txt"))
	require.FileExists(t, filepath.Join(ws, "two.txt"))
	require.NoDirExists(t, filepath.Join(ws, "three"))
	require.Equal(t, "exec command rejected by user", apptest.ModelOutput(t, fake, 3, "call_3"))
}

// exec_command with an approval, in the reference's order and shape: the
// item starts with source "agent" before the request, and completes with
// source "unifiedExecStartup" and the session's processId.
func TestToolsExecCommandApproval(t *testing.T) {
	ws := apptest.Workspace(t)
	call := `{"call_id":"call_touch","name":"exec_command","arguments":{"cmd":"touch approved.txt"}}`
	_, _, r := apptest.StartWithFake(t, apptest.CallScript(`[`+call+`]`, "call_touch", "ok"))
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws, "approvalPolicy": "untrusted", "sandbox": "workspace-write"})
	frames := apptest.Turn(t, r, apptest.Input(threadID, "go"), func(apptest.Frame) any { return map[string]any{"decision": "accept"} })
	ref := apptest.Outline(t, teReferenceTurns(t)[1])
	got := apptest.Outline(t, frames)
	// The reference turn goes on with a patch; its command part is the same.
	require.Equal(t, ref[:11], got[:11])
	started, done := apptest.Items(t, frames, "started")["call_touch"], apptest.Items(t, frames, "completed")["call_touch"]
	require.Equal(t, "agent", started.Source)
	require.Nil(t, started.ProcessID)
	require.Equal(t, "unifiedExecStartup", done.Source)
	require.NotNil(t, done.ProcessID)
	require.Equal(t, "completed", done.Status)
	require.Equal(t, 0, *done.ExitCode)
	require.FileExists(t, filepath.Join(ws, "approved.txt"))
}

// Exec-policy rules live in <data_dir>/rules/*.rules: an accepted
// amendment is appended to default.rules and, after a restart, a matching
// command runs without asking; a "forbidden" rule refuses a command with
// the rule's reason.
func TestToolsExecPolicyRulesFilesPersistAcrossRestart(t *testing.T) {
	ws := apptest.Workspace(t)
	dataDir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dataDir, "rules"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dataDir, "rules", "team.rules"),
		[]byte(`prefix_rule(pattern=["shred"], decision="forbidden", justification="never shred here")`+"\n"), 0o644))
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"first"},"tool_calls":[`+apptest.ShellCall("call_1", "touch one.txt")+`]},
		{"match":{"call_output":"call_1"},"text":"one"},
		{"match":{"user_text":"second"},"tool_calls":[`+apptest.ShellCall("call_2", "touch two.txt")+`]},
		{"match":{"call_output":"call_2"},"tool_calls":[`+apptest.ShellCall("call_3", "shred notes.txt")+`]},
		{"match":{"call_output":"call_3"},"text":"two"}]}`)
	args := append([]string{"--data-dir", dataDir}, apptest.FakeArgs(fake, "responses")...)
	d := apptest.Start(t, args...)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws, "approvalPolicy": "untrusted", "sandbox": "workspace-write"})
	asked := 0
	apptest.Turn(t, r, apptest.Input(threadID, "first"), func(f apptest.Frame) any {
		asked++
		return map[string]any{"decision": map[string]any{"acceptWithExecpolicyAmendment": map[string]any{"execpolicy_amendment": []string{"touch"}}}}
	})
	require.Equal(t, 1, asked)
	rules, err := os.ReadFile(filepath.Join(dataDir, "rules", "default.rules"))
	require.NoError(t, err)
	require.Contains(t, string(rules), `prefix_rule(pattern=["touch"], decision="allow")`)

	d.Stop(t)
	d2 := apptest.Start(t, args...)
	r2 := d2.RPC(t)
	thread2 := apptest.StartThread(t, r2, map[string]any{"cwd": ws, "approvalPolicy": "untrusted", "sandbox": "workspace-write"})
	apptest.Turn(t, r2, apptest.Input(thread2, "second"), func(f apptest.Frame) any {
		t.Fatalf("asked for approval after restart: %s", f.Params)
		return nil
	})
	require.FileExists(t, filepath.Join(ws, "two.txt"))
	require.FileExists(t, filepath.Join(ws, "notes.txt"), "shred was forbidden by the team rule")
	require.Contains(t, apptest.ModelOutput(t, fake, 4, "call_3"), "never shred here")
}

// A known-safe command is safe only inside the sandbox: with a
// core.fsmonitor planted in the repository, `git status` outside the
// sandbox runs it. When the model asks for require_escalated under
// on-request, the user is asked first, for shell_command and exec_command
// alike; declined, nothing runs outside; accepted, it runs unsandboxed.
func TestToolsEscalatedKnownSafeCommandAsks(t *testing.T) {
	outside, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	for _, tc := range []struct {
		name, decision, status string
		call                   func(callID string) string
		ran                    bool
	}{
		{"shell_command declined", "decline", "declined", func(id string) string {
			b, _ := json.Marshal(map[string]any{"call_id": id, "name": "shell_command", "arguments": map[string]any{
				"command": "git status", "sandbox_permissions": "require_escalated", "justification": "status"}})
			return string(b)
		}, false},
		{"exec_command declined", "decline", "declined", func(id string) string {
			b, _ := json.Marshal(map[string]any{"call_id": id, "name": "exec_command", "arguments": map[string]any{
				"cmd": "git status", "sandbox_permissions": "require_escalated", "justification": "status"}})
			return string(b)
		}, false},
		{"shell_command accepted", "accept", "completed", func(id string) string {
			b, _ := json.Marshal(map[string]any{"call_id": id, "name": "shell_command", "arguments": map[string]any{
				"command": "git status", "sandbox_permissions": "require_escalated"}})
			return string(b)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := apptest.Workspace(t)
			target := filepath.Join(outside, strings.ReplaceAll(tc.name, " ", "_"))
			for _, args := range [][]string{{"init", "-q"}, {"config", "core.fsmonitor", "touch " + target}} {
				out, err := exec.Command("git", append([]string{"-C", ws}, args...)...).CombinedOutput()
				require.NoError(t, err, string(out))
			}
			_, _, r := apptest.StartWithFake(t, apptest.CallScript(`[`+tc.call("call_git")+`]`, "call_git", "done"))
			threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws})
			p := apptest.Input(threadID, "go")
			p["approvalPolicy"] = "on-request"
			p["sandboxPolicy"] = map[string]any{"type": "workspaceWrite", "excludeSlashTmp": true, "excludeTmpdirEnvVar": true}
			var asked []string
			frames := apptest.Turn(t, r, p, func(f apptest.Frame) any {
				asked = append(asked, f.Method)
				return map[string]any{"decision": tc.decision}
			})
			require.Equal(t, []string{"item/commandExecution/requestApproval"}, asked, "leaving the sandbox is the user's call")
			require.Equal(t, tc.status, apptest.Items(t, frames, "completed")["call_git"].Status)
			if tc.ran {
				require.FileExists(t, target, "approved: git ran outside the sandbox")
			} else {
				require.NoFileExists(t, target, "declined: nothing ran outside the sandbox")
			}
		})
	}
}
