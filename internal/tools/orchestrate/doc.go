// Package orchestrate builds the tool set of each turn and runs the policy
// flows around the built-in tools: it is the layer between the turns
// manager (which hands it a turns.ToolContext) and the tool handlers of
// internal/tools, internal/dynamic and internal/skills (which know nothing
// about threads).
//
// It owns:
//   - building a thread's registry for one turn: the shell tool the model's
//     shell_type selects, apply_patch in the provider's form, exec_command
//     and write_stdin, the file tools, request_user_input, update_plan, the
//     skills namespace and the thread's dynamic tools (Service.Build);
//   - the approval flow: a server request through the turn's
//     ClientRequests, with the waitingOnApproval flag, decoded into a
//     policy.ReviewDecision, and what the model reads when nobody answered,
//     the client failed or the turn was interrupted;
//   - the item life cycles: commandExecution items of shell commands and of
//     exec_command sessions (which may outlive the call), fileChange items
//     of apply_patch, including `apply_patch` run through a shell tool;
//   - exec-policy amendments accepted by a client ("approved with
//     amendment"): applied to every thread and appended to the rules file;
//   - what a thread's own tools may touch: fsguard.ForThread of the turn's
//     sandbox policy, the turn's cwd (never a directory the model names)
//     and the session's granted roots, handed with the daemon's guard to
//     the file tools and apply_patch; the sandbox hides the guard's masked
//     paths from commands.
//
// The conversions between api and policy values are policy's (wire.go),
// shared with command/exec.
//
// It must not import internal/server, internal/httpapi, internal/hub or
// cmd: transports reach it only through the turns interfaces, so it is tested with small
// fakes of those and without a websocket.
package orchestrate
