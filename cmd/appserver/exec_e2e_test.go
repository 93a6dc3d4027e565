package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/execclient"
)

// execOutcome is how one `appserver exec` ended.
type execOutcome struct {
	stdout, stderr string
	err            error
	code           int
	took           time.Duration
}

// execIn runs `appserver exec` in-process against the daemon with stdin,
// as main does, and returns how it ended.
func execIn(t *testing.T, ctx context.Context, d *apptest.Daemon, stdin *os.File, args ...string) execOutcome {
	t.Helper()
	if stdin == nil {
		stdin = devNull(t)
	}
	var out, errb bytes.Buffer
	start := time.Now()
	err := runExec(ctx, append([]string{"--server", d.Addr}, args...), stdin, &out, &errb)
	return execOutcome{stdout: out.String(), stderr: errb.String(), err: err, code: exitCode(err), took: time.Since(start)}
}

func execRun(t *testing.T, d *apptest.Daemon, args ...string) execOutcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return execIn(t, ctx, d, nil, args...)
}

func devNull(t *testing.T) *os.File {
	f, err := os.Open(os.DevNull)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// stdinWith is a file holding s, to be exec's stdin.
func stdinWith(t *testing.T, s string) *os.File {
	path := filepath.Join(t.TempDir(), "stdin")
	require.NoError(t, os.WriteFile(path, []byte(s), 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// jsonLines parses exec's JSONL stdout line by line: each line one JSON
// object with a string "type".
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var v map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &v), "not a JSON object: %s", sc.Text())
		typ, ok := v["type"].(string)
		require.True(t, ok && typ != "", "no type: %s", sc.Text())
		lines = append(lines, v)
	}
	require.NoError(t, sc.Err())
	return lines
}

func typesOf(lines []map[string]any) []string {
	var out []string
	for _, l := range lines {
		out = append(out, l["type"].(string))
	}
	return out
}

// lastTurn is the ended turn the last JSONL line carries.
func lastTurn(t *testing.T, lines []map[string]any) api.HTTPTurn {
	t.Helper()
	require.NotEmpty(t, lines)
	b, err := json.Marshal(lines[len(lines)-1]["turn"])
	require.NoError(t, err)
	var turn api.HTTPTurn
	require.NoError(t, json.Unmarshal(b, &turn))
	return turn
}

// TestExecStreamsATurn runs `appserver exec` against the daemon: text on
// stdout, progress on stderr, the JSONL stream, reruns with the same
// Idempotency-Key, and the exit statuses of a failed turn, a bad command
// line, an unknown thread, a wrong token and a daemon that is gone.
func TestExecStreamsATurn(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[
		{"text":"First answer, streamed.","chunks":4,"usage":{"input_tokens":9,"output_tokens":4,"total_tokens":13}},
		{"match":{"user_text":"again"},"text":"Second answer."},
		{"match":{"user_text":"fail"},"error":{"status":401,"message":"bad key"}}]}`)
	root := t.TempDir() // the ci principal's workspace root
	d := apptest.Start(t, append(append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...), apptest.AuthArgs(root)...)...)
	t.Setenv(execclient.EnvToken, apptest.CIToken)

	r := execRun(t, d, "--cwd", root, "say something")
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "First answer, streamed.\n", r.stdout, "only the agent's text goes to stdout")
	require.Regexp(t, `turn \S+ completed in \d+(\.\d+)?m?s \(13 tokens: 9 in, 4 out\)`, r.stderr)
	threadID := strings.Fields(strings.SplitN(r.stderr, "thread ", 2)[1])[0]

	r = execRun(t, d, "--resume", threadID, "--json", "again")
	require.NoError(t, r.err, r.stderr)
	lines := jsonLines(t, r.stdout)
	require.Equal(t, "thread.started", lines[0]["type"])
	require.Equal(t, threadID, lines[0]["thread_id"])
	turn := lastTurn(t, lines)
	require.Equal(t, threadID, turn.ThreadID)
	require.Equal(t, api.TurnCompleted, turn.Status)
	require.Equal(t, "Second answer.", *turn.FinalMessage)
	require.Len(t, turn.Items, 2)

	r = execRun(t, d, "--thread", threadID, "fail now")
	require.Equal(t, execclient.ExitTurnFailed, r.code, "%v", r.err)
	require.Contains(t, r.err.Error(), "turn failed")
	require.Contains(t, r.err.Error(), "401")

	// A rerun with the same Idempotency-Key does not run the turn again.
	before := len(fake.Requests())
	r = execRun(t, d, "--resume", threadID, "--idempotency-key", "job-7", "again")
	require.NoError(t, r.err)
	r = execRun(t, d, "--resume", threadID, "--idempotency-key", "job-7", "--json", "again")
	require.NoError(t, r.err)
	require.Equal(t, api.TurnCompleted, lastTurn(t, jsonLines(t, r.stdout)).Status)
	require.Equal(t, before+1, len(fake.Requests()))

	// Usage, unknown thread, auth.
	for _, args := range [][]string{{}, {"--bogus", "hi"}, {"--sandbox", "none", "hi"}, {"--resume", threadID, "--sandbox", "read-only", "hi"}, {"--on-approval", "ask", "hi"}} {
		r = execRun(t, d, args...)
		require.Equal(t, execclient.ExitUsage, r.code, "%v: %v", args, r.err)
	}
	r = execRun(t, d, "--resume", "01a2007c-e7fe-75b3-9b2c-d4ca854a9857", "hello")
	require.Equal(t, execclient.ExitRejected, r.code, "an unknown thread: %v", r.err)
	require.Contains(t, r.err.Error(), "404 Not found: thread 01a2007c-e7fe-75b3-9b2c-d4ca854a9857 not found")
	r = execRun(t, d, "--cwd", root, "--sandbox", "danger-full-access", "hello")
	require.Equal(t, execclient.ExitAuth, r.code, "beyond the principal's ceiling: %v", r.err)
	require.Contains(t, r.err.Error(), "403")
	r = execRun(t, d, "--cwd", t.TempDir(), "hello")
	require.Equal(t, execclient.ExitAuth, r.code, "outside the principal's roots: %v", r.err)
	// --cwd "" leaves the directory to the daemon: the principal's root.
	r = execRun(t, d, "--cwd", "", "--json", "again")
	require.NoError(t, r.err, r.stderr)
	th := apptest.GetJSON[api.HTTPThread](t, d, "/v1/threads/"+jsonLines(t, r.stdout)[0]["thread_id"].(string), apptest.CIToken)
	require.Equal(t, root, th.Thread.Cwd)
	t.Setenv(execclient.EnvToken, "wrong")
	r = execRun(t, d, "hello")
	require.Contains(t, r.err.Error(), "invalid bearer token")
	require.Equal(t, execclient.ExitAuth, r.code, "a wrong token: %v", r.err)

	// A daemon that is gone is told apart from a failed turn.
	d.Stop(t)
	r = execRun(t, d, "hello")
	require.Equal(t, execclient.ExitUnreachable, r.code, "%v", r.err)
}

// escalation is a model step asking to run a command outside the sandbox,
// which needs an approval under on-request.
const escalation = `{"match":{"user_text":"touch it"},"tool_calls":[{"call_id":"call_touch","name":"shell_command","arguments":{"command":"touch approved.txt","sandbox_permissions":"require_escalated","justification":"it must write outside"}}]},
	{"match":{"call_output":"call_touch"},"text":"Done, or not."}`

// An approval under on-request with no terminal never waits: by default
// it is declined and the turn goes on (as codex exec), under
// --on-approval fail the turn is interrupted and exec exits 7; stderr
// names the command either way, and both end well within --timeout.
func TestExecApprovalWithoutATerminal(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[`+escalation+`,`+escalation+`]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	ws := t.TempDir()

	r := execRun(t, d, "--cwd", ws, "--approval-policy", "on-request", "--sandbox", "workspace-write", "--timeout", "30s", "touch it")
	require.NoError(t, r.err, r.stderr)
	require.Less(t, r.took, 20*time.Second)
	require.Regexp(t, "(?m)^\\[exec\\] approval requested: run `.*touch approved.txt.*` in .* \\(reason: it must write outside\\)$", r.stderr)
	require.Contains(t, r.stderr, "[exec] --on-approval decline: declined; the turn goes on")
	require.Equal(t, "Done, or not.\n", r.stdout)
	require.NoFileExists(t, filepath.Join(ws, "approved.txt"))
	// The model heard that the command was declined.
	last := fake.Requests()[len(fake.Requests())-1]
	require.Contains(t, string(last.Body), "call_touch")

	r = execRun(t, d, "--cwd", ws, "--approval-policy", "on-request", "--on-approval", "fail", "--timeout", "30s", "--json", "touch it")
	require.Equal(t, execclient.ExitApprovalRefused, r.code, "%v\n%s", r.err, r.stderr)
	require.Less(t, r.took, 20*time.Second)
	require.Contains(t, r.stderr, "[exec] --on-approval fail: refused; interrupting the turn")
	require.Contains(t, r.err.Error(), "touch approved.txt")
	lines := jsonLines(t, r.stdout)
	types := typesOf(lines)
	require.Contains(t, types, "approval.requested")
	require.Equal(t, "turn.interrupted", types[len(types)-1])
	require.Equal(t, api.TurnInterrupted, lastTurn(t, lines).Status)
	require.NoFileExists(t, filepath.Join(ws, "approved.txt"))
}

// With a terminal on stdin, exec asks there; the person's "y" runs the
// command.
func TestExecAsksAtTheTerminal(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[`+escalation+`]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	ws := t.TempDir()
	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	defer ptmx.Close()

	// The terminal's side: read what exec shows, answer "y" once asked.
	shown := make(chan string, 1)
	go func() {
		var seen strings.Builder
		buf := make([]byte, 1024)
		answered := false
		for {
			n, err := ptmx.Read(buf)
			seen.Write(buf[:n])
			if !answered && strings.Contains(seen.String(), "Run it?") {
				answered = true
				_, _ = ptmx.Write([]byte("y\n"))
			}
			if err != nil {
				shown <- seen.String()
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := execIn(t, ctx, d, tty, "--cwd", ws, "--approval-policy", "on-request", "--sandbox", "workspace-write", "touch it")
	// With its last other side closed (exec closed its own), the
	// terminal's reads end.
	tty.Close()
	terminal := <-shown
	require.NoError(t, r.err, "%s\nterminal:\n%s", r.stderr, terminal)
	require.Contains(t, terminal, "$ ")
	require.Contains(t, terminal, "touch approved.txt")
	require.Contains(t, terminal, "reason: it must write outside")
	require.Contains(t, terminal, "Run it? [y]es")
	require.FileExists(t, filepath.Join(ws, "approved.txt"), "the person accepted")
	require.Contains(t, r.stderr, "approval requested: run")
}

// TestExecJSONFollowsCodexExec runs the turns of the reference capture
// (testdata/golden/reference/exec_json_capture.sh) and holds `exec --json`
// to what `codex exec --json` printed: the same events in the same order,
// items of the same types with the same fields and values, codex's fields
// on the turn's last line; ours may add fields.
func TestExecJSONFollowsCodexExec(t *testing.T) {
	script, err := os.ReadFile("testdata/golden/reference/exec_json_model.json")
	require.NoError(t, err)
	fake := apptest.StartFake(t, string(script))
	d := apptest.Start(t, append(append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...), "-c", `model="gpt-5.5"`)...)
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\n"), 0o600))

	for golden, prompt := range map[string]string{"exec_json_fix.jsonl": "Fix the notes", "exec_json_fail.jsonl": "Fail please"} {
		b, err := os.ReadFile(filepath.Join("testdata/golden/reference", golden))
		require.NoError(t, err)
		want := jsonLines(t, string(b))
		r := execRun(t, d, "--cwd", ws, "--approval-policy", "never", "--sandbox", "workspace-write", "--json", prompt)
		got := jsonLines(t, r.stdout)
		require.Equal(t, typesOf(want), typesOf(got), "%s\n%s", golden, r.stdout)
		for i, w := range want {
			g := got[i]
			switch w["type"] {
			case "thread.started":
				require.NotEmpty(t, g["thread_id"])
			case "item.started", "item.completed":
				wi, gi := w["item"].(map[string]any), g["item"].(map[string]any)
				require.Equal(t, keysOf(wi), keysOf(gi), "line %d of %s", i, golden)
				for k, v := range wi {
					switch k {
					case "id":
					case "changes":
						require.Len(t, gi[k], len(v.([]any)))
						for j, c := range v.([]any) {
							gc := gi[k].([]any)[j].(map[string]any)
							require.Equal(t, c.(map[string]any)["kind"], gc["kind"])
							require.Equal(t, filepath.Base(c.(map[string]any)["path"].(string)), filepath.Base(gc["path"].(string)))
						}
					default:
						require.Equal(t, v, gi[k], "%s of line %d of %s", k, i, golden)
					}
				}
			case "turn.completed":
				require.Equal(t, w["usage"], g["usage"])
			case "turn.failed":
				require.NotEmpty(t, g["error"].(map[string]any)["message"])
			case "error":
				require.NotEmpty(t, g["message"])
			}
			for k := range w {
				require.Contains(t, g, k, "line %d of %s lacks codex's %q", i, golden, k)
			}
		}
		if prompt == "Fail please" {
			require.Equal(t, execclient.ExitTurnFailed, r.code)
		} else {
			require.NoError(t, r.err, r.stderr)
		}
	}
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// --output-schema goes to the model as the answer's format, and the exit
// status says whether the final message matched it.
func TestExecOutputSchema(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"good"},"text":"{\"answer\": 42}"},
		{"match":{"user_text":"bad"},"text":"{\"answer\": \"forty-two\"}"}]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	schema := filepath.Join(t.TempDir(), "answer.schema.json")
	require.NoError(t, os.WriteFile(schema, []byte(`{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"],"additionalProperties":false}`), 0o600))

	r := execRun(t, d, "--output-schema", schema, "good")
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "{\"answer\": 42}\n", r.stdout)
	require.Contains(t, r.stderr, "the final message matches --output-schema")
	body := string(fake.Requests()[0].Body)
	require.Contains(t, body, `"json_schema"`)
	require.Contains(t, body, `"required":["answer"]`)

	r = execRun(t, d, "--output-schema", schema, "bad")
	require.Equal(t, execclient.ExitOutputInvalid, r.code, "%v", r.err)
	require.Contains(t, r.stderr, "does not match --output-schema")
	require.Contains(t, r.stderr, "/answer")

	r = execRun(t, d, "--output-schema", filepath.Join(t.TempDir(), "missing.json"), "good")
	require.Equal(t, execclient.ExitUsage, r.code)
}

// The prompt comes from stdin with "-" or with no argument and stdin not
// a terminal; images go with it as data: URLs.
func TestExecStdinPromptAndImages(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"text":"one"},{"text":"two"},{"text":"three"}]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	r := execIn(t, ctx, d, stdinWith(t, "Summarize this log:\nERROR disk full\n"))
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, string(fake.Requests()[0].Body), `Summarize this log:\nERROR disk full\n`)

	r = execIn(t, ctx, d, stdinWith(t, "From a dash."), "-")
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, string(fake.Requests()[1].Body), "From a dash.")

	png := filepath.Join(t.TempDir(), "screen.png")
	require.NoError(t, os.WriteFile(png, []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"), 0o600))
	r = execIn(t, ctx, d, nil, "-i", png, "What is on the screen?")
	require.NoError(t, r.err, r.stderr)
	body := string(fake.Requests()[2].Body)
	require.Contains(t, body, `"type":"input_image"`)
	require.Contains(t, body, `"image_url":"data:image/png;base64,iVBORw0KGgo`)
	require.Contains(t, body, "What is on the screen?")

	r = execIn(t, ctx, d, nil)
	require.Equal(t, execclient.ExitUsage, r.code, "no prompt: %v", r.err)
}

// A turn the daemon refuses (a NUL in the prompt is a 400) leaves no
// thread behind: exec deletes the one it created.
func TestExecRefusedStartLeavesNoThread(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := execIn(t, ctx, d, stdinWith(t, "a NUL \x00 here"))
	require.Equal(t, execclient.ExitRejected, r.code, "%v\n%s", r.err, r.stderr)
	require.Contains(t, r.err.Error(), "NUL")
	require.Contains(t, r.stderr, "deleted: its turn did not start")
	list := apptest.GetJSON[api.HTTPThreadList](t, d, "/v1/threads", "")
	require.Empty(t, list.Data, "no orphaned thread")
	require.Empty(t, fake.Requests())
}

// --timeout interrupts a turn that runs too long (124); so does a signal
// (130); a turn interrupted by another client is 6.
func TestExecTimeoutSignalAndInterrupt(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"fail":{"kind":"stall"},"times":3}]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)

	r := execRun(t, d, "--timeout", "1s", "--json", "take your time")
	require.Equal(t, execclient.ExitTimeout, r.code, "%v\n%s", r.err, r.stderr)
	require.Less(t, r.took, 20*time.Second)
	require.Contains(t, r.stderr, "--timeout 1s expired: interrupting the turn")
	lines := jsonLines(t, r.stdout)
	turn := lastTurn(t, lines)
	require.Equal(t, api.TurnInterrupted, turn.Status, "the turn was interrupted on the daemon")
	stored := apptest.GetJSON[api.HTTPTurn](t, d, "/v1/threads/"+turn.ThreadID+"/turns/"+turn.ID, "")
	require.Equal(t, api.TurnInterrupted, stored.Status)

	// A signal: exec's context ends.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(time.Second, cancel)
	r = execIn(t, ctx, d, nil, "take your time")
	require.Equal(t, execclient.ExitSignal, r.code, "%v\n%s", r.err, r.stderr)
	require.Contains(t, r.stderr, "stopped: interrupting the turn")

	// Another client interrupts the turn exec follows.
	pr, pw := io.Pipe()
	done := make(chan execOutcome, 1)
	go func() {
		var errb bytes.Buffer
		err := runExec(context.Background(), []string{"--server", d.Addr, "--json", "take your time"}, devNull(t), pw, &errb)
		pw.Close()
		done <- execOutcome{err: err, code: exitCode(err), stderr: errb.String()}
	}()
	sc := bufio.NewScanner(pr)
	var threadID string
	for sc.Scan() {
		var ev map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev))
		switch ev["type"] {
		case "thread.started":
			threadID = ev["thread_id"].(string)
		case "turn.started":
			resp := d.Do(t, "POST", "/v1/threads/"+threadID+"/turns/"+ev["turn_id"].(string)+"/interrupt", "", nil)
			require.Less(t, resp.StatusCode, 300)
		}
	}
	r = <-done
	require.Equal(t, execclient.ExitInterrupted, r.code, "%v\n%s", r.err, r.stderr)
}
