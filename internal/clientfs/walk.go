package clientfs

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"github.com/appserver/appserver/internal/fsguard"
)

// maxIgnoreFileBytes bounds an ignore file read during a walk.
const maxIgnoreFileBytes = 1 << 20

// entry is one file or directory a search walked.
type entry struct {
	root int    // the root it is relative to
	rel  string // its path below the root, "/"-separated
	dir  bool
}

// errWalkFull stops a walk that reached its bound.
var errWalkFull = errors.New("walk bound reached")

// walker walks search roots as the reference's file search does: hidden
// entries included, symlinks followed (a loop is not entered twice), and
// what .gitignore, .ignore and .git/info/exclude files ignore left out,
// those of the roots' parent directories included, whether or not the
// directory is in a git repository. Every directory is listed through the
// path rule, so a caller sees nothing the rule refuses it.
type walker struct {
	s     *Service
	a     fsguard.Access
	roots []string // absolute and clean
	max   int
	n     int
	emit  func(entry) error
}

// walk walks the roots, those nested in another root as their own. It
// stops at the first error of emit (or of ctx) and returns it, and at
// the walker's bound (returning nil).
func (w *walker) walk(ctx context.Context) error {
	for i, root := range w.roots {
		fi, err := w.s.guard.Stat(ctx, w.a, root)
		if err != nil || !fi.IsDir() {
			continue
		}
		// The root itself is an entry, with an empty path, as in the
		// reference's walk: only a query of no words matches it.
		if w.n >= w.max {
			return nil
		}
		w.n++
		if err := w.emit(entry{root: i, dir: true}); err != nil {
			return err
		}
		ign := w.parentIgnores(ctx, root)
		err = w.dir(ctx, i, root, "", ign, []devIno{devInoOf(fi)})
		if errors.Is(err, errWalkFull) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// devIno names a directory, for symlink loops.
type devIno struct{ dev, ino uint64 }

func devInoOf(fi fs.FileInfo) devIno {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return devIno{uint64(st.Dev), st.Ino}
	}
	return devIno{}
}

// ignores are the ignore patterns in force in a directory, most
// important last.
type ignores []gitignore.Pattern

// dir walks the directory at abs (rel below root i).
func (w *walker) dir(ctx context.Context, root int, abs, rel string, ign ignores, stack []devIno) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	des, err := w.s.guard.ReadDir(ctx, w.a, abs)
	if err != nil {
		return nil // unreadable: left out, as the reference skips it
	}
	ign = w.ownIgnores(ctx, abs, des, ign)
	matcher := gitignore.NewMatcher(ign)
	parts := components(abs)
	for _, de := range des {
		name := de.Name()
		if !utf8.ValidString(name) {
			continue
		}
		childAbs := filepath.Join(abs, name)
		if w.nestedRoot(root, childAbs) {
			continue
		}
		isDir := de.IsDir()
		var fi fs.FileInfo
		if de.Type()&fs.ModeSymlink != 0 {
			if fi, err = w.s.guard.Stat(ctx, w.a, childAbs); err != nil {
				continue
			}
			isDir = fi.IsDir()
		}
		if len(ign) > 0 && matcher.Match(append(parts[:len(parts):len(parts)], name), isDir) {
			continue
		}
		var id devIno
		if isDir {
			if fi == nil {
				if fi, err = w.s.guard.Stat(ctx, w.a, childAbs); err != nil {
					continue
				}
			}
			// A symlink back to a directory being walked is left out,
			// as the reference's walker reports it as an error.
			if id = devInoOf(fi); loops(stack, id) {
				continue
			}
		}
		childRel := name
		if rel != "" {
			childRel = rel + "/" + name
		}
		if w.n >= w.max {
			return errWalkFull
		}
		w.n++
		if err := w.emit(entry{root: root, rel: childRel, dir: isDir}); err != nil {
			return err
		}
		if !isDir {
			continue
		}
		if err := w.dir(ctx, root, childAbs, childRel, ign, append(stack, id)); err != nil {
			return err
		}
	}
	return nil
}

func loops(stack []devIno, id devIno) bool {
	for _, s := range stack {
		if s == id {
			return true
		}
	}
	return false
}

// nestedRoot says whether p is another root inside root i, walked as its
// own root.
func (w *walker) nestedRoot(i int, p string) bool {
	for j, r := range w.roots {
		if j != i && r == p && fsguard.Within(w.roots[i], r) {
			return true
		}
	}
	return false
}

// components splits an absolute path into its names.
func components(abs string) []string {
	if abs == "/" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(abs, "/"), "/")
}

// parentIgnores reads the ignore files of root's parent directories,
// outermost first; those the caller may not read are skipped.
func (w *walker) parentIgnores(ctx context.Context, root string) ignores {
	if root == "/" {
		return nil
	}
	var dirs []string
	for d := filepath.Dir(root); ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if d == "/" {
			break
		}
	}
	var ign ignores
	for i := len(dirs) - 1; i >= 0; i-- {
		ign = w.readIgnores(ctx, dirs[i], ign, w.hasGitDir(ctx, dirs[i]))
	}
	return ign
}

func (w *walker) hasGitDir(ctx context.Context, dir string) bool {
	fi, err := w.s.guard.Stat(ctx, w.a, filepath.Join(dir, ".git"))
	return err == nil && fi.IsDir()
}

// ownIgnores adds the ignore files of the directory abs, whose entries
// are des, to ign.
func (w *walker) ownIgnores(ctx context.Context, abs string, des []fs.DirEntry, ign ignores) ignores {
	var ignoreFile, gitDir bool
	for _, de := range des {
		switch de.Name() {
		case ".gitignore", ".ignore":
			ignoreFile = true
		case ".git":
			gitDir = true
		}
	}
	if !ignoreFile && !gitDir {
		return ign
	}
	return w.readIgnores(ctx, abs, ign, gitDir)
}

// readIgnores appends the patterns of dir's ignore files to ign, in
// increasing importance: the repository's exclude file (when dir holds
// .git), .gitignore, .ignore.
func (w *walker) readIgnores(ctx context.Context, dir string, ign ignores, gitDir bool) ignores {
	// A fresh slice: the parent's patterns are shared by its siblings.
	out := ign[:len(ign):len(ign)]
	domain := components(dir)
	files := []string{".gitignore", ".ignore"}
	if gitDir {
		files = append([]string{filepath.Join(".git", "info", "exclude")}, files...)
	}
	for _, name := range files {
		f, err := w.s.guard.OpenRead(ctx, w.a, filepath.Join(dir, name))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(io.LimitReader(f, maxIgnoreFileBytes))
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
				continue
			}
			out = append(out, gitignore.ParsePattern(line, domain))
		}
		_ = f.Close()
	}
	return out
}
