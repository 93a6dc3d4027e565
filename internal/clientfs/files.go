package clientfs

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/fsguard"
)

// ReadFile reads a regular file whole (fs/readFile), up to MaxFileBytes.
func (s *Service) ReadFile(ctx context.Context, a fsguard.Access, p api.FsReadFileParams) (api.FsReadFileResult, error) {
	path := string(p.Path)
	f, err := s.guard.OpenRead(ctx, a, path)
	switch {
	case errors.Is(err, fsguard.ErrNotRegular), errnoOf(err) == syscall.EISDIR:
		return api.FsReadFileResult{}, invalid("path `%s` is not a file", path)
	case err != nil:
		return api.FsReadFileResult{}, fail(err)
	}
	defer f.Close()
	limit := s.cfg.MaxFileBytes
	if fi, err := f.Stat(); err == nil && fi.Size() > limit {
		return api.FsReadFileResult{}, tooLarge(path, limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return api.FsReadFileResult{}, fail(&fs.PathError{Op: "read", Path: path, Err: err})
	}
	if int64(len(b)) > limit {
		return api.FsReadFileResult{}, tooLarge(path, limit)
	}
	return api.FsReadFileResult{DataBase64: base64.StdEncoding.EncodeToString(b)}, nil
}

func tooLarge(path string, limit int64) error {
	return invalid("file `%s` is larger than %d bytes, the most fs/readFile returns", path, limit)
}

// WriteFile creates or replaces a file with the decoded data
// (fs/writeFile). A symlink is followed to the file it names; the data
// goes to a new file renamed over the target, so a reader never sees it
// half written and no hard link is written through.
func (s *Service) WriteFile(ctx context.Context, a fsguard.Access, p api.FsWriteFileParams) (api.FsWriteFileResult, error) {
	limit := s.cfg.MaxFileBytes
	if int64(len(p.DataBase64))/4*3 > limit+2 {
		return api.FsWriteFileResult{}, invalid("dataBase64 decodes to more than %d bytes, the most fs/writeFile writes", limit)
	}
	data, err := decodeBase64(p.DataBase64)
	if err != nil {
		return api.FsWriteFileResult{}, invalid("fs/writeFile requires valid base64 dataBase64: %v", err)
	}
	if int64(len(data)) > limit {
		return api.FsWriteFileResult{}, invalid("dataBase64 decodes to more than %d bytes, the most fs/writeFile writes", limit)
	}
	err = s.inTree(ctx, a, func(t *fsguard.Tree) error {
		tg, err := t.Resolve("/", string(p.Path), fsguard.Write)
		if err != nil {
			return err
		}
		return t.WriteFile(tg.Real, data)
	})
	return api.FsWriteFileResult{}, fail(err)
}

// inTree runs f on a Tree of a.
func (s *Service) inTree(ctx context.Context, a fsguard.Access, f func(*fsguard.Tree) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t, err := s.guard.Tree(a)
	if err != nil {
		return err
	}
	defer t.Close()
	return f(t)
}

// CreateDirectory makes a directory (fs/createDirectory): with its
// missing parents, an existing directory being fine, unless recursive is
// false.
func (s *Service) CreateDirectory(ctx context.Context, a fsguard.Access, p api.FsCreateDirectoryParams) (api.FsCreateDirectoryResult, error) {
	path := string(p.Path)
	if p.Recursive != nil && !*p.Recursive {
		return api.FsCreateDirectoryResult{}, fail(s.guard.Mkdir(ctx, a, path, 0o777))
	}
	err := s.inTree(ctx, a, func(t *fsguard.Tree) error {
		tg, err := t.Resolve("/", path, fsguard.Write)
		if err != nil {
			return err
		}
		var made []string
		err = t.MkdirAll(tg.Real, &made)
		if errnoOf(err) == syscall.ENOTDIR {
			// Something that is not a directory is in the way: the
			// path itself (it exists) or one of its parents.
			if info, lerr := t.Lstat(tg.Real); lerr == nil && info.Kind != fsguard.KindNone {
				return syscall.EEXIST
			}
		}
		return err
	})
	return api.FsCreateDirectoryResult{}, fail(err)
}

// GetMetadata describes what a path resolves to, and whether it is a
// symlink itself (fs/getMetadata). The creation time is 0, as the
// reference's builds report it.
func (s *Service) GetMetadata(ctx context.Context, a fsguard.Access, p api.FsGetMetadataParams) (api.FsGetMetadataResult, error) {
	path := string(p.Path)
	fi, err := s.guard.Stat(ctx, a, path)
	if err != nil {
		return api.FsGetMetadataResult{}, fail(err)
	}
	res := api.FsGetMetadataResult{
		IsDirectory:  fi.IsDir(),
		IsFile:       fi.Mode().IsRegular(),
		ModifiedAtMs: fi.ModTime().UnixMilli(),
	}
	err = s.inTree(ctx, a, func(t *fsguard.Tree) error {
		tg, err := t.Resolve("/", path, fsguard.Read)
		if err != nil {
			return err
		}
		info, err := t.Lstat(tg.Entry)
		res.IsSymlink = info.Kind == fsguard.KindSymlink
		return err
	})
	return res, fail(err)
}

// ReadDirectory lists a directory's entries by name (fs/readDirectory),
// what each resolves to; entries the path rule refuses, and symlinks
// that lead nowhere it allows, are left out.
func (s *Service) ReadDirectory(ctx context.Context, a fsguard.Access, p api.FsReadDirectoryParams) (api.FsReadDirectoryResult, error) {
	dir := string(p.Path)
	des, err := s.guard.ReadDir(ctx, a, dir)
	if err != nil {
		return api.FsReadDirectoryResult{}, fail(err)
	}
	if len(des) > s.cfg.MaxDirEntries {
		return api.FsReadDirectoryResult{}, invalid("directory `%s` has more than %d entries, the most fs/readDirectory lists", dir, s.cfg.MaxDirEntries)
	}
	res := api.FsReadDirectoryResult{Entries: make(api.List[api.FsReadDirectoryEntry], 0, len(des))}
	for _, de := range des {
		mode := de.Type()
		if mode&fs.ModeSymlink != 0 {
			fi, err := s.guard.Stat(ctx, a, filepath.Join(dir, de.Name()))
			if err != nil {
				continue
			}
			mode = fi.Mode()
		}
		res.Entries = append(res.Entries, api.FsReadDirectoryEntry{FileName: de.Name(), IsDirectory: mode.IsDir(), IsFile: mode.IsRegular()})
	}
	return res, nil
}

// Remove removes a file, a symlink (not what it names) or a directory
// with what it holds (fs/remove); a missing path is fine unless force is
// false. A directory holding a path the rule refuses is not removed.
func (s *Service) Remove(ctx context.Context, a fsguard.Access, p api.FsRemoveParams) (api.FsRemoveResult, error) {
	recursive := p.Recursive == nil || *p.Recursive
	force := p.Force == nil || *p.Force
	err := s.inTree(ctx, a, func(t *fsguard.Tree) error {
		tg, err := t.Resolve("/", string(p.Path), fsguard.Write)
		if err != nil {
			return err
		}
		info, err := t.Lstat(tg.Entry)
		if e := errnoOf(err); e == syscall.ENOTDIR || e == syscall.ENOENT {
			// A parent that is missing or not a directory: the path
			// does not exist either.
			info, err = fsguard.Info{}, nil
		}
		switch {
		case err != nil:
			return err
		case info.Kind == fsguard.KindNone && force:
			return nil
		case info.Kind == fsguard.KindNone:
			return syscall.ENOENT
		case info.Kind == fsguard.KindDir && recursive:
			if err := t.Removable(tg.Entry); err != nil {
				return err
			}
			return s.removeTree(ctx, a, t, tg.Entry)
		}
		return t.Remove(tg.Entry, info.Kind == fsguard.KindDir)
	})
	return api.FsRemoveResult{}, fail(err)
}

// removeTree removes the directory at the real path dir and what it
// holds, depth first.
func (s *Service) removeTree(ctx context.Context, a fsguard.Access, t *fsguard.Tree, dir string) error {
	des, err := s.guard.ReadDir(ctx, a, dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := filepath.Join(dir, de.Name())
		if de.IsDir() {
			err = s.removeTree(ctx, a, t, p)
		} else {
			err = t.Remove(p, false)
		}
		if err != nil && errnoOf(err) != syscall.ENOENT {
			return err
		}
	}
	return t.Remove(dir, true)
}

// Copy copies a file (its content and permission bits, over an existing
// file), a symlink (as a symlink) or, with recursive, a directory tree
// into a new directory (fs/copy). A recursive copy skips special files
// and what the path rule refuses.
func (s *Service) Copy(ctx context.Context, a fsguard.Access, p api.FsCopyParams) (api.FsCopyResult, error) {
	src, dst := string(p.SourcePath), string(p.DestinationPath)
	err := s.inTree(ctx, a, func(t *fsguard.Tree) error {
		from, err := t.Resolve("/", src, fsguard.Read)
		if err != nil {
			return err
		}
		info, err := t.Lstat(from.Entry)
		switch {
		case err != nil:
			return err
		case info.Kind == fsguard.KindNone:
			return syscall.ENOENT
		case info.Kind == fsguard.KindOther:
			return invalid("fs/copy only supports regular files, directories, and symlinks")
		}
		to, err := t.Resolve("/", dst, fsguard.Write)
		if err != nil {
			return err
		}
		switch info.Kind {
		case fsguard.KindDir:
			if !p.Recursive {
				return invalid("fs/copy requires recursive: true when sourcePath is a directory")
			}
			if fsguard.Within(from.Real, to.Real) {
				return invalid("fs/copy cannot copy a directory to itself or one of its descendants")
			}
			return s.copyTree(ctx, a, t, from.Real, to.Real)
		case fsguard.KindSymlink:
			return copySymlink(t, from.Entry, to.Entry)
		}
		return s.copyFile(ctx, a, from.Real, to.Real)
	})
	return api.FsCopyResult{}, fail(err)
}

// copySymlink makes a symlink at the real path to with the target of the
// one at from; an existing entry there is an error.
func copySymlink(t *fsguard.Tree, from, to string) error {
	target, err := t.Readlink(from)
	if err != nil {
		return err
	}
	if info, err := t.Lstat(to); err != nil {
		return err
	} else if info.Kind != fsguard.KindNone {
		return syscall.EEXIST
	}
	return t.Symlink(target, to)
}

// copyFile copies the regular file at from over or to to, with from's
// permission bits.
func (s *Service) copyFile(ctx context.Context, a fsguard.Access, from, to string) error {
	in, err := s.guard.OpenRead(ctx, a, from)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := s.guard.OpenWrite(ctx, a, to, os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, contextReader{ctx, in})
	if err == nil {
		err = out.Chmod(fi.Mode().Perm())
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// contextReader stops a copy when ctx ends.
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// copyTree copies the directory at the real path from into a new
// directory at to.
func (s *Service) copyTree(ctx context.Context, a fsguard.Access, t *fsguard.Tree, from, to string) error {
	if err := s.guard.Mkdir(ctx, a, to, 0o777); err != nil {
		return err
	}
	des, err := s.guard.ReadDir(ctx, a, from)
	if err != nil {
		return err
	}
	for _, de := range des {
		if err := ctx.Err(); err != nil {
			return err
		}
		src, dst := filepath.Join(from, de.Name()), filepath.Join(to, de.Name())
		switch mode := de.Type(); {
		case mode.IsDir():
			err = s.copyTree(ctx, a, t, src, dst)
		case mode&fs.ModeSymlink != 0:
			err = copySymlink(t, src, dst)
		case mode.IsRegular():
			err = s.copyFile(ctx, a, src, dst)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
