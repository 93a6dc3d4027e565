package orchestrate_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
)

// What sandboxed commands must not reach through the daemon's own state
// and listener, end to end: the login-shell snapshot of other commands,
// and the daemon's API.

// injectedMark is what a poisoned snapshot line prints.
const injectedMark = "INJECTED-LINE-RAN"

// snapshotAttack is a login-shell script that finds the snapshot it was
// started from (and any under the temporary directory, where snapshots
// used to live) and tries every way to make later commands run a line of
// its own: appending, replacing, swapping in a symlink, writing next to
// it. The line prints injectedMark and creates touched.
func snapshotAttack(touched string) string {
	return `evil='echo ` + injectedMark + `; touch ` + touched + `'
snap=${BASH_EXECUTION_STRING#. \'}; snap=${snap%%\'*}
echo "started from: $snap"
for f in "$snap" /tmp/appserver-shell-*/* "${TMPDIR:-/tmp}"/appserver-shell-*/*; do
  [ -e "$f" ] || continue
  echo "$evil" >> "$f"
  printf '%s\n' "$evil" > "$f.new" && mv -f "$f.new" "$f"
  printf '%s\n' "$evil" > ./evil.sh && ln -sf "$PWD/evil.sh" "$f"
  d=$(dirname "$f"); for i in 1 2 3 4 5; do printf '%s\n' "$evil" > "$d/snapshot-$i.sh"; done
done
echo attack-done`
}

// commandOutputs are the aggregated outputs of a turn's commandExecution
// items, by item id.
func commandOutputs(t *testing.T, items api.List[api.ThreadItem]) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, it := range items {
		b, err := json.Marshal(it)
		require.NoError(t, err)
		var ti apptest.Item
		require.NoError(t, json.Unmarshal(b, &ti))
		if ti.Type == "commandExecution" && ti.AggregatedOutput != nil {
			out[ti.ID] = *ti.AggregatedOutput
		}
	}
	return out
}

// principalThread starts a workspace-write thread for a principal over
// the HTTP API and returns its id.
func principalThread(t *testing.T, d *apptest.Daemon, token, cwd string) string {
	t.Helper()
	resp := d.Do(t, "POST", "/v1/threads", token, map[string]any{"cwd": cwd, "sandbox": "workspace-write", "approvalPolicy": "never"})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var th api.HTTPThread
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&th))
	return th.Thread.ID
}

// principalTurn runs a turn over the HTTP API and waits for its end.
func principalTurn(t *testing.T, d *apptest.Daemon, token, threadID, text string) api.HTTPTurn {
	t.Helper()
	resp := d.Do(t, "POST", "/v1/threads/"+threadID+"/turns?wait=true", token, map[string]any{"input": []any{map[string]any{"type": "text", "text": text}}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var turn api.HTTPTurn
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&turn))
	require.Equal(t, api.TurnCompleted, turn.Status)
	return turn
}

// TestSnapshotPoisoningDoesNotSpread: a sandboxed login-shell command of
// principal P1's thread attacks the login-shell snapshot it was started
// from. A later login-shell command of principal P2's thread, P1's own
// next one, and a user's shell command (thread/shellCommand, unsandboxed)
// do not run the injected line.
func TestSnapshotPoisoningDoesNotSpread(t *testing.T) {
	apptest.NeedTools(t, "bash")
	const p2Token = "p2-secret-token"
	touched := filepath.Join(t.TempDir(), "touched")
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"poison"},"tool_calls":[`+apptest.ShellCall("call_poison", snapshotAttack(touched))+`]},
		{"match":{"call_output":"call_poison"},"text":"poisoned"},
		{"match":{"user_text":"probe p2"},"tool_calls":[`+apptest.ShellCall("call_p2", "echo p2-ran")+`]},
		{"match":{"call_output":"call_p2"},"text":"probed"},
		{"match":{"user_text":"probe p1"},"tool_calls":[`+apptest.ShellCall("call_p1", "echo p1-ran")+`]},
		{"match":{"call_output":"call_p1"},"text":"probed"}]}`)
	wsA, wsB := apptest.Workspace(t), apptest.Workspace(t)
	args := append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)
	args = append(args, apptest.AuthArgs(wsA)...)
	args = append(args, "-c", `http_api.principals.p2.token_sha256="`+apptest.SHA256Hex(p2Token)+`"`)
	args = append(args, apptest.PrincipalRoots("p2", wsB)...)
	d := apptest.Start(t, args...)

	threadA := principalThread(t, d, apptest.CIToken, wsA)
	attack := commandOutputs(t, principalTurn(t, d, apptest.CIToken, threadA, "poison").Items)["call_poison"]
	require.Contains(t, attack, "started from: /", "the attack found the snapshot it was started from")
	require.Contains(t, attack, "attack-done")

	threadB := principalThread(t, d, p2Token, wsB)
	out := commandOutputs(t, principalTurn(t, d, p2Token, threadB, "probe p2").Items)["call_p2"]
	require.Equal(t, "p2-ran\n", out, "P2's login shell ran a line P1 injected")
	out = commandOutputs(t, principalTurn(t, d, apptest.CIToken, threadA, "probe p1").Items)["call_p1"]
	require.Equal(t, "p1-ran\n", out, "P1's next login shell ran the injected line")

	// The operator's user shell on P2's thread (and on P1's): unsandboxed.
	r := apptest.RPC(t, d.Addr, apptest.OperatorToken, nil)
	for _, th := range []string{threadB, threadA} {
		r.Seen = nil
		r.Call("thread/shellCommand", map[string]any{"threadId": th, "command": "echo user-shell-ran"})
		var item apptest.Item
		for item.Status == "" || item.Status == "inProgress" {
			f := r.Until("item/completed")
			var p struct {
				Item apptest.Item `json:"item"`
			}
			require.NoError(t, json.Unmarshal(f.Params, &p))
			item = p.Item
		}
		require.Equal(t, "userShell", item.Source)
		require.Equal(t, "user-shell-ran\n", *item.AggregatedOutput, "the user's shell ran the injected line")
	}
	require.NoFileExists(t, touched)
}

// TestSandboxedCommandCannotReachTheDaemon: with the loopback listener
// taking requests without authentication (the local-trust setup of the
// TUI), a sandboxed command with network access tries to create a
// danger-full-access thread through the daemon's own API. It is refused
// before it starts, with the setting to change; no thread is created.
// Without network access, sandboxed commands run as before.
func TestSandboxedCommandCannotReachTheDaemon(t *testing.T) {
	apptest.NeedTools(t, "bash")
	// The command's script names the daemon's port, known once it
	// listens: the model (started first) calls a script file the test
	// writes then.
	escape := filepath.Join(t.TempDir(), "escape.sh")
	fake, d, r := apptest.StartWithFake(t, `{"steps":[
		{"match":{"user_text":"escape"},"tool_calls":[`+apptest.ShellCall("call_escape", "bash "+escape)+`]},
		{"match":{"call_output":"call_escape"},"text":"tried"},
		{"match":{"user_text":"local"},"tool_calls":[`+apptest.ShellCall("call_local", "echo local > made.txt && cat made.txt")+`]},
		{"match":{"call_output":"call_local"},"text":"done"}]}`)
	_, port, _ := strings.Cut(strings.TrimPrefix(d.Addr, "ws://"), ":")
	require.NoError(t, os.WriteFile(escape, []byte(`exec 3<>/dev/tcp/127.0.0.1/`+port+` || exit 7
body='{"sandbox":"danger-full-access","approvalPolicy":"never"}'
printf 'POST /v1/threads HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' "${#body}" "$body" >&3
head -n 1 <&3
`), 0o644))

	ws := apptest.Workspace(t)
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws, "sandbox": "workspace-write", "approvalPolicy": "never"})
	p := apptest.Input(threadID, "escape")
	p["sandboxPolicy"] = map[string]any{"type": "workspaceWrite", "networkAccess": true}
	frames := apptest.Turn(t, r, p, nil)
	done := apptest.Items(t, frames, "completed")
	require.Equal(t, "failed", done["call_escape"].Status)
	seen := apptest.ModelOutput(t, fake, 1, "call_escape")
	require.Contains(t, seen, "ws_auth", "the model reads which setting refuses it")
	require.NotContains(t, seen, "HTTP/1.")

	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.Call("thread/list", map[string]any{}), &list))
	require.Len(t, list.Data, 1, "the sandboxed command created a thread through the daemon's API")

	// Without network access (turn overrides last: it is asked for), the
	// same thread's commands run.
	p = apptest.Input(threadID, "local")
	p["sandboxPolicy"] = map[string]any{"type": "workspaceWrite", "networkAccess": false}
	frames = apptest.Turn(t, r, p, nil)
	done = apptest.Items(t, frames, "completed")
	require.Equal(t, "completed", done["call_local"].Status, apptest.ModelOutput(t, fake, 3, "call_local"))
	require.Equal(t, "local\n", *done["call_local"].AggregatedOutput)
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(ws, "made.txt")); return err == nil }, 5*time.Second, 50*time.Millisecond)
}
