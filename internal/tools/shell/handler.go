package shell

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
)

// DefaultTimeout is a command's timeout when the call gives none.
const DefaultTimeout = 10 * time.Second

// Config holds what the shell handlers need. The zero value runs commands
// read-only sandboxed with the daemon's environment minus its secrets.
type Config struct {
	// Runner decides approval and sandbox per call; nil is
	// SandboxRunner{} (read-only, no approvals).
	Runner Runner
	// Env derives the command environment from BaseEnv.
	Env EnvPolicy
	// BaseEnv returns the daemon's environment; nil is os.Environ.
	BaseEnv func() []string
	// Shell runs shell_command scripts; the zero value is DetectUserShell().
	Shell UserShell
	// Snapshots, when set, run login shells from SnapshotOwner's
	// login-shell snapshots instead of running the profile for every
	// command.
	Snapshots     *Snapshots
	SnapshotOwner string
	// NoLoginShell forces non-login shells for shell_command (Codex's
	// allow_login_shell = false); login:true is then ignored.
	NoLoginShell bool
	// Truncation is the model's truncation policy; a zero Limit is
	// DefaultTruncationPolicy.
	Truncation TruncationPolicy
	// DefaultTimeout replaces DefaultTimeout when positive.
	DefaultTimeout time.Duration
	// OnOutputDelta receives the command's output as it arrives, for
	// item/commandExecution/outputDelta (itemId = the call id). At most
	// MaxOutputDeltas chunks per call; they never split a UTF-8 character.
	OnOutputDelta func(ctx context.Context, inv registry.Invocation, d OutputDelta)
	// InterceptApplyPatch, when set, is offered every argv first; when it
	// reports handled, its output is the call's (docs/tools.md §2.2: apply_patch
	// invocations run through the patch engine).
	InterceptApplyPatch func(ctx context.Context, inv registry.Invocation, argv []string, cwd string) (out registry.Output, handled bool, err error)
}

// form is the output format of a tool.
type form int

const (
	structured form = iota // shell, container.exec, local_shell
	freeform               // shell_command
)

// Handler runs the calls of one shell tool family: the argv tools (shell,
// container.exec, local_shell) or shell_command.
type Handler struct {
	cfg     Config
	script  bool // shell_command: the command is a script string
	shellOf UserShell
}

// NewHandler returns the argv handler (shell, container.exec, and
// local_shell payloads).
func NewHandler(cfg Config) *Handler { return newHandler(cfg, false) }

// NewCommandHandler returns the shell_command handler.
func NewCommandHandler(cfg Config) *Handler { return newHandler(cfg, true) }

func newHandler(cfg Config, script bool) *Handler {
	if cfg.Runner == nil {
		cfg.Runner = SandboxRunner{}
	}
	if cfg.BaseEnv == nil {
		cfg.BaseEnv = os.Environ
	}
	if cfg.Truncation.Limit == 0 {
		cfg.Truncation = DefaultTruncationPolicy
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = DefaultTimeout
	}
	sh := cfg.Shell
	if script && sh.Path == "" {
		sh = DetectUserShell()
	}
	return &Handler{cfg: cfg, script: script, shellOf: sh}
}

// Kind returns registry.PayloadFunction.
func (h *Handler) Kind() registry.PayloadKind { return registry.PayloadFunction }

// MatchesKind accepts function payloads, and local_shell payloads for the
// argv handler.
func (h *Handler) MatchesKind(p registry.Payload) bool {
	switch p.(type) {
	case registry.FunctionPayload:
		return true
	case registry.LocalShellPayload:
		return !h.script
	}
	return false
}

// IsMutating is !policy.IsKnownSafe(argv); true when the call does not
// parse.
func (h *Handler) IsMutating(_ context.Context, inv registry.Invocation) bool {
	c, err := h.parse(inv)
	if err != nil {
		return true
	}
	return !policy.IsKnownSafe(c.argv)
}

// call is a parsed invocation.
type call struct {
	argv       []string
	workdir    string
	timeout    time.Duration
	escalation policy.Escalation
	env        map[string]string
	form       form
}

type argvArgs struct {
	Command                  *[]string `json:"command"`
	Workdir                  *string   `json:"workdir"`
	TimeoutMS                *int64    `json:"timeout_ms"`
	SandboxPermissions       string    `json:"sandbox_permissions"`
	WithEscalatedPermissions *bool     `json:"with_escalated_permissions"`
	Justification            string    `json:"justification"`
	PrefixRule               []string  `json:"prefix_rule"`
}

type scriptArgs struct {
	Command                  *string  `json:"command"`
	Workdir                  *string  `json:"workdir"`
	TimeoutMS                *int64   `json:"timeout_ms"`
	Login                    *bool    `json:"login"`
	SandboxPermissions       string   `json:"sandbox_permissions"`
	WithEscalatedPermissions *bool    `json:"with_escalated_permissions"`
	Justification            string   `json:"justification"`
	PrefixRule               []string `json:"prefix_rule"`
}

func (h *Handler) timeout(ms *int64) (time.Duration, error) {
	if ms == nil {
		return h.cfg.DefaultTimeout, nil
	}
	if *ms < 0 {
		return 0, registry.ArgumentsError(fmt.Errorf("invalid value: integer `%d`, expected u64", *ms))
	}
	if *ms == 0 {
		return time.Nanosecond, nil // the reference expires at once
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

func (h *Handler) parse(inv registry.Invocation) (call, error) {
	switch p := inv.Payload.(type) {
	case registry.LocalShellPayload:
		if h.script {
			break
		}
		a := p.Action
		if len(a.Command) == 0 {
			return call{}, errors.New("local_shell call has an empty command")
		}
		t, err := h.timeout(a.TimeoutMS)
		if err != nil {
			return call{}, err
		}
		return call{argv: a.Command, workdir: a.WorkingDirectory, timeout: t, env: a.Env, form: structured}, nil
	case registry.FunctionPayload:
		if h.script {
			var a scriptArgs
			if err := registry.DecodeArguments(p.Arguments, &a); err != nil {
				return call{}, err
			}
			if a.Command == nil {
				return call{}, registry.ArgumentsError(errors.New("missing field `command`"))
			}
			esc, err := policy.EscalationFromArgs(a.SandboxPermissions, a.WithEscalatedPermissions, a.Justification, a.PrefixRule)
			if err != nil {
				return call{}, registry.ArgumentsError(err)
			}
			t, err := h.timeout(a.TimeoutMS)
			if err != nil {
				return call{}, err
			}
			login := !h.cfg.NoLoginShell && (a.Login == nil || *a.Login)
			return call{argv: h.shellOf.Argv(*a.Command, login), workdir: deref(a.Workdir), timeout: t, escalation: esc, form: freeform}, nil
		}
		var a argvArgs
		if err := registry.DecodeArguments(p.Arguments, &a); err != nil {
			return call{}, err
		}
		if a.Command == nil {
			return call{}, registry.ArgumentsError(errors.New("missing field `command`"))
		}
		if len(*a.Command) == 0 {
			return call{}, errors.New("command is empty")
		}
		esc, err := policy.EscalationFromArgs(a.SandboxPermissions, a.WithEscalatedPermissions, a.Justification, a.PrefixRule)
		if err != nil {
			return call{}, registry.ArgumentsError(err)
		}
		t, err := h.timeout(a.TimeoutMS)
		if err != nil {
			return call{}, err
		}
		return call{argv: *a.Command, workdir: deref(a.Workdir), timeout: t, escalation: esc, form: structured}, nil
	}
	return call{}, fmt.Errorf("%s handler received unsupported payload", inv.Name)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ResolveWorkdir resolves a call's workdir against the turn's cwd: absolute
// paths as given, relative ones joined to cwd, empty meaning cwd.
func ResolveWorkdir(turnCwd, workdir string) string {
	if workdir == "" {
		return turnCwd
	}
	if filepath.IsAbs(workdir) {
		return filepath.Clean(workdir)
	}
	return filepath.Join(turnCwd, workdir)
}

// Handle runs the call through the Runner and shapes the result (docs/tools.md
// §3.3): structured JSON for the argv tools, freeform text for
// shell_command; success is exit code 0.
func (h *Handler) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	c, err := h.parse(inv)
	if err != nil {
		return registry.Output{}, err
	}
	cwd := ResolveWorkdir(inv.Turn.Cwd, c.workdir)
	if h.cfg.InterceptApplyPatch != nil && !h.script {
		if out, handled, err := h.cfg.InterceptApplyPatch(ctx, inv, c.argv, cwd); handled || err != nil {
			return out, err
		}
	}
	req := RunRequest{
		Snapshots:     h.cfg.Snapshots,
		SnapshotOwner: h.cfg.SnapshotOwner,
		Invocation:    inv,
		Argv:          c.argv,
		Cwd:           cwd,
		TurnCwd:       inv.Turn.Cwd,
		Env:           withOverlay(h.cfg.Env.Build(h.cfg.BaseEnv()), c.env),
		Timeout:       c.timeout,
		Escalation:    c.escalation,
	}
	if h.cfg.OnOutputDelta != nil {
		req.OnOutput = func(d OutputDelta) { h.cfg.OnOutputDelta(ctx, inv, d) }
	}
	res, err := h.cfg.Runner.Run(ctx, req)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, registry.ErrFatal) {
			return registry.Output{}, err
		}
		if se := (*SpawnError)(nil); errors.As(err, &se) {
			return registry.Output{}, fmt.Errorf("execution error: %w", se.Err)
		}
		return registry.Output{}, err
	}
	return Shape(res, c.form == freeform, h.cfg.Truncation), nil
}

// Shape formats a finished run for the model: the freeform text
// (shell_command) or the structured JSON (the argv tools), with success
// true only for exit code 0 (docs/tools.md §3.4).
func Shape(r ExecResult, freeformText bool, p TruncationPolicy) registry.Output {
	text := FormatStructured(r, p)
	if freeformText {
		text = FormatFreeform(r, p)
	}
	return registry.TextOutput(text, r.ExitCode == 0)
}

// Register adds the shell tools to b for a model whose shell_type is t
// (docs/tools.md §2.1): the offered spec is parallel-capable, and every alias
// (shell, container.exec, local_shell, shell_command) gets a handler.
func Register(b *registry.Builder, t ToolType, cfg Config, opts SpecOptions) error {
	if t == ToolDisabled {
		return nil
	}
	argvH, scriptH := NewHandler(cfg), NewCommandHandler(cfg)
	var err error
	reg := func(f func() error) {
		if err == nil {
			err = f()
		}
	}
	switch t {
	case ToolShell:
		reg(func() error { return b.Register(ShellSpec(), argvH, true) })
	case ToolShellCommand:
		reg(func() error { return b.Register(ShellCommandSpec(opts), scriptH, true) })
	case ToolLocalShell:
		reg(func() error { return b.Register(registry.LocalShellSpec{}, argvH, true) })
	}
	if t != ToolShell {
		reg(func() error { return b.AddHandler(ShellName, argvH) })
	}
	reg(func() error { return b.AddHandler(ContainerExecName, argvH) })
	if t != ToolLocalShell {
		reg(func() error { return b.AddHandler(LocalShellName, argvH) })
	}
	if t != ToolShellCommand {
		reg(func() error { return b.AddHandler(ShellCommandName, scriptH) })
	}
	return err
}

// ToolType is the model's shell_type: which shell tool is offered.
type ToolType int

// The shell types (docs/tools.md §2.1).
const (
	// ToolShell offers `shell` (shell_type "default").
	ToolShell ToolType = iota
	// ToolLocalShell offers the hosted `local_shell` (shell_type "local").
	ToolLocalShell
	// ToolShellCommand offers `shell_command`.
	ToolShellCommand
	// ToolUnifiedExec offers exec_command/write_stdin (registered
	// elsewhere); only the aliases are registered here.
	ToolUnifiedExec
	// ToolDisabled offers and registers nothing.
	ToolDisabled
)

// ParseToolType maps the catalog's shell_type string.
func ParseToolType(s string) (ToolType, error) {
	switch s {
	case "default", "":
		return ToolShell, nil
	case "local":
		return ToolLocalShell, nil
	case "shell_command":
		return ToolShellCommand, nil
	case "unified_exec":
		return ToolUnifiedExec, nil
	case "disabled":
		return ToolDisabled, nil
	}
	return 0, fmt.Errorf("unknown shell_type %q", s)
}
