package config

import (
	"reflect"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// formatKey renders a key path as a dotted TOML key, quoting the segments
// that are not bare keys: mcp_servers."my.server".command.
func formatKey(path []string) string {
	var b strings.Builder
	for i, seg := range path {
		if i > 0 {
			b.WriteByte('.')
		}
		if isBareKey(seg) {
			b.WriteString(seg)
		} else {
			b.WriteString(strconv.Quote(seg))
		}
	}
	return b.String()
}

// isBareKey reports whether s is a TOML bare key (A-Za-z0-9_-, non-empty).
func isBareKey(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// parseKeyPath parses the dotted key at the start of s up to the first '='
// outside quotes and returns its segments and the rest of s after the '='.
// Segments are bare (any run of characters but whitespace, '.', '=' and
// quotes, which is laxer than TOML so that every key Codex's naive split
// accepts still works) or TOML quoted strings ("a.b" with escapes, 'a.b'
// literal). Whitespace around segments is ignored.
func parseKeyPath(s string) (path []string, rest string, err error) {
	i := 0
	skipSpace := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	for {
		skipSpace()
		if i >= len(s) {
			return nil, "", errMissingEquals
		}
		var seg string
		switch s[i] {
		case '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, "", errKey("unterminated quoted key segment")
			}
			seg, err = unquoteBasic(s[i : j+1])
			if err != nil {
				return nil, "", errKey("invalid quoted key segment " + s[i:j+1])
			}
			i = j + 1
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, "", errKey("unterminated quoted key segment")
			}
			seg = s[i+1 : i+1+j]
			i += j + 2
		case '.', '=':
			if len(path) == 0 && s[i] == '=' {
				return nil, "", errKey("empty key")
			}
			return nil, "", errKey("empty key segment")
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t.=\"'", rune(s[j])) {
				j++
			}
			seg = s[i:j]
			i = j
		}
		path = append(path, seg)
		skipSpace()
		if i >= len(s) {
			return nil, "", errMissingEquals
		}
		switch s[i] {
		case '.':
			i++
		case '=':
			return path, s[i+1:], nil
		default:
			return nil, "", errKey("unexpected character " + strconv.QuoteRune(rune(s[i])) + " in key")
		}
	}
}

// keyError is a problem with the key part of a -c override.
type keyError string

func (e keyError) Error() string { return string(e) }

func errKey(msg string) error { return keyError(msg) }

var errMissingEquals = errKey("expected key=value")

// unquoteBasic decodes a TOML basic string (with its quotes) by letting the
// TOML parser read it.
func unquoteBasic(quoted string) (string, error) {
	var m map[string]string
	if _, err := toml.Decode("k = "+quoted, &m); err != nil {
		return "", err
	}
	return m["k"], nil
}

// parseValue interprets the value part of a -c override (or an environment
// variable) the way Codex does: as a TOML value when it parses as exactly
// one, otherwise as the literal string, so that -c model=o3 works unquoted.
func parseValue(raw string) any {
	var m map[string]any
	if _, err := toml.Decode("_x_ = "+raw, &m); err == nil && len(m) == 1 {
		if v, ok := m["_x_"]; ok {
			return v
		}
	}
	return raw
}

// codexTopLevelKeys are config.toml keys Codex reads that appserver does not
// use; they get a gentler warning than keys nobody knows. Keys starting with
// "experimental_" are treated the same way.
var codexTopLevelKeys = setOf(
	"allow_login_shell", "analytics", "approvals_reviewer", "apps",
	"apps_mcp_product_sku", "audio", "auto_review", "background_terminal_max_timeout",
	"chatgpt_base_url", "check_for_update_on_startup", "cli_auth_credentials_store",
	"debug", "default_permissions", "desktop", "developer_instructions",
	"disable_paste_burst", "disable_response_storage", "feedback",
	"file_opener", "forced_chatgpt_workspace_id", "forced_login_method", "ghost_snapshot",
	"hide_agent_reasoning", "history", "hooks", "include_apply_patch_tool",
	"include_apps_instructions", "include_collaboration_mode_instructions",
	"include_environment_context", "include_permissions_instructions", "include_plan_tool",
	"include_view_image_tool", "instructions", "log_dir", "marketplaces",
	"mcp_oauth_callback_port", "mcp_oauth_callback_url", "mcp_oauth_credentials_store",
	"memories", "model_auto_compact_token_limit_scope",
	"model_catalog_json", "model_instructions_file",
	"model_max_output_tokens",
	"model_reasoning_summary_format", "model_supports_reasoning_summaries",
	"notice", "notify", "openai_base_url", "oss_provider",
	"permissions", "personality", "plan_mode_reasoning_effort", "plugins",
	"preferred_auth_method", "profile", "profiles", "project_doc_fallback_filenames",
	"project_doc_max_bytes", "project_root_markers", "projects", "realtime",
	"responses_originator_header_internal_override", "review_model",
	"sandbox_workspace_write", "shell_environment_policy",
	"show_raw_agent_reasoning", "sqlite_home", "suppress_unstable_features_warning",
	"tool_output_token_limit", "tool_suggest", "tools", "tui",
	"use_experimental_streamable_shell_tool", "use_experimental_unified_exec_tool",
	"use_experimental_use_rmcp_client", "windows",
	"windows_wsl_setup_acknowledged",
)

// codexNestedKeys are, per table type, fields Codex accepts in that table
// that appserver does not use.
var codexNestedKeys = map[reflect.Type]map[string]bool{
	reflect.TypeFor[OTel](): setOf("environment", "log_user_prompt", "trace_exporter", "metrics_exporter"),
	reflect.TypeFor[ModelProvider](): setOf(
		"auth", "aws", "experimental_bearer_token", "supports_websockets",
		"websocket_connect_timeout_ms",
	),
	reflect.TypeFor[MCPServer](): setOf(
		"env_vars", "environment_id",
		"name", "oauth", "oauth_resource", "required", "scopes", "startup_timeout_ms",
		"supports_parallel_tool_calls",
	),
}

func setOf(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// isCodexKey reports whether key, a field of a table of type parent (the
// Config struct at the top level), is a Codex key appserver ignores.
func isCodexKey(parent reflect.Type, key string, topLevel bool) bool {
	if topLevel {
		return codexTopLevelKeys[key] || strings.HasPrefix(key, "experimental_")
	}
	if parent == reflect.TypeFor[Features]() || parent == reflect.TypeFor[Agents]() {
		// Codex has many feature switches and agent roles; appserver
		// implements some.
		return true
	}
	return codexNestedKeys[parent][key]
}
