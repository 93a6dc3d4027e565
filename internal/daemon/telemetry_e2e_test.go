package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// logRecords are the JSON log lines with the given msg.
func logRecords(t *testing.T, logs string, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "log line %q is not JSON", line)
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// TestTelemetryAfterTurns runs turns of every kind the series count (a
// plain answer, an approved and a declined shell call, a retried 503, the
// model's 401), then scrapes /metrics and reads the JSON logs.
func TestTelemetryAfterTurns(t *testing.T) {
	ws := apptest.Workspace(t)
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"hello"},"reasoning":{"summary":["thinking"]},"text":"hi there",
		 "usage":{"input_tokens":120,"cached_input_tokens":100,"output_tokens":30,"reasoning_output_tokens":10,"total_tokens":150}},
		{"match":{"user_text":"make it"},"tool_calls":[`+apptest.ShellCall("call_ok", "touch made.txt")+`],
		 "usage":{"input_tokens":200,"output_tokens":20,"total_tokens":220}},
		{"match":{"call_output":"call_ok"},"text":"made","usage":{"input_tokens":250,"output_tokens":5,"total_tokens":255}},
		{"match":{"user_text":"remove it"},"tool_calls":[`+apptest.ShellCall("call_no", "rm made.txt")+`]},
		{"match":{"call_output":"call_no"},"text":"not removed"},
		{"match":{"user_text":"flaky"},"error":{"status":503,"message":"busy"}},
		{"match":{"user_text":"flaky"},"text":"after a retry"},
		{"match":{"user_text":"boom"},"error":{"status":401,"message":"Incorrect API key provided."}}]}`)

	var logs apptest.SyncBuffer
	d := apptest.StartWith(t, apptest.Options{Stderr: &logs}, "--data-dir", t.TempDir(),
		"--log-format", "json", "--log-level", "info",
		"-c", `model="fake-model"`, "-c", `model_provider="fake"`,
		"-c", `model_providers.fake={name="Fake", base_url="`+fake.URL()+`", wire_api="responses", request_max_retries=1}`)

	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws, "approvalPolicy": "untrusted", "sandbox": "workspace-write"})
	turn := func(text, decision string, want string) string {
		t.Helper()
		frames := apptest.Turn(t, r, apptest.Input(threadID, text), func(apptest.Frame) any { return map[string]any{"decision": decision} })
		var tr apptest.TurnResult
		require.NoError(t, json.Unmarshal(frames[len(frames)-1].Params, &tr))
		require.Equal(t, want, tr.Turn.Status, text)
		return tr.Turn.ID
	}
	turn("hello", "", "completed")
	turn("make it", "accept", "completed")
	turn("remove it", "decline", "completed")
	turn("flaky", "", "completed")
	failedTurn := turn("boom", "", "failed")

	m := apptest.Metrics(t, d.URL("/metrics"))
	// Labels print sorted by name.
	const fm = `model="fake-model",provider="fake"`
	for series, want := range map[string]float64{
		`appserver_turns_total{status="completed"}`:                              4,
		`appserver_turns_total{status="failed"}`:                                 1,
		`appserver_turn_duration_seconds_count{status="completed"}`:              4,
		`appserver_turn_duration_seconds_count{status="failed"}`:                 1,
		`appserver_model_retries_total{` + fm + `}`:                              1,
		`appserver_model_request_duration_seconds_count{` + fm + `}`:             7,
		`appserver_model_time_to_first_token_seconds_count{` + fm + `}`:          6,
		`appserver_tool_calls_total{outcome="ok",tool="shell_command"}`:          1,
		`appserver_tool_calls_total{outcome="failed",tool="shell_command"}`:      1,
		`appserver_tool_call_duration_seconds_count{tool="shell_command"}`:       2,
		`appserver_approvals_pending`:                                            0,
		`appserver_approval_decisions_total{decision="accept",kind="approval"}`:  1,
		`appserver_approval_decisions_total{decision="decline",kind="approval"}`: 1,
		`appserver_threads_loaded`:                                               1,
		`appserver_turns_running`:                                                0,
	} {
		got, ok := m[series]
		require.True(t, ok, "no series %s", series)
		require.Equal(t, want, got, series)
	}
	for series, want := range map[string]float64{
		`appserver_model_requests_total{model="fake-model",outcome="ok",provider="fake"}`:           6,
		`appserver_model_requests_total{model="fake-model",outcome="unauthorized",provider="fake"}`: 1,
		`appserver_model_tokens_total{model="fake-model",provider="fake",type="input"}`:             570,
		`appserver_model_tokens_total{model="fake-model",provider="fake",type="cached_input"}`:      100,
		`appserver_model_tokens_total{model="fake-model",provider="fake",type="output"}`:            55,
		`appserver_model_tokens_total{model="fake-model",provider="fake",type="reasoning_output"}`:  10,
	} {
		got, ok := m[series]
		require.True(t, ok, "no series %s", series)
		require.Equal(t, want, got, series)
	}
	for _, sum := range []string{
		`appserver_turn_duration_seconds_sum{status="completed"}`,
		`appserver_model_request_duration_seconds_sum{model="fake-model",provider="fake"}`,
		`appserver_model_time_to_first_token_seconds_sum{model="fake-model",provider="fake"}`,
		`appserver_tool_call_duration_seconds_sum{tool="shell_command"}`,
	} {
		require.Greater(t, m[sum], 0.0, sum)
	}
	// The flaky turn waited a retry's backoff (200ms, jitter at most 10%
	// off): the request duration covers it.
	require.Greater(t, m[`appserver_model_request_duration_seconds_sum{model="fake-model",provider="fake"}`], 0.15)
	require.Greater(t, m[`appserver_store_operation_duration_seconds_count{op="write",outcome="ok"}`], 0.0)
	require.Greater(t, m[`appserver_store_group_commit_batches_count`], 0.0)
	require.GreaterOrEqual(t, m[`appserver_store_group_commit_batches_sum`], m[`appserver_store_group_commit_batches_count`], "a commit carries a batch at least")
	var build string
	for k, v := range m {
		if strings.HasPrefix(k, "appserver_build_info{") {
			build = k
			require.Equal(t, 1.0, v)
		}
	}
	require.Contains(t, build, `goversion="go`)
	require.Contains(t, build, `version="`)

	// Logs: the 401 with its status, provider and attempt; the failed turn;
	// the declined command; every duration as text.
	text := logs.String()
	failed := logRecords(t, text, "model request failed")
	require.Len(t, failed, 1, text)
	rec := failed[0]
	require.Equal(t, "WARN", rec["level"])
	require.Equal(t, threadID, rec["thread"])
	require.Equal(t, failedTurn, rec["turn"])
	require.Equal(t, "fake", rec["provider"])
	require.Equal(t, 401.0, rec["status"])
	require.Equal(t, 1.0, rec["attempts"])
	require.Equal(t, "unauthorized", rec["outcome"])
	turnFailed := logRecords(t, text, "turn failed")
	require.Len(t, turnFailed, 1, text)
	require.Equal(t, failedTurn, turnFailed[0]["turn"])
	require.Contains(t, turnFailed[0]["error"], "401")
	toolFailed := logRecords(t, text, "tool call failed")
	require.Len(t, toolFailed, 1, text)
	require.Equal(t, "shell_command", toolFailed[0]["tool"])
	require.Equal(t, "call_no", toolFailed[0]["call_id"])
	require.Equal(t, threadID, toolFailed[0]["thread"])
	require.Len(t, logRecords(t, text, "model request failed; retrying"), 1, text)
	for _, recs := range [][]map[string]any{failed, turnFailed, toolFailed} {
		s, ok := recs[0]["duration"].(string)
		require.True(t, ok, "duration %v is not text", recs[0]["duration"])
		_, err := time.ParseDuration(s)
		require.NoError(t, err)
	}
	retry := logRecords(t, text, "model request failed; retrying")[0]
	require.IsType(t, "", retry["delay"], "the retry delay is text")
	require.Equal(t, threadID, retry["thread"])
	require.NotEmpty(t, retry["turn"])
	require.Equal(t, "fake", retry["provider"])
	require.Equal(t, 503.0, retry["status"])
	require.Equal(t, 1.0, retry["attempt"])
}
