package applypatch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Result is what an applied patch did.
type Result struct {
	// Added, Modified and Deleted are the paths as written in the patch,
	// in hunk order; a moved file is listed under its destination.
	Added, Modified, Deleted []string
	// Changes are the protocol file changes, sorted by path.
	Changes []FileChange
}

// Summary is the reference's success text:
//
//	Success. Updated the following files:
//	A <added path>
//	M <modified path>
//	D <deleted path>
func (r Result) Summary() string {
	var b strings.Builder
	b.WriteString("Success. Updated the following files:\n")
	for _, group := range []struct {
		tag   string
		paths []string
	}{{"A", r.Added}, {"M", r.Modified}, {"D", r.Deleted}} {
		for _, p := range group.paths {
			b.WriteString(group.tag + " " + p + "\n")
		}
	}
	return b.String()
}

// Apply writes the plan. It first re-checks that every path still
// resolves inside the roots and that no file the plan read has changed
// since NewPlan (ErrStale, nothing written); then it runs the hunks in
// order. If a write fails it undoes the changes already made, as far as
// the filesystem allows, and returns an ErrIO error saying so. A plan can
// be applied once.
func (p *Plan) Apply() (Result, error) {
	if p.applied {
		return Result{}, errors.New("applypatch: plan already applied")
	}
	p.applied = true
	if err := p.checkUnchanged(); err != nil {
		return Result{}, err
	}
	w := &writer{seen: map[string]bool{}, inject: p.inject}
	var res Result
	for _, op := range p.ops {
		if err := w.run(op); err != nil {
			return Result{}, w.fail(err)
		}
		switch op.hunk.Kind {
		case AddFile:
			res.Added = append(res.Added, op.src.display)
		case DeleteFile:
			res.Deleted = append(res.Deleted, op.src.display)
		case UpdateFile:
			if op.dst != nil {
				res.Modified = append(res.Modified, op.dst.display)
			} else {
				res.Modified = append(res.Modified, op.src.display)
			}
		}
	}
	res.Changes = slices.Clone(p.changes)
	return res, nil
}

// checkUnchanged re-resolves every target and re-reads every file the
// plan looked at.
func (p *Plan) checkUnchanged() error {
	stale := func(path string) error {
		return &Error{Kind: ErrStale, Msg: fmt.Sprintf(
			"apply_patch verification failed: %s changed on disk after the patch was verified; no files were modified. Read the file again and resend the patch.", path)}
	}
	for _, op := range p.ops {
		for _, t := range []*target{&op.src, op.dst} {
			if t == nil {
				continue
			}
			now, err := p.ws.confine(p.cwd, t.display)
			if err != nil {
				return err
			}
			if now.real != t.real || now.entry != t.entry {
				return stale(t.abs)
			}
		}
	}
	paths := make([]string, 0, len(p.disk))
	for path := range p.disk {
		paths = append(paths, path)
	}
	slices.Sort(paths)
	for _, path := range paths {
		now, err := readState(path)
		if err != nil || now != p.disk[path] {
			return stale(path)
		}
	}
	return nil
}

// snapshot is what a path held before Apply touched it, for rollback.
type snapshot struct {
	path    string
	exists  bool
	link    string // symlink target when the entry was a symlink
	content []byte
	mode    fs.FileMode
}

// writer performs the writes of one Apply and remembers how to undo them.
type writer struct {
	inject  func(path string) error // tests: fail the write or removal of path
	seen    map[string]bool
	undo    []snapshot
	created []string // directories created, outermost first
}

// remember records path's current state the first time it is touched.
func (w *writer) remember(path string) error {
	if w.seen[path] {
		return nil
	}
	w.seen[path] = true
	s := snapshot{path: path}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		if s.link, err = os.Readlink(path); err != nil {
			return err
		}
		s.exists = true
	case fi.Mode().IsRegular():
		if s.content, err = os.ReadFile(path); err != nil {
			return err
		}
		s.exists, s.mode = true, fi.Mode().Perm()
	default:
		return fmt.Errorf("%s is not a regular file", path)
	}
	w.undo = append(w.undo, s)
	return nil
}

func (w *writer) injected(path string) error {
	if w.inject == nil {
		return nil
	}
	return w.inject(path)
}

// mkdirs creates the missing parents of path, recording each one.
func (w *writer) mkdirs(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		w.created = append(w.created, missing[i])
	}
	return nil
}

func (w *writer) write(t target) func(content string) error {
	return func(content string) error {
		if err := w.mkdirs(filepath.Dir(t.real)); err != nil {
			return fmt.Errorf("Failed to create parent directories for %s: %s", t.abs, ioText(err))
		}
		if err := w.remember(t.real); err != nil {
			return fmt.Errorf("Failed to write file %s: %s", t.abs, ioText(err))
		}
		if err := w.injected(t.real); err != nil {
			return fmt.Errorf("Failed to write file %s: %s", t.abs, ioText(err))
		}
		if err := os.WriteFile(t.real, []byte(content), 0o666); err != nil {
			return fmt.Errorf("Failed to write file %s: %s", t.abs, ioText(err))
		}
		return nil
	}
}

func (w *writer) remove(t target, context string) error {
	if err := w.remember(t.entry); err != nil {
		return fmt.Errorf("%s %s: %s", context, t.abs, ioText(err))
	}
	if err := w.injected(t.entry); err != nil {
		return fmt.Errorf("%s %s: %s", context, t.abs, ioText(err))
	}
	if err := syscall.Unlink(t.entry); err != nil {
		return fmt.Errorf("%s %s: %s", context, t.abs, ioText(err))
	}
	return nil
}

func (w *writer) run(op planOp) error {
	switch op.hunk.Kind {
	case AddFile:
		return w.write(op.src)(op.after)
	case DeleteFile:
		return w.remove(op.src, "Failed to delete file")
	case UpdateFile:
		if op.dst == nil {
			return w.write(op.src)(op.after)
		}
		if err := w.write(*op.dst)(op.after); err != nil {
			return err
		}
		return w.remove(op.src, "Failed to remove original")
	}
	return nil
}

// fail rolls back and wraps the write error for the model.
func (w *writer) fail(cause error) error {
	var broken []string
	for i := len(w.undo) - 1; i >= 0; i-- {
		if err := restore(w.undo[i]); err != nil {
			broken = append(broken, w.undo[i].path)
		}
	}
	for i := len(w.created) - 1; i >= 0; i-- {
		// Only empty directories go; anything else stays.
		_ = os.Remove(w.created[i])
	}
	msg := cause.Error()
	if len(broken) == 0 {
		msg += "\nThe patch was not applied: the changes it had already made were undone."
	} else {
		msg += "\nThe patch was only partly applied; these files could not be restored: " + strings.Join(broken, ", ")
	}
	return &Error{Kind: ErrIO, Msg: msg, Err: cause}
}

func restore(s snapshot) error {
	if !s.exists {
		if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if s.link != "" {
		_ = os.Remove(s.path)
		return os.Symlink(s.link, s.path)
	}
	if fi, err := os.Lstat(s.path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		_ = os.Remove(s.path)
	}
	if err := os.WriteFile(s.path, s.content, s.mode); err != nil {
		return err
	}
	return os.Chmod(s.path, s.mode)
}
