package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/tools/shell"
)

// CommandExecConfig configures command/exec (protocol.md §4.19).
type CommandExecConfig struct {
	// Cwd is the working directory when the request names none, and the
	// base of relative ones; it must be absolute.
	Cwd string
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

// RegisterCommandExec serves command/exec: a one-off process outside any
// thread, buffered or with its stdout/stderr streamed as
// command/exec/outputDelta (base64) to the calling connection, which gets
// the result once the process exited and every delta was sent. Closing the
// connection kills the process. tty and streamStdin are rejected with
// -32602, and command/exec/write, /resize and /terminate stay
// unregistered (-32601), as protocol.md §4.19 allows for a first cut.
func (s *Server) RegisterCommandExec(cfg CommandExecConfig) {
	ce := &commandExec{cfg: cfg, active: map[uint64]map[string]bool{}}
	s.Handle("command/exec", ce.handle)
}

type commandExec struct {
	cfg CommandExecConfig

	mu     sync.Mutex
	active map[uint64]map[string]bool // per connection: processIds running
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
	case flag(p.Tty) || flag(p.StreamStdin):
		return nil, InvalidParams("command/exec tty and streamStdin are not supported by this server (this server has no command/exec/write, resize or terminate)")
	}
	params := shell.CommandExecParams{
		Command:            p.Command,
		Env:                p.Env,
		TimeoutMS:          p.TimeoutMs,
		DisableTimeout:     flag(p.DisableTimeout),
		DisableOutputCap:   flag(p.DisableOutputCap),
		StreamStdoutStderr: flag(p.StreamStdoutStderr),
		HasProcessID:       p.ProcessID != nil && *p.ProcessID != "",
	}
	if p.Cwd != nil {
		params.Cwd = *p.Cwd
	}
	if p.OutputBytesCap != nil {
		n := int64(min(*p.OutputBytesCap, 1<<40))
		params.OutputBytesCap = &n
	}
	if p.SandboxPolicy != nil {
		raw, err := json.Marshal(p.SandboxPolicy)
		if err != nil {
			return nil, InvalidParams("invalid sandboxPolicy: %v", err)
		}
		var sp policy.SandboxPolicy
		if err := json.Unmarshal(raw, &sp); err != nil {
			return nil, InvalidParams("invalid sandboxPolicy: %v", err)
		}
		params.SandboxPolicy = &sp
	}
	processID := ""
	if p.ProcessID != nil {
		processID = *p.ProcessID
		if !ce.claim(c.Session, processID) {
			return nil, InvalidRequest("duplicate active command/exec process id: %s", processID)
		}
		defer ce.release(c.Session, processID)
	}
	base := ce.cfg.BaseEnv
	if base == nil {
		base = os.Environ
	}
	sess := c.Session
	opts := shell.CommandExecOptions{
		BaseEnv:        ce.cfg.Env.Build(base()),
		DefaultCwd:     ce.cfg.Cwd,
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
	// The handler's context ends when the connection closes, which kills
	// the process group.
	res, err := shell.CommandExec(ctx, params, opts)
	if err != nil {
		return nil, err
	}
	return api.CommandExecResult{ExitCode: int32(res.ExitCode), Stdout: res.Stdout, Stderr: res.Stderr}, nil
}

// claim marks processID as running on the connection; false when it is
// already in use there.
func (ce *commandExec) claim(sess *Session, processID string) bool {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	m := ce.active[sess.id]
	if m == nil {
		m = map[string]bool{}
		ce.active[sess.id] = m
	}
	if m[processID] {
		return false
	}
	m[processID] = true
	return true
}

func (ce *commandExec) release(sess *Session, processID string) {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	if m := ce.active[sess.id]; m != nil {
		delete(m, processID)
		if len(m) == 0 {
			delete(ce.active, sess.id)
		}
	}
}
