package turns

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/budget"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/turns/transcript"
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

// profilePolicy is the sandbox policy of a built-in permission profile; an
// unknown id, or one of a user-defined profile (which needs a
// [permissions] table this server does not have), is refused with the id
// named, never ignored.
func profilePolicy(id string) (api.SandboxPolicy, error) {
	mode, ok := profileSandbox[id]
	if !ok {
		if strings.HasPrefix(id, ":") {
			return api.SandboxPolicy{}, apperr.New(apperr.Invalid, "failed to load configuration: default_permissions refers to unknown built-in profile `%s`", id)
		}
		return api.SandboxPolicy{}, apperr.New(apperr.Invalid, "failed to load configuration: default_permissions refers to profile `%s`, which needs a `[permissions]` table; this server has only the built-in profiles `%s`, `%s` and `%s`",
			id, ProfileReadOnly, ProfileWorkspace, ProfileDangerFull)
	}
	return sandboxPolicyFor(mode)
}

// activeProfile is activePermissionProfile of a thread whose sandbox a
// built-in profile chose; nil otherwise.
func activeProfile(id string) *api.ActivePermissionProfile {
	if id == "" {
		return nil
	}
	return &api.ActivePermissionProfile{ID: id}
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
// of a built-in profile unless the request chose a sandbox itself; profile
// reports that it did. The keys that shape the tool set are read by the
// ToolsFactory (ToolContext.Config).
func applyConfig(meta *transcript.ThreadMeta, raw map[string]json.RawMessage, sandboxChosen bool) (profile bool, err error) {
	cfg, err := flattenConfig(raw)
	if err != nil || cfg == nil {
		return false, err
	}
	if _, err := budget.ParseOverrides(cfg); err != nil {
		return false, err
	}
	if v, ok := cfg["default_permissions"]; ok && !sandboxChosen {
		var name string
		if err := json.Unmarshal(v, &name); err != nil {
			return false, apperr.New(apperr.Invalid, "Invalid request: config.default_permissions must be a string")
		}
		sb, err := profilePolicy(name)
		if err != nil {
			return false, err
		}
		meta.Sandbox, meta.PermissionProfile = sb, name
		profile = true
	}
	if err := applyModelKeys(meta, cfg); err != nil {
		return false, err
	}
	merged := maps.Clone(meta.Config)
	if merged == nil {
		merged = map[string]json.RawMessage{}
	}
	maps.Copy(merged, cfg)
	meta.Config = merged
	return profile, nil
}

// reasoningEfforts are the values of model_reasoning_effort.
var reasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra"}

// applyModelKeys applies the model keys a thread's config may set, as the
// reference applies them per thread: model_reasoning_effort and
// model_reasoning_summary become the thread's settings (its thread
// object's reasoningEffort, the effort of its turns);
// model_auto_compact_token_limit is checked here and read by each turn
// (autoCompactLimit). A value of the wrong kind is refused, naming the key.
func applyModelKeys(meta *transcript.ThreadMeta, cfg map[string]json.RawMessage) error {
	str := func(key string, allowed []string) (string, bool, error) {
		v, ok := cfg[key]
		if !ok {
			return "", false, nil
		}
		var s string
		if json.Unmarshal(v, &s) != nil || !slices.Contains(allowed, s) {
			return "", false, apperr.New(apperr.Invalid, "Invalid request: config.%s must be one of %s", key, strings.Join(allowed, ", "))
		}
		return s, true, nil
	}
	effort, ok, err := str("model_reasoning_effort", reasoningEfforts)
	if err != nil {
		return err
	}
	if ok {
		meta.ReasoningEffort = &effort
	}
	summary, ok, err := str("model_reasoning_summary", []string{"auto", "concise", "detailed", "none"})
	if err != nil {
		return err
	}
	if ok {
		meta.ReasoningSummary = summary
	}
	if v, ok := cfg["model_auto_compact_token_limit"]; ok {
		var n int64
		if json.Unmarshal(v, &n) != nil {
			return apperr.New(apperr.Invalid, "Invalid request: config.model_auto_compact_token_limit must be an integer")
		}
	}
	return nil
}

// autoCompactLimitLocked is the context size at which the thread's turns
// compact: its config's model_auto_compact_token_limit, else the
// daemon's. t.mu must be held.
func (t *thread) autoCompactLimitLocked() int64 {
	if v, ok := t.meta.Config["model_auto_compact_token_limit"]; ok {
		var n int64
		if json.Unmarshal(v, &n) == nil {
			return n
		}
	}
	return t.m.cfg.Defaults.AutoCompactLimit
}

// UpdateSettings applies thread/settings/update: the thread's next turns
// use the new model, effort, summary, service tier, cwd, approval policy
// and sandbox (a built-in permission profile's, when the client names
// one), within the caller's bounds. When the settings changed, the After
// tells the thread's subscribers with thread/settings/updated.
func (m *Manager) UpdateSettings(ctx context.Context, c Caller, p api.ThreadSettingsUpdateParams) (api.ThreadSettingsUpdateResult, After, error) {
	t, err := m.threadFor(ctx, p.ThreadID, "thread not found: %s")
	if err != nil {
		return api.ThreadSettingsUpdateResult{}, nil, err
	}
	defer t.unpin()
	o := overrides{model: p.Model, cwd: p.Cwd, approval: p.ApprovalPolicy, sandboxPolicy: p.SandboxPolicy,
		permissions: p.Permissions, effort: p.Effort, summary: (*string)(p.Summary), serviceTier: p.ServiceTier,
		sandboxParam: "sandboxPolicy"}
	changed, err := t.updateSettings(ctx, c.Principal, o)
	if err != nil || changed == nil {
		return api.ThreadSettingsUpdateResult{}, nil, err
	}
	return api.ThreadSettingsUpdateResult{}, changed, nil
}

// updateSettings is update that also returns, when the thread's settings
// changed, the work that announces them (thread/settings/updated to the
// thread's subscribers); nil when they did not.
func (t *thread) updateSettings(ctx context.Context, who principal.Principal, o overrides) (After, error) {
	before := t.settings()
	if err := t.update(ctx, who, o); err != nil {
		return nil, err
	}
	after := t.settings()
	if reflect.DeepEqual(before, after) {
		return nil, nil
	}
	return func() {
		t.emit("thread/settings/updated", api.ThreadSettingsUpdatedNotification{ThreadID: t.id, ThreadSettings: after})
	}, nil
}

// settings are the thread's settings for its next turns, as
// thread/settings/updated reports them.
func (t *thread) settings() api.ThreadSettings {
	t.mu.Lock()
	defer t.mu.Unlock()
	model := ""
	if t.rec.Model != nil {
		model = *t.rec.Model
	}
	s := api.ThreadSettings{
		DisabledPluginIDs:       api.List[string]{},
		Cwd:                     t.rec.Cwd,
		Environments:            transcript.LocalEnvironments(t.rec.Cwd),
		ApprovalPolicy:          t.meta.ApprovalPolicy,
		ApprovalsReviewer:       api.ReviewerUser,
		SandboxPolicy:           t.meta.Sandbox,
		ActivePermissionProfile: activeProfile(t.meta.PermissionProfile),
		Model:                   model,
		ModelProvider:           t.rec.ModelProvider,
		ServiceTier:             t.meta.ServiceTier,
		Effort:                  t.meta.ReasoningEffort,
		CollaborationMode:       api.CollaborationMode{Mode: api.ModeDefault, Settings: api.CollaborationSettings{Model: model, ReasoningEffort: t.meta.ReasoningEffort}},
		MultiAgentMode:          "explicitRequestOnly",
	}
	if t.meta.ReasoningSummary != "" {
		summary := api.ReasoningSummary(t.meta.ReasoningSummary)
		s.Summary = &summary
	}
	return s
}

// ThreadFeatures returns the feature switches a thread's own config sets
// (`features.<key>` with a boolean value), by key, for
// experimentalFeature/list; an unknown thread is NotFound.
func (m *Manager) ThreadFeatures(ctx context.Context, rawID string) (map[string]bool, error) {
	t, err := m.threadFor(ctx, rawID, "thread not found: %s")
	if err != nil {
		return nil, err
	}
	defer t.unpin()
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]bool{}
	for k, v := range t.meta.Config {
		name, ok := strings.CutPrefix(k, "features.")
		var on bool
		if ok && json.Unmarshal(v, &on) == nil {
			out[name] = on
		}
	}
	return out, nil
}

// ProfileSandboxMode is the sandbox mode a built-in permission profile
// stands for, "" for an unknown one.
func ProfileSandboxMode(id string) api.SandboxMode { return api.SandboxMode(profileSandbox[id]) }
