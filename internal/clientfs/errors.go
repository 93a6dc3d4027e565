package clientfs

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/fsguard"
)

// errnoText is the text the reference gives an operating system error:
// its C library's message (musl's, in the released binaries).
var errnoText = map[syscall.Errno]string{
	syscall.EPERM:        "Operation not permitted",
	syscall.ENOENT:       "No such file or directory",
	syscall.EINTR:        "Interrupted system call",
	syscall.EIO:          "I/O error",
	syscall.ENXIO:        "No such device or address",
	syscall.EBADF:        "Bad file descriptor",
	syscall.EAGAIN:       "Resource temporarily unavailable",
	syscall.ENOMEM:       "Out of memory",
	syscall.EACCES:       "Permission denied",
	syscall.EBUSY:        "Resource busy",
	syscall.EEXIST:       "File exists",
	syscall.EXDEV:        "Cross-device link",
	syscall.ENODEV:       "No such device",
	syscall.ENOTDIR:      "Not a directory",
	syscall.EISDIR:       "Is a directory",
	syscall.EINVAL:       "Invalid argument",
	syscall.ENFILE:       "Too many open files in system",
	syscall.EMFILE:       "No file descriptors available",
	syscall.ETXTBSY:      "Text file busy",
	syscall.EFBIG:        "File too large",
	syscall.ENOSPC:       "No space left on device",
	syscall.EROFS:        "Read-only file system",
	syscall.EMLINK:       "Too many links",
	syscall.ENAMETOOLONG: "Filename too long",
	syscall.ENOTEMPTY:    "Directory not empty",
	syscall.ELOOP:        "Symbolic link loop",
	syscall.EDQUOT:       "Quota exceeded",
	syscall.ESTALE:       "Stale file handle",
	syscall.EOPNOTSUPP:   "Not supported",
}

// OSMessage words err as the reference does: "<message> (os error N)"
// for an operating system error, the error's own text otherwise.
func OSMessage(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		text, ok := errnoText[errno]
		if !ok {
			text = errno.Error()
			if text != "" {
				text = strings.ToUpper(text[:1]) + text[1:]
			}
		}
		return fmt.Sprintf("%s (os error %d)", text, int(errno))
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// fail maps an error of a file operation to the domain error the client
// gets: a refusal of the path rule is Forbidden with the rule's text, an
// operating system error Unavailable (-32603, as the reference answers
// them) with its text; a cancelled request stays what it is.
func fail(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var denied *fsguard.Error
	if errors.As(err, &denied) {
		return apperr.Wrap(apperr.Forbidden, err, "%s", denied.Error())
	}
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return err
	}
	return apperr.Wrap(apperr.Unavailable, err, "%s", OSMessage(err))
}

// errnoOf is the operating system error in err, or 0.
func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return 0
}

// decodeBase64 decodes standard base64 with its padding, refusing what
// the reference refuses, in its words.
func decodeBase64(s string) ([]byte, error) {
	body := strings.TrimRight(s, "=")
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '=' && i >= len(body) {
			continue
		}
		if !isBase64Symbol(c) {
			return nil, fmt.Errorf("Invalid symbol %d, offset %d.", c, i)
		}
	}
	pad := len(s) - len(body)
	switch {
	case len(body)%4 == 1:
		return nil, fmt.Errorf("Invalid input length: %d", len(s))
	case len(s)%4 != 0 || pad > 2 || (pad > 0 && (len(body)+pad)%4 != 0):
		return nil, errors.New("Invalid padding")
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		last := len(body) - 1
		return nil, fmt.Errorf("Invalid last symbol %d, offset %d.", s[last], last)
	}
	return b, nil
}

func isBase64Symbol(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/'
}
