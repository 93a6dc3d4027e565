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
	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/registry"
)

// AccessFunc returns what a call may read: the thread's roots as
// fsguard.ForThread computes them from its policies. A nil AccessFunc, or
// an empty Access, confines the call to the turn's cwd.
type AccessFunc func(inv registry.Invocation) fsguard.Access

// accessOf returns the Access of inv under f.
func accessOf(f AccessFunc, inv registry.Invocation) fsguard.Access {
	if f != nil {
		if a := f(inv); len(a.Read) > 0 || len(a.Write) > 0 {
			return a
		}
	}
	return fsguard.Dirs(inv.Turn.Cwd)
}

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
