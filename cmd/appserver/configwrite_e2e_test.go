package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// A config write that the daemon's -c override hides answers okOverridden
// in the reference's shape.
func TestConfigWriteOverridden(t *testing.T) {
	d := startDaemon(t, "--data-dir", t.TempDir(), "-c", `model="m1"`)
	r := newRPC(t, d)
	res := r.call("config/value/write", map[string]any{"keyPath": "model", "value": "m2", "mergeStrategy": "replace"})
	schemaValidate(t, "ConfigWriteResponse", res)
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
	d := startDaemon(t, "--data-dir", t.TempDir())
	r := newRPC(t, d)
	res := r.call("config/batchWrite", map[string]any{"edits": []any{
		map[string]any{"keyPath": "model", "value": "live-model", "mergeStrategy": "replace"},
		map[string]any{"keyPath": "approval_policy", "value": "never", "mergeStrategy": "replace"},
		map[string]any{"keyPath": "sandbox_mode", "value": "workspace-write", "mergeStrategy": "replace"},
	}})
	schemaValidate(t, "ConfigWriteResponse", res)
	var st struct {
		Model          string `json:"model"`
		ModelProvider  string `json:"modelProvider"`
		ApprovalPolicy string `json:"approvalPolicy"`
		Sandbox        struct {
			Type string `json:"type"`
		} `json:"sandbox"`
	}
	require.NoError(t, json.Unmarshal(r.call("thread/start", map[string]any{"cwd": t.TempDir()}), &st))
	require.Equal(t, "live-model", st.Model)
	require.Equal(t, "never", st.ApprovalPolicy)
	require.Equal(t, "workspaceWrite", st.Sandbox.Type)

	var read struct {
		Config struct {
			Model string `json:"model"`
		} `json:"config"`
	}
	require.NoError(t, json.Unmarshal(r.call("config/read", map[string]any{}), &read))
	require.Equal(t, "live-model", read.Config.Model, "config/read shows the written value")
}
