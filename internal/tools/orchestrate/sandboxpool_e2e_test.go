package orchestrate_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/testenv"
)

// The pooled sandboxes through the tool path: exec_command of two threads
// of the daemon, each in a pooled bubblewrap sandbox of its own once it is
// up; a command of one thread neither sees nor signals the other's
// running session, nor writes into its workspace.
func TestSandboxPoolPerThread(t *testing.T) {
	const probes = 60
	probe := `cat /proc/1/cmdline | tr '\0' ' '`
	var steps []map[string]any
	call := func(user, id, cmd string, yieldMs int) {
		args := map[string]any{"cmd": cmd}
		if yieldMs > 0 {
			args["yield_time_ms"] = yieldMs
		}
		steps = append(steps,
			map[string]any{"match": map[string]any{"user_text": user}, "tool_calls": []any{map[string]any{"call_id": id, "name": "exec_command", "arguments": args}}},
			map[string]any{"match": map[string]any{"call_output": id}, "text": "ok"})
	}
	for _, th := range []string{"a", "b"} {
		for i := range probes {
			call(fmt.Sprintf("probe-%s-%d.", th, i), fmt.Sprintf("probe_%s_%d", th, i), probe, 0)
		}
	}
	wsA, wsB := apptest.Workspace(t), apptest.Workspace(t)
	call("sleep-a.", "sleep_a", "exec sleep 4790.5", 200)
	call("look-b.", "look_b", fmt.Sprintf(`set -- /proc/[0-9]*/cmdline; cat "$@" | tr '\0' ' ' | grep -c "479$((0)).5"
kill -KILL -1 2>/dev/null
echo pwned > %s/pwned && echo wrote; true`, wsA), 0)
	script, err := json.Marshal(map[string]any{"steps": steps})
	require.NoError(t, err)
	_, _, r := apptest.StartWithFake(t, string(script))

	policy := map[string]any{"type": "workspaceWrite", "excludeSlashTmp": true, "excludeTmpdirEnvVar": true}
	turn := func(threadID, text string) apptest.Item {
		p := apptest.Input(threadID, text)
		p["sandboxPolicy"] = policy
		frames := apptest.Turn(t, r, p, nil)
		// The item of a session still running has only started.
		for _, phase := range []string{"completed", "started"} {
			for _, it := range apptest.Items(t, frames, phase) {
				if it.Type == "commandExecution" {
					return it
				}
			}
		}
		t.Fatalf("no command in the turn %q", text)
		return apptest.Item{}
	}
	// Until the thread's pooled sandbox runs its commands: then pid 1 is
	// its launcher, not bubblewrap.
	pooled := func(threadID, th string) {
		for i := range probes {
			it := turn(threadID, fmt.Sprintf("probe-%s-%d.", th, i))
			require.Equal(t, "completed", it.Status)
			if strings.Contains(*it.AggregatedOutput, "__appserver-sandbox --box") {
				return
			}
		}
		t.Fatalf("thread %s: no pooled sandbox after %d commands", th, probes)
	}
	a := apptest.StartThread(t, r, map[string]any{"cwd": wsA})
	b := apptest.StartThread(t, r, map[string]any{"cwd": wsB})
	pooled(a, "a")
	pooled(b, "b")

	sleep := turn(a, "sleep-a.")
	require.Equal(t, "inProgress", sleep.Status, "the session keeps running")
	pids := testenv.Processes("sleep 4790.5")
	require.Len(t, pids, 1)
	look := turn(b, "look-b.")
	require.Equal(t, "0\n", strings.SplitAfter(*look.AggregatedOutput, "\n")[0], *look.AggregatedOutput)
	require.NotContains(t, *look.AggregatedOutput, "wrote")
	require.NoFileExists(t, filepath.Join(wsA, "pwned"))
	require.Equal(t, pids, testenv.Processes("sleep 4790.5"), "thread b's command reached thread a's session")
}
