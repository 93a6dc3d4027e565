// Package policy holds the pure decision logic behind tool approvals and
// sandboxing (docs/tools.md §4): approval policies and sandbox policies with their
// wire forms, the known-safe and dangerous command classifiers, exec-policy
// prefix rules with amendments, the per-call orchestrator decision (skip,
// ask, forbid, run unsandboxed) including the retry-after-sandbox-denial
// rule, patch safety, and the per-thread store of session approvals; and
// the typed conversions between those values and their api wire types
// (wire.go), the one place they are converted, for the tool layer and for
// command/exec alike.
//
// Of our packages it imports only api, the contract: it must not import a
// transport, the turns manager or the tool layer.
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
package policy
