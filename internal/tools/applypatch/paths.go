package applypatch

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/appserver/appserver/internal/fsguard"
)

// within reports whether p is root or below it (both clean and absolute).
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}

// target is a patch path resolved for checking and writing.
type target struct {
	display string // as written in the patch
	abs     string // absolute, lexically clean: the protocol path
	real    string // every symlink resolved: where writes and reads go
	entry   string // the directory entry itself (final symlink not followed): what a delete removes
}

// confine resolves the patch path p against the plan's cwd and checks it
// for writing (fsguard.Tree.Resolve): the entry and what it points to
// inside the roots, neither a path of the daemon nor in a read-only
// subpath.
func (p *Plan) confine(tree *fsguard.Tree, path string) (target, error) {
	tg, err := tree.Resolve(p.cwd, path, fsguard.Write)
	var denied *fsguard.Error
	switch {
	case errors.As(err, &denied):
		if denied.Reason == fsguard.OutsideRoots && denied.Resolved == "" {
			return target{}, &Error{Kind: ErrOutsideRoots, Err: err, Msg: fmt.Sprintf(
				"apply_patch verification failed: %s is outside the workspace roots (%s); a patch may only change files under them",
				denied.Path, strings.Join(denied.Roots, ", "))}
		}
		kind := ErrOutsideRoots
		if denied.Reason != fsguard.OutsideRoots {
			kind = ErrProtected
		}
		return target{}, &Error{Kind: kind, Msg: verifyPrefix + denied.Error(), Err: err}
	case err != nil:
		abs := path
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(p.cwd, abs)
		}
		abs = filepath.Clean(abs)
		return target{}, verifyError(fmt.Sprintf("Failed to resolve %s: %s", abs, ioText(err)), err)
	}
	return target{display: path, abs: tg.Abs, real: tg.Real, entry: tg.Entry}, nil
}

// ioText renders an OS error the way Rust's io::Error does ("No such file
// or directory (os error 2)"), which is what the reference shows.
func ioText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		msg := errno.Error()
		if r, size := utf8.DecodeRuneInString(msg); size > 0 {
			msg = string(unicode.ToUpper(r)) + msg[size:]
		}
		return fmt.Sprintf("%s (os error %d)", msg, int(errno))
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// utf8ErrorText reports the first invalid UTF-8 sequence of b in the words
// of Rust's Utf8Error, or "" when b is valid.
func utf8ErrorText(b []byte) string {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			i += size
			continue
		}
		n := invalidSequenceLen(b[i:])
		if n == 0 {
			return fmt.Sprintf("incomplete utf-8 byte sequence from index %d", i)
		}
		return fmt.Sprintf("invalid utf-8 sequence of %d bytes from index %d", n, i)
	}
	return ""
}

// invalidSequenceLen is Rust's Utf8Error::error_len for an invalid
// sequence at the start of b: the length of its longest valid prefix
// (at least 1), or 0 when b ends in the middle of a valid sequence.
func invalidSequenceLen(b []byte) int {
	lo, hi := byte(0x80), byte(0xBF)
	width := 0
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		width = 2
	case c == 0xE0:
		width, lo = 3, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		width = 3
	case c == 0xED:
		width, hi = 3, 0x9F
	case c == 0xF0:
		width, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		width = 4
	case c == 0xF4:
		width, hi = 4, 0x8F
	default:
		return 1
	}
	for k := 1; k < width; k++ {
		if k >= len(b) {
			return 0
		}
		l, h := byte(0x80), byte(0xBF)
		if k == 1 {
			l, h = lo, hi
		}
		if b[k] < l || b[k] > h {
			return k
		}
	}
	return 1 // unreachable for an invalid sequence
}
