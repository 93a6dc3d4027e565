package server_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// What a principal reaches with the account and server-information
// methods: feedback/save writes and reads in its workspace roots only
// (-32602 naming the path outside them, nothing written) and reports on
// no thread it cannot see; server/diagnostics, everyone's counts, is the
// operator's; modelProvider/default/set changes the principal's own
// default and nobody else's; modelProvider/config/write changes no
// provider, whoever asks.
func TestAccountInfoPrincipals(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[]}`)
	dataDir, ciRoot, bobRoot := apptest.RealTempDir(t), apptest.RealTempDir(t), apptest.RealTempDir(t)
	conf := filepath.Join(apptest.RealTempDir(t), "config.toml")
	require.NoError(t, os.WriteFile(conf, []byte(`model = "fake-model"
model_provider = "fake"
[model_providers.fake]
name = "Fake"
base_url = "`+fake.URL()+`"
wire_api = "responses"
[model_providers.other]
name = "Other"
base_url = "`+fake.URL()+`"
wire_api = "chat"
`), 0o600))
	args := append([]string{"--data-dir", dataDir, "--config", conf}, apptest.AuthArgs(ciRoot)...)
	args = append(args, "-c", `http_api.principals.bob.token_sha256="`+apptest.SHA256Hex(apptest.BobToken)+`"`)
	d := apptest.Start(t, append(args, apptest.PrincipalRoots("bob", bobRoot)...)...)

	secret := filepath.Join(bobRoot, "secret.log")
	require.NoError(t, os.WriteFile(secret, []byte("bob's"), 0o644))
	require.NoError(t, os.Symlink(bobRoot, filepath.Join(ciRoot, "bob")))
	bob := apptest.RPC(t, d.Addr, apptest.BobToken, nil)
	bobThread := apptest.StartThread(t, bob, map[string]any{"cwd": bobRoot})

	ci := apptest.RPC(t, d.Addr, apptest.CIToken, nil)
	ci.Call("feedback/save", map[string]any{"classification": "bug", "savePath": filepath.Join(ciRoot, "ok.zip")})
	for _, p := range []map[string]any{
		{"savePath": filepath.Join(bobRoot, "fb.zip")},
		{"savePath": filepath.Join(ciRoot, "bob", "fb.zip")},
		{"savePath": filepath.Join(ciRoot, "fb.zip"), "extraLogFiles": []string{secret}},
		{"savePath": filepath.Join(ciRoot, "fb.zip"), "extraLogFiles": []string{filepath.Join(ciRoot, "bob", "secret.log")}},
	} {
		p["classification"] = "bug"
		f := ci.CallRaw("feedback/save", p)
		require.NotNil(t, f.Error, "%v", p)
		require.Equal(t, -32602, f.Error.Code, "%v", p)
		require.Contains(t, f.Error.Message, "is outside the workspace roots ("+ciRoot+")")
	}
	for _, p := range []string{filepath.Join(bobRoot, "fb.zip"), filepath.Join(ciRoot, "fb.zip")} {
		_, err := os.Stat(p)
		require.True(t, errors.Is(err, os.ErrNotExist), p)
	}
	f := ci.CallRaw("feedback/save", map[string]any{"classification": "bug", "savePath": filepath.Join(ciRoot, "t.zip"), "threadId": bobThread, "includeLogs": true})
	require.NotNil(t, f.Error, "bob's thread")
	_, err := os.Stat(filepath.Join(ciRoot, "t.zip"))
	require.True(t, errors.Is(err, os.ErrNotExist))

	f = ci.CallRaw("server/diagnostics", map[string]any{})
	require.NotNil(t, f.Error)
	require.Equal(t, -32600, f.Error.Code)
	op := apptest.RPC(t, d.Addr, apptest.OperatorToken, nil)
	op.Call("server/diagnostics", map[string]any{})

	defaultOf := func(r *apptest.Client) string {
		var l struct {
			DefaultProviderID string `json:"defaultProviderId"`
		}
		require.NoError(t, json.Unmarshal(r.Call("modelProvider/list", map[string]any{}), &l))
		return l.DefaultProviderID
	}
	ci.Call("modelProvider/default/set", map[string]any{"providerId": "other"})
	require.Equal(t, "other", defaultOf(ci))
	require.Equal(t, "fake", defaultOf(bob))
	require.Equal(t, "fake", defaultOf(op))
	var caps struct {
		WebSearch bool `json:"webSearch"`
	}
	require.NoError(t, json.Unmarshal(ci.Call("modelProvider/capabilities/read", map[string]any{}), &caps))
	require.False(t, caps.WebSearch, "ci's default speaks Chat Completions")
	require.NoError(t, json.Unmarshal(bob.Call("modelProvider/capabilities/read", map[string]any{}), &caps))
	require.True(t, caps.WebSearch)

	for _, r := range []*apptest.Client{ci, op} {
		f := r.CallRaw("modelProvider/config/write", map[string]any{"settings": map[string]any{
			"type": "customGateway", "providerId": "fake", "baseUrl": "http://127.0.0.1:9/v1", "envKey": "OPENAI_API_KEY"}})
		require.NotNil(t, f.Error)
		require.JSONEq(t, `{"config_write_error_code":"configLayerReadonly"}`, string(f.Error.Data))
	}
	var l struct {
		Data []struct {
			ID      string  `json:"id"`
			BaseURL *string `json:"baseUrl"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(op.Call("modelProvider/list", map[string]any{}), &l))
	for _, p := range l.Data {
		if p.ID == "fake" {
			require.Equal(t, fake.URL(), *p.BaseURL)
		}
	}
}
