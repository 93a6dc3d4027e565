package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
)

// RootsFunc returns the workspace roots a call may read under; a nil or
// empty result leaves the call unconfined.
type RootsFunc func(inv registry.Invocation) []string

// ItemSink publishes the items a tool produces (the imageView item of
// view_image) to the turn the call belongs to; it is the part of the turns
// layer's ToolSink this package uses, so the turn's sink is passed as is.
// ItemStarted announces the item, ItemCompleted persists and announces its
// final state. Neither may block on a client.
type ItemSink interface {
	// ItemStarted announces the item.
	ItemStarted(item api.ThreadItem)
	// ItemCompleted persists and announces the item's final state.
	ItemCompleted(item api.ThreadItem)
}

// functionArgs returns the raw arguments of a function payload.
func functionArgs(tool string, inv registry.Invocation) (string, error) {
	p, ok := inv.Payload.(registry.FunctionPayload)
	if !ok {
		return "", fmt.Errorf("%s handler received unsupported payload", tool)
	}
	return p.Arguments, nil
}

// checkRoots fails when roots are configured and p (absolute) is outside
// all of them, lexically or once symlinks are resolved.
func checkRoots(roots RootsFunc, inv registry.Invocation, p string) error {
	if roots == nil {
		return nil
	}
	rs := roots(inv)
	if len(rs) == 0 {
		return nil
	}
	clean := filepath.Clean(p)
	real, err := filepath.EvalSymlinks(clean)
	if err != nil {
		real = clean
	}
	for _, r := range rs {
		r = filepath.Clean(r)
		rr, err := filepath.EvalSymlinks(r)
		if err != nil {
			rr = r
		}
		if within(r, clean) && (within(rr, real) || within(r, real)) {
			return nil
		}
	}
	return fmt.Errorf("access denied: `%s` is outside the workspace roots (%s)", p, strings.Join(rs, ", "))
}

// within reports whether p is root or below it (both clean and absolute).
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}

// resolvePath makes p absolute against cwd.
func resolvePath(cwd, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(cwd, p)
}

// ioErrorText renders an I/O error the way the reference (Rust) prints
// std::io::Error, e.g. "No such file or directory (os error 2)".
func ioErrorText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		msg := errno.Error()
		if msg != "" {
			msg = strings.ToUpper(msg[:1]) + msg[1:]
		}
		return fmt.Sprintf("%s (os error %d)", msg, int(errno))
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return "No such file or directory (os error 2)"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// isNotExist reports a missing file in either of Go's spellings.
func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

// cutBytes cuts s to at most n bytes on a UTF-8 boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// usize checks that an optional number argument is not negative, as the
// reference's usize fields require, and returns it or def.
func usize(field string, v *int64, def int) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v < 0 {
		return 0, registry.ArgumentsError(fmt.Errorf("invalid value: integer `%d`, expected usize for field `%s`", *v, field))
	}
	return int(min(*v, int64(^uint(0)>>1))), nil
}
