package api

// Methods and notifications of the process/* family: standalone processes
// a client spawns and drives by a handle of its own choosing, scoped to its
// connection (docs/protocol.md §4.33).
const (
	// MethodProcessSpawn starts a process and returns once it runs.
	MethodProcessSpawn = "process/spawn"
	// MethodProcessWriteStdin writes to a process's stdin, closes it, or both.
	MethodProcessWriteStdin = "process/writeStdin"
	// MethodProcessResizePty resizes the terminal of a process spawned with tty.
	MethodProcessResizePty = "process/resizePty"
	// MethodProcessKill kills a process and what it started.
	MethodProcessKill = "process/kill"
	// NotifyProcessOutputDelta carries a chunk of a streaming process's output.
	NotifyProcessOutputDelta = "process/outputDelta"
	// NotifyProcessExited reports a process's end and its buffered output.
	NotifyProcessExited = "process/exited"
)

// ProcessTerminalSize is a terminal size in character cells.
type ProcessTerminalSize struct {
	// Rows is the height.
	Rows uint16 `json:"rows"`
	// Cols is the width.
	Cols uint16 `json:"cols"`
}

// ProcessSpawnParams are the params of process/spawn.
type ProcessSpawnParams struct {
	// Command is argv; required and non-empty.
	Command []string `json:"command"`
	// ProcessHandle is the client's name for the process, unique among the
	// connection's live processes; required and non-empty.
	ProcessHandle string `json:"processHandle"`
	// Cwd is the absolute working directory; required.
	Cwd string `json:"cwd"`
	// Tty runs the process on a pseudo-terminal (implies both streams).
	Tty bool `json:"tty,omitempty"`
	// StreamStdin accepts process/writeStdin.
	StreamStdin bool `json:"streamStdin,omitempty"`
	// StreamStdoutStderr streams output as process/outputDelta instead of
	// buffering it into process/exited.
	StreamStdoutStderr bool `json:"streamStdoutStderr,omitempty"`
	// OutputBytesCap caps each stream: absent is the default (1 MiB), null
	// lifts the cap.
	OutputBytesCap Nullable[uint64] `json:"outputBytesCap,omitzero"`
	// TimeoutMs bounds the run time: absent is the default (10 s), null
	// lifts the bound.
	TimeoutMs Nullable[int64] `json:"timeoutMs,omitzero"`
	// Env adds (string) or unsets (null) variables, or null.
	Env map[string]*string `json:"env,omitempty"`
	// Size is the initial terminal size for tty, or null.
	Size *ProcessTerminalSize `json:"size,omitempty"`
}

// ProcessSpawnResult is the (empty) result of process/spawn.
type ProcessSpawnResult struct{}

// ProcessWriteStdinParams are the params of process/writeStdin.
type ProcessWriteStdinParams struct {
	// ProcessHandle names the process.
	ProcessHandle string `json:"processHandle"`
	// DeltaBase64 is the base64-encoded bytes to write, or null.
	DeltaBase64 *string `json:"deltaBase64,omitempty"`
	// CloseStdin closes stdin after writing DeltaBase64.
	CloseStdin bool `json:"closeStdin,omitempty"`
}

// ProcessWriteStdinResult is the (empty) result of process/writeStdin.
type ProcessWriteStdinResult struct{}

// ProcessResizePtyParams are the params of process/resizePty.
type ProcessResizePtyParams struct {
	// ProcessHandle names the process.
	ProcessHandle string `json:"processHandle"`
	// Size is the new terminal size.
	Size ProcessTerminalSize `json:"size"`
}

// ProcessResizePtyResult is the (empty) result of process/resizePty.
type ProcessResizePtyResult struct{}

// ProcessKillParams are the params of process/kill.
type ProcessKillParams struct {
	// ProcessHandle names the process.
	ProcessHandle string `json:"processHandle"`
}

// ProcessKillResult is the (empty) result of process/kill.
type ProcessKillResult struct{}

// ProcessOutputDeltaNotification is a chunk of a streaming process's output
// (method process/outputDelta).
type ProcessOutputDeltaNotification struct {
	// ProcessHandle names the process.
	ProcessHandle string `json:"processHandle"`
	// Stream is "stdout" (a terminal's output too) or "stderr".
	Stream string `json:"stream"`
	// DeltaBase64 is the chunk, base64-encoded.
	DeltaBase64 string `json:"deltaBase64"`
	// CapReached is true on the last chunk of a stream cut by the cap.
	CapReached bool `json:"capReached"`
}

// ProcessExitedNotification is the end of a process (method
// process/exited), the last message about its handle.
type ProcessExitedNotification struct {
	// ProcessHandle names the process.
	ProcessHandle string `json:"processHandle"`
	// ExitCode is the exit status: 128+signal when killed (137 by
	// process/kill), 124 on timeout.
	ExitCode int32 `json:"exitCode"`
	// OutputDrainTimedOut is true when output was still open the drain
	// time after the process exited (a descendant that left its process
	// group kept it).
	OutputDrainTimedOut bool `json:"outputDrainTimedOut"`
	// Stdout is the buffered stdout ("" when streamed).
	Stdout string `json:"stdout"`
	// StdoutCapReached reports that stdout reached the cap.
	StdoutCapReached bool `json:"stdoutCapReached"`
	// Stderr is the buffered stderr ("" when streamed).
	Stderr string `json:"stderr"`
	// StderrCapReached reports that stderr reached the cap.
	StderrCapReached bool `json:"stderrCapReached"`
}
