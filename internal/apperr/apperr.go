package apperr

import (
	"errors"
	"fmt"
)

// Code classifies a domain error.
type Code string

// The error codes used across appserver.
const (
	NotFound Code = "not_found"
	Invalid  Code = "invalid"
	// Forbidden is a well-formed request its caller may not make: a
	// principal asking beyond its ceiling or outside its workspace roots.
	Forbidden   Code = "forbidden"
	Conflict    Code = "conflict"
	Unavailable Code = "unavailable"
	// Overloaded is work refused past a configured limit (running turns):
	// the same request may succeed once others have ended.
	Overloaded Code = "overloaded"
	Internal   Code = "internal"
)

// Error is a domain error with a code and a message that is safe to show to
// clients. Err, when set, is the underlying cause; it is logged, never sent.
type Error struct {
	Code    Code
	Message string
	Err     error
}

// Error returns the client-safe message, followed by the cause for logs.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// New returns an Error with the given code and formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an Error with the given code and message wrapping cause.
func Wrap(code Code, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: cause}
}

// CodeOf returns the Code of the first *Error in err's chain, Internal for
// any other non-nil error, and "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// MessageOf returns the client-safe message of err: the Message of the first
// *Error in its chain, or a generic text for anything else, so that internal
// details never reach a client.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// Is reports whether err carries the given code.
func Is(err error, code Code) bool { return CodeOf(err) == code }
