package shell

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"time"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/lossy"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/sandbox"
)

// CommandExecParams are the parameters of command/exec (docs/protocol.md §4.19)
// that concern the process; processId bookkeeping and the transport stay
// with the server.
type CommandExecParams struct {
	// Command is the argv; required, non-empty.
	Command []string
	// Cwd is the working directory; "" or relative resolves against
	// CommandExecOptions.DefaultCwd.
	Cwd string
	// Env overrides the base environment; a nil value unsets the variable.
	Env map[string]*string
	// TimeoutMS overrides the default timeout.
	TimeoutMS *int64
	// DisableTimeout runs without a timeout (exclusive with TimeoutMS).
	DisableTimeout bool
	// OutputBytesCap caps each stream (default 1 MiB).
	OutputBytesCap *int64
	// DisableOutputCap captures everything (exclusive with OutputBytesCap).
	DisableOutputCap bool
	// SandboxPolicy overrides the default policy.
	SandboxPolicy *policy.SandboxPolicy
	// StreamStdoutStderr streams output through OnOutput; the result then
	// carries empty stdout/stderr ("streamed bytes are not repeated").
	StreamStdoutStderr bool
	// TTY runs the command on a pseudo-terminal (implies StreamStdin and
	// StreamStdoutStderr; the terminal's output is the stdout stream) of
	// Rows x Cols (0 is 24 x 80).
	TTY        bool
	Rows, Cols uint16
	// StreamStdin feeds stdin through the Process given to
	// CommandExecOptions.OnStart.
	StreamStdin bool
	// HasProcessID says whether the client gave a processId (required for
	// streaming).
	HasProcessID bool
	// WaitForOutput hears background children until the output closes or
	// the drain timeout passes (ExecRequest.WaitForOutput).
	WaitForOutput bool
}

// CommandExecOptions are the server-side defaults of command/exec.
type CommandExecOptions struct {
	// BaseEnv is the environment before Env overrides (typically
	// EnvPolicy.Build(os.Environ())).
	BaseEnv []string
	// DefaultCwd is used when Cwd is empty and resolves relative ones.
	DefaultCwd string
	// DefaultPolicy applies when SandboxPolicy is nil.
	DefaultPolicy policy.SandboxPolicy
	// DefaultTimeout applies when TimeoutMS is nil; zero is DefaultTimeout.
	DefaultTimeout time.Duration
	// Sandbox builds the commands; nil uses sandbox.Default().
	Sandbox *sandbox.Sandbox
	// OnOutput receives the streamed chunks (StreamStdoutStderr), each
	// stream cut at the cap with CapReached on its last chunk.
	OnOutput func(OutputDelta)
	// OnStart receives the controls (stdin, resize, terminate) of the
	// started process.
	OnStart func(*Process)
}

// CommandExecResult is command/exec's result.
type CommandExecResult struct {
	// ExitCode is the exit status (124 on timeout, 128+signal when killed).
	ExitCode int `json:"exitCode"`
	// Stdout is the captured standard output ("" when streamed).
	Stdout string `json:"stdout"`
	// Stderr is the captured standard error ("" when streamed).
	Stderr string `json:"stderr"`
	// StdoutCapReached and StderrCapReached report that the stream
	// reached the cap and output was dropped.
	StdoutCapReached bool `json:"stdoutCapReached"`
	StderrCapReached bool `json:"stderrCapReached"`
	// DrainTimedOut reports ExecResult.DrainTimedOut.
	DrainTimedOut bool `json:"outputDrainTimedOut"`
}

// Validate checks the parameter combinations the protocol rejects with
// -32602 (apperr.Invalid).
func (p CommandExecParams) Validate() error {
	switch {
	case len(p.Command) == 0 || p.Command[0] == "":
		return apperr.New(apperr.Invalid, "command must not be empty")
	case p.TimeoutMS != nil && p.DisableTimeout:
		return apperr.New(apperr.Invalid, "timeoutMs and disableTimeout are mutually exclusive")
	case p.TimeoutMS != nil && *p.TimeoutMS < 0:
		return apperr.New(apperr.Invalid, "timeoutMs must not be negative")
	case p.OutputBytesCap != nil && p.DisableOutputCap:
		return apperr.New(apperr.Invalid, "outputBytesCap and disableOutputCap are mutually exclusive")
	case p.OutputBytesCap != nil && *p.OutputBytesCap < 0:
		return apperr.New(apperr.Invalid, "outputBytesCap must not be negative")
	case (p.TTY || p.StreamStdin || p.StreamStdoutStderr) && !p.HasProcessID:
		return apperr.New(apperr.Invalid, "processId is required for tty or streaming")
	}
	return nil
}

// CommandExec runs a one-off command outside any turn (command/exec) and
// returns its result after the process exited and all deltas were
// delivered. Invalid parameters are apperr.Invalid; a command that cannot
// be started is apperr.Invalid too, with the reason, and its chain holds
// the *SpawnError.
func CommandExec(ctx context.Context, p CommandExecParams, o CommandExecOptions) (CommandExecResult, error) {
	if err := p.Validate(); err != nil {
		return CommandExecResult{}, err
	}
	cwd := o.DefaultCwd
	if p.Cwd != "" {
		cwd = ResolveWorkdir(o.DefaultCwd, p.Cwd)
	}
	if !filepath.IsAbs(cwd) {
		return CommandExecResult{}, apperr.New(apperr.Invalid, "cwd must be an absolute path")
	}
	timeout := o.DefaultTimeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	switch {
	case p.DisableTimeout:
		timeout = 0
	case p.TimeoutMS != nil:
		timeout = time.Duration(*p.TimeoutMS) * time.Millisecond
		if timeout == 0 {
			timeout = time.Nanosecond
		}
	}
	capBytes := DefaultMaxOutputBytes
	switch {
	case p.DisableOutputCap:
		capBytes = -1
	case p.OutputBytesCap != nil:
		capBytes = int(min(*p.OutputBytesCap, int64(1<<40)))
	}
	pol := o.DefaultPolicy
	if p.SandboxPolicy != nil {
		pol = *p.SandboxPolicy
	}
	req := ExecRequest{
		Argv: p.Command, Cwd: cwd, Env: applyEnvOverrides(o.BaseEnv, p.Env), Timeout: timeout,
		Policy: pol, Sandbox: o.Sandbox, SeparateStreams: true, MaxOutputBytes: &capBytes,
		MaxDeltas: -1, StopDeltasAtCap: true, WaitForOutput: p.WaitForOutput,
	}
	stream := p.StreamStdoutStderr || p.TTY
	if stream {
		req.OnOutput, req.StreamOnly = o.OnOutput, true
	}
	req.TTY, req.TTYRows, req.TTYCols = p.TTY, p.Rows, p.Cols
	req.StdinPipe = p.StreamStdin || p.TTY
	req.OnStart = o.OnStart
	res, err := Exec(ctx, req)
	if err != nil {
		if se := (*SpawnError)(nil); errors.As(err, &se) {
			return CommandExecResult{}, apperr.Wrap(apperr.Invalid, se, "failed to start command: %v", se.Err)
		}
		return CommandExecResult{}, err
	}
	out := CommandExecResult{ExitCode: res.ExitCode, StdoutCapReached: res.StdoutCapped,
		StderrCapReached: res.StderrCapped, DrainTimedOut: res.DrainTimedOut}
	if !stream {
		out.Stdout, out.Stderr = lossy.String(res.Stdout), lossy.String(res.Stderr)
	}
	return out, nil
}

// applyEnvOverrides sets or (nil value) unsets variables on top of base.
func applyEnvOverrides(base []string, over map[string]*string) []string {
	if len(over) == 0 {
		return base
	}
	set := map[string]string{}
	out := make([]string, 0, len(base))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := over[k]; ok {
			continue
		}
		out = append(out, kv)
	}
	for k, v := range over {
		if v != nil {
			set[k] = *v
		}
	}
	return withOverlay(out, set)
}
