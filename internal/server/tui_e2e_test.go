package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// The real TUI's everyday requests end to end, against what codex-cli
// 0.169.0 does with the same params and the same fake model.

// sentParams returns the params of the n-th request of method the client
// sent in a reference capture.
func sentParams(t *testing.T, name, method string, n int) map[string]any {
	t.Helper()
	for _, l := range apptest.ReferenceFrames(t, name) {
		var f struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		require.NoError(t, json.Unmarshal(l.Frame, &f))
		if l.Dir == "send" && f.Method == method {
			if n == 0 {
				return f.Params
			}
			n--
		}
	}
	t.Fatalf("%s: no %s request", name, method)
	return nil
}

// The TUI's hidden title thread (title_thread.jsonl: its thread/start
// config turns every tool off, its turn asks for a JSON answer) gets a
// model request with no tools and the JSON-schema output format, as the
// reference sends it (title_thread_model.json).
func TestTitleThreadOffersNoTools(t *testing.T) {
	const capture = "title_thread.jsonl"
	var want struct {
		Tools []json.RawMessage `json:"tools"`
		Text  json.RawMessage   `json:"text"`
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "golden", "reference", "title_thread_model.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &want))
	require.Empty(t, want.Tools)

	fake := apptest.StartFake(t, `{"steps":[{"text":"{\"title\":\"Say hi\"}"}]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	r := d.RPC(t)
	start := sentParams(t, capture, "thread/start", 0)
	start["cwd"] = t.TempDir()
	threadID := apptest.StartThread(t, r, start)
	turn := sentParams(t, capture, "turn/start", 0)
	turn["threadId"] = threadID
	r.Call("turn/start", turn)
	done := r.Until("turn/completed")
	var tr apptest.TurnResult
	require.NoError(t, json.Unmarshal(done.Params, &tr))
	require.Equal(t, "completed", tr.Turn.Status)

	reqs := fake.Requests()
	require.Len(t, reqs, 1)
	var got struct {
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
		Text json.RawMessage `json:"text"`
	}
	require.NoError(t, reqs[0].Decode(&got))
	require.Empty(t, got.Tools, "tools offered to the title thread")
	require.JSONEq(t, string(want.Text), string(got.Text))
}

// default_permissions in a thread's config picks a built-in permission
// profile's sandbox when the request names no sandbox mode.
func TestThreadConfigDefaultPermissions(t *testing.T) {
	d := apptest.Start(t, "--data-dir", t.TempDir(), "-c", `sandbox_mode="read-only"`)
	r := d.RPC(t)
	var res struct {
		Sandbox struct {
			Type string `json:"type"`
		} `json:"sandbox"`
	}
	raw := r.Call("thread/start", map[string]any{"cwd": t.TempDir(), "config": map[string]any{"default_permissions": ":workspace"}})
	require.NoError(t, json.Unmarshal(raw, &res))
	require.Equal(t, "workspaceWrite", res.Sandbox.Type)
	f := r.CallRaw("thread/start", map[string]any{"cwd": t.TempDir(), "config": map[string]any{"default_permissions": ":nope"}})
	require.NotNil(t, f.Error)
	require.Contains(t, f.Error.Message, "default_permissions refers to unknown built-in profile `:nope`")
}

// A user's `!cmd` (thread/shellCommand) runs in a turn of its own, as
// the reference runs it (shell_command.jsonl): unsandboxed in the thread's
// cwd, a commandExecution item with source userShell, and a
// <user_shell_command> message in the history the model reads next turn.
func TestShellCommandMatchesReference(t *testing.T) {
	const capture = "shell_command.jsonl"
	var refFrames []apptest.Frame
	sentShell := false
	for _, l := range apptest.ReferenceFrames(t, capture) {
		var f apptest.Frame
		require.NoError(t, json.Unmarshal(l.Frame, &f))
		if l.Dir == "send" {
			if f.Method == "turn/start" && sentShell {
				break
			}
			sentShell = sentShell || f.Method == "thread/shellCommand"
			continue
		}
		if sentShell {
			refFrames = append(refFrames, f)
		}
	}
	var refModel struct {
		Msgs []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"input_last_user_shell"`
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "golden", "reference", "shell_command_model.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &refModel))
	refText := refModel.Msgs[0].Content[0].Text

	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[{"text":"It printed one."}]}`)
			d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, "responses")...)...)
			r := d.RPC(t)
			cwd := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(cwd, "notes.txt"), []byte("one\n"), 0o644))
			threadID := apptest.StartThread(t, r, map[string]any{"cwd": cwd, "sandbox": "read-only"})

			r.Seen = nil
			res := r.Call("thread/shellCommand", map[string]any{"threadId": threadID, "command": "cat notes.txt", "timeoutMs": nil})
			require.JSONEq(t, `{}`, string(res))
			var frames []apptest.Frame
			frames = append(frames, r.Seen...)
			r.Seen = nil
			for len(frames) == 0 || frames[len(frames)-1].Method != "turn/completed" {
				f, err := r.Read(20 * time.Second)
				require.NoError(t, err)
				frames = append(frames, f)
			}
			require.Equal(t, apptest.Outline(t, refFrames), apptest.Outline(t, frames))
			apptest.ValidateSchema(t, "ThreadShellCommandResponse", res)
			for _, f := range frames {
				if name, ok := apptest.NotificationSchemas[f.Method]; ok {
					apptest.ValidateSchema(t, name, f.Params)
				}
			}
			var item apptest.Item
			for _, f := range frames {
				if f.Method == "item/completed" {
					var p struct {
						Item apptest.Item `json:"item"`
					}
					require.NoError(t, json.Unmarshal(f.Params, &p))
					item = p.Item
				}
			}
			require.Equal(t, "userShell", item.Source)
			require.Equal(t, "completed", item.Status)
			require.Equal(t, "one\n", *item.AggregatedOutput)
			require.Equal(t, 0, *item.ExitCode)
			require.Equal(t, cwd, item.Cwd)
			require.Contains(t, item.Command, "cat notes.txt")
			require.JSONEq(t, `[{"type":"read","command":"cat notes.txt","name":"notes.txt","path":"`+filepath.Join(cwd, "notes.txt")+`"}]`, string(apptest.JSON(t, item.CommandActions)))

			// Unsandboxed although the thread is read-only; a failure is
			// a failed item with its exit code.
			r.Call("thread/shellCommand", map[string]any{"threadId": threadID, "command": "touch made.txt; echo err >&2; exit 3"})
			done := r.Until("turn/completed")
			require.NotNil(t, done)
			_, err := os.Stat(filepath.Join(cwd, "made.txt"))
			require.NoError(t, err, "the user's command runs unsandboxed")

			r.Call("turn/start", apptest.Input(threadID, "What did it print?"))
			r.Until("turn/completed")
			reqs := fake.Requests()
			require.Len(t, reqs, 1)
			var body apptest.ModelRequest
			require.NoError(t, reqs[0].Decode(&body))
			var shellMsgs []string
			for _, in := range body.Input {
				if in.Role == "user" && len(in.Content) == 1 && strings.HasPrefix(in.Content[0].Text, "<user_shell_command>") {
					shellMsgs = append(shellMsgs, in.Content[0].Text)
				}
			}
			require.Len(t, shellMsgs, 2)
			durRE := regexp.MustCompile(`Duration: [0-9.]+ seconds`)
			require.Equal(t, durRE.ReplaceAllString(refText, "Duration: X seconds"), durRE.ReplaceAllString(shellMsgs[0], "Duration: X seconds"))
			require.Contains(t, shellMsgs[1], "Exit code: 3\n")
			require.Contains(t, shellMsgs[1], "Output:\nerr\n")
		})
	}
}

// The informational methods the TUI calls at start-up and for /permissions
// answer in the reference's shape.
func TestStartupMethodsMatchSchema(t *testing.T) {
	d := apptest.Start(t, "--data-dir", t.TempDir(), "-c", `model_provider="local"`,
		"-c", `model_providers.local={name="Local", base_url="http://127.0.0.1:1/v1", env_key="LOCAL_KEY"}`)
	r := d.RPC(t)
	for _, tc := range []struct {
		method, schema string
		params         any
		want           string
	}{
		{"permissionProfile/list", "PermissionProfileListResponse", map[string]any{},
			`{"data":[{"id":":read-only","description":null,"allowed":true},{"id":":workspace","description":null,"allowed":true},{"id":":danger-full-access","description":null,"allowed":true}],"nextCursor":null}`},
		{"permissionProfile/list", "PermissionProfileListResponse", map[string]any{"limit": 2},
			`{"data":[{"id":":read-only","description":null,"allowed":true},{"id":":workspace","description":null,"allowed":true}],"nextCursor":"2"}`},
		{"permissionProfile/list", "PermissionProfileListResponse", map[string]any{"cursor": "2"},
			`{"data":[{"id":":danger-full-access","description":null,"allowed":true}],"nextCursor":null}`},
		{"modelProvider/list", "ModelProviderListResponse", map[string]any{},
			`{"data":[{"id":"local","name":"Local","canEdit":false,"baseUrl":"http://127.0.0.1:1/v1","settings":{"type":"customGateway","auth":{"mode":"environmentVariable","envKey":"LOCAL_KEY"}}},
			{"id":"openai","name":"OpenAI","canEdit":false,"baseUrl":null,"settings":{"type":"openai"}}],"defaultProviderId":"local","canChangeDefault":true}`},
		{"plugin/installed", "PluginInstalledResponse", map[string]any{"cwds": []string{t.TempDir()}, "installSuggestionPluginNames": nil},
			`{"marketplaces":[],"marketplaceLoadErrors":[]}`},
		{"account/bedrock/checkGovCloudRequirements", "BedrockCheckGovCloudRequirementsResponse", map[string]any{},
			`{"isGovCloud":false,"shouldWarn":false}`},
	} {
		res := r.Call(tc.method, tc.params)
		require.JSONEq(t, tc.want, string(res), tc.method)
		apptest.ValidateSchema(t, tc.schema, res)
	}
}

// The TUI's /model saves the default with config/batchWrite: the value is
// written to the per-user overlay in data_dir and survives a restart; a
// value the configuration refuses is not written at all.
func TestConfigWriteSurvivesRestart(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			dataDir := t.TempDir()
			args := append(append([]string{}, storeArgs...), "--data-dir", dataDir)
			d := apptest.Start(t, args...)
			r := d.RPC(t)
			res := r.Call("config/batchWrite", map[string]any{"edits": []any{
				map[string]any{"keyPath": "model", "value": "saved-model", "mergeStrategy": "replace"},
				map[string]any{"keyPath": "model_reasoning_effort", "value": "high", "mergeStrategy": "replace"},
			}, "filePath": nil, "expectedVersion": nil, "reloadUserConfig": true})
			apptest.ValidateSchema(t, "ConfigWriteResponse", res)
			var wr struct {
				Status   string `json:"status"`
				Version  string `json:"version"`
				FilePath string `json:"filePath"`
			}
			require.NoError(t, json.Unmarshal(res, &wr))
			require.Equal(t, "ok", wr.Status)
			require.Equal(t, filepath.Join(dataDir, "user-config.toml"), wr.FilePath)

			f := r.CallRaw("config/value/write", map[string]any{"keyPath": "approval_policy", "value": "sometimes", "mergeStrategy": "replace"})
			require.NotNil(t, f.Error, "an invalid value is refused")
			f = r.CallRaw("config/value/write", map[string]any{"keyPath": "data_dir", "value": "/elsewhere", "mergeStrategy": "replace"})
			require.NotNil(t, f.Error, "clients do not move the data dir")
			f = r.CallRaw("config/value/write", map[string]any{"keyPath": "model", "value": "x", "mergeStrategy": "replace", "expectedVersion": "sha256:00"})
			require.NotNil(t, f.Error, "a stale expectedVersion is refused")
			res = r.Call("config/value/write", map[string]any{"keyPath": "approval_policy", "value": "never", "mergeStrategy": "replace", "expectedVersion": wr.Version})
			apptest.ValidateSchema(t, "ConfigWriteResponse", res)
			d.Stop(t)

			d = apptest.Start(t, args...)
			r = d.RPC(t)
			var st struct {
				Model          string `json:"model"`
				ApprovalPolicy string `json:"approvalPolicy"`
			}
			require.NoError(t, json.Unmarshal(r.Call("thread/start", map[string]any{"cwd": t.TempDir()}), &st))
			require.Equal(t, "saved-model", st.Model)
			require.Equal(t, "never", st.ApprovalPolicy)
		})
	}
}

// The TUI's /permissions (and /model on a running thread) change the
// thread's settings with thread/settings/update; its next turns use them.
func TestThreadSettingsUpdate(t *testing.T) {
	d := apptest.Start(t, "--data-dir", t.TempDir(), "-c", `model="m1"`)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, map[string]any{"sandbox": "read-only"})
	res := r.Call("thread/settings/update", map[string]any{
		"threadId": threadID, "disabledPluginIds": nil, "cwd": nil, "environments": nil, "approvalPolicy": "never",
		"approvalsReviewer": "user", "sandboxPolicy": nil, "permissions": ":workspace", "model": "m2", "effort": "high",
		"summary": nil, "collaborationMode": nil, "multiAgentMode": nil, "personality": nil,
	})
	apptest.ValidateSchema(t, "ThreadSettingsUpdateResponse", res)
	var st struct {
		Model           string `json:"model"`
		ApprovalPolicy  string `json:"approvalPolicy"`
		ReasoningEffort string `json:"reasoningEffort"`
		Sandbox         struct {
			Type string `json:"type"`
		} `json:"sandbox"`
	}
	require.NoError(t, json.Unmarshal(r.Call("thread/resume", map[string]any{"threadId": threadID}), &st))
	require.Equal(t, "m2", st.Model)
	require.Equal(t, "never", st.ApprovalPolicy)
	require.Equal(t, "high", st.ReasoningEffort)
	require.Equal(t, "workspaceWrite", st.Sandbox.Type)

	f := r.CallRaw("thread/settings/update", map[string]any{"threadId": threadID, "permissions": ":read-only", "sandboxPolicy": map[string]any{"type": "readOnly"}})
	require.NotNil(t, f.Error)
	f = r.CallRaw("thread/settings/update", map[string]any{"threadId": threadID, "permissions": ":everything"})
	require.NotNil(t, f.Error)
	require.Contains(t, f.Error.Message, "default_permissions refers to unknown built-in profile `:everything`")
}
