package applypatch

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/appserver/appserver/internal/fsguard"
)

// state is what the real path p holds, for the plan: a missing file, a
// directory, a special file, or a regular file and its content. A symlink
// at p (one the check did not see) is an error.
func state(tree *fsguard.Tree, p string) (fileState, error) {
	e, err := tree.Lstat(p)
	switch {
	case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR):
		return fileState{}, nil
	case err != nil:
		return fileState{}, err
	case e.Kind == fsguard.KindNone:
		return fileState{}, nil
	case e.Kind == fsguard.KindDir:
		return fileState{exists: true, dir: true}, nil
	case e.Kind == fsguard.KindSymlink:
		return fileState{}, fsguard.ErrSymlinkAppeared
	case e.Kind == fsguard.KindOther:
		return fileState{exists: true, special: true}, nil
	case e.Size > MaxFileSize:
		return fileState{}, fmt.Errorf("file is too large to patch (%d bytes; the limit is %d)", e.Size, MaxFileSize)
	}
	b, err := tree.ReadFile(p, MaxFileSize)
	if err != nil {
		return fileState{}, err
	}
	return fileState{exists: true, content: string(b)}, nil
}

// snapshot is what a path held before Apply touched it, for rollback.
type snapshot struct {
	path    string
	exists  bool
	link    string // symlink target when the entry was a symlink
	content []byte
	info    fsguard.Info // permission bits and owner of a regular file
}

// takeSnapshot reads what the real path p holds, symlink not followed,
// for rollback.
func takeSnapshot(tree *fsguard.Tree, p string) (snapshot, error) {
	s := snapshot{path: p}
	e, err := tree.Lstat(p)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return s, nil
	case err != nil:
		return s, err
	case e.Kind == fsguard.KindNone:
		return s, nil
	case e.Kind == fsguard.KindSymlink:
		if s.link, err = tree.Readlink(p); err != nil {
			return s, err
		}
		s.exists = true
		return s, nil
	case e.Kind != fsguard.KindFile:
		return s, fmt.Errorf("%s is not a regular file", p)
	}
	if s.content, err = tree.ReadFile(p, MaxFileSize); err != nil {
		return s, err
	}
	s.exists, s.info = true, e
	return s, nil
}

// restore puts a snapshot back.
func restore(tree *fsguard.Tree, s snapshot) error {
	switch {
	case !s.exists:
		if err := tree.Remove(s.path, false); err != nil && !errors.Is(err, syscall.ENOENT) {
			return err
		}
		return nil
	case s.link != "":
		return tree.Symlink(s.link, s.path)
	}
	return tree.RestoreFile(s.path, s.content, s.info)
}
