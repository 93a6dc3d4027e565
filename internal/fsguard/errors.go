package fsguard

import (
	"errors"
	"fmt"
	"strings"
)

// Reason is why a path was refused.
type Reason uint8

// The reasons a path is refused.
const (
	// OutsideRoots is a path outside the caller's roots, as named or once
	// its symlinks are resolved.
	OutsideRoots Reason = iota + 1
	// DaemonPath is one of the daemon's masked paths (or below one, or
	// reached through a symlink), or the daemon's own /proc entries.
	// Nothing is looked up below a masked path, so the refusal is the same
	// whether or not the file exists.
	DaemonPath
	// ReadOnlySubpath is a write below a subpath that the sandbox keeps
	// read-only inside a writable root (.git, .codex, .agents).
	ReadOnlySubpath
	// NoHostProc is the host's /proc for a caller whose commands see a
	// /proc of their own (every sandboxed thread).
	NoHostProc
)

// Error is a refused path. Its text names the path and the reason, for a
// model or a client to read.
type Error struct {
	// Path is the path as the caller named it (absolute).
	Path string
	// Reason is why it was refused.
	Reason Reason
	// Resolved is, for OutsideRoots, where symlinks took Path when that
	// is elsewhere; "" when Path itself is outside.
	Resolved string
	// Roots are, for OutsideRoots, the roots the caller may use.
	Roots []string
	// Subpath is, for ReadOnlySubpath, the read-only subpath.
	Subpath string
}

// ErrDenied is matched (errors.Is) by every *Error.
var ErrDenied = errors.New("access denied")

// Is makes errors.Is(err, ErrDenied) true for every refusal.
func (e *Error) Is(target error) bool { return target == ErrDenied }

// Error returns the model-readable text.
func (e *Error) Error() string {
	switch e.Reason {
	case OutsideRoots:
		roots := strings.Join(e.Roots, ", ")
		if e.Resolved != "" {
			return fmt.Sprintf("access denied: `%s` resolves to `%s`, which is outside the workspace roots (%s)", e.Path, e.Resolved, roots)
		}
		return fmt.Sprintf("access denied: `%s` is outside the workspace roots (%s)", e.Path, roots)
	case DaemonPath:
		return fmt.Sprintf("access denied: `%s` is a protected path of the daemon (its own data, configuration, credentials or process); no tool may read or change it", e.Path)
	case ReadOnlySubpath:
		return fmt.Sprintf("access denied: `%s` is in `%s`, which stays read-only in this thread's sandbox", e.Path, e.Subpath)
	case NoHostProc:
		return fmt.Sprintf("access denied: `%s` is in the host's /proc, which this thread's sandbox does not show (its commands see a /proc of their own)", e.Path)
	}
	return fmt.Sprintf("access denied: `%s`", e.Path)
}
