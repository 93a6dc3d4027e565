package server

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/tools/shell"
)

// CommandExecConfig configures command/exec (docs/protocol.md §4.19); it
// runs in Config.Cwd when the request names no directory, and relative
// ones are resolved against it.
type CommandExecConfig struct {
	// Policy is the sandbox policy when the request gives no
	// sandboxPolicy (the config's sandbox_mode).
	Policy policy.SandboxPolicy
	// Env derives the command's environment from BaseEnv (the daemon's
	// secrets never reach it); BaseEnv nil is the daemon's environment.
	Env     shell.EnvPolicy
	BaseEnv func() []string
	// Timeout is the default timeout; 0 is shell.DefaultTimeout.
	Timeout time.Duration
	// Sandbox builds the commands; nil is sandbox.Default().
	Sandbox *sandbox.Sandbox
}

// registerCommandExec serves command/exec: a one-off process outside any
// thread, buffered, with its stdout/stderr streamed as
// command/exec/outputDelta (base64) to the calling connection, with a
// stdin stream (streamStdin) or on a pseudo-terminal (tty, whose output is
// the stdout stream). The calling connection gets the result once the
// process exited and every delta was sent. Processes with a client-chosen
// processId (connection-scoped) are driven by command/exec/write, /resize
// and /terminate. Closing the connection kills the process group.
func (s *Server) registerCommandExec(cfg CommandExecConfig) {
	ce := &commandExec{cfg: cfg, cwd: s.cfg.Cwd, procs: newProcTable(0, 0)}
	s.Handle(api.MethodCommandExec, ce.handle)
	s.Handle(api.MethodCommandExecWrite, ce.write)
	s.Handle(api.MethodCommandExecResize, ce.resize)
	s.Handle(api.MethodCommandExecTerminate, ce.terminate)
}

type commandExec struct {
	cfg   CommandExecConfig
	cwd   string
	procs *procTable // the runs with a processId, per connection
}

func (ce *commandExec) handle(ctx context.Context, c *Call) (any, error) {
	var p api.CommandExecParams
	if err := DecodeParams(c, &p, "command"); err != nil {
		return nil, err
	}
	flag := func(b *bool) bool { return b != nil && *b }
	switch {
	case len(p.Command) == 0 || p.Command[0] == "":
		return nil, InvalidRequest("command must not be empty")
	case p.TimeoutMs != nil && flag(p.DisableTimeout):
		return nil, InvalidParams("command/exec cannot set both timeoutMs and disableTimeout")
	case p.OutputBytesCap != nil && flag(p.DisableOutputCap):
		return nil, InvalidParams("command/exec cannot set both outputBytesCap and disableOutputCap")
	case p.TimeoutMs != nil && *p.TimeoutMs < 0:
		return nil, InvalidParams("command/exec timeoutMs must not be negative")
	case (flag(p.Tty) || flag(p.StreamStdin) || flag(p.StreamStdoutStderr)) && (p.ProcessID == nil || *p.ProcessID == ""):
		return nil, InvalidRequest("command/exec tty or streaming requires a client-supplied processId")
	case p.Size != nil && !flag(p.Tty):
		return nil, InvalidParams("command/exec size is only supported when tty is true")
	case p.Size != nil && (p.Size.Rows == 0 || p.Size.Cols == 0):
		return nil, InvalidParams("command/exec size rows and cols must be greater than 0")
	}
	params := shell.CommandExecParams{
		Command:            p.Command,
		Env:                p.Env,
		TimeoutMS:          p.TimeoutMs,
		DisableTimeout:     flag(p.DisableTimeout),
		DisableOutputCap:   flag(p.DisableOutputCap),
		StreamStdoutStderr: flag(p.StreamStdoutStderr),
		TTY:                flag(p.Tty),
		StreamStdin:        flag(p.StreamStdin),
		HasProcessID:       p.ProcessID != nil && *p.ProcessID != "",
	}
	if p.Cwd != nil {
		params.Cwd = *p.Cwd
	}
	if p.Size != nil {
		params.Rows, params.Cols = p.Size.Rows, p.Size.Cols
	}
	if p.OutputBytesCap != nil {
		n := int64(min(*p.OutputBytesCap, 1<<40))
		params.OutputBytesCap = &n
	}
	if p.SandboxPolicy != nil {
		sp, err := policy.SandboxFromAPI(*p.SandboxPolicy)
		if err != nil {
			return nil, InvalidParams("invalid sandboxPolicy: %v", err)
		}
		params.SandboxPolicy = &sp
	}
	processID := ""
	var entry *procEntry
	if p.ProcessID != nil {
		processID = *p.ProcessID
		e, err := ce.procs.claim(c.Session, processID)
		if errors.Is(err, errProcDuplicate) {
			return nil, InvalidRequest("duplicate active command/exec process id: %s", processID)
		} else if err != nil {
			return nil, InvalidRequest("command/exec %q: %v", processID, err)
		}
		entry = e
		defer func() {
			ce.procs.release(e)
			e.done()
		}()
	}
	base := ce.cfg.BaseEnv
	if base == nil {
		base = os.Environ
	}
	sess := c.Session
	opts := shell.CommandExecOptions{
		BaseEnv:        ce.cfg.Env.Build(base()),
		DefaultCwd:     ce.cwd,
		DefaultPolicy:  ce.cfg.Policy,
		DefaultTimeout: ce.cfg.Timeout,
		Sandbox:        ce.cfg.Sandbox,
		OnOutput: func(d shell.OutputDelta) {
			n, err := sess.srv.NewNotification("command/exec/outputDelta", api.CommandExecOutputDeltaNotification{
				ProcessID: processID, Stream: d.Stream.String(),
				DeltaBase64: base64.StdEncoding.EncodeToString(d.Data), CapReached: d.CapReached,
			})
			if err == nil {
				sess.Notify(n)
			}
		},
	}
	if entry != nil {
		opts.OnStart = func(proc *shell.Process) {
			ce.procs.started(entry, proc)
			// Writes, resizes and terminations for this process id queue
			// behind this request in arrival order; they may run now.
			c.ReleaseOrder()
		}
	}
	// The handler's context ends when the connection closes, which kills
	// the process group.
	res, err := shell.CommandExec(ctx, params, opts)
	if err != nil {
		return nil, err
	}
	return api.CommandExecResult{ExitCode: int32(res.ExitCode), Stdout: res.Stdout, Stderr: res.Stderr}, nil
}

// lookup returns the started process of processID on the connection.
func (ce *commandExec) lookup(ctx context.Context, sess *Session, processID string) (*shell.Process, error) {
	proc, ok, err := ce.procs.lookup(ctx, sess, processID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, InvalidRequest("no active command/exec for process id %q", processID)
	}
	return proc, nil
}

func (ce *commandExec) write(ctx context.Context, c *Call) (any, error) {
	var p api.CommandExecWriteParams
	if err := DecodeParams(c, &p, "processId"); err != nil {
		return nil, err
	}
	var data []byte
	if p.DeltaBase64 != nil {
		var err error
		if data, err = base64.StdEncoding.DecodeString(*p.DeltaBase64); err != nil {
			return nil, InvalidParams("invalid deltaBase64: %v", err)
		}
	}
	proc, err := ce.lookup(ctx, c.Session, p.ProcessID)
	if err != nil {
		return nil, err
	}
	if err := proc.Write(data); err != nil {
		return nil, execControlError(p.ProcessID, err)
	}
	if p.CloseStdin != nil && *p.CloseStdin {
		if err := proc.CloseStdin(); err != nil {
			return nil, execControlError(p.ProcessID, err)
		}
	}
	return api.CommandExecWriteResult{}, nil
}

func (ce *commandExec) resize(ctx context.Context, c *Call) (any, error) {
	var p api.CommandExecResizeParams
	if err := DecodeParams(c, &p, "processId", "size"); err != nil {
		return nil, err
	}
	if p.Size.Rows == 0 || p.Size.Cols == 0 {
		return nil, InvalidParams("command/exec size rows and cols must be greater than 0")
	}
	proc, err := ce.lookup(ctx, c.Session, p.ProcessID)
	if err != nil {
		return nil, err
	}
	if err := proc.Resize(p.Size.Rows, p.Size.Cols); err != nil {
		return nil, execControlError(p.ProcessID, err)
	}
	return api.CommandExecResizeResult{}, nil
}

func (ce *commandExec) terminate(ctx context.Context, c *Call) (any, error) {
	var p api.CommandExecTerminateParams
	if err := DecodeParams(c, &p, "processId"); err != nil {
		return nil, err
	}
	proc, err := ce.lookup(ctx, c.Session, p.ProcessID)
	if err != nil {
		return nil, err
	}
	proc.Terminate()
	return api.CommandExecTerminateResult{}, nil
}

// execControlError maps a Process control failure to -32600.
func execControlError(processID string, err error) error {
	switch {
	case errors.Is(err, shell.ErrStdinNotStreamed):
		return InvalidRequest("command/exec %q was not started with streamStdin or tty", processID)
	case errors.Is(err, shell.ErrStdinClosed):
		return InvalidRequest("stdin of command/exec %q is already closed", processID)
	case errors.Is(err, shell.ErrNotTTY):
		return InvalidRequest("command/exec %q was not started with tty", processID)
	case errors.Is(err, shell.ErrProcessExited):
		return InvalidRequest("command/exec %q has already exited", processID)
	}
	return InvalidRequest("command/exec %q: %v", processID, err)
}
