package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/appserver/appserver/api"
)

// codexArgs are the arguments of `codex`.
type codexArgs struct {
	Prompt                *string                    `json:"prompt"`
	Model                 *string                    `json:"model"`
	Cwd                   *string                    `json:"cwd"`
	ApprovalPolicy        *string                    `json:"approval-policy"`
	Sandbox               *string                    `json:"sandbox"`
	Config                map[string]json.RawMessage `json:"config"`
	BaseInstructions      *string                    `json:"base-instructions"`
	DeveloperInstructions *string                    `json:"developer-instructions"`
	CompactPrompt         *string                    `json:"compact-prompt"`
}

// replyArgs are the arguments of `codex-reply`.
type replyArgs struct {
	Prompt         *string `json:"prompt"`
	ThreadID       string  `json:"threadId"`
	ConversationID string  `json:"conversationId"`
}

// configKeys are the `config` keys a session may set, each a thread
// setting of its own; the daemon's other settings are not per thread.
var configKeys = []string{"approval_policy", "base_instructions", "developer_instructions", "model", "model_provider", "sandbox_mode"}

// argError is a bad argument, reported to the host as an isError result.
type argError struct{ msg string }

func (e argError) Error() string { return e.msg }

func badArgs(format string, args ...any) error { return argError{fmt.Sprintf(format, args...)} }

// decodeArgs decodes a tool's arguments; strict refuses unknown members,
// as the `codex` schema's additionalProperties: false does.
func decodeArgs(raw json.RawMessage, v any, strict bool) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return badArgs("invalid arguments: %s must be a %s", te.Field, jsonKind(te.Type.Kind().String()))
		}
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return badArgs("invalid arguments: unknown argument %s", field)
		}
		return badArgs("invalid arguments: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badArgs("invalid arguments: trailing data after the arguments object")
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string", "ptr":
		return "string"
	case "map", "struct":
		return "object"
	}
	return goKind
}

func prompt(p *string) (string, error) {
	if p == nil {
		return "", badArgs("invalid arguments: missing required argument prompt")
	}
	if strings.TrimSpace(*p) == "" {
		return "", badArgs("invalid arguments: prompt must not be empty")
	}
	return *p, nil
}

// threadStart turns `codex` arguments into thread/start params.
func (a codexArgs) threadStart() (api.ThreadStartParams, error) {
	var p api.ThreadStartParams
	if a.CompactPrompt != nil {
		// Accepting it would promise a compaction this server never runs.
		return p, badArgs("compact-prompt is not supported: this server does not compact conversations")
	}
	keys := make([]string, 0, len(a.Config))
	for k := range a.Config {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	cfg := map[string]string{}
	for _, k := range keys {
		if !slices.Contains(configKeys, k) {
			return p, badArgs("config key %q is not supported per session (supported: %s)", k, strings.Join(configKeys, ", "))
		}
		var s string
		if err := json.Unmarshal(a.Config[k], &s); err != nil {
			return p, badArgs("config key %q must be a string", k)
		}
		cfg[k] = s
	}
	// Dedicated arguments win over the same setting in config.
	pick := func(arg *string, key string) *string {
		if arg != nil {
			return arg
		}
		if v, ok := cfg[key]; ok {
			return &v
		}
		return nil
	}
	p.Model = pick(a.Model, "model")
	p.ModelProvider = pick(nil, "model_provider")
	p.Cwd = a.Cwd
	p.BaseInstructions = pick(a.BaseInstructions, "base_instructions")
	p.DeveloperInstructions = pick(a.DeveloperInstructions, "developer_instructions")
	if v := pick(a.ApprovalPolicy, "approval_policy"); v != nil {
		switch api.ApprovalPolicy(*v) {
		case api.ApprovalUntrusted, api.ApprovalOnRequest, api.ApprovalNever, "on-failure":
		default:
			return p, badArgs("invalid arguments: approval-policy must be one of on-request, never, untrusted, on-failure; got %q", *v)
		}
		p.ApprovalPolicy = &api.AskForApproval{Policy: api.ApprovalPolicy(*v)}
	}
	if v := pick(a.Sandbox, "sandbox_mode"); v != nil {
		switch api.SandboxMode(*v) {
		case api.SandboxReadOnly, api.SandboxWorkspaceWrite, api.SandboxDangerFullAccess:
		default:
			return p, badArgs("invalid arguments: sandbox must be one of read-only, workspace-write, danger-full-access; got %q", *v)
		}
		mode := api.SandboxMode(*v)
		p.Sandbox = &mode
	}
	return p, nil
}

// thread returns the thread id of `codex-reply`, threadId or the
// deprecated conversationId.
func (a replyArgs) thread() (string, error) {
	switch {
	case a.ThreadID != "":
		return a.ThreadID, nil
	case a.ConversationID != "":
		return a.ConversationID, nil
	}
	return "", badArgs("invalid arguments: missing threadId (the threadId a codex call returned)")
}
