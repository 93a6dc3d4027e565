package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// lookPath resolves file the way execvp does for the command's environment:
// a name with a slash is taken relative to dir, a bare name is searched on
// pathEnv (the command's PATH, not the daemon's). Errors match os/exec's
// (*exec.Error wrapping exec.ErrNotFound or the stat error), so a missing
// command reads the same sandboxed or not.
func lookPath(file, pathEnv, dir string) (string, error) {
	if strings.Contains(file, "/") {
		p := file
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := findExecutable(p); err != nil {
			return "", &exec.Error{Name: file, Err: err}
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "." // POSIX: an empty PATH entry is the current directory
		}
		p := filepath.Join(d, file)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if findExecutable(p) == nil {
			return p, nil
		}
	}
	return "", &exec.Error{Name: file, Err: exec.ErrNotFound}
}

func findExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if m := fi.Mode(); m.IsDir() || m&0o111 == 0 {
		return fs.ErrPermission
	}
	return nil
}

// isNotFound reports whether err is a lookup failure of lookPath.
func isNotFound(err error) bool {
	return errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist)
}
