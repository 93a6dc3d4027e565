// Package files implements the workspace-reading tools of docs/tools.md §2.6–§2.8
// and §2.10–§2.11: read_file (slice and indentation modes), list_dir,
// grep_files (ripgrep), view_image (a local image attached to the next model
// request as a data URL) and request_user_input (questions sent to the
// client as a server request).
//
// Each tool is a registry.Handler with a Register method that adds its spec
// with the reference parallel flag. Parameters, defaults, limits, output
// formats and error texts follow the reference implementation, so models
// trained against Codex read them as usual. None of these tools changes the
// workspace (IsMutating is false).
//
// Every path goes through internal/fsguard, the one rule of what the
// daemon touches on a caller's behalf: the Access hook gives the thread's
// roots (fsguard.ForThread: where its sandbox lets commands write, its
// cwd under read-only, everywhere under full access; without a hook, the
// turn's cwd), and the Guard refuses the daemon's own paths (data
// directory, config, credentials, its /proc entries) to every thread.
// Files are opened race-free through the guard; list_dir leaves refused
// entries out; grep_files checks its path through the guard and runs
// ripgrep inside the sandbox (read-only policy, no network, PATH and HOME
// only), which hides the same paths.
//
// # Integration
//
// grep_files needs ripgrep (`rg`) on PATH; without it every call answers
// "failed to launch rg: … Ensure ripgrep is installed and on PATH.". It
// needs a Sandbox too, and refuses to search without one.
// view_image takes the turn's sink (turns.ToolSink satisfies ItemSink)
// for its imageView item. request_user_input takes an Asker
// that sends item/tool/requestUserInput to the thread's client, sets the
// thread status flag waitingOnUserInput while it waits, emits
// serverRequest/resolved and returns ErrCancelled when no client answers;
// its Mode hook reports the collaboration mode (Codex offers the tool in
// Plan mode only).
//
// # Dependencies
//
// Like every tool handler it knows nothing about threads, storage or
// transports: the hooks above are its only way out. It imports
// internal/fsguard, internal/policy and internal/sandbox for the path rule
// and ripgrep's confinement. It must not import
// internal/turns, internal/tools/orchestrate, the store, internal/model,
// internal/hub, internal/server, internal/httpapi or cmd.
package files
