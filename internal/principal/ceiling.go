package principal

import (
	"fmt"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
)

// Ceiling bounds the sandbox and approval policy of every principal's
// threads. A principal is a tenant (a CI bot, a team): its prompts must
// not buy it an unsandboxed daemon.
type Ceiling struct {
	// MaxSandbox is the most permissive sandbox mode a principal may ask
	// for; "" means workspace-write. Network access counts as beyond any
	// ceiling but danger-full-access.
	MaxSandbox api.SandboxMode
	// MaxApproval is the least asking approval policy a principal may ask
	// for (untrusted < on-request < on-failure < never); "" means never.
	MaxApproval api.ApprovalPolicy
	// AllowNeverWithFullAccess lets a principal combine "never" with
	// danger-full-access: no one would be asked before an unsandboxed
	// command, so it takes an explicit grant.
	AllowNeverWithFullAccess bool
}

func (c Ceiling) validate() error {
	switch c.MaxSandbox {
	case "", api.SandboxReadOnly, api.SandboxWorkspaceWrite, api.SandboxDangerFullAccess:
	default:
		return apperr.New(apperr.Invalid, "principal_max_sandbox: unknown sandbox mode %q", c.MaxSandbox)
	}
	switch c.MaxApproval {
	case "", api.ApprovalUntrusted, api.ApprovalOnRequest, "on-failure", api.ApprovalNever:
	default:
		return apperr.New(apperr.Invalid, "principal_max_approval: unknown approval policy %q", c.MaxApproval)
	}
	return nil
}

func (c Ceiling) maxSandbox() api.SandboxMode {
	if c.MaxSandbox == "" {
		return api.SandboxWorkspaceWrite
	}
	return c.MaxSandbox
}

func (c Ceiling) maxApproval() api.ApprovalPolicy {
	if c.MaxApproval == "" {
		return api.ApprovalNever
	}
	return c.MaxApproval
}

// AllowsSandbox reports whether a thread may run under the sandbox mode.
func (c Ceiling) AllowsSandbox(m api.SandboxMode) bool {
	return modeRank(m) <= modeRank(c.maxSandbox())
}

func modeRank(m api.SandboxMode) int {
	switch m {
	case api.SandboxReadOnly:
		return 0
	case api.SandboxWorkspaceWrite:
		return 1
	default: // danger-full-access, and anything unknown counts as the most
		return 2
	}
}

// policyRank ranks a sandbox policy as modeRank does its mode; an
// external sandbox is no sandbox of ours.
func policyRank(p api.SandboxPolicy) int {
	switch p.Type {
	case api.SandboxPolicyReadOnly:
		return 0
	case api.SandboxPolicyWorkspaceWrite:
		return 1
	default:
		return 2
	}
}

// policyName is the mode a sandbox policy stands for, as messages name it.
func policyName(p api.SandboxPolicy) string {
	switch p.Type {
	case api.SandboxPolicyReadOnly:
		return string(api.SandboxReadOnly)
	case api.SandboxPolicyWorkspaceWrite:
		return string(api.SandboxWorkspaceWrite)
	case api.SandboxPolicyDangerFullAccess:
		return string(api.SandboxDangerFullAccess)
	}
	return string(p.Type)
}

// policyOf is the policy of a sandbox mode, as thread/start makes it.
func policyOf(m api.SandboxMode) api.SandboxPolicy {
	switch m {
	case api.SandboxReadOnly:
		return api.SandboxPolicy{Type: api.SandboxPolicyReadOnly}
	case api.SandboxWorkspaceWrite:
		return api.SandboxPolicy{Type: api.SandboxPolicyWorkspaceWrite, WritableRoots: []string{}}
	}
	return api.SandboxPolicy{Type: api.SandboxPolicyDangerFullAccess}
}

// approvalRank orders policies by how little they ask; a granular policy
// asks like on-request.
func approvalRank(a api.AskForApproval) int {
	if a.Granular != nil {
		return 1
	}
	switch a.Policy {
	case api.ApprovalUntrusted:
		return 0
	case api.ApprovalOnRequest:
		return 1
	case "on-failure":
		return 2
	default: // never, and anything unknown counts as the least asking
		return 3
	}
}

func approvalName(a api.AskForApproval) string {
	if a.Granular != nil {
		return "granular"
	}
	return fmt.Sprintf("%q", a.Policy)
}

func forbidden(format string, args ...any) error {
	return apperr.New(apperr.Forbidden, format, args...)
}

// boundPolicy checks the sandbox and approval policy of s against the
// ceiling: what the request chose beyond it is refused, what it left as
// it was (defaults, the thread's settings) is lowered to it.
func (c Ceiling) boundPolicy(s *Settings) error {
	maxS := c.maxSandbox()
	param := s.SandboxParam
	if param == "" {
		param = "sandbox"
	}
	if policyRank(s.Sandbox) > modeRank(maxS) {
		if s.SandboxAsked {
			return forbidden("%s %q is beyond this principal's ceiling %q (principal_max_sandbox)", param, policyName(s.Sandbox), maxS)
		}
		s.Sandbox = policyOf(maxS)
	}
	if s.Sandbox.NetworkAccess && maxS != api.SandboxDangerFullAccess {
		if s.SandboxAsked {
			return forbidden("%s with network access is beyond this principal's ceiling %q (principal_max_sandbox)", param, maxS)
		}
		s.Sandbox.NetworkAccess = false
	}
	maxA := api.AskForApproval{Policy: c.maxApproval()}
	if approvalRank(s.Approval) > approvalRank(maxA) {
		if s.ApprovalAsked {
			return forbidden("approval policy %s is beyond this principal's ceiling %q (principal_max_approval)", approvalName(s.Approval), maxA.Policy)
		}
		s.Approval = maxA
	}
	if policyRank(s.Sandbox) == 2 && s.Approval.Granular == nil && s.Approval.Policy == api.ApprovalNever && !c.AllowNeverWithFullAccess {
		if s.ApprovalAsked {
			return forbidden(`approval policy "never" with sandbox "danger-full-access" needs principal_max_approval = "never" set explicitly`)
		}
		s.Approval = api.AskForApproval{Policy: api.ApprovalOnRequest}
	}
	return nil
}

// MayRunUnsandboxed refuses what runs a command outside any sandbox and
// without asking (a user's shell command, command/exec), named by what,
// unless the ceiling allows danger-full-access with "never" explicitly.
func (p Principal) MayRunUnsandboxed(what string) error {
	if p.IsOperator() {
		return nil
	}
	c := p.rules.ceiling
	if c.maxSandbox() == api.SandboxDangerFullAccess && c.AllowNeverWithFullAccess {
		return nil
	}
	return forbidden("%s runs commands unsandboxed and unasked, beyond this principal's ceiling %q (principal_max_sandbox, principal_max_approval)", what, c.maxSandbox())
}

// CommandSandbox is the sandbox policy of a command the principal runs
// outside any thread and unasked (process/spawn): its ceiling's mode,
// without network access unless the ceiling is danger-full-access, and
// unsandboxed only where MayRunUnsandboxed allows it (workspace-write
// otherwise). The operator has no bound: ok is false.
func (p Principal) CommandSandbox() (pol api.SandboxPolicy, ok bool) {
	if p.IsOperator() {
		return api.SandboxPolicy{}, false
	}
	pol = policyOf(p.rules.ceiling.maxSandbox())
	if policyRank(pol) == 2 && p.MayRunUnsandboxed("") != nil {
		pol = policyOf(api.SandboxWorkspaceWrite)
	}
	return pol, true
}
