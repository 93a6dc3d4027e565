package applypatch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// maxSymlinks bounds symlink resolution, like the kernel's ELOOP limit.
const maxSymlinks = 40

// resolvePath makes a patch path absolute against cwd and cleans it
// lexically ("a/../b" is "b"), as the reference does.
func resolvePath(cwd, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(cwd, p)
}

// realPath resolves every symlink in the absolute, clean path p, including
// dangling ones and a final one; components that do not exist are kept as
// written. It is where a write to p would land.
func realPath(p string) (string, error) {
	resolved := string(filepath.Separator)
	rest := strings.Split(strings.TrimPrefix(p, string(filepath.Separator)), string(filepath.Separator))
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, c)
		fi, err := os.Lstat(next)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return filepath.Join(append([]string{next}, rest...)...), nil
			}
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if links++; links > maxSymlinks {
			return "", &fs.PathError{Op: "resolve", Path: p, Err: syscall.ELOOP}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			resolved = string(filepath.Separator)
		}
		rest = append(strings.Split(target, string(filepath.Separator)), rest...)
	}
	return resolved, nil
}

// within reports whether p is root or below it (both clean and absolute).
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}

// workspace is the set of roots a patch may touch, lexically and with
// their symlinks resolved.
type workspace struct {
	roots []string
	real  []string
}

func newWorkspace(cwd string, roots []string) (workspace, error) {
	if len(roots) == 0 {
		roots = []string{cwd}
	}
	var w workspace
	for _, r := range roots {
		abs := resolvePath(cwd, r)
		real, err := realPath(abs)
		if err != nil {
			return workspace{}, fmt.Errorf("workspace root %s: %w", abs, err)
		}
		w.roots = append(w.roots, abs)
		w.real = append(w.real, real)
	}
	return w, nil
}

func (w workspace) contains(real string) bool {
	for _, r := range w.real {
		if within(r, real) {
			return true
		}
	}
	return false
}

// target is a patch path resolved for checking and writing.
type target struct {
	display string // as written in the patch
	abs     string // absolute, lexically clean: the protocol path
	real    string // every symlink resolved: where writes and reads go
	entry   string // the directory entry itself (final symlink not followed): what a delete removes
}

// confine resolves p and checks that both the entry and what it points to
// are inside the workspace roots.
func (w workspace) confine(cwd, p string) (target, error) {
	t := target{display: p, abs: resolvePath(cwd, p)}
	real, err := realPath(t.abs)
	if err != nil {
		return target{}, verifyError(fmt.Sprintf("Failed to resolve %s: %s", t.abs, ioText(err)), err)
	}
	parent, err := realPath(filepath.Dir(t.abs))
	if err != nil {
		return target{}, verifyError(fmt.Sprintf("Failed to resolve %s: %s", t.abs, ioText(err)), err)
	}
	t.real, t.entry = real, filepath.Join(parent, filepath.Base(t.abs))
	roots := strings.Join(w.roots, ", ")
	if !w.contains(t.entry) {
		if !w.lexicallyContains(t.abs) {
			return target{}, &Error{Kind: ErrOutsideRoots, Msg: fmt.Sprintf(
				"apply_patch verification failed: %s is outside the workspace roots (%s); a patch may only change files under them", t.abs, roots)}
		}
		return target{}, &Error{Kind: ErrOutsideRoots, Msg: fmt.Sprintf(
			"apply_patch verification failed: %s resolves through a symlink to %s, which is outside the workspace roots (%s)", t.abs, t.entry, roots)}
	}
	if !w.contains(t.real) {
		return target{}, &Error{Kind: ErrOutsideRoots, Msg: fmt.Sprintf(
			"apply_patch verification failed: %s is a symlink to %s, which is outside the workspace roots (%s)", t.abs, t.real, roots)}
	}
	return t, nil
}

func (w workspace) lexicallyContains(abs string) bool {
	for _, r := range w.roots {
		if within(r, abs) {
			return true
		}
	}
	return false
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
