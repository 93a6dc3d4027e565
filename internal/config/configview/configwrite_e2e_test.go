package configview_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
)

// A config write that the daemon's -c override hides answers okOverridden
// in the reference's shape.
func TestConfigWriteOverridden(t *testing.T) {
	d := apptest.Start(t, "--data-dir", t.TempDir(), "-c", `model="m1"`)
	r := d.RPC(t)
	res := r.Call("config/value/write", map[string]any{"keyPath": "model", "value": "m2", "mergeStrategy": "replace"})
	apptest.ValidateSchema(t, "ConfigWriteResponse", res)
	var wr struct {
		Status             string          `json:"status"`
		OverriddenMetadata json.RawMessage `json:"overriddenMetadata"`
	}
	require.NoError(t, json.Unmarshal(res, &wr))
	require.Equal(t, "okOverridden", wr.Status)
	require.JSONEq(t, `{"message":"Overridden by session flags","overridingLayer":{"name":{"type":"sessionFlags"},"version":"override"},"effectiveValue":"m1"}`, string(wr.OverriddenMetadata))
}

// A config write reaches new threads and config/read without a restart:
// the model and the approval and sandbox defaults.
func TestConfigWriteAppliesLive(t *testing.T) {
	d := apptest.Start(t, "--data-dir", t.TempDir())
	r := d.RPC(t)
	res := r.Call("config/batchWrite", map[string]any{"edits": []any{
		map[string]any{"keyPath": "model", "value": "live-model", "mergeStrategy": "replace"},
		map[string]any{"keyPath": "approval_policy", "value": "never", "mergeStrategy": "replace"},
		map[string]any{"keyPath": "sandbox_mode", "value": "workspace-write", "mergeStrategy": "replace"},
	}})
	apptest.ValidateSchema(t, "ConfigWriteResponse", res)
	var st struct {
		Model          string `json:"model"`
		ModelProvider  string `json:"modelProvider"`
		ApprovalPolicy string `json:"approvalPolicy"`
		Sandbox        struct {
			Type string `json:"type"`
		} `json:"sandbox"`
	}
	require.NoError(t, json.Unmarshal(r.Call("thread/start", map[string]any{"cwd": t.TempDir()}), &st))
	require.Equal(t, "live-model", st.Model)
	require.Equal(t, "never", st.ApprovalPolicy)
	require.Equal(t, "workspaceWrite", st.Sandbox.Type)

	var read struct {
		Config struct {
			Model string `json:"model"`
		} `json:"config"`
	}
	require.NoError(t, json.Unmarshal(r.Call("config/read", map[string]any{}), &read))
	require.Equal(t, "live-model", read.Config.Model, "config/read shows the written value")
}

// The keys only the daemon's operator sets are refused over the websocket
// by config/value/write and config/batchWrite, with -32600, the key named
// and config_write_error_code; nothing is written, so nothing applies
// after a restart either. A value with a NUL is refused the same way.
func TestConfigWriteRefusesOperatorKeys(t *testing.T) {
	dataDir := t.TempDir()
	d := apptest.Start(t, "--data-dir", dataDir, "-c", `model="m1"`)
	r := d.RPC(t)
	for _, tc := range []struct {
		key   string
		value any
		code  string
	}{
		{"http_api.principal_max_sandbox", "danger-full-access", "configLayerReadonly"},
		{"http_api.principals.mallory.token_sha256", apptest.SHA256Hex("mallory"), "configLayerReadonly"},
		{"model_providers.evil", map[string]any{"base_url": "http://127.0.0.1:9/v1", "env_key": "OPENAI_API_KEY"}, "configLayerReadonly"},
		{"mcp_servers.x.command", "/bin/sh", "configLayerReadonly"},
		{"event_retention", "1s", "configLayerReadonly"},
		{"node_id", "other", "configLayerReadonly"},
		{"sandbox_backend", "landlock", "configLayerReadonly"},
		{"otel.endpoint", "http://127.0.0.1:9", "configLayerReadonly"},
		{"model", "a\u0000b", "configValidationError"},
		{"model_provider", "evil", "configValidationError"},
	} {
		for _, req := range []struct {
			method string
			params map[string]any
		}{
			{"config/value/write", map[string]any{"keyPath": tc.key, "value": tc.value, "mergeStrategy": "replace"}},
			{"config/batchWrite", map[string]any{"edits": []any{
				map[string]any{"keyPath": "approval_policy", "value": "never", "mergeStrategy": "replace"},
				map[string]any{"keyPath": tc.key, "value": tc.value, "mergeStrategy": "replace"},
			}}},
		} {
			f := r.CallRaw(req.method, req.params)
			require.NotNil(t, f.Error, "%s %s", req.method, tc.key)
			require.Equal(t, -32600, f.Error.Code)
			require.Contains(t, f.Error.Message, `"`+tc.key+`"`)
			require.JSONEq(t, `{"config_write_error_code":"`+tc.code+`"}`, string(f.Error.Data), "%s %s", req.method, tc.key)
		}
	}
	_, err := os.Stat(filepath.Join(dataDir, "user-config.toml"))
	require.True(t, errors.Is(err, os.ErrNotExist), "nothing was written")

	// Allowed keys still work.
	r.Call("config/value/write", map[string]any{"keyPath": "model_reasoning_effort", "value": "high", "mergeStrategy": "replace"})
	var st struct {
		ApprovalPolicy string `json:"approvalPolicy"`
		Sandbox        struct {
			Type string `json:"type"`
		} `json:"sandbox"`
	}
	require.NoError(t, json.Unmarshal(r.Call("thread/start", map[string]any{"cwd": t.TempDir()}), &st))
	require.Equal(t, "on-request", st.ApprovalPolicy, "the refused batch wrote nothing")
	require.Equal(t, "readOnly", st.Sandbox.Type)
}

// A user config poisoned on disk (by an older build or a hand edit) with
// keys only the operator sets: after a restart they are not applied, each
// is named in a configWarning, and what clients may write still applies.
func TestPoisonedUserConfigAfterRestart(t *testing.T) {
	dataDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dataDir, "user-config.toml"), []byte(`model = "kept-model"
event_retention = "1s"
sandbox_backend = "landlock"
[http_api]
principal_max_sandbox = "danger-full-access"
[mcp_servers.x]
command = "/bin/false"
[otel]
endpoint = "http://127.0.0.1:9"
`), 0o600))
	d := apptest.Start(t, "--data-dir", dataDir)
	c, _, err := d.Dial(t, nil)
	require.NoError(t, err)
	r := c
	r.Call("initialize", map[string]any{"clientInfo": map[string]any{"name": "t", "title": nil, "version": "0"}})
	var warned []string
	for range 5 {
		f, err := r.Read(5 * time.Second)
		require.NoError(t, err)
		require.Equal(t, "configWarning", f.Method)
		var w struct {
			Summary string `json:"summary"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &w))
		warned = append(warned, w.Summary)
	}
	for _, k := range []string{"event_retention", "sandbox_backend", "http_api", "mcp_servers", "otel"} {
		require.True(t, slices.ContainsFunc(warned, func(s string) bool { return strings.Contains(s, `config key "`+k+`"`) }), "%s not warned about: %q", k, warned)
	}
	var read struct {
		Config struct {
			Model          string         `json:"model"`
			EventRetention string         `json:"event_retention"`
			SandboxBackend string         `json:"sandbox_backend"`
			MCPServers     map[string]any `json:"mcp_servers"`
			HTTPAPI        struct {
				PrincipalMaxSandbox string `json:"principal_max_sandbox"`
			} `json:"http_api"`
			OTel struct {
				Endpoint string `json:"endpoint"`
			} `json:"otel"`
		} `json:"config"`
	}
	require.NoError(t, json.Unmarshal(r.Call("config/read", map[string]any{}), &read))
	require.Equal(t, "kept-model", read.Config.Model)
	require.Equal(t, "24h0m0s", read.Config.EventRetention)
	require.Equal(t, "auto", read.Config.SandboxBackend)
	require.Empty(t, read.Config.MCPServers)
	require.Equal(t, "workspace-write", read.Config.HTTPAPI.PrincipalMaxSandbox)
	require.Empty(t, read.Config.OTel.Endpoint)
}

// A principal's own user config applies to the threads that principal
// starts, through the HTTP API and /mcp, and to nobody else's: another
// principal's and the operator's threads keep the daemon's defaults. The
// principal writes it over the websocket.
func TestPrincipalUserConfigAppliesToItsThreads(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"match":{"user_text":"Hello"},"text":"hi"}]}`)
	dataDir := t.TempDir()
	pdir := filepath.Join(dataDir, "principal-config")
	require.NoError(t, os.MkdirAll(pdir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(pdir, "ci.toml"), []byte("model = \"ci-model\"\nsandbox_mode = \"read-only\"\n"), 0o600))
	// The daemon's defaults in its file: -c would win over every user
	// config.
	file := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(file, []byte(`model = "daemon-model"
sandbox_mode = "workspace-write"
model_provider = "fake"
[model_providers.fake]
base_url = "`+fake.URL()+`"
request_max_retries = 0
`), 0o600))
	args := append([]string{"--config", file, "--data-dir", dataDir,
		"-c", `http_api.principals.other.token_sha256="` + apptest.SHA256Hex("other-token") + `"`}, apptest.AuthArgs()...)
	d := apptest.Start(t, args...)
	create := func(token string) api.Thread {
		t.Helper()
		// No cwd: a principal's thread works in its own root.
		resp := d.Do(t, "POST", "/v1/threads", token, nil)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		var th api.HTTPThread
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&th))
		return th.Thread
	}
	threadSettings := func(id string) (string, string) {
		t.Helper()
		r := apptest.RPC(t, d.Addr, apptest.OperatorToken, nil)
		var res struct {
			Model   string `json:"model"`
			Sandbox struct {
				Type string `json:"type"`
			} `json:"sandbox"`
		}
		require.NoError(t, json.Unmarshal(r.Call("thread/resume", map[string]any{"threadId": id}), &res))
		return res.Model, res.Sandbox.Type
	}
	m, s := threadSettings(create(apptest.CIToken).ID)
	require.Equal(t, "ci-model", m)
	require.Equal(t, "readOnly", s)
	for _, token := range []string{"other-token", apptest.OperatorToken} {
		m, s := threadSettings(create(token).ID)
		require.Equal(t, "daemon-model", m)
		require.Equal(t, "workspaceWrite", s)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ci := apptest.MCPConnect(t, d.MCPHTTP(apptest.CIToken), nil)
	text, thread, isErr := apptest.CallTool(t, ctx, ci, "codex", map[string]any{"prompt": "Hello"})
	require.False(t, isErr, text)
	m, s = threadSettings(thread)
	require.Equal(t, "ci-model", m)
	require.Equal(t, "readOnly", s)
	reqs := fake.Requests()
	require.NotEmpty(t, reqs)
	require.Contains(t, string(reqs[len(reqs)-1].Body), `"model":"ci-model"`)

	// Over the websocket, the principal writes its own file, not the
	// daemon-wide one, and its next threads get it.
	ws := apptest.RPC(t, d.Addr, apptest.CIToken, nil)
	ws.Call("config/value/write", map[string]any{"keyPath": "model", "value": "ci-ws-model", "mergeStrategy": "replace"})
	b, err := os.ReadFile(filepath.Join(pdir, "ci.toml"))
	require.NoError(t, err)
	require.Contains(t, string(b), "ci-ws-model")
	_, err = os.Stat(filepath.Join(dataDir, "user-config.toml"))
	require.True(t, os.IsNotExist(err), "the daemon-wide user config is not the principal's")
	m, _ = threadSettings(create(apptest.CIToken).ID)
	require.Equal(t, "ci-ws-model", m)
	m, _ = threadSettings(create("other-token").ID)
	require.Equal(t, "daemon-model", m)
}

// The refusals of config writes have the reference's shape: each request
// of testdata/golden/reference/config_write_errors.jsonl (see
// config_write_capture.js) the reference refused is refused here with the
// same code and config_write_error_code; those it accepted (a key only
// the operator sets, a NUL) are refused here, as configLayerReadonly and
// configValidationError.
func TestConfigWriteErrorsMatchReference(t *testing.T) {
	data, err := os.ReadFile("testdata/golden/reference/config_write_errors.jsonl")
	require.NoError(t, err)
	d := apptest.Start(t, "--data-dir", t.TempDir(), "-c", `model="gpt-5.5"`)
	r := d.RPC(t)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 9)
	for _, line := range lines {
		var golden struct {
			Req [2]json.RawMessage `json:"req"`
			Err *struct {
				Code int             `json:"code"`
				Data json.RawMessage `json:"data"`
			} `json:"err"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &golden))
		var method string
		require.NoError(t, json.Unmarshal(golden.Req[0], &method))
		f := r.CallRaw(method, golden.Req[1])
		require.NotNil(t, f.Error, "%s", line)
		if golden.Err != nil {
			require.Equal(t, golden.Err.Code, f.Error.Code, "%s", line)
			require.JSONEq(t, string(golden.Err.Data), string(f.Error.Data), "%s", line)
			continue
		}
		want := `{"config_write_error_code":"configLayerReadonly"}`
		if strings.Contains(line, `\u0000`) {
			want = `{"config_write_error_code":"configValidationError"}`
		}
		require.Equal(t, -32600, f.Error.Code)
		require.JSONEq(t, want, string(f.Error.Data), "%s", line)
	}
}
