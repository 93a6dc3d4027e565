package orchestrate

import (
	"fmt"
	"slices"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/policy"
)

// ApprovalPolicy converts a thread's approval policy from its wire type to
// the policy package's; an unknown string policy is an error.
func ApprovalPolicy(a api.AskForApproval) (policy.ApprovalPolicy, error) {
	if g := a.Granular; g != nil {
		return policy.ApprovalPolicy{Mode: policy.Granular, Granular: policy.GranularApproval{
			SandboxApproval:    g.SandboxApproval,
			Rules:              g.Rules,
			SkillApproval:      g.SkillApproval,
			RequestPermissions: g.RequestPermissions,
			McpElicitations:    g.McpElicitations,
		}}, nil
	}
	return policy.ParseApprovalPolicy(string(a.Policy))
}

// SandboxPolicy converts a thread's sandbox policy from its wire type to
// the policy package's; an unknown variant or external network setting is
// an error.
func SandboxPolicy(p api.SandboxPolicy) (policy.SandboxPolicy, error) {
	switch p.Type {
	case api.SandboxPolicyReadOnly:
		return policy.SandboxPolicy{Kind: policy.ReadOnly, NetworkAccess: p.NetworkAccess}, nil
	case api.SandboxPolicyWorkspaceWrite:
		out := policy.SandboxPolicy{
			Kind:                policy.WorkspaceWrite,
			NetworkAccess:       p.NetworkAccess,
			ExcludeTmpdirEnvVar: p.ExcludeTmpdirEnvVar,
			ExcludeSlashTmp:     p.ExcludeSlashTmp,
		}
		if len(p.WritableRoots) > 0 {
			out.WritableRoots = slices.Clone(p.WritableRoots)
		}
		return out, nil
	case api.SandboxPolicyDangerFullAccess:
		return policy.SandboxPolicy{Kind: policy.DangerFullAccess}, nil
	case api.SandboxPolicyExternalSandbox:
		switch p.ExternalNetworkAccess {
		case "", api.NetworkRestricted:
			return policy.SandboxPolicy{Kind: policy.ExternalSandbox}, nil
		case api.NetworkEnabled:
			return policy.SandboxPolicy{Kind: policy.ExternalSandbox, NetworkAccess: true}, nil
		}
		return policy.SandboxPolicy{}, fmt.Errorf("unknown variant `%s`, expected `restricted` or `enabled`", p.ExternalNetworkAccess)
	}
	return policy.SandboxPolicy{}, fmt.Errorf("unknown variant `%s`, expected one of `dangerFullAccess`, `readOnly`, `externalSandbox`, `workspaceWrite`", p.Type)
}

// APIDecision converts a decision offered to the client to its wire type.
func APIDecision(d policy.ReviewDecision) api.CommandExecutionApprovalDecision {
	switch d.Kind {
	case policy.AcceptWithExecpolicyAmendment:
		return api.CommandExecutionApprovalDecision{Decision: api.DecisionAcceptWithExecpolicyAmendment, ExecpolicyAmendment: slices.Clone(d.ExecpolicyAmendment)}
	case policy.ApplyNetworkPolicyAmendment:
		a := &api.NetworkPolicyAmendment{}
		if d.NetworkAmendment != nil {
			a.Host, a.Action = d.NetworkAmendment.Host, api.NetworkPolicyRuleAction(d.NetworkAmendment.Action)
		}
		return api.CommandExecutionApprovalDecision{Decision: api.DecisionApplyNetworkPolicyAmendment, NetworkPolicyAmendment: a}
	}
	// The other kinds are plain strings, spelled by policy as on the wire.
	return api.CommandExecutionApprovalDecision{Decision: d.String()}
}

// APIDecisions converts the decisions offered with an approval request;
// none is nil (the field is then omitted).
func APIDecisions(ds []policy.ReviewDecision) []api.CommandExecutionApprovalDecision {
	if len(ds) == 0 {
		return nil
	}
	out := make([]api.CommandExecutionApprovalDecision, len(ds))
	for i, d := range ds {
		out[i] = APIDecision(d)
	}
	return out
}
