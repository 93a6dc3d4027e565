package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/tools/shell"
)

// Bounds of the process/* methods (docs/protocol.md §4.33).
const (
	// DefaultMaxProcessesPerConnection is how many processes one
	// connection may have running at once.
	DefaultMaxProcessesPerConnection = 16
	// DefaultMaxProcesses is how many processes all connections together
	// may have running at once.
	DefaultMaxProcesses = 64
	// MaxBufferedProcessOutput is the most a process keeps of each stream
	// it does not stream (outputBytesCap above it, or null, is lowered to
	// it): buffered output travels in one process/exited frame.
	MaxBufferedProcessOutput = 2 << 20
)

// ProcessConfig configures the process/* methods: processes a client
// spawns outside any thread and drives by a handle of its own.
type ProcessConfig struct {
	// Env derives a process's environment from BaseEnv (the daemon's
	// secrets never reach it); BaseEnv nil is the daemon's environment.
	Env     shell.EnvPolicy
	BaseEnv func() []string
	// Timeout is the default timeout; 0 is shell.DefaultTimeout.
	Timeout time.Duration
	// Sandbox builds the commands of principals; nil is sandbox.Default().
	Sandbox *sandbox.Sandbox
	// MaxPerConnection bounds the live processes of one connection; 0 is
	// DefaultMaxProcessesPerConnection.
	MaxPerConnection int
	// MaxTotal bounds the live processes of all connections; 0 is
	// DefaultMaxProcesses.
	MaxTotal int
}

// registerProcesses serves process/spawn, process/writeStdin,
// process/resizePty and process/kill. A process runs with the connection's
// principal's bounds: the operator's (local trust included) as the
// reference runs it, unsandboxed in any cwd; a principal's in a cwd inside
// its workspace roots, under its ceiling's sandbox
// (principal.CommandSandbox). Its output streams as process/outputDelta or
// comes buffered in process/exited, both to the spawning connection only,
// after the spawn's response. Closing the connection kills its processes.
func (s *Server) registerProcesses(cfg ProcessConfig) {
	if cfg.MaxPerConnection <= 0 {
		cfg.MaxPerConnection = DefaultMaxProcessesPerConnection
	}
	if cfg.MaxTotal <= 0 {
		cfg.MaxTotal = DefaultMaxProcesses
	}
	if cfg.BaseEnv == nil {
		cfg.BaseEnv = os.Environ
	}
	ps := &processes{cfg: cfg, procs: newProcTable(cfg.MaxPerConnection, cfg.MaxTotal)}
	s.Handle(api.MethodProcessSpawn, ps.spawn)
	s.Handle(api.MethodProcessWriteStdin, ps.writeStdin)
	s.Handle(api.MethodProcessResizePty, ps.resizePty)
	s.Handle(api.MethodProcessKill, ps.kill)
}

type processes struct {
	cfg   ProcessConfig
	procs *procTable
}

func (ps *processes) spawn(_ context.Context, c *Call) (any, error) {
	var p api.ProcessSpawnParams
	if err := DecodeParams(c, &p, "command", "processHandle", "cwd"); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(p.Cwd) {
		return nil, InvalidRequest("Invalid request: cwd must be an absolute path, got %s", quoteJSON(p.Cwd))
	}
	switch {
	case p.ProcessHandle == "":
		return nil, InvalidRequest("processHandle must not be empty")
	case len(p.Command) == 0:
		return nil, InvalidRequest("command must not be empty")
	case p.Size != nil && !p.Tty:
		return nil, InvalidParams("process/spawn size requires tty: true")
	case p.Size != nil && (p.Size.Rows == 0 || p.Size.Cols == 0):
		return nil, InvalidParams("process size rows and cols must be greater than 0")
	case p.TimeoutMs.Value != nil && *p.TimeoutMs.Value < 0:
		return nil, InvalidParams("process/spawn timeoutMs must be non-negative, got %d", *p.TimeoutMs.Value)
	case p.Command[0] == "":
		return nil, spawnFailed("missing program")
	case hasNUL(p):
		return nil, spawnFailed("nul byte found in provided data")
	}
	who := c.Session.who
	cwd, pol := p.Cwd, policy.SandboxPolicy{Kind: policy.DangerFullAccess}
	if bound, ok := who.CommandSandbox(); ok {
		var err error
		if cwd, err = who.CheckPath("cwd", p.Cwd); err != nil {
			return nil, err
		}
		if pol, err = policy.SandboxFromAPI(bound); err != nil {
			return nil, err
		}
	}
	params := ps.execParams(p, cwd, pol)

	entry, err := ps.procs.claim(c.Session, p.ProcessHandle)
	switch {
	case errors.Is(err, errProcDuplicate):
		return nil, InvalidRequest("duplicate active process handle: %s", quoteJSON(p.ProcessHandle))
	case errors.Is(err, errProcConnLimit):
		return nil, InvalidRequest("process/spawn: this connection already runs %d processes, the most it may; kill one first", ps.cfg.MaxPerConnection)
	case errors.Is(err, errProcTotalLimit):
		return nil, InvalidRequest("process/spawn: the server already runs %d processes for its clients, the most it may", ps.cfg.MaxTotal)
	case err != nil:
		return nil, InvalidRequest("process/spawn: %v", err)
	}
	sess, handle := c.Session, p.ProcessHandle
	// Notifications about the process follow the spawn's response.
	responded := make(chan struct{})
	notify := func(method string, params any) {
		select {
		case <-responded:
		case <-sess.Context().Done():
			return
		}
		if n, err := sess.srv.NewNotification(method, params); err == nil {
			sess.Notify(n)
		}
	}
	startErr := make(chan error, 1)
	started := false // written by OnStart, on the run goroutine
	opts := shell.CommandExecOptions{
		BaseEnv:        ps.cfg.Env.Build(ps.cfg.BaseEnv()),
		DefaultCwd:     cwd,
		DefaultTimeout: ps.cfg.Timeout,
		Sandbox:        ps.cfg.Sandbox,
		OnOutput: func(d shell.OutputDelta) {
			notify(api.NotifyProcessOutputDelta, api.ProcessOutputDeltaNotification{
				ProcessHandle: handle, Stream: d.Stream.String(),
				DeltaBase64: base64.StdEncoding.EncodeToString(d.Data), CapReached: d.CapReached,
			})
		},
		OnStart: func(proc *shell.Process) {
			started = true
			ps.procs.started(entry, proc)
			startErr <- nil
		},
	}
	// The run belongs to the connection: its close kills the process
	// (the session's context ends) and waits for the run (procTable).
	go func() {
		defer entry.done()
		res, err := shell.CommandExec(sess.Context(), params, opts)
		// The handle is free again by the time the client hears the exit.
		ps.procs.release(entry)
		if !started {
			startErr <- err
			return
		}
		if err != nil {
			return // the connection closed: no one to tell
		}
		notify(api.NotifyProcessExited, api.ProcessExitedNotification{
			ProcessHandle: handle, ExitCode: int32(res.ExitCode), OutputDrainTimedOut: res.DrainTimedOut,
			Stdout: res.Stdout, StdoutCapReached: res.StdoutCapReached,
			Stderr: res.Stderr, StderrCapReached: res.StderrCapReached,
		})
	}()
	if err := <-startErr; err != nil {
		var se *shell.SpawnError
		if errors.As(err, &se) {
			return nil, spawnFailed(se.Err.Error())
		}
		return nil, err
	}
	c.After(func() { close(responded) })
	return api.ProcessSpawnResult{}, nil
}

// execParams turns process/spawn's params into the runner's: absent
// timeout and cap are the defaults, null lifts them, and a stream that is
// not streamed keeps at most MaxBufferedProcessOutput.
func (ps *processes) execParams(p api.ProcessSpawnParams, cwd string, pol policy.SandboxPolicy) shell.CommandExecParams {
	streamed := p.Tty || p.StreamStdoutStderr
	out := shell.CommandExecParams{
		Command: p.Command, Cwd: cwd, Env: p.Env, SandboxPolicy: &pol,
		StreamStdoutStderr: p.StreamStdoutStderr, TTY: p.Tty, StreamStdin: p.StreamStdin,
		HasProcessID: true, WaitForOutput: true,
	}
	if p.Size != nil {
		out.Rows, out.Cols = p.Size.Rows, p.Size.Cols
	}
	if p.TimeoutMs.Set {
		if p.TimeoutMs.Value == nil {
			out.DisableTimeout = true
		} else {
			out.TimeoutMS = p.TimeoutMs.Value
		}
	}
	limit := int64(-1)
	if !p.OutputBytesCap.Set {
		limit = shell.DefaultMaxOutputBytes
	} else if p.OutputBytesCap.Value != nil {
		limit = int64(min(*p.OutputBytesCap.Value, 1<<40))
	}
	if !streamed && (limit < 0 || limit > MaxBufferedProcessOutput) {
		limit = MaxBufferedProcessOutput
	}
	if limit < 0 {
		out.DisableOutputCap = true
	} else {
		out.OutputBytesCap = &limit
	}
	return out
}

func (ps *processes) writeStdin(ctx context.Context, c *Call) (any, error) {
	var p api.ProcessWriteStdinParams
	if err := DecodeParams(c, &p, "processHandle"); err != nil {
		return nil, err
	}
	if p.DeltaBase64 == nil && !p.CloseStdin {
		return nil, InvalidParams("process/writeStdin requires deltaBase64 or closeStdin")
	}
	var data []byte
	if p.DeltaBase64 != nil {
		var err error
		if data, err = base64.StdEncoding.DecodeString(*p.DeltaBase64); err != nil {
			return nil, InvalidParams("invalid deltaBase64: %v", err)
		}
	}
	proc, err := ps.lookup(ctx, c.Session, p.ProcessHandle)
	if err != nil {
		return nil, err
	}
	if err := proc.Write(data); err != nil {
		return nil, processControlError(p.ProcessHandle, err)
	}
	if p.CloseStdin {
		if err := proc.CloseStdin(); err != nil {
			return nil, processControlError(p.ProcessHandle, err)
		}
	}
	return api.ProcessWriteStdinResult{}, nil
}

func (ps *processes) resizePty(ctx context.Context, c *Call) (any, error) {
	var p api.ProcessResizePtyParams
	if err := DecodeParams(c, &p, "processHandle", "size"); err != nil {
		return nil, err
	}
	if p.Size.Rows == 0 || p.Size.Cols == 0 {
		return nil, InvalidParams("process size rows and cols must be greater than 0")
	}
	proc, err := ps.lookup(ctx, c.Session, p.ProcessHandle)
	if err != nil {
		return nil, err
	}
	if err := proc.Resize(p.Size.Rows, p.Size.Cols); err != nil {
		return nil, processControlError(p.ProcessHandle, err)
	}
	return api.ProcessResizePtyResult{}, nil
}

func (ps *processes) kill(ctx context.Context, c *Call) (any, error) {
	var p api.ProcessKillParams
	if err := DecodeParams(c, &p, "processHandle"); err != nil {
		return nil, err
	}
	proc, err := ps.lookup(ctx, c.Session, p.ProcessHandle)
	if err != nil {
		return nil, err
	}
	proc.Terminate()
	return api.ProcessKillResult{}, nil
}

// lookup returns the running process of handle on the connection.
func (ps *processes) lookup(ctx context.Context, sess *Session, handle string) (*shell.Process, error) {
	proc, ok, err := ps.procs.lookup(ctx, sess, handle)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, InvalidRequest("no active process for process handle %s", quoteJSON(handle))
	}
	return proc, nil
}

// processControlError maps a Process control failure as the reference
// words it (-32600).
func processControlError(handle string, err error) error {
	switch {
	case errors.Is(err, shell.ErrStdinNotStreamed):
		return InvalidRequest("stdin streaming is not enabled for this process")
	case errors.Is(err, shell.ErrStdinClosed):
		return InvalidRequest("stdin is already closed")
	case errors.Is(err, shell.ErrNotTTY):
		return InvalidRequest("failed to resize PTY: process is not attached to a PTY")
	case errors.Is(err, shell.ErrProcessExited):
		return InvalidRequest("process %s is no longer running", quoteJSON(handle))
	}
	return InvalidRequest("process %s: %v", quoteJSON(handle), err)
}

// spawnFailed is the reference's answer to a process that could not be
// started: -32603 with the reason.
func spawnFailed(reason string) error {
	return &RPCError{Code: CodeInternal, Message: "failed to spawn process: " + reason}
}

// hasNUL reports a NUL byte in what process/spawn hands to the OS, which
// no argv, environment or path can carry.
func hasNUL(p api.ProcessSpawnParams) bool {
	if strings.ContainsRune(p.Cwd, 0) {
		return true
	}
	for _, a := range p.Command {
		if strings.ContainsRune(a, 0) {
			return true
		}
	}
	for k, v := range p.Env {
		if strings.ContainsRune(k, 0) || v != nil && strings.ContainsRune(*v, 0) {
			return true
		}
	}
	return false
}

// quoteJSON is s as a JSON string, as the reference quotes handles.
func quoteJSON(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
