// Package applypatch is the apply_patch tool (tools.md §2.5): the patch
// language parser, the lenient replacement algorithm, a planner that
// verifies a whole patch against the workspace without writing anything,
// the applier, the protocol file changes and git-style diffs, and the tool
// specs and registry handler.
//
// The flow is split so that a policy layer can ask for approval between
// verification and writing:
//
//	plan, err := applypatch.NewPlan(cwd, roots, patchText) // parse + verify, no writes
//	// ... show plan.Changes(), ask for approval ...
//	res, err := plan.Apply()                              // write, or roll back
//
// Behaviour follows codex-cli 0.169.0, observed by running the released
// binary; the deliberate differences are that every path must stay inside
// the workspace roots (also through symlinks), and that the whole patch is
// verified in order (each hunk against the result of the hunks before it)
// before the first write, so a patch that fails verification leaves every
// file untouched. Errors carry the reference's model-facing words.
package applypatch
