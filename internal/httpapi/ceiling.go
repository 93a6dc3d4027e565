package httpapi

import (
	"fmt"

	"github.com/appserver/appserver/api"
)

// Ceiling bounds the sandbox mode and approval policy a named principal's
// thread runs under. The operator's token has no ceiling: a principal is a
// tenant (a CI bot, a team), and its prompts must not buy it an
// unsandboxed daemon.
type Ceiling struct {
	// MaxSandbox is the most permissive sandbox mode a principal may ask
	// for; "" means workspace-write.
	MaxSandbox api.SandboxMode
	// MaxApproval is the least asking approval policy a principal may ask
	// for (untrusted < on-request < on-failure < never); "" means never.
	MaxApproval api.ApprovalPolicy
	// AllowNeverWithFullAccess lets a principal combine "never" with
	// danger-full-access: no one would be asked before an unsandboxed
	// command, so it takes an explicit grant.
	AllowNeverWithFullAccess bool
	// DefaultSandbox and DefaultApproval are the daemon's defaults: what a
	// principal that asks for nothing gets, lowered to the ceiling.
	DefaultSandbox  api.SandboxMode
	DefaultApproval api.ApprovalPolicy
}

func sandboxRank(m api.SandboxMode) int {
	switch m {
	case api.SandboxReadOnly:
		return 0
	case api.SandboxWorkspaceWrite:
		return 1
	default: // danger-full-access, and anything unknown counts as the most
		return 2
	}
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

// apply fills in and checks a principal's thread policy: a field the
// principal set beyond the ceiling is refused; an unset one gets the
// daemon's default, lowered to the ceiling. Both come back set, so the
// thread keeps the checked values whatever the defaults become later.
func (c Ceiling) apply(sandbox *api.SandboxMode, approval *api.AskForApproval) (*api.SandboxMode, *api.AskForApproval, *problem) {
	maxS, maxA := c.maxSandbox(), api.AskForApproval{Policy: c.maxApproval()}
	var s api.SandboxMode
	switch {
	case sandbox != nil && sandboxRank(*sandbox) > sandboxRank(maxS):
		return nil, nil, forbidden("sandbox %q is beyond this principal's ceiling %q", *sandbox, maxS)
	case sandbox != nil:
		s = *sandbox
	case c.DefaultSandbox == "" || sandboxRank(c.DefaultSandbox) > sandboxRank(maxS):
		s = maxS
	default:
		s = c.DefaultSandbox
	}
	var a api.AskForApproval
	switch {
	case approval != nil && approvalRank(*approval) > approvalRank(maxA):
		return nil, nil, forbidden("approval policy %s is beyond this principal's ceiling %q", approvalName(*approval), maxA.Policy)
	case approval != nil:
		a = *approval
	case c.DefaultApproval == "" || approvalRank(api.AskForApproval{Policy: c.DefaultApproval}) > approvalRank(maxA):
		a = maxA
	default:
		a = api.AskForApproval{Policy: c.DefaultApproval}
	}
	if s == api.SandboxDangerFullAccess && a.Granular == nil && a.Policy == api.ApprovalNever && !c.AllowNeverWithFullAccess {
		if approval != nil {
			return nil, nil, forbidden(`approval policy "never" with sandbox "danger-full-access" needs principal_max_approval = "never" set explicitly`)
		}
		a = api.AskForApproval{Policy: api.ApprovalOnRequest}
	}
	return &s, &a, nil
}

func approvalName(a api.AskForApproval) string {
	if a.Granular != nil {
		return "granular"
	}
	return fmt.Sprintf("%q", a.Policy)
}
