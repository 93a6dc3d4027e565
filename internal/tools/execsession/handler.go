//go:build unix

package execsession

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
)

// ExecArgs are exec_command's arguments as the model sent them. Absent
// optional fields are nil.
type ExecArgs struct {
	// Cmd is the shell command (required).
	Cmd *string `json:"cmd"`
	// Workdir is the working directory; "" is ignored.
	Workdir *string `json:"workdir"`
	// Shell overrides the shell binary.
	Shell *string `json:"shell"`
	// Login selects login-shell semantics (-lc); default true.
	Login *bool `json:"login"`
	// TTY runs the command on a PTY.
	TTY bool `json:"tty"`
	// YieldTimeMS is the requested wait in milliseconds.
	YieldTimeMS *int64 `json:"yield_time_ms"`
	// MaxOutputTokens is the requested output budget.
	MaxOutputTokens *int64 `json:"max_output_tokens"`
	// SandboxPermissions is use_default or require_escalated.
	SandboxPermissions string `json:"sandbox_permissions"`
	// Justification is the approval question for require_escalated.
	Justification string `json:"justification"`
	// PrefixRule is a proposed reusable allow prefix.
	PrefixRule []string `json:"prefix_rule"`
}

// WriteArgs are write_stdin's arguments.
type WriteArgs struct {
	// SessionID is the session (required).
	SessionID *int64 `json:"session_id"`
	// Chars is written; "" polls.
	Chars string `json:"chars"`
	// YieldTimeMS is the requested wait in milliseconds.
	YieldTimeMS *int64 `json:"yield_time_ms"`
	// MaxOutputTokens is the requested output budget.
	MaxOutputTokens *int64 `json:"max_output_tokens"`
}

// ParseExecArgs decodes exec_command's raw arguments; errors read
// "failed to parse function arguments: …".
func ParseExecArgs(raw string) (ExecArgs, error) {
	var a ExecArgs
	if err := registry.DecodeArguments(raw, &a); err != nil {
		return ExecArgs{}, err
	}
	if a.Cmd == nil {
		return ExecArgs{}, registry.ArgumentsError(errors.New("missing field `cmd`"))
	}
	return a, nil
}

// ParseWriteArgs decodes write_stdin's raw arguments.
func ParseWriteArgs(raw string) (WriteArgs, error) {
	var a WriteArgs
	if err := registry.DecodeArguments(raw, &a); err != nil {
		return WriteArgs{}, err
	}
	if a.SessionID == nil {
		return WriteArgs{}, registry.ArgumentsError(errors.New("missing field `session_id`"))
	}
	return a, nil
}

// PrepareFunc runs before a session is spawned, with the parsed arguments
// and the request about to be executed. It is where the integration applies
// approvals and the sandbox: it may set req.Command (e.g. a sandbox wrapper)
// or req.Env. A non-nil error stops the call and is answered to the model as
// is (e.g. "exec command rejected by user"); a non-nil output answers the
// call without spawning anything (e.g. an intercepted apply_patch).
type PrepareFunc func(ctx context.Context, inv registry.Invocation, args ExecArgs, req *ExecRequest) (*registry.Output, error)

// HandlerConfig configures a Handler.
type HandlerConfig struct {
	// Manager runs the sessions of the thread; required.
	Manager *Manager
	// Shell is the user's shell; "" uses $SHELL, then /bin/bash, then
	// /bin/sh.
	Shell string
	// DisableLoginShell makes login default to false and rejects an explicit
	// login=true (docs/tools.md: login is only advertised when allowed).
	DisableLoginShell bool
	// TruncationTokens caps max_output_tokens with the model's truncation
	// budget in tokens (10 000 for the 0.169 catalog); 0 means no cap
	// beyond the 262 144 ceiling.
	TruncationTokens int
	// Prepare, when set, runs before each spawn.
	Prepare PrepareFunc
}

// Handler serves exec_command and write_stdin (function payloads) for one
// thread. It is safe for concurrent use.
type Handler struct {
	cfg HandlerConfig
}

var _ registry.Handler = (*Handler)(nil)

// NewHandler returns a Handler; cfg.Manager must be set.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Manager == nil {
		return nil, errors.New("execsession: HandlerConfig.Manager is nil")
	}
	return &Handler{cfg: cfg}, nil
}

// Register adds exec_command (parallel-capable) and write_stdin
// (non-parallel) to b, both served by h, as Codex registers them.
func Register(b *registry.Builder, h *Handler) error {
	if err := b.Register(ExecCommandSpec(!h.cfg.DisableLoginShell), h, true); err != nil {
		return err
	}
	return b.Register(WriteStdinSpec(), h, false)
}

// Kind returns registry.PayloadFunction.
func (*Handler) Kind() registry.PayloadKind { return registry.PayloadFunction }

// IsMutating reports exec_command calls whose command is not known to be
// safe (policy.IsKnownSafe), every write_stdin call, and anything that does
// not parse.
func (h *Handler) IsMutating(_ context.Context, inv registry.Invocation) bool {
	p, ok := inv.Payload.(registry.FunctionPayload)
	if !ok || inv.Name != ExecCommandName {
		return true
	}
	args, err := ParseExecArgs(p.Arguments)
	if err != nil {
		return true
	}
	argv, err := h.argv(args)
	if err != nil {
		return true
	}
	return !policy.IsKnownSafe(argv)
}

// Handle runs one call. Failures are answered to the model as
// "exec_command failed: …" / "write_stdin failed: …"; a successful call
// always has success:true, the exit code being in the text.
func (h *Handler) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	p, ok := inv.Payload.(registry.FunctionPayload)
	if !ok {
		return registry.Output{}, errors.New("unified_exec handler received unsupported payload")
	}
	switch inv.Name {
	case ExecCommandName:
		return h.execCommand(ctx, inv, p.Arguments)
	case WriteStdinName:
		return h.writeStdin(ctx, inv, p.Arguments)
	default:
		return registry.Output{}, fmt.Errorf("unsupported unified exec function %s", inv.Name)
	}
}

func (h *Handler) execCommand(ctx context.Context, inv registry.Invocation, raw string) (registry.Output, error) {
	args, err := ParseExecArgs(raw)
	if err != nil {
		return registry.Output{}, err
	}
	argv, err := h.argv(args)
	if err != nil {
		return registry.Output{}, err
	}
	cwd := inv.Turn.Cwd
	if args.Workdir != nil && *args.Workdir != "" {
		cwd = resolvePath(inv.Turn.Cwd, *args.Workdir)
	}
	req := ExecRequest{
		Argv:            argv,
		Cwd:             cwd,
		TTY:             args.TTY,
		YieldTime:       ExecYieldTime(args.YieldTimeMS),
		MaxOutputTokens: ResolveMaxOutputTokens(args.MaxOutputTokens, h.cfg.TruncationTokens),
		TurnID:          inv.Turn.TurnID,
		CallID:          inv.CallID,
	}
	if h.cfg.Prepare != nil {
		out, err := h.cfg.Prepare(ctx, inv, args, &req)
		if err != nil {
			return registry.Output{}, err
		}
		if out != nil {
			return *out, nil
		}
	}
	res, err := h.cfg.Manager.Exec(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return registry.Output{}, err
		}
		return registry.Output{}, fmt.Errorf("exec_command failed: %w", err)
	}
	return registry.TextOutput(res.Text(), true), nil
}

// TerminalInteractionMethod is the notification a write_stdin call emits.
const TerminalInteractionMethod = "item/commandExecution/terminalInteraction"

// TerminalInteraction is the item/commandExecution/terminalInteraction
// event every successful write_stdin call emits (even an empty poll), after
// its output: ItemID is the commandExecution item (the exec_command call
// id), ProcessID the session id. The turns layer adds threadId and turnId.
type TerminalInteraction struct {
	// ItemID is the id of the session's commandExecution item.
	ItemID string `json:"itemId"`
	// ProcessID is the session id as a string.
	ProcessID string `json:"processId"`
	// Stdin is what was written ("" for a poll).
	Stdin string `json:"stdin"`
}

// Method returns "item/commandExecution/terminalInteraction".
func (TerminalInteraction) Method() string { return TerminalInteractionMethod }

// Params returns the notification of the turn turnID of thread threadID.
func (e TerminalInteraction) Params(threadID, turnID string) any {
	return api.TerminalInteractionNotification{ThreadID: threadID, TurnID: turnID, ItemID: e.ItemID, ProcessID: e.ProcessID, Stdin: e.Stdin}
}

func (h *Handler) writeStdin(ctx context.Context, inv registry.Invocation, raw string) (registry.Output, error) {
	args, err := ParseWriteArgs(raw)
	if err != nil {
		return registry.Output{}, err
	}
	req := WriteRequest{
		SessionID:       int(*args.SessionID),
		Chars:           args.Chars,
		YieldTime:       WriteYieldTime(args.YieldTimeMS, args.Chars == ""),
		MaxOutputTokens: ResolveMaxOutputTokens(args.MaxOutputTokens, h.cfg.TruncationTokens),
	}
	res, err := h.cfg.Manager.Write(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return registry.Output{}, err
		}
		return registry.Output{}, fmt.Errorf("write_stdin failed: %w", err)
	}
	inv.Turn.Emit(ctx, TerminalInteraction{ItemID: res.StartCallID, ProcessID: strconv.Itoa(req.SessionID), Stdin: req.Chars})
	return registry.TextOutput(res.Text(), true), nil
}

// argv builds the shell invocation of a call.
func (h *Handler) argv(args ExecArgs) ([]string, error) {
	login := !h.cfg.DisableLoginShell
	if args.Login != nil {
		if *args.Login && h.cfg.DisableLoginShell {
			return nil, errors.New("login shells are turned off by the configuration: leave out `login` or set it to false")
		}
		login = *args.Login
	}
	shell := h.defaultShell()
	if args.Shell != nil && *args.Shell != "" {
		// A shell the model names but that does not exist falls back to
		// the user's shell, as the reference does.
		if p, err := exec.LookPath(*args.Shell); err == nil {
			shell = p
		}
	}
	return ShellArgv(shell, *args.Cmd, login), nil
}

func (h *Handler) defaultShell() string {
	if h.cfg.Shell != "" {
		return h.cfg.Shell
	}
	return UserShell()
}

// UserShell returns the user's shell: $SHELL when it is executable, else
// /bin/bash, else /bin/sh.
func UserShell() string {
	for _, c := range []string{os.Getenv("SHELL"), "/bin/bash", "/bin/sh"} {
		if c == "" {
			continue
		}
		if st, err := os.Stat(c); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return c
		}
	}
	return "/bin/sh"
}

// ShellArgv returns the argv that runs script with shell: [shell, "-lc" or
// "-c", script] for POSIX shells, [shell, ("-NoProfile",) "-Command",
// script] for PowerShell, [shell, "/c", script] for cmd.
func ShellArgv(shell, script string, login bool) []string {
	base := strings.ToLower(strings.TrimSuffix(filepath.Base(shell), ".exe"))
	switch base {
	case "pwsh", "powershell":
		if login {
			return []string{shell, "-Command", script}
		}
		return []string{shell, "-NoProfile", "-Command", script}
	case "cmd":
		return []string{shell, "/c", script}
	}
	if login {
		return []string{shell, "-lc", script}
	}
	return []string{shell, "-c", script}
}

// resolvePath makes p absolute against cwd.
func resolvePath(cwd, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(cwd, p)
}
