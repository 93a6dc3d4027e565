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
