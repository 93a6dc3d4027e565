package execclient

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/appserver/appserver/api"
)

// Exit statuses of `appserver exec`, one per kind of outcome, so that a CI
// job can tell the agent's failure from the infrastructure's, from its own
// mistakes and from its own limits. docs/ci.md has the table.
const (
	// ExitCompleted is the status of a turn that completed (and, with an
	// output schema, whose final message validated).
	ExitCompleted = 0
	// ExitTurnFailed is the status of a turn that failed: the model's
	// error, a tool's, a context window exceeded.
	ExitTurnFailed = 1
	// ExitUsage is the status of a bad command line: unknown flags, no
	// prompt, a --server that is not a URL, an unreadable image or schema.
	ExitUsage = 2
	// ExitUnreachable is the status when the daemon could not be reached
	// or was lost: connection refused, DNS or TLS failures, a 5xx answer
	// (also a 503 after the retries), an event stream that could not be
	// resumed.
	ExitUnreachable = 3
	// ExitRejected is the status when the daemon refused a request with a
	// 4xx answer other than 401 and 403: an unknown thread, an invalid
	// input, a body too large, an Idempotency-Key reused for another
	// request.
	ExitRejected = 4
	// ExitAuth is the status when the daemon refused the caller: 401 (a
	// missing or wrong token) or 403 (a principal asking for a sandbox or
	// approval policy beyond its ceiling, or a directory outside its
	// workspace roots).
	ExitAuth = 5
	// ExitInterrupted is the status of a turn that ended interrupted by
	// someone else than exec: another client, the daemon shutting down.
	ExitInterrupted = 6
	// ExitApprovalRefused is the status when exec refused an approval or
	// user-input request under --on-approval fail, or at the terminal
	// chose to cancel the turn, and interrupted the turn.
	ExitApprovalRefused = 7
	// ExitOutputInvalid is the status of a turn that completed but whose
	// final message is missing, not JSON or not valid against
	// --output-schema.
	ExitOutputInvalid = 8
	// ExitTimeout is the status when --timeout expired: exec interrupted
	// the turn (as timeout(1) does, 124).
	ExitTimeout = 124
	// ExitSignal is the status when exec was stopped by SIGINT or SIGTERM:
	// it interrupted the turn first (128 + SIGINT, as shells report).
	ExitSignal = 130
)

// ExitCode returns the exit status for an error of Client.Run (nil is
// ExitCompleted; see the Exit constants).
func ExitCode(err error) int {
	var (
		stopped StoppedError
		refused ApprovalRefusedError
		invalid OutputInvalidError
		ended   TurnEndedError
		ae      *apiError
	)
	switch {
	case err == nil:
		return ExitCompleted
	case errors.As(err, &invalid):
		return ExitOutputInvalid
	case errors.As(err, &refused):
		return ExitApprovalRefused
	case errors.As(err, &stopped):
		if stopped.Timeout > 0 {
			return ExitTimeout
		}
		return ExitSignal
	case errors.As(err, &ended):
		if ended.Status == api.TurnInterrupted {
			return ExitInterrupted
		}
		return ExitTurnFailed
	case errors.As(err, &ae) && (ae.status == http.StatusUnauthorized || ae.status == http.StatusForbidden):
		return ExitAuth
	case errors.As(err, &ae) && ae.status >= 400 && ae.status < 500:
		return ExitRejected
	default:
		return ExitUnreachable
	}
}

// TurnEndedError is a turn that ended but did not complete, for a reason
// exec did not cause.
type TurnEndedError struct {
	// Status is how the turn ended (failed, interrupted).
	Status api.TurnStatus
	// Message is the turn's error message, if any.
	Message string
}

// Error says how the turn ended, with its message.
func (e TurnEndedError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("turn %s: %s", e.Status, e.Message)
	}
	return "turn " + string(e.Status)
}

// StoppedError is a run exec stopped itself: --timeout expired (Timeout
// is set) or a signal arrived. The turn, if one was started, was
// interrupted.
type StoppedError struct {
	// Timeout is the --timeout that expired; 0 for a signal.
	Timeout time.Duration
	// Err is what the run was doing when it stopped, if it had not
	// started the turn yet.
	Err error
}

// Error says why the run stopped.
func (e StoppedError) Error() string {
	msg := "stopped by a signal: the turn was interrupted"
	if e.Timeout > 0 {
		msg = fmt.Sprintf("--timeout %s expired: the turn was interrupted", e.Timeout)
	}
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	return msg
}

// Unwrap returns what the run was doing.
func (e StoppedError) Unwrap() error { return e.Err }

// ApprovalRefusedError is a turn exec interrupted because it refused an
// approval or user-input request (--on-approval fail, or "cancel" at the
// terminal).
type ApprovalRefusedError struct {
	// Request describes the request, as stderr showed it.
	Request string
	// Rule is how it was refused: "--on-approval fail" or "at the
	// terminal".
	Rule string
}

// Error names the request and the rule.
func (e ApprovalRefusedError) Error() string {
	return fmt.Sprintf("%s: refused (%s), the turn was interrupted", e.Request, e.Rule)
}

// OutputInvalidError is a completed turn whose final message does not
// satisfy --output-schema.
type OutputInvalidError struct {
	// Reason says what is wrong with the message.
	Reason string
}

// Error says why the message is not valid.
func (e OutputInvalidError) Error() string {
	return "the final message does not match --output-schema: " + e.Reason
}
