package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/execclient"
)

// Tokens of the HTTP API tests: the operator's (the websocket's
// capability token) and the CI principal's.
const (
	operatorToken = "operator-secret-token"
	ciToken       = "ci-bot-secret-token"
)

func sha256Hex(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// authArgs run the daemon with capability-token auth and a "ci" principal.
func authArgs() []string {
	return []string{
		"--ws-auth", "capability-token", "--ws-token-sha256", sha256Hex(operatorToken),
		"-c", `http_api.principals.ci.token_sha256="` + sha256Hex(ciToken) + `"`,
	}
}

// needTools skips a test when the tools its script needs are missing
// (scripts/test-deps.sh installs them; under CI=true they are required).
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required (scripts/test-deps.sh installs it)", tool)
			}
			t.Skipf("%s not installed (scripts/test-deps.sh installs it)", tool)
		}
	}
}

// runBash runs a bash script against the daemon with the API's URL and a
// token in the environment, in dir.
func runBash(t *testing.T, d *testDaemon, dir, script, token string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "APPSERVER="+d.httpURL(""), "APPSERVER_TOKEN="+token, "CI_RUN_ID=test")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	// A stream a script left behind (it stopped reading) must not keep
	// the test waiting for its output pipes.
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	require.NoError(t, err, "script failed\nstdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	return out.String(), errb.String()
}

// kv parses the key=value lines of a script's output.
func kv(out string) map[string]string {
	m := map[string]string{}
	for line := range strings.SplitSeq(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// authRPC is newRPC with the operator's token.
func authRPC(t *testing.T, d *testDaemon) *rpc {
	t.Helper()
	c, _, err := dialDaemon(t, d, http.Header{"Authorization": {"Bearer " + operatorToken}})
	require.NoError(t, err)
	r := &rpc{t: t, ws: c.ws}
	r.call("initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "codex-tui", "title": nil, "version": "0.169.0"},
		"capabilities": map[string]any{"experimentalApi": true},
	})
	return r
}

// TestCIBotScript runs testdata/ci_bot.sh, a CI bot written in bash + curl,
// against the daemon, then checks from a websocket client that the thread
// it made is there and matches what the HTTP API reported.
func TestCIBotScript(t *testing.T) {
	needTools(t, "bash", "curl", "jq")
	for name, storeArgs := range storeBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := startFake(t, `{"steps":[
				{"text":"Build 1234 failed in TestFlaky.","usage":{"input_tokens":40,"output_tokens":8,"total_tokens":48}},
				{"tool_calls":[{"call_id":"call_ci1","name":"ci_build_status","arguments":{"build":"1234"}}]},
				{"match":{"call_output":"call_ci1"},"text":"Build 1234 still fails: TestFlaky timed out. Rerun it.","chunks":4}]}`)
			args := append(append(storeArgs, fakeArgs(fake, "responses")...), authArgs()...)
			d := startDaemon(t, args...)
			script, err := filepath.Abs("testdata/ci_bot.sh")
			require.NoError(t, err)
			out, errOut := runBash(t, d, t.TempDir(), script, ciToken)
			res := kv(out)
			require.Equal(t, "Build 1234 still fails: TestFlaky timed out. Rerun it.", res["answer"], errOut)
			threadID := res["thread"]

			// The retried POST did not start a turn: the model saw three
			// requests, one for the first turn and two (call, answer) for the
			// second.
			reqs := fake.Requests()
			require.Len(t, reqs, 3)
			require.Contains(t, string(reqs[2].Body), "TestFlaky timed out after 60s")

			// The operator's websocket client sees the same thread.
			r := authRPC(t, d)
			var read struct {
				Thread struct {
					ID         string  `json:"id"`
					Originator *string `json:"originator"`
					Turns      []struct {
						ID     string            `json:"id"`
						Status string            `json:"status"`
						Items  []json.RawMessage `json:"items"`
					} `json:"turns"`
				} `json:"thread"`
			}
			require.NoError(t, json.Unmarshal(r.call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true}), &read))
			require.Equal(t, "appserver-http/ci", *read.Thread.Originator)
			require.Len(t, read.Thread.Turns, 2)
			require.Equal(t, res["first_turn"], read.Thread.Turns[0].ID)
			require.Equal(t, res["second_turn"], read.Thread.Turns[1].ID)
			for _, tr := range read.Thread.Turns {
				require.Equal(t, "completed", tr.Status)
			}

			// Item for item, the websocket's transcript is the HTTP one.
			var wsItems []json.RawMessage
			for _, tr := range read.Thread.Turns {
				wsItems = append(wsItems, tr.Items...)
			}
			httpItems := httpGet[api.HTTPItemList](t, d, "/v1/threads/"+threadID+"/items?limit=100", ciToken)
			require.Len(t, httpItems.Data, len(wsItems))
			for i, it := range httpItems.Data {
				b, err := json.Marshal(it.Item)
				require.NoError(t, err)
				require.JSONEq(t, string(wsItems[i]), string(b), "item %d", i)
			}
			var kinds []string
			for _, it := range httpItems.Data {
				kinds = append(kinds, string(it.Item.Body.ItemType()))
			}
			require.Equal(t, []string{"userMessage", "agentMessage", "userMessage", "dynamicToolCall", "agentMessage"}, kinds)

			// And the websocket's thread/items/list agrees.
			var list struct {
				Data []struct {
					TurnID string          `json:"turnId"`
					Item   json.RawMessage `json:"item"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal(r.call("thread/items/list", map[string]any{"threadId": threadID}), &list))
			require.Len(t, list.Data, len(httpItems.Data))
			for i := range list.Data {
				require.Equal(t, httpItems.Data[i].TurnID, list.Data[i].TurnID)
			}

			// The principal cannot see the operator's threads; the operator
			// sees the principal's.
			opThread := startThread(t, r, nil)
			resp := httpDo(t, d, "GET", "/v1/threads/"+opThread, ciToken, nil)
			require.Equal(t, http.StatusNotFound, resp.StatusCode)
			resp = httpDo(t, d, "GET", "/v1/threads/"+threadID, operatorToken, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			// A principal's token is an HTTP API credential only.
			_, wsResp, err := dialDaemon(t, d, http.Header{"Authorization": {"Bearer " + ciToken}})
			require.Error(t, err)
			require.Equal(t, http.StatusUnauthorized, wsResp.StatusCode)
		})
	}
}

func httpDo(t *testing.T, d *testDaemon, method, path, token string, body any) *http.Response {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, d.httpURL(path), rd)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func httpGet[T any](t *testing.T, d *testDaemon, path, token string) T {
	t.Helper()
	resp := httpDo(t, d, "GET", path, token, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var v T
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	return v
}

// readmeExamples returns the ```sh blocks of README.md between the
// http-api-examples markers, in order.
func readmeExamples(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(b)
	const begin, end = "<!-- http-api-examples:begin -->", "<!-- http-api-examples:end -->"
	i, j := strings.Index(text, begin), strings.Index(text, end)
	require.True(t, i >= 0 && j > i, "README.md has no %s … %s section", begin, end)
	var blocks []string
	rest := text[i+len(begin) : j]
	for {
		k := strings.Index(rest, "```sh\n")
		if k < 0 {
			break
		}
		rest = rest[k+len("```sh\n"):]
		e := strings.Index(rest, "\n```")
		require.True(t, e >= 0, "unterminated code block in the README examples")
		blocks = append(blocks, rest[:e+1])
		rest = rest[e+len("\n```"):]
	}
	return blocks
}

// TestREADMECurlExamples runs the HTTP API section's curl examples, in
// order, as one bash script against a daemon, so that they cannot rot.
func TestREADMECurlExamples(t *testing.T) {
	needTools(t, "bash", "curl", "jq")
	blocks := readmeExamples(t)
	require.GreaterOrEqual(t, len(blocks), 5)
	fake := startFake(t, `{"steps":[
		{"text":"Looks good to me: the change is small and tested.","usage":{"input_tokens":30,"output_tokens":12,"total_tokens":42}},
		{"text":"Build 1234: 2 failures, both in TestFlaky.","chunks":4},
		{"tool_calls":[{"call_id":"call_ci7","name":"ci_build_status","arguments":{"build":"1234"}}]},
		{"match":{"call_output":"call_ci7"},"text":"TestFlaky timed out; rerun the build."}]}`)
	d := startDaemon(t, append(append([]string{"--data-dir", t.TempDir()}, fakeArgs(fake, "responses")...), authArgs()...)...)
	script := "set -euo pipefail\n" + strings.Join(blocks, "\n")
	out, errOut := runBash(t, d, t.TempDir(), script, ciToken)
	t.Logf("output of the README examples:\n%s", out)
	for _, want := range []string{
		"Looks good to me: the change is small and tested.",
		"Build 1234: 2 failures, both in TestFlaky.",
		"TestFlaky timed out; rerun the build.",
		api.ProblemInvalidRequest,
	} {
		require.Contains(t, out, want, "stderr:\n%s", errOut)
	}
}

// TestExecStreamsATurn runs `appserver exec` against the daemon.
func TestExecStreamsATurn(t *testing.T) {
	fake := startFake(t, `{"steps":[
		{"text":"First answer, streamed.","chunks":4,"usage":{"input_tokens":9,"output_tokens":4,"total_tokens":13}},
		{"match":{"user_text":"again"},"text":"Second answer."},
		{"match":{"user_text":"fail"},"error":{"status":401,"message":"bad key"}}]}`)
	d := startDaemon(t, append(append([]string{"--data-dir", t.TempDir()}, fakeArgs(fake, "responses")...), authArgs()...)...)
	t.Setenv(execclient.EnvToken, ciToken)
	exec := func(args ...string) (string, string, error) {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := run(ctx, append([]string{"exec", "--server", d.addr}, args...), &out, &errb)
		return out.String(), errb.String(), err
	}

	out, progress, err := exec("--cwd", t.TempDir(), "say something")
	require.NoError(t, err, progress)
	require.Equal(t, "First answer, streamed.\n", out, "only the agent's text goes to stdout")
	require.Contains(t, progress, "thread ")
	require.Regexp(t, `turn \S+ completed in \d+(\.\d+)?m?s \(13 tokens: 9 in, 4 out\)`, progress)
	threadID := strings.Fields(strings.SplitN(progress, "thread ", 2)[1])[0]

	out, progress, err = exec("--thread", threadID, "--json", "again")
	require.NoError(t, err, progress)
	var turn api.HTTPTurn
	require.NoError(t, json.Unmarshal([]byte(out), &turn), out)
	require.Equal(t, threadID, turn.ThreadID)
	require.Equal(t, api.TurnCompleted, turn.Status)
	require.Equal(t, "Second answer.", *turn.FinalMessage)
	require.Len(t, turn.Items, 2)

	_, progress, err = exec("--thread", threadID, "fail now")
	require.Error(t, err)
	require.Equal(t, 1, exitCode(err))
	require.Contains(t, err.Error(), "turn failed")
	require.Contains(t, err.Error(), "401")
	require.Contains(t, progress, "failed")

	// A rerun with the same Idempotency-Key does not run the turn again.
	before := len(fake.Requests())
	_, _, err = exec("--thread", threadID, "--idempotency-key", "job-7", "again")
	require.NoError(t, err)
	out, _, err = exec("--thread", threadID, "--idempotency-key", "job-7", "--json", "again")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &turn))
	require.Equal(t, before+1, len(fake.Requests()))

	// Usage and auth errors.
	_, _, err = exec()
	require.Equal(t, 2, exitCode(err))
	_, _, err = exec("--thread", "01a2007c-e7fe-75b3-9b2c-d4ca854a9857", "hello")
	require.Error(t, err)
	require.Equal(t, execclient.ExitRejected, exitCode(err), "an unknown thread: %v", err)
	t.Setenv(execclient.EnvToken, "wrong")
	_, _, err = exec("hello")
	require.Error(t, err)
	require.Contains(t, err.Error(), "invalid bearer token")
	require.Equal(t, execclient.ExitRejected, exitCode(err), "a wrong token: %v", err)

	// A daemon that is gone is told apart from a failed turn.
	d.stop(t)
	_, _, err = exec("hello")
	require.Error(t, err)
	require.Equal(t, execclient.ExitUnreachable, exitCode(err), "%v", err)
}

// TestExecUnknownThreadIsNotFound checks the error a CI log shows.
func TestExecUnknownThreadIsNotFound(t *testing.T) {
	fake := startFake(t, `{"steps":[]}`)
	d := startDaemon(t, append([]string{"--data-dir", t.TempDir()}, fakeArgs(fake, "responses")...)...)
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"exec", "--server", d.httpURL(""), "--thread", "01a2007c-e7fe-75b3-9b2c-d4ca854a9857", "hi"}, &out, &errb)
	require.Error(t, err)
	require.Contains(t, err.Error(), "404 Not found: thread 01a2007c-e7fe-75b3-9b2c-d4ca854a9857 not found")
}

// TestHTTPApprovalOfABuiltInCommand answers a real command approval over
// HTTP: the request appears on the event stream with a requestId, the
// bot's POST approves it, the command runs and the turn completes.
func TestHTTPApprovalOfABuiltInCommand(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	call, _ := json.Marshal(map[string]any{"call_id": "call_t", "name": "shell_command", "arguments": map[string]any{"command": "touch approved.txt"}})
	fake := startFake(t, `{"steps":[{"tool_calls":[`+string(call)+`]},{"match":{"call_output":"call_t"},"text":"done"}]}`)
	d := startDaemon(t, append(append([]string{"--data-dir", t.TempDir()}, fakeArgs(fake, "responses")...), authArgs()...)...)

	resp := httpDo(t, d, "POST", "/v1/threads", ciToken, map[string]any{"cwd": ws, "approvalPolicy": "untrusted", "sandbox": "workspace-write"})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var th api.HTTPThread
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&th))
	resp = httpDo(t, d, "POST", "/v1/threads/"+th.Thread.ID+"/turns", ciToken, map[string]any{"input": []any{map[string]any{"type": "text", "text": "go"}}})
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var turn api.HTTPTurn
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&turn))

	events := httpDo(t, d, "GET", sprintfPath("/v1/threads/%s/events?after=%d&until=turnCompleted", th.Thread.ID, *turn.EventsAfter), ciToken, nil)
	require.Equal(t, http.StatusOK, events.StatusCode)
	var seen []string
	sc := bufioScanner(events)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev api.HTTPEvent
		require.NoError(t, json.Unmarshal([]byte(data), &ev))
		seen = append(seen, ev.Method)
		if ev.Method == "item/commandExecution/requestApproval" {
			require.NotNil(t, ev.RequestID)
			a := httpDo(t, d, "POST", "/v1/threads/"+th.Thread.ID+"/approvals/"+*ev.RequestID, ciToken, map[string]any{"decision": "accept"})
			require.Equal(t, http.StatusOK, a.StatusCode)
			again := httpDo(t, d, "POST", "/v1/threads/"+th.Thread.ID+"/approvals/"+*ev.RequestID, ciToken, map[string]any{"decision": "accept"})
			require.Equal(t, http.StatusConflict, again.StatusCode)
		}
	}
	require.Contains(t, seen, "serverRequest/resolved")
	require.Equal(t, "turn/completed", seen[len(seen)-1])
	done := httpGet[api.HTTPTurn](t, d, "/v1/threads/"+th.Thread.ID+"/turns/"+turn.ID+"?wait=true", ciToken)
	require.Equal(t, api.TurnCompleted, done.Status)
	require.Equal(t, "done", *done.FinalMessage)
	require.FileExists(t, filepath.Join(ws, "approved.txt"))
}

func sprintfPath(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func bufioScanner(resp *http.Response) *bufio.Scanner {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	return sc
}
