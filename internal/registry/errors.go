package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrFatal matches (with errors.Is) every error that must end the turn
// rather than be answered to the model: payload kind mismatches, errors a
// handler marks with Fatalf, and after-tool-use hook aborts.
var ErrFatal = errors.New("fatal tool error")

// FatalError is a tool error that ends the turn (Codex FunctionCallError::Fatal).
type FatalError struct {
	// Message is the text the turn fails with.
	Message string
}

// Error returns the message.
func (e *FatalError) Error() string { return e.Message }

// Is reports whether target is ErrFatal.
func (e *FatalError) Is(target error) bool { return target == ErrFatal }

// Fatalf returns a FatalError with a formatted message; a handler returns it
// to end the turn instead of answering the model.
func Fatalf(format string, args ...any) error {
	return &FatalError{Message: fmt.Sprintf(format, args...)}
}

// HookAbortError is returned by dispatch when an after-tool-use hook aborted
// the operation; the turn must stop. It matches ErrFatal.
type HookAbortError struct {
	// Hook is the name of the hook that aborted.
	Hook string
	// Err is the reason the hook gave.
	Err error
}

// Error returns the reference text: after_tool_use hook '<name>' failed and
// aborted operation: <error>.
func (e *HookAbortError) Error() string {
	return fmt.Sprintf("after_tool_use hook '%s' failed and aborted operation: %v", e.Hook, e.Err)
}

// Unwrap returns the hook's reason.
func (e *HookAbortError) Unwrap() error { return e.Err }

// Is reports whether target is ErrFatal.
func (e *HookAbortError) Is(target error) bool { return target == ErrFatal }

// DecodeArguments decodes a function call's raw arguments into v. Unknown
// fields are ignored. The error, returned from Handle, is answered to the model
// as "failed to parse function arguments: <reason>" so it can retry.
func DecodeArguments(arguments string, v any) error {
	return decodeArguments(arguments, v, false)
}

// DecodeArgumentsStrict is DecodeArguments but rejects unknown fields.
func DecodeArgumentsStrict(arguments string, v any) error {
	return decodeArguments(arguments, v, true)
}

func decodeArguments(arguments string, v any, strict bool) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(arguments)))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return ArgumentsError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ArgumentsError(errors.New("trailing characters after the JSON value"))
	}
	return nil
}

// ArgumentsError wraps an argument validation failure in the reference
// wording, "failed to parse function arguments: <reason>".
func ArgumentsError(reason error) error {
	return fmt.Errorf("failed to parse function arguments: %w", reason)
}
