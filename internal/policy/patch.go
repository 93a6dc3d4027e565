package policy

// ChangeKind is the kind of one file operation of a patch.
type ChangeKind int

// The file operations.
const (
	// ChangeAdd creates a file.
	ChangeAdd ChangeKind = iota
	// ChangeDelete deletes a file.
	ChangeDelete
	// ChangeUpdate edits a file, optionally moving it to MovePath.
	ChangeUpdate
)

// FileChange is one file operation of a patch.
type FileChange struct {
	// Kind is add, delete or update.
	Kind ChangeKind
	// Path is the file, absolute or relative to the patch's Cwd.
	Path string
	// MovePath is the update's destination ("*** Move to:"), if any.
	MovePath string
}

// Patch is the set of file operations of one apply_patch call.
type Patch struct {
	// Cwd resolves relative paths.
	Cwd string
	// Changes are the file operations.
	Changes []FileChange
}

// TouchedPaths returns every path the patch writes (adds, deletes, update
// sources and move destinations), absolute and lexically cleaned.
func (p Patch) TouchedPaths() []string {
	var out []string
	for _, c := range p.Changes {
		out = append(out, ResolvePath(p.Cwd, c.Path))
		if c.Kind == ChangeUpdate && c.MovePath != "" {
			out = append(out, ResolvePath(p.Cwd, c.MovePath))
		}
	}
	return out
}

// PatchVerdict is the outcome kind of the patch safety check.
type PatchVerdict int

// The patch verdicts (Codex SafetyCheck).
const (
	// PatchAutoApprove applies without asking.
	PatchAutoApprove PatchVerdict = iota
	// PatchAskUser asks the user first.
	PatchAskUser
	// PatchReject refuses with a reason.
	PatchReject
)

// PatchAssessment is the result of AssessPatch.
type PatchAssessment struct {
	// Verdict is auto-approve, ask or reject.
	Verdict PatchVerdict
	// Sandboxed (auto-approve) says whether the patch is applied inside the
	// sandbox: always, except under full access. Paths that look writable may
	// still be hard links to files outside the roots.
	Sandboxed bool
	// Reason (reject) is "empty patch" or the outside-the-project text.
	Reason string
}

// ReasonPatchOutsideProject is the rejection of a patch that writes outside
// the writable roots under the "never" policy.
const ReasonPatchOutsideProject = "it writes outside the writable roots, and the approval policy lets no one approve that"

// ModelMessage is the text the model receives for a rejected patch: the
// reference prefixes the reason with "patch rejected: ".
func (a PatchAssessment) ModelMessage() string {
	if a.Verdict != PatchReject {
		return ""
	}
	return "patch rejected: " + a.Reason
}

// AssessPatch decides whether a patch may be applied without asking
// (docs/tools.md §4.8, Codex assess_patch_safety): an empty patch is rejected;
// untrusted always asks; when every touched path is writable (full access:
// always; read-only: never; workspace-write: under one of roots, which the
// caller builds from the sandbox policy and the session's granted roots) or
// the policy is on-failure, it is auto-approved (unsandboxed only under full
// access; this daemon always has a platform sandbox on Linux); otherwise
// never rejects and the other policies ask.
func AssessPatch(p Patch, roots []WritableRoot, sandbox SandboxPolicy, approval ApprovalPolicy) PatchAssessment {
	if len(p.Changes) == 0 {
		return PatchAssessment{Verdict: PatchReject, Reason: "empty patch"}
	}
	if approval.Mode == Untrusted {
		return PatchAssessment{Verdict: PatchAskUser}
	}
	if patchWritable(p, roots, sandbox) || approval.Mode == OnFailure {
		return PatchAssessment{Verdict: PatchAutoApprove, Sandboxed: !sandbox.HasFullDiskWriteAccess()}
	}
	if approval.Mode == Never {
		return PatchAssessment{Verdict: PatchReject, Reason: ReasonPatchOutsideProject}
	}
	return PatchAssessment{Verdict: PatchAskUser}
}

func patchWritable(p Patch, roots []WritableRoot, sandbox SandboxPolicy) bool {
	switch sandbox.Kind {
	case DangerFullAccess, ExternalSandbox:
		return true
	case ReadOnly:
		return false
	}
	for _, path := range p.TouchedPaths() {
		if !anyRootWritable(roots, path) {
			return false
		}
	}
	return true
}
