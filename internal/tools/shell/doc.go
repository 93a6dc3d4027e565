// Package shell provides the `shell` (argv) and `shell_command` (string)
// tools of docs/tools.md §2.1–§2.3, the process runner behind them (Exec), the
// output shaping of §3 (head+tail truncation with the reference's markers,
// the structured and freeform formats, the success flag) and the one-off
// command/exec helper (CommandExec, docs/protocol.md §4.19).
//
// Approval and sandboxing are decided per call by a Runner, so the turns
// layer can plan each command with policy.PlanExec; PolicyRunner implements
// that flow (forbid, ask, sandboxed first attempt, retry prompt after a
// denial) and SandboxRunner is the approval-free default. Commands run
// through internal/sandbox.
//
// Environment rule (EnvPolicy): a command inherits the daemon's environment
// like Codex's shell_environment_policy (inherit all by default; optional
// KEY/SECRET/TOKEN excludes, excludes, set, include_only), except that the
// daemon's own secrets are always removed: every APPSERVER_* variable, the
// common provider key variables (DefaultSecretVars) and each configured
// provider's env_key (EnvPolicy.SecretVars). When the sandbox cuts the
// network the command also sees CODEX_SANDBOX_NETWORK_DISABLED=1.
//
// Login shells (shell_command's login:true, exec_command's default) run
// their profile once: a Snapshot records what the user's login shell sets
// (variables, functions, aliases, options), and commands run in a plain
// `-c` shell that sources it; a changed startup file is taken again.
// Snapshots are kept per owner (a thread's originator: one principal never
// sources another's) and per kind: sandboxed commands get one taken under
// a read-only sandbox, unsandboxed model commands one taken directly, and
// the user's own shell commands one of their own. The files live in a
// directory only the daemon writes (shown to sandboxed commands read-only)
// and are checked against what the daemon wrote before every use
// (docs/security.md, "The login-shell snapshot").
//
// Like every tool handler it knows nothing about threads, storage or
// transports: it must not import internal/turns, internal/tools/orchestrate,
// the store, internal/model, internal/hub, internal/server, internal/httpapi
// or cmd. The websocket server uses its command/exec helper, not the
// reverse.
package shell
