package applypatch

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/appserver/appserver/internal/fsguard"
)

// MaxFileSize is the largest file a patch may read (update, delete, or
// overwrite); larger files are refused rather than loaded into memory.
const MaxFileSize = 64 << 20

// Change kinds of a FileChange, as the protocol spells them.
const (
	// ChangeAdd is a created (or overwritten) file.
	ChangeAdd = "add"
	// ChangeDelete is a removed file.
	ChangeDelete = "delete"
	// ChangeUpdate is an edited, possibly moved, file.
	ChangeUpdate = "update"
)

// ChangeKind is the protocol PatchChangeKind: {"type":"add"},
// {"type":"delete"} or {"type":"update","move_path":string|null}.
type ChangeKind struct {
	// Type is ChangeAdd, ChangeDelete or ChangeUpdate.
	Type string
	// MovePath is the absolute destination of a moved update, or nil.
	MovePath *string
}

// MarshalJSON writes move_path (snake_case, as the protocol has it) only
// for updates.
func (k ChangeKind) MarshalJSON() ([]byte, error) {
	if k.Type == ChangeUpdate {
		return json.Marshal(struct {
			Type     string  `json:"type"`
			MovePath *string `json:"move_path"`
		}{k.Type, k.MovePath})
	}
	return json.Marshal(struct {
		Type string `json:"type"`
	}{k.Type})
}

// FileChange is the protocol FileUpdateChange of one file in a fileChange
// item.
type FileChange struct {
	// Path is the absolute path of the file (the source of a move).
	Path string `json:"path"`
	// Kind is add, delete or update.
	Kind ChangeKind `json:"kind"`
	// Diff is the new body for add, the old body for delete, and unified
	// hunks (one line of context, no file header) for update, followed by
	// "\n\nMoved to: <dest>" for a move.
	Diff string `json:"diff"`
}

// fileState is what a path holds, on disk or in the simulated workspace.
type fileState struct {
	exists  bool
	dir     bool
	special bool // neither a regular file nor a directory
	content string
}

// planOp is one hunk, resolved and simulated.
type planOp struct {
	hunk       Hunk
	src        target
	dst        *target // moves only; nil when the file stays
	before     fileState
	destBefore fileState // the move destination before the write
	after      string    // new body for add and update
}

// Plan is a verified patch: every path resolved and confined, every hunk
// checked against the workspace (each against the result of the hunks
// before it), and the resulting file bodies computed. Nothing has been
// written. A Plan is not safe for concurrent use.
type Plan struct {
	cwd     string
	guard   *fsguard.Guard
	access  fsguard.Access
	roots   []string
	patch   *Patch
	ops     []planOp
	changes []FileChange
	disk    map[string]fileState // every disk path read, as it was
	applied bool
	inject  func(path string) error // tests: fail or race a write, just before it
}

// Scope is where a patch may write: the daemon's guard (its masked paths;
// nil masks nothing) and the caller's access. An Access without write
// roots confines the patch to its cwd.
type Scope struct {
	// Guard holds the paths no patch may touch.
	Guard *fsguard.Guard
	// Access is what the patch may change (its Write roots).
	Access fsguard.Access
}

// NewPlan parses patchText, resolves its paths against cwd (absolute),
// checks them for writing under scope (fsguard.Tree.Resolve: inside the
// write roots also through symlinks, not a path of the daemon, not in a
// read-only subpath), and verifies every hunk against the files, without
// writing anything. Its errors are *Error values whose text is what the
// model is told.
func NewPlan(cwd string, scope Scope, patchText string) (*Plan, error) {
	if !filepath.IsAbs(cwd) {
		return nil, verifyError(fmt.Sprintf("the working directory must be an absolute path, got '%s'", cwd), nil)
	}
	cwd = filepath.Clean(cwd)
	patch, err := Parse(patchText)
	if err != nil {
		return nil, &Error{Kind: ErrParse, Msg: verifyPrefix + err.Error(), Err: err}
	}
	if patch.EnvironmentID != "" {
		return nil, &Error{Kind: ErrEnvironment, Msg: "apply_patch environment selection is unavailable for this turn"}
	}
	if len(patch.Hunks) == 0 {
		return nil, &Error{Kind: ErrEmpty, Msg: "patch rejected: empty patch"}
	}
	if len(scope.Access.Write) == 0 {
		scope.Access = fsguard.Dirs(cwd)
	}
	p := &Plan{cwd: cwd, guard: scope.Guard, access: scope.Access, patch: patch, disk: map[string]fileState{}}
	tree, err := p.guard.Tree(p.access)
	if err != nil {
		return nil, verifyError(ioText(err), err)
	}
	defer tree.Close()
	p.roots = tree.Roots(fsguard.Write)
	sim := &simulation{plan: p, tree: tree, files: map[string]fileState{}, dirs: map[string]bool{}}
	seen := map[string]bool{}
	for _, h := range patch.Hunks {
		op := planOp{hunk: h}
		if op.src, err = p.confine(tree, h.Path); err != nil {
			return nil, err
		}
		if h.Kind == UpdateFile && h.MovePath != "" {
			dst, err := p.confine(tree, h.MovePath)
			if err != nil {
				return nil, err
			}
			op.dst = &dst
		}
		if seen[op.src.abs] {
			return nil, verifyError("invalid patch: multiple operations target "+op.src.abs, nil)
		}
		seen[op.src.abs] = true
		if err := sim.run(&op); err != nil {
			return nil, err
		}
		p.ops = append(p.ops, op)
	}
	p.changes = p.fileChanges()
	return p, nil
}

// Patch returns the parsed patch.
func (p *Plan) Patch() *Patch { return p.patch }

// Cwd returns the directory relative paths were resolved against.
func (p *Plan) Cwd() string { return p.cwd }

// Roots returns the absolute workspace roots the plan was confined to.
func (p *Plan) Roots() []string { return slices.Clone(p.roots) }

// Paths returns every absolute path the patch writes or removes (sources
// and move destinations), in hunk order; a patch-safety check decides on
// these.
func (p *Plan) Paths() []string {
	var out []string
	for _, op := range p.ops {
		out = append(out, op.src.abs)
		if op.dst != nil {
			out = append(out, op.dst.abs)
		}
	}
	return out
}

// Changes returns the protocol file changes, sorted by path.
func (p *Plan) Changes() []FileChange { return slices.Clone(p.changes) }

// UnifiedDiff returns the git-style diff of the whole patch, with paths
// relative to the cwd, as turn/diff/updated shows it.
func (p *Plan) UnifiedDiff() string {
	t := NewDiffTracker(p.cwd)
	t.Track(p)
	return t.Diff()
}

func (p *Plan) fileChanges() []FileChange {
	out := make([]FileChange, 0, len(p.ops))
	for _, op := range p.ops {
		switch op.hunk.Kind {
		case AddFile:
			out = append(out, FileChange{Path: op.src.abs, Kind: ChangeKind{Type: ChangeAdd}, Diff: op.after})
		case DeleteFile:
			out = append(out, FileChange{Path: op.src.abs, Kind: ChangeKind{Type: ChangeDelete}, Diff: op.before.content})
		case UpdateFile:
			diff := unifiedDiff(op.before.content, op.after, 1, "", "")
			kind := ChangeKind{Type: ChangeUpdate}
			if op.dst != nil {
				dest := op.dst.abs
				kind.MovePath = &dest
				diff += "\n\nMoved to: " + dest
			}
			out = append(out, FileChange{Path: op.src.abs, Kind: kind, Diff: diff})
		}
	}
	slices.SortStableFunc(out, func(a, b FileChange) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// simulation runs the hunks against an in-memory overlay of the disk.
type simulation struct {
	plan  *Plan
	tree  *fsguard.Tree        // reads the disk without following unchecked symlinks
	files map[string]fileState // real path → state after earlier hunks
	dirs  map[string]bool      // directories earlier hunks create
}

// stat returns what path holds now: overlay first, then disk.
func (s *simulation) stat(path string) (fileState, error) {
	if st, ok := s.files[path]; ok {
		return st, nil
	}
	if s.dirs[path] {
		return fileState{exists: true, dir: true}, nil
	}
	return s.plan.readDisk(s.tree, path)
}

// readDisk reads the real path once and remembers what it saw, so Apply
// can tell whether the file changed in between.
func (p *Plan) readDisk(tree *fsguard.Tree, path string) (fileState, error) {
	if st, ok := p.disk[path]; ok {
		return st, nil
	}
	st, err := state(tree, path)
	if err != nil {
		return fileState{}, err
	}
	p.disk[path] = st
	return st, nil
}

// readText reads the file a delete or update works on: it must be an
// existing regular file of UTF-8 text. context prefixes errors, e.g.
// "Failed to read file to update".
func (s *simulation) readText(t target, context string) (fileState, error) {
	fail := func(reason string, cause error) error {
		return verifyError(fmt.Sprintf("%s %s: %s", context, t.abs, reason), cause)
	}
	st, err := s.stat(t.real)
	switch {
	case err != nil:
		return fileState{}, fail(ioText(err), err)
	case !st.exists:
		return fileState{}, fail(ioText(syscall.ENOENT), fs.ErrNotExist)
	case st.dir || st.special:
		return fileState{}, fail(fmt.Sprintf("path `%s` is not a file", t.abs), nil)
	}
	if msg := utf8ErrorText([]byte(st.content)); msg != "" {
		return fileState{}, fail(msg, nil)
	}
	return st, nil
}

// prepareWrite checks that a file can be written at t: it is not a
// directory or special file, and its parents are (or can be made)
// directories. It returns what t holds now.
func (s *simulation) prepareWrite(t target) (fileState, error) {
	st, err := s.stat(t.real)
	switch {
	case err != nil:
		return fileState{}, verifyError(fmt.Sprintf("Failed to write file %s: %s", t.abs, ioText(err)), err)
	case st.dir:
		return fileState{}, verifyError(fmt.Sprintf("Failed to write file %s: %s", t.abs, ioText(syscall.EISDIR)), nil)
	case st.special:
		return fileState{}, verifyError(fmt.Sprintf("Failed to write file %s: not a regular file", t.abs), nil)
	}
	var missing []string
	for d := filepath.Dir(t.real); ; d = filepath.Dir(d) {
		ds, err := s.stat(d)
		if err != nil {
			return fileState{}, verifyError(fmt.Sprintf("Failed to create parent directories for %s: %s", t.abs, ioText(err)), err)
		}
		if ds.exists {
			if !ds.dir {
				return fileState{}, verifyError(fmt.Sprintf("Failed to create parent directories for %s: %s is not a directory", t.abs, d), nil)
			}
			break
		}
		missing = append(missing, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for _, d := range missing {
		s.dirs[d] = true
	}
	return st, nil
}

// run verifies one hunk against the overlay and records its effect.
func (s *simulation) run(op *planOp) error {
	h := op.hunk
	switch h.Kind {
	case AddFile:
		st, err := s.prepareWrite(op.src)
		if err != nil {
			return err
		}
		op.before, op.after = st, h.Contents
		s.files[op.src.real] = fileState{exists: true, content: h.Contents}
	case DeleteFile:
		st, err := s.readText(op.src, "Failed to read")
		if err != nil {
			return err
		}
		op.before = st
		s.files[op.src.entry] = fileState{}
	case UpdateFile:
		st, err := s.readText(op.src, "Failed to read file to update")
		if err != nil {
			return err
		}
		after, err := deriveNewContents(st.content, op.src.abs, h.Chunks)
		if err != nil {
			return verifyError(err.Error(), nil)
		}
		op.before, op.after = st, after
		if op.dst != nil && op.dst.real == op.src.real {
			// Moving a file onto itself is an in-place update (the
			// reference would write it and then delete it).
			op.dst = nil
		}
		if op.dst == nil {
			s.files[op.src.real] = fileState{exists: true, content: after}
			return nil
		}
		dst, err := s.prepareWrite(*op.dst)
		if err != nil {
			return err
		}
		op.destBefore = dst
		s.files[op.dst.real] = fileState{exists: true, content: after}
		s.files[op.src.entry] = fileState{}
	}
	return nil
}
