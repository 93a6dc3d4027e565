package applypatch

import "errors"

// ErrorKind classifies why a patch was not applied.
type ErrorKind uint8

// The ways a patch can fail.
const (
	// ErrParse is a patch that does not follow the grammar.
	ErrParse ErrorKind = iota + 1
	// ErrVerify is a patch that does not fit the workspace: a missing
	// file, lines that cannot be found, two hunks on one file.
	ErrVerify
	// ErrOutsideRoots is a path outside the workspace roots, directly,
	// through "..", or through a symlink.
	ErrOutsideRoots
	// ErrEmpty is a patch without hunks.
	ErrEmpty
	// ErrEnvironment is a patch that selects an environment
	// ("*** Environment ID:"), which this daemon does not offer.
	ErrEnvironment
	// ErrStale means a file changed on disk between NewPlan and Apply;
	// nothing was written.
	ErrStale
	// ErrIO is a write that failed during Apply; the changes already made
	// were rolled back as far as possible.
	ErrIO
	// ErrProtected is a path the daemon's own tools never change: one of
	// its masked paths (data directory, configuration, credentials), or
	// a read-only subpath of a writable root (.git, .codex, .agents).
	ErrProtected
)

// Error is a patch that was not applied. Its Error text is exactly what the
// model is told.
type Error struct {
	// Kind classifies the failure.
	Kind ErrorKind
	// Msg is the model-facing text.
	Msg string
	// Err is the underlying cause, if any.
	Err error
}

// Error returns the model-facing text.
func (e *Error) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of a patch error, or 0 when err is not one.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// verifyPrefix starts every verification failure, as in the reference.
const verifyPrefix = "apply_patch verification failed: "

func verifyError(msg string, cause error) *Error {
	return &Error{Kind: ErrVerify, Msg: verifyPrefix + msg, Err: cause}
}
