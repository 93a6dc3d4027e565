package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ApprovalMode is the kind of approval policy (docs/tools.md §4.1).
type ApprovalMode int

// The approval modes. The zero value is OnRequest, Codex's default.
const (
	// OnRequest runs sandboxed and asks when the model requests escalation,
	// when a command looks dangerous or when a rule says prompt.
	OnRequest ApprovalMode = iota
	// Untrusted (core name UnlessTrusted) runs only known-safe commands
	// without asking.
	Untrusted
	// OnFailure runs everything sandboxed and asks to re-run outside the
	// sandbox when the sandbox denies something.
	OnFailure
	// Never never asks: prompts become rejections.
	Never
	// Granular is like OnRequest with per-category auto-rejection.
	Granular
)

// GranularApproval says, per prompt category, whether the prompt may be shown
// (true) or is auto-rejected (false).
type GranularApproval struct {
	// SandboxApproval allows shell approval prompts (escalation, sandbox retry).
	SandboxApproval bool `json:"sandbox_approval"`
	// Rules allows prompts caused by exec-policy "prompt" rules.
	Rules bool `json:"rules"`
	// SkillApproval allows prompts for skill script execution.
	SkillApproval bool `json:"skill_approval"`
	// RequestPermissions allows prompts from the request_permissions tool.
	RequestPermissions bool `json:"request_permissions"`
	// McpElicitations allows MCP elicitation prompts.
	McpElicitations bool `json:"mcp_elicitations"`
}

// ApprovalPolicy is an approval policy: a mode plus, for Granular, its
// per-category switches.
type ApprovalPolicy struct {
	// Mode is the policy kind.
	Mode ApprovalMode
	// Granular holds the switches when Mode is Granular; ignored otherwise.
	Granular GranularApproval
}

// The wire strings of the string-form approval policies.
const (
	wireUntrusted = "untrusted"
	wireOnFailure = "on-failure"
	wireOnRequest = "on-request"
	wireNever     = "never"
)

// ParseApprovalPolicy parses the string form of an approval policy
// ("untrusted", "on-failure", "on-request", "never"). Unknown values are an
// error, as the brief asks.
func ParseApprovalPolicy(s string) (ApprovalPolicy, error) {
	switch s {
	case wireUntrusted:
		return ApprovalPolicy{Mode: Untrusted}, nil
	case wireOnFailure:
		return ApprovalPolicy{Mode: OnFailure}, nil
	case wireOnRequest:
		return ApprovalPolicy{Mode: OnRequest}, nil
	case wireNever:
		return ApprovalPolicy{Mode: Never}, nil
	}
	return ApprovalPolicy{}, fmt.Errorf("unknown variant `%s`, expected one of `untrusted`, `on-failure`, `on-request`, `granular`, `never`", s)
}

// String returns the wire form: the kebab-case string, or "granular".
func (p ApprovalPolicy) String() string {
	switch p.Mode {
	case Untrusted:
		return wireUntrusted
	case OnFailure:
		return wireOnFailure
	case Never:
		return wireNever
	case Granular:
		return "granular"
	default:
		return wireOnRequest
	}
}

// allowsSandboxPrompt reports whether a sandbox/escalation prompt may be shown.
func (p ApprovalPolicy) allowsSandboxPrompt() bool {
	switch p.Mode {
	case Never:
		return false
	case Granular:
		return p.Granular.SandboxApproval
	default:
		return true
	}
}

// MarshalJSON writes the string form, or {"granular":{...}}.
func (p ApprovalPolicy) MarshalJSON() ([]byte, error) {
	if p.Mode == Granular {
		return json.Marshal(struct {
			Granular GranularApproval `json:"granular"`
		}{p.Granular})
	}
	return json.Marshal(p.String())
}

// UnmarshalJSON accepts the string form or {"granular":{...}}; in the object
// sandbox_approval, rules and mcp_elicitations are required, the other two
// default to false.
func (p *ApprovalPolicy) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := ParseApprovalPolicy(s)
		if err != nil {
			return err
		}
		*p = v
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return fmt.Errorf("approval policy: expected a string or an object: %w", err)
	}
	if len(obj) != 1 {
		return fmt.Errorf("approval policy: expected exactly one key, got %d", len(obj))
	}
	raw, ok := obj["granular"]
	if !ok {
		for k := range obj {
			return fmt.Errorf("unknown variant `%s`, expected `granular`", k)
		}
	}
	var w struct {
		SandboxApproval    *bool `json:"sandbox_approval"`
		Rules              *bool `json:"rules"`
		SkillApproval      bool  `json:"skill_approval"`
		RequestPermissions bool  `json:"request_permissions"`
		McpElicitations    *bool `json:"mcp_elicitations"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return err
	}
	for name, v := range map[string]*bool{"sandbox_approval": w.SandboxApproval, "rules": w.Rules, "mcp_elicitations": w.McpElicitations} {
		if v == nil {
			return fmt.Errorf("missing field `%s`", name)
		}
	}
	*p = ApprovalPolicy{Mode: Granular, Granular: GranularApproval{
		SandboxApproval:    *w.SandboxApproval,
		Rules:              *w.Rules,
		SkillApproval:      w.SkillApproval,
		RequestPermissions: w.RequestPermissions,
		McpElicitations:    *w.McpElicitations,
	}}
	return nil
}
