// Package policy holds the pure decision logic behind tool approvals and
// sandboxing (docs/tools.md §4): approval policies and sandbox policies with their
// wire forms, the known-safe and dangerous command classifiers, exec-policy
// prefix rules with amendments, the per-call orchestrator decision (skip,
// ask, forbid, run unsandboxed) including the retry-after-sandbox-denial
// rule, patch safety, and the per-thread store of session approvals.
//
// Rules files are Starlark programs (go.starlark.net) run with the rule
// built-ins, without while loops, recursion or load, and within a step
// limit, so a rules file can neither hang the daemon nor reach outside it.
//
// Nothing here runs a process. The only file-system access is the lookup of
// protected subpaths (.git, .codex, .agents) when writable roots are resolved,
// and appending an allow rule to a rules file on request.
//
// Texts returned for the model (rejections, reasons) use the reference
// implementation's words so models trained against Codex read them as usual.
//
// It must not import any package of the module: the sandbox, the tools and
// their orchestration build on it.
package policy
