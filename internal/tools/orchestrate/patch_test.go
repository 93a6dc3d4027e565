package orchestrate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
)

const addHello = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch"

// A patch inside the workspace under workspace-write is applied without
// asking: the fileChange item starts with the changes and completes, and
// the turn's aggregate diff is announced.
func TestPatchFileChangeItem(t *testing.T) {
	s := newService(t, Config{})
	ws := workspace(t)
	tu := newTurn(t, s, ws, turnOpts{approval: "on-request", sandbox: api.SandboxPolicyWorkspaceWrite})
	require.Equal(t, "apply_patch", customToolName(tu.specs), "a Responses provider gets the freeform tool")
	out := tu.call(t.Context(), "call_p", "apply_patch", registry.CustomPayload{Input: addHello})
	require.Contains(t, out.PlainText(), "hello.txt")
	require.FileExists(t, filepath.Join(ws, "hello.txt"))

	evs := tu.sink.snapshot()
	require.Len(t, evs, 2)
	start, done := evs[0], evs[1]
	require.Equal(t, "call_p", start.file.ID)
	require.Equal(t, api.StatusInProgress, start.file.Status)
	require.Len(t, start.file.Changes, 1)
	require.Equal(t, filepath.Join(ws, "hello.txt"), start.file.Changes[0].Path)
	require.Equal(t, api.PatchChangeKindType("add"), start.file.Changes[0].Kind.Type)
	require.True(t, done.completed)
	require.Equal(t, api.StatusCompleted, done.file.Status)
	require.Empty(t, tu.client.sent())
	diffs := tu.turnDiffs()
	require.Len(t, diffs, 1, "turn/diff/updated after the item")
	require.Contains(t, diffs[0], "+hello")
}

// Under read-only a patch asks: accepted it is written; declined, or with
// nobody to answer, the item is declined, nothing is written and the model
// reads why.
func TestPatchApproval(t *testing.T) {
	for _, tc := range []struct {
		name       string
		answer     answerFunc
		written    bool
		status     api.ToolStatus
		modelReads string
		interrupts int
	}{
		{name: "approved", answer: decision(`"accept"`), written: true, status: api.StatusCompleted},
		{name: "declined", answer: decision(`"decline"`), status: api.StatusDeclined, modelReads: "patch rejected by user"},
		{name: "cancelled", answer: decision(`"cancel"`), status: api.StatusDeclined, modelReads: "patch rejected by user", interrupts: 1},
		{name: "no client", status: api.StatusDeclined, modelReads: noClientText("patch")},
		{name: "client error", answer: func(ctx contextT, _ requestT) (rawT, error) { return nil, errClient },
			status: api.StatusFailed, modelReads: "patch rejected: the approval request failed: " + errClient.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, Config{})
			ws := workspace(t)
			tu := newTurn(t, s, ws, turnOpts{approval: "on-request", sandbox: api.SandboxPolicyReadOnly, answer: tc.answer})
			out := tu.call(t.Context(), "call_p", "apply_patch", registry.CustomPayload{Input: addHello})

			reqs := tu.client.sent()
			require.Len(t, reqs, 1)
			require.Equal(t, "item/fileChange/requestApproval", reqs[0].Method)
			p := reqs[0].Params.(api.FileChangeRequestApprovalParams)
			require.Equal(t, "call_p", p.ItemID)
			evs := tu.sink.snapshot()
			require.Len(t, evs, 2)
			require.Equal(t, api.StatusInProgress, evs[0].file.Status, "the item starts before the request")
			require.Equal(t, tc.status, evs[1].file.Status)
			if tc.written {
				require.FileExists(t, filepath.Join(ws, "hello.txt"))
				require.Len(t, tu.turnDiffs(), 1)
			} else {
				require.NoFileExists(t, filepath.Join(ws, "hello.txt"))
				require.Empty(t, tu.turnDiffs())
				require.Contains(t, out.PlainText(), tc.modelReads)
				require.Equal(t, 1, evs[1].raised, "the flag comes down after the item completed")
			}
			require.Equal(t, 0, tu.client.raisedNow())
			require.Equal(t, tc.interrupts, tu.interrupts())
		})
	}
}

// `apply_patch` run through the argv shell tool goes through the patch
// engine: a fileChange item, not a commandExecution item, and the file is
// written relative to a leading `cd`. shell_command scripts are not
// intercepted (the reference does not either).
func TestApplyPatchThroughShellIsIntercepted(t *testing.T) {
	heredoc := "apply_patch <<'EOF'\n" + addHello + "\nEOF"
	for _, tc := range []struct {
		name string
		argv []string
		file string
	}{
		{name: "heredoc", argv: []string{"bash", "-lc", heredoc}, file: "hello.txt"},
		{name: "cd then heredoc", argv: []string{"bash", "-lc", "cd sub && " + heredoc}, file: "sub/hello.txt"},
		{name: "argv", argv: []string{"apply_patch", addHello}, file: "hello.txt"},
		{name: "other delimiter", argv: []string{"bash", "-lc", "apply_patch <<'PATCH'\n" + addHello + "\nPATCH"}, file: "hello.txt"},
		{name: "bare delimiter", argv: []string{"bash", "-lc", "apply_patch <<END\n" + addHello + "\nEND"}, file: "hello.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, Config{Models: modelShell("m", "default")})
			ws := workspace(t)
			require.NoError(t, os.Mkdir(filepath.Join(ws, "sub"), 0o755))
			tu := newTurn(t, s, ws, turnOpts{approval: "on-request", sandbox: api.SandboxPolicyWorkspaceWrite, model: "m"})
			out := tu.fn("call_s", "shell", map[string]any{"command": tc.argv})
			require.FileExists(t, filepath.Join(ws, tc.file), out.Text)
			evs := tu.sink.snapshot()
			require.Len(t, evs, 2)
			for _, ev := range evs {
				require.Nil(t, ev.command, "no commandExecution item")
				require.NotNil(t, ev.file)
			}
			require.Equal(t, filepath.Join(ws, tc.file), evs[0].file.Changes[0].Path)
			require.Equal(t, api.StatusCompleted, evs[1].file.Status)
			require.Len(t, tu.turnDiffs(), 1)
		})
	}
}

// exec_command intercepts an apply_patch heredoc the same way: the patch
// engine writes the file and reports a fileChange item, no process runs.
func TestApplyPatchThroughExecCommandIsIntercepted(t *testing.T) {
	s := newService(t, Config{})
	ws := workspace(t)
	require.NoError(t, os.Mkdir(filepath.Join(ws, "sub"), 0o755))
	tu := newTurn(t, s, ws, turnOpts{approval: "on-request", sandbox: api.SandboxPolicyWorkspaceWrite})
	out := tu.fn("call_x", "exec_command", map[string]any{"cmd": "cd sub && apply_patch <<'PATCH'\n" + addHello + "\nPATCH", "yield_time_ms": 5000})
	require.FileExists(t, filepath.Join(ws, "sub", "hello.txt"), out.Text)
	require.Contains(t, out.Text, "Success")
	evs := tu.sink.snapshot()
	require.Len(t, evs, 2)
	for _, ev := range evs {
		require.Nil(t, ev.command, "no commandExecution item")
		require.NotNil(t, ev.file)
	}
	require.Equal(t, api.StatusCompleted, evs[1].file.Status)
	require.Zero(t, s.LiveSessions())
}
