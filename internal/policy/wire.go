package policy

import (
	"fmt"
	"slices"

	"github.com/appserver/appserver/api"
)

// ApprovalFromAPI converts a thread's approval policy from its wire type;
// an unknown string policy is an error.
func ApprovalFromAPI(a api.AskForApproval) (ApprovalPolicy, error) {
	if g := a.Granular; g != nil {
		return ApprovalPolicy{Mode: Granular, Granular: GranularApproval{
			SandboxApproval:    g.SandboxApproval,
			Rules:              g.Rules,
			SkillApproval:      g.SkillApproval,
			RequestPermissions: g.RequestPermissions,
			McpElicitations:    g.McpElicitations,
		}}, nil
	}
	return ParseApprovalPolicy(string(a.Policy))
}

// SandboxFromAPI converts a sandbox policy (a thread's, or command/exec's
// sandboxPolicy) from its wire type; an unknown variant or external
// network setting is an error.
func SandboxFromAPI(p api.SandboxPolicy) (SandboxPolicy, error) {
	switch p.Type {
	case api.SandboxPolicyReadOnly:
		return SandboxPolicy{Kind: ReadOnly, NetworkAccess: p.NetworkAccess}, nil
	case api.SandboxPolicyWorkspaceWrite:
		out := SandboxPolicy{
			Kind:                WorkspaceWrite,
			NetworkAccess:       p.NetworkAccess,
			ExcludeTmpdirEnvVar: p.ExcludeTmpdirEnvVar,
			ExcludeSlashTmp:     p.ExcludeSlashTmp,
		}
		if len(p.WritableRoots) > 0 {
			out.WritableRoots = slices.Clone(p.WritableRoots)
		}
		return out, nil
	case api.SandboxPolicyDangerFullAccess:
		return SandboxPolicy{Kind: DangerFullAccess}, nil
	case api.SandboxPolicyExternalSandbox:
		switch p.ExternalNetworkAccess {
		case "", api.NetworkRestricted:
			return SandboxPolicy{Kind: ExternalSandbox}, nil
		case api.NetworkEnabled:
			return SandboxPolicy{Kind: ExternalSandbox, NetworkAccess: true}, nil
		}
		return SandboxPolicy{}, fmt.Errorf("unknown variant `%s`, expected `restricted` or `enabled`", p.ExternalNetworkAccess)
	}
	return SandboxPolicy{}, fmt.Errorf("unknown variant `%s`, expected one of `dangerFullAccess`, `readOnly`, `externalSandbox`, `workspaceWrite`", p.Type)
}

// APIDecision converts a decision offered to the client to its wire type.
func APIDecision(d ReviewDecision) api.CommandExecutionApprovalDecision {
	switch d.Kind {
	case AcceptWithExecpolicyAmendment:
		return api.CommandExecutionApprovalDecision{Decision: api.DecisionAcceptWithExecpolicyAmendment, ExecpolicyAmendment: slices.Clone(d.ExecpolicyAmendment)}
	case ApplyNetworkPolicyAmendment:
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
func APIDecisions(ds []ReviewDecision) []api.CommandExecutionApprovalDecision {
	if len(ds) == 0 {
		return nil
	}
	out := make([]api.CommandExecutionApprovalDecision, len(ds))
	for i, d := range ds {
		out[i] = APIDecision(d)
	}
	return out
}
