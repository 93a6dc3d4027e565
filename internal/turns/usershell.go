package turns

import (
	"context"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/turns/loop"
)

// DefaultUserShellTimeout bounds a thread/shellCommand without timeoutMs,
// as the reference does.
const DefaultUserShellTimeout = time.Hour

// UserShellRunner runs the commands users type into a thread
// (thread/shellCommand, `!cmd` in the TUI).
type UserShellRunner interface {
	// RunUserShell runs req in the turn tc describes: it announces and
	// completes the commandExecution item (source userShell, id
	// req.ItemID) through tc.Items, streams its output with tc.Notify and
	// returns what the model reads of it. An error means the command
	// could not be run at all.
	RunUserShell(ctx context.Context, tc ToolContext, req UserShellRequest) (UserShellResult, error)
}

// UserShellRequest is one user shell command.
type UserShellRequest struct {
	// ItemID is the id of the commandExecution item.
	ItemID string
	// Command is the script as the user typed it.
	Command string
	// Timeout stops the command.
	Timeout time.Duration
}

// UserShellResult is what the model is told of a user shell command.
type UserShellResult struct {
	// ModelText is the user message added to the model history
	// (<user_shell_command>…</user_shell_command>).
	ModelText string
}

// ShellCommand runs a user's shell command in a turn of its own: the
// response comes first, then turn/started, the commandExecution item and
// turn/completed; the command and its output join the thread's history,
// so the model sees them on the next turn.
func (m *Manager) ShellCommand(ctx context.Context, c Caller, p api.ThreadShellCommandParams) (api.ThreadShellCommandResult, After, error) {
	if m.cfg.UserShell == nil {
		return api.ThreadShellCommandResult{}, nil, apperr.New(apperr.Invalid, "shell commands are not supported by this server")
	}
	if p.Command == "" {
		return api.ThreadShellCommandResult{}, nil, apperr.New(apperr.Invalid, "Invalid request: command must not be empty")
	}
	if err := c.Principal.MayRunUnsandboxed("thread/shellCommand"); err != nil {
		return api.ThreadShellCommandResult{}, nil, err
	}
	timeout := DefaultUserShellTimeout
	if p.TimeoutMs != nil {
		if *p.TimeoutMs < 0 {
			return api.ThreadShellCommandResult{}, nil, apperr.New(apperr.Invalid, "Invalid request: timeoutMs must be non-negative")
		}
		timeout = time.Duration(*p.TimeoutMs) * time.Millisecond
	}
	_, after, err := m.startTurn(ctx, c, api.TurnStartParams{ThreadID: p.ThreadID}, &UserShellRequest{ItemID: newID(), Command: p.Command, Timeout: timeout})
	return api.ThreadShellCommandResult{}, after, err
}

// runTurn is the goroutine of a user shell command's turn: the command
// runs in the turn (stored before thread/shellCommand answered) and what
// the model reads of it joins the turn's history.
func (req *UserShellRequest) runTurn(m *Manager, r *loop.Run, tc ToolContext) {
	r.RunUserShell(func(ctx context.Context) (string, error) {
		res, err := m.cfg.UserShell.RunUserShell(ctx, tc, *req)
		return res.ModelText, err
	})
}
