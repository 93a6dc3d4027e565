package apptest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// RunScript is the fake model's script of a turn that runs `echo run >>
// runs.txt` (which the untrusted policy asks approval for) and then
// answers "done": Runs counts how many times the command ran.
var RunScript = CallScript(`[`+ShellCall("call_run", "echo run >> runs.txt")+`]`, "call_run", "done")

// Runs returns how many times RunScript's command ran in ws.
func Runs(t testing.TB, ws string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, "runs.txt"))
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	return strings.Count(string(b), "run\n")
}

// ApprovalThread is thread/start's params of a thread in ws whose
// commands need approval.
func ApprovalThread(ws string) map[string]any {
	return map[string]any{"cwd": ws, "approvalPolicy": "untrusted", "sandbox": "workspace-write"}
}

// Answers to a command's approval request.
var (
	Accept  = map[string]any{"decision": "accept"}
	Decline = map[string]any{"decision": "decline"}
)

// Resolved waits on c for serverRequest/resolved before the turn
// completes and returns its requestId.
func Resolved(t testing.TB, c *Client) json.RawMessage {
	t.Helper()
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	require.NoError(t, json.Unmarshal(c.UntilInTurn("serverRequest/resolved").Params, &p))
	return p.RequestID
}

// CommandItem returns the completed item of callID among the frames c
// recorded in Seen.
func CommandItem(t testing.TB, c *Client, callID string) Item {
	t.Helper()
	it, ok := Items(t, c.Seen, "completed")[callID]
	require.True(t, ok, "no item/completed for %s", callID)
	return it
}
