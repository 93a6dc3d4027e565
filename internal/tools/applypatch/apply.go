package applypatch

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/appserver/appserver/internal/fsguard"
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
// order. Every read, write and removal is resolved below a descriptor of
// "/" without following symlinks (fsguard.Tree), so a path
// changed into a symlink after these checks fails the write instead of
// redirecting it. If a write fails it undoes the changes already made, as
// far as the filesystem allows, and returns an ErrIO error saying so. A
// plan can be applied once.
func (p *Plan) Apply() (Result, error) {
	if p.applied {
		return Result{}, errors.New("applypatch: plan already applied")
	}
	p.applied = true
	tree, err := p.guard.Tree(p.access)
	if err != nil {
		return Result{}, &Error{Kind: ErrIO, Msg: ioText(err), Err: err}
	}
	defer tree.Close()
	if err := p.checkUnchanged(tree); err != nil {
		return Result{}, err
	}
	w := newWriter(tree, p.inject)
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
func (p *Plan) checkUnchanged(tree *fsguard.Tree) error {
	stale := func(path string) error {
		return &Error{Kind: ErrStale, Msg: fmt.Sprintf(
			"apply_patch verification failed: %s changed on disk after the patch was verified; no files were modified. Read the file again and resend the patch.", path)}
	}
	for _, op := range p.ops {
		for _, t := range []*target{&op.src, op.dst} {
			if t == nil {
				continue
			}
			now, err := p.confine(tree, t.display)
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
		now, err := state(tree, path)
		if err != nil || now != p.disk[path] {
			return stale(path)
		}
	}
	return nil
}

// writer performs the writes of one Apply through tree and remembers how
// to undo them.
type writer struct {
	tree    *fsguard.Tree
	inject  func(path string) error // tests: fail (or race) the write or removal of path
	seen    map[string]bool
	undo    []snapshot
	created []string // directories created, outermost first
}

func newWriter(tree *fsguard.Tree, inject func(path string) error) *writer {
	return &writer{tree: tree, inject: inject, seen: map[string]bool{}}
}

// remember records path's current state the first time it is touched.
func (w *writer) remember(path string) error {
	if w.seen[path] {
		return nil
	}
	w.seen[path] = true
	s, err := takeSnapshot(w.tree, path)
	if err != nil {
		return err
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

func (w *writer) write(t target) func(content string) error {
	return func(content string) error {
		fail := func(err error) error {
			return fmt.Errorf("Failed to write file %s: %s", t.abs, ioText(err))
		}
		if err := w.injected(t.real); err != nil {
			return fail(err)
		}
		if err := w.tree.MkdirAll(filepath.Dir(t.real), &w.created); err != nil {
			return fmt.Errorf("Failed to create parent directories for %s: %s", t.abs, ioText(err))
		}
		if err := w.remember(t.real); err != nil {
			return fail(err)
		}
		if err := w.tree.WriteFile(t.real, []byte(content)); err != nil {
			return fail(err)
		}
		return nil
	}
}

func (w *writer) remove(t target, context string) error {
	fail := func(err error) error {
		return fmt.Errorf("%s %s: %s", context, t.abs, ioText(err))
	}
	if err := w.injected(t.entry); err != nil {
		return fail(err)
	}
	if err := w.remember(t.entry); err != nil {
		return fail(err)
	}
	if err := w.tree.Remove(t.entry, false); err != nil {
		return fail(err)
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
		if err := restore(w.tree, w.undo[i]); err != nil {
			broken = append(broken, w.undo[i].path)
		}
	}
	for i := len(w.created) - 1; i >= 0; i-- {
		// Only empty directories go; anything else stays.
		_ = w.tree.Remove(w.created[i], true)
	}
	msg := cause.Error()
	if len(broken) == 0 {
		msg += "\nThe patch was not applied: the changes it had already made were undone."
	} else {
		msg += "\nThe patch was only partly applied; these files could not be restored: " + strings.Join(broken, ", ")
	}
	return &Error{Kind: ErrIO, Msg: msg, Err: cause}
}
