package execclient

import "errors"

// Exit statuses of `appserver exec`, one per kind of outcome, so that a CI
// job can tell the agent's failure from the infrastructure's and from its
// own mistakes.
const (
	// ExitCompleted is the status of a turn that completed.
	ExitCompleted = 0
	// ExitTurnFailed is the status of a turn that ended failed or
	// interrupted (the model's error, a tool's, Ctrl-C).
	ExitTurnFailed = 1
	// ExitUsage is the status of a bad command line: unknown flags, no
	// prompt, a --server that is not a URL.
	ExitUsage = 2
	// ExitUnreachable is the status when the daemon could not be reached
	// or was lost: connection refused, DNS or TLS failures, a 5xx answer
	// (also a 503 after the retries), an event stream that could not be
	// resumed.
	ExitUnreachable = 3
	// ExitRejected is the status when the daemon refused the request with
	// a 4xx answer: a missing or wrong token, an unknown thread, an
	// invalid input, an Idempotency-Key reused for another request.
	ExitRejected = 4
)

// ExitCode returns the exit status for an error of Client.Run: nil is
// ExitCompleted, a TurnEndedError ExitTurnFailed, a 4xx answer
// ExitRejected and anything else ExitUnreachable.
func ExitCode(err error) int {
	var ended TurnEndedError
	var ae *apiError
	switch {
	case err == nil:
		return ExitCompleted
	case errors.As(err, &ended):
		return ExitTurnFailed
	case errors.As(err, &ae) && ae.status >= 400 && ae.status < 500:
		return ExitRejected
	default:
		return ExitUnreachable
	}
}
