// Package execsession implements the unified-exec tools exec_command and
// write_stdin (docs/tools.md §2.4): commands that run as long-lived sessions, on
// a PTY (tty=true) or on plain pipes, whose output the model collects across
// calls.
//
// A Manager owns the sessions of one thread: it spawns processes (through a
// CommandFunc hook, so the integration layer can put the sandbox around
// them), reserves session ids, keeps at most 64 live sessions (pruning the
// least recently used one outside the 8 most recent, exited ones first),
// buffers each session's output in a 1 MiB head+tail buffer and collects it
// for a call until the process exits or the yield time passes. Close kills
// the whole process tree of every session (process group, terminal session
// and descendants) and waits for every goroutine it started.
//
// A Supervisor holds the Managers of all threads of the daemon, so a thread
// unload releases one of them and daemon shutdown reaps everything.
//
// Handler is the registry.Handler serving both tools; Register adds their
// specs, byte for byte as codex-cli 0.169 sends them. The text returned to
// the model follows the reference format:
//
//	Chunk ID: <6 hex>
//	Wall time: <seconds, 4 decimals> seconds
//	Process exited with code <N>          (when it exited)
//	Process running with session ID <id>  (while it runs)
//	Original token count: <ceil(bytes/4)>
//	Output:
//	<output, middle-truncated to max_output_tokens>
//
// "Original token count" is always present and the output carries the
// "Warning: truncated output …" header when cut, as codex-cli 0.169 does.
//
// # Integration
//
// The daemon owns one Supervisor (Close it on shutdown, after the turns
// stopped); a thread's Manager comes from Supervisor.Manager(threadID) and
// is released with Supervisor.Release when the thread unloads. Per turn, the
// tools factory builds a Handler around the thread's Manager and calls
// Register. HandlerConfig.Prepare is the hook for approvals, the escalation
// guard and the sandbox (set ExecRequest.Command); ManagerConfig.Observer
// (or a per-thread one) turns session life cycles into commandExecution
// items, and write_stdin emits TerminalInteraction through the turn's
// registry.Emitter.
//
// # Dependencies
//
// Like every tool handler it knows nothing about threads, storage or
// transports: it must not import internal/turns, internal/tools/orchestrate
// (which provides the hooks above), the store, internal/model, internal/hub,
// internal/server, internal/httpapi or cmd.
package execsession
