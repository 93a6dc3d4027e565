package fsguard

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxSymlinks bounds symlink resolution, like the kernel's ELOOP limit.
const maxSymlinks = 40

// resolve returns where the absolute, clean path p really is: every
// symlink resolved, including a final one and dangling ones; components
// that do not exist are kept as written (where a write to p would land).
// With deny set, it stops as soon as the path resolved so far is refused
// and returns deny's reason: nothing is looked up below a refused path, so
// a refusal says nothing of what is there.
func resolve(p string, deny func(string) Reason) (string, Reason, error) {
	resolved := "/"
	rest := strings.Split(strings.TrimPrefix(p, "/"), "/")
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
		if deny != nil {
			if r := deny(next); r != 0 {
				return "", r, nil
			}
		}
		fi, err := os.Lstat(next)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return filepath.Join(append([]string{next}, rest...)...), 0, nil
			}
			return "", 0, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if links++; links > maxSymlinks {
			return "", 0, &fs.PathError{Op: "resolve", Path: p, Err: syscall.ELOOP}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", 0, err
		}
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return resolved, 0, nil
}
