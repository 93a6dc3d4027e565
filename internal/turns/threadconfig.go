package turns

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
)

// Built-in permission profiles a thread may name in its
// default_permissions override, as the reference lists them
// (permissionProfile/list).
const (
	ProfileReadOnly   = ":read-only"
	ProfileWorkspace  = ":workspace"
	ProfileDangerFull = ":danger-full-access"
)

// PermissionProfiles are the built-in permission profiles, in the order
// permissionProfile/list reports them.
var PermissionProfiles = []string{ProfileReadOnly, ProfileWorkspace, ProfileDangerFull}

// profileSandbox maps a built-in permission profile to the sandbox mode it
// stands for.
var profileSandbox = map[string]string{
	ProfileReadOnly:   "read-only",
	ProfileWorkspace:  "workspace-write",
	ProfileDangerFull: "danger-full-access",
}

// flattenConfig turns a thread's config overrides (thread/start `config`:
// dotted keys, values that may themselves be tables) into dotted keys with
// non-table values, so that `{"features": {"shell_tool": false}}` and
// `{"features.shell_tool": false}` read the same. An empty table (such as
// `mcp_servers = {}`) is kept as it is: it says "none".
func flattenConfig(in map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := map[string]json.RawMessage{}
	var walk func(prefix string, v json.RawMessage) error
	walk = func(prefix string, v json.RawMessage) error {
		v = bytes.TrimSpace(v)
		if len(v) == 0 || v[0] != '{' {
			out[prefix] = v
			return nil
		}
		var table map[string]json.RawMessage
		if err := json.Unmarshal(v, &table); err != nil {
			return apperr.New(apperr.Invalid, "Invalid request: config.%s: %v", prefix, err)
		}
		if len(table) == 0 {
			out[prefix] = v
			return nil
		}
		for k, sub := range table {
			if err := walk(prefix+"."+k, sub); err != nil {
				return err
			}
		}
		return nil
	}
	for k, v := range in {
		if err := walk(k, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// applyConfig merges a thread's flattened config overrides into its meta
// and applies the keys turns owns: default_permissions picks the sandbox
// of a built-in profile unless the request chose a sandbox itself. The
// keys that shape the tool set are read by the ToolsFactory
// (ToolContext.Config).
func applyConfig(meta *threadMeta, raw map[string]json.RawMessage, sandboxChosen bool) error {
	cfg, err := flattenConfig(raw)
	if err != nil || cfg == nil {
		return err
	}
	if v, ok := cfg["default_permissions"]; ok && !sandboxChosen {
		var name string
		if err := json.Unmarshal(v, &name); err != nil {
			return apperr.New(apperr.Invalid, "Invalid request: config.default_permissions must be a string")
		}
		mode, ok := profileSandbox[name]
		if !ok {
			return apperr.New(apperr.Invalid, "Invalid request: unknown permission profile `%s`, expected one of `%s`, `%s`, `%s`", name, ProfileReadOnly, ProfileWorkspace, ProfileDangerFull)
		}
		sb, err := sandboxPolicyFor(mode)
		if err != nil {
			return err
		}
		meta.Sandbox = sb
	}
	merged := maps.Clone(meta.Config)
	if merged == nil {
		merged = map[string]json.RawMessage{}
	}
	maps.Copy(merged, cfg)
	meta.Config = merged
	return nil
}

// UpdateSettings applies thread/settings/update: the thread's next turns
// use the new model, effort, cwd, approval policy and sandbox (a built-in
// permission profile's, when the client names one).
func (m *Manager) UpdateSettings(ctx context.Context, p api.ThreadSettingsUpdateParams) (api.ThreadSettingsUpdateResult, error) {
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.ThreadSettingsUpdateResult{}, err
	}
	defer t.unpin()
	o := overrides{model: p.Model, cwd: p.Cwd, approval: p.ApprovalPolicy, sandboxPolicy: p.SandboxPolicy, effort: p.Effort}
	if p.Permissions != nil {
		if p.SandboxPolicy != nil {
			return api.ThreadSettingsUpdateResult{}, apperr.New(apperr.Invalid, "Invalid request: `permissions` cannot be combined with `sandboxPolicy`")
		}
		mode, ok := profileSandbox[*p.Permissions]
		if !ok {
			return api.ThreadSettingsUpdateResult{}, apperr.New(apperr.Invalid, "Invalid request: unknown permission profile `%s`", *p.Permissions)
		}
		sm := api.SandboxMode(mode)
		o.sandboxMode = &sm
	}
	return api.ThreadSettingsUpdateResult{}, t.update(ctx, o)
}
