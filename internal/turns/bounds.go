package turns

import (
	"slices"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// bound applies a principal's ceiling and workspace roots to the settings
// a request left a thread with (rec and meta, overrides o applied):
// chosen ones beyond them are refused, the others lowered, a missing cwd
// becomes the principal's root, and every path comes back resolved.
// profile is set when the thread's config chose a permission profile.
func bound(who principal.Principal, rec *store.Thread, meta *transcript.ThreadMeta, o overrides, profile bool) error {
	if who.IsOperator() {
		return nil
	}
	s := principal.Settings{
		Cwd:           rec.Cwd,
		Sandbox:       meta.Sandbox,
		SandboxAsked:  o.sandboxAsked() || profile,
		SandboxParam:  cmpParam(o, profile),
		Approval:      meta.ApprovalPolicy,
		ApprovalAsked: o.approval != nil,
	}
	for _, r := range o.roots {
		s.Paths = append(s.Paths, principal.Path{Param: "runtimeWorkspaceRoots", Path: r})
	}
	if err := who.Bound(&s); err != nil {
		return err
	}
	rec.Cwd, meta.Cwd = s.Cwd, s.Cwd
	if !sameSandbox(meta.Sandbox, s.Sandbox) {
		// Lowered to the ceiling: no longer the profile that was named.
		meta.Sandbox, meta.PermissionProfile = s.Sandbox, ""
	}
	meta.ApprovalPolicy = s.Approval
	return nil
}

// cmpParam names the request parameter that chose the sandbox.
func cmpParam(o overrides, profile bool) string {
	switch {
	case o.permissions != nil:
		return "permissions"
	case o.sandboxPolicy != nil:
		return "sandboxPolicy"
	case profile:
		return "config.default_permissions"
	}
	return "sandbox"
}

// sameBounds reports whether two metas have the same bounded settings.
func sameBounds(a, b transcript.ThreadMeta) bool {
	return a.Cwd == b.Cwd && sameSandbox(a.Sandbox, b.Sandbox) && a.PermissionProfile == b.PermissionProfile &&
		sameApproval(a.ApprovalPolicy, b.ApprovalPolicy)
}

func sameSandbox(a, b api.SandboxPolicy) bool {
	return a.Type == b.Type && a.NetworkAccess == b.NetworkAccess && a.ExternalNetworkAccess == b.ExternalNetworkAccess &&
		a.ExcludeSlashTmp == b.ExcludeSlashTmp && a.ExcludeTmpdirEnvVar == b.ExcludeTmpdirEnvVar &&
		slices.Equal(a.WritableRoots, b.WritableRoots)
}

func sameApproval(a, b api.AskForApproval) bool {
	if a.Granular == nil || b.Granular == nil {
		return a.Granular == b.Granular && a.Policy == b.Policy
	}
	return *a.Granular == *b.Granular
}

// boundedParams checks a principal's turn/start against its bounds before
// the turn may go to another daemon, and returns p with the settings the
// thread is to have (the other daemon runs the turn as no one in
// particular, so it must get them settled).
func (t *thread) boundedParams(who principal.Principal, o overrides, p api.TurnStartParams) (api.TurnStartParams, error) {
	t.mu.Lock()
	rec, meta := t.rec, t.meta
	t.mu.Unlock()
	if err := t.m.apply(&rec, &meta, o); err != nil {
		return p, err
	}
	if err := bound(who, &rec, &meta, o, false); err != nil {
		return p, err
	}
	cwd, approval := rec.Cwd, meta.ApprovalPolicy
	p.Cwd, p.ApprovalPolicy = &cwd, &approval
	if meta.PermissionProfile != "" && p.Permissions != nil {
		return p, nil // the profile, as named, within bounds
	}
	sb := meta.Sandbox
	p.SandboxPolicy, p.Permissions = &sb, nil
	return p, nil
}
