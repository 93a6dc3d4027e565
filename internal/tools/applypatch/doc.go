// Package applypatch is the apply_patch tool (docs/tools.md §2.5): the patch
// language parser, the lenient replacement algorithm, a planner that
// verifies a whole patch against the workspace without writing anything,
// the applier, the protocol file changes and git-style diffs, and the tool
// specs and registry handler.
//
// The flow is split so that a policy layer can ask for approval between
// verification and writing:
//
//	plan, err := applypatch.NewPlan(cwd, scope, patchText) // parse + verify, no writes
//	// ... show plan.Changes(), ask for approval ...
//	res, err := plan.Apply()                              // write, or roll back
//
// Behaviour follows codex-cli 0.169.0, observed by running the released
// binary; the deliberate differences are that every path must stay inside
// the workspace roots (also through symlinks), and that the whole patch is
// verified in order (each hunk against the result of the hunks before it)
// before the first write, so a patch that fails verification leaves every
// file untouched. Errors carry the reference's model-facing words.
//
// Paths are checked once, by internal/fsguard (the one rule of what the
// daemon touches on a caller's behalf), and then never re-resolved by
// name: a patch cannot be raced into writing outside its roots. Planning
// resolves each path's symlinks and checks the result for writing under
// the caller's Scope: inside the write roots (symlinks inside the
// workspace keep working), not one of the daemon's masked paths (its data
// directory with the exec-policy rules and the user config overlay, its
// config and credential files), not in a read-only subpath of a writable
// root (.git, .codex, .agents under a sandboxed thread). Every later read,
// write, removal and directory creation goes through an fsguard.Tree,
// which opens the checked path below "/" without following any symlink
// (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or an O_NOFOLLOW walk
// where the kernel lacks it) and acts on the final directory with *at
// calls; a write goes to a new file in that directory renamed over the
// target, so it never goes through a symlink or hard link. A process that
// swaps a directory for a symlink after the check makes the patch fail
// ("a symlink appeared on the path after it was checked") and roll back;
// it cannot redirect a write, removal or rename outside the workspace.
//
// Like every tool handler it knows nothing about threads, storage or
// transports (it imports internal/fsguard for paths): it must not import internal/turns, internal/tools/orchestrate
// (which asks for approval around it), the store, internal/model,
// internal/hub, internal/server, internal/httpapi or cmd.
package applypatch
