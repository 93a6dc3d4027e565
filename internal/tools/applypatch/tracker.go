package applypatch

import (
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

const (
	zeroOID         = "0000000000000000000000000000000000000000"
	regularFileMode = "100644"
)

// DiffTracker accumulates the net effect of the patches applied during a
// turn and renders it as one git-style diff for turn/diff/updated (Codex's
// TurnDiffTracker): every file is diffed from its content before the first
// patch of the turn touched it to its content now, a file moved and not
// recreated is shown as a rename, and nothing is re-read from disk. It is
// safe for concurrent use.
type DiffTracker struct {
	mu       sync.Mutex
	root     string
	baseline map[string]string // content before the turn; absent = did not exist
	current  map[string]string // content now; absent = does not exist
	origin   map[string]string // moved file → where it came from
}

// NewDiffTracker returns a tracker that shows paths relative to
// displayRoot (usually the turn's cwd); paths outside it are shown
// absolute.
func NewDiffTracker(displayRoot string) *DiffTracker {
	return &DiffTracker{
		root:     filepath.Clean(displayRoot),
		baseline: map[string]string{},
		current:  map[string]string{},
		origin:   map[string]string{},
	}
}

// Track records a plan that was applied successfully.
func (t *DiffTracker) Track(p *Plan) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, op := range p.ops {
		path := op.src.abs
		_, cur := t.current[path]
		_, base := t.baseline[path]
		switch op.hunk.Kind {
		case AddFile:
			delete(t.origin, path)
			if !cur && !base && op.before.exists {
				t.baseline[path] = op.before.content
			}
			t.current[path] = op.after
		case DeleteFile:
			if _, ok := t.current[path]; ok {
				delete(t.current, path)
			} else if !base {
				t.baseline[path] = op.before.content
			}
			delete(t.origin, path)
		case UpdateFile:
			if !cur && !base {
				t.baseline[path] = op.before.content
			}
			if op.dst == nil {
				t.current[path] = op.after
				continue
			}
			dest := op.dst.abs
			_, dcur := t.current[dest]
			_, dbase := t.baseline[dest]
			if !dcur && !dbase && op.destBefore.exists {
				t.baseline[dest] = op.destBefore.content
			}
			origin, ok := t.origin[path]
			if !ok {
				origin = path
			}
			delete(t.origin, path)
			delete(t.current, path)
			t.current[dest] = op.after
			delete(t.origin, dest)
			if dest != origin {
				t.origin[dest] = origin
			}
		}
	}
}

// Diff returns the turn's aggregate diff, "" when nothing changed.
func (t *DiffTracker) Diff() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	renames := map[string]string{} // origin → destination
	renamed := map[string]bool{}
	for dest, origin := range t.origin {
		_, originNow := t.current[origin]
		_, destNow := t.current[dest]
		_, originBase := t.baseline[origin]
		_, destBase := t.baseline[dest]
		if dest == origin || originNow || !destNow || !originBase || destBase {
			continue
		}
		renames[origin] = dest
		renamed[dest] = true
	}
	var paths []string
	for p := range t.baseline {
		paths = append(paths, p)
	}
	for p := range t.current {
		if _, ok := t.baseline[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.SortFunc(paths, func(a, b string) int { return strings.Compare(t.display(a), t.display(b)) })
	var b strings.Builder
	for _, p := range paths {
		if renamed[p] {
			continue
		}
		right := p
		if dest, ok := renames[p]; ok {
			right = dest
		}
		left, leftOK := t.baseline[p]
		rightContent, rightOK := t.current[right]
		d := t.render(p, left, leftOK, right, rightContent, rightOK)
		if d == "" {
			continue
		}
		b.WriteString(d)
		if !strings.HasSuffix(d, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func (t *DiffTracker) render(leftPath, left string, leftOK bool, rightPath, right string, rightOK bool) string {
	if leftOK == rightOK && left == right {
		return ""
	}
	if !leftOK && !rightOK {
		return ""
	}
	ld, rd := t.display(leftPath), t.display(rightPath)
	var b strings.Builder
	b.WriteString("diff --git a/" + ld + " b/" + rd + "\n")
	switch {
	case !leftOK:
		b.WriteString("new file mode " + regularFileMode + "\n")
	case !rightOK:
		b.WriteString("deleted file mode " + regularFileMode + "\n")
	}
	lo, ro := zeroOID, zeroOID
	oldHeader, newHeader := "/dev/null", "/dev/null"
	if leftOK {
		lo, oldHeader = gitBlobOID(left), "a/"+ld
	}
	if rightOK {
		ro, newHeader = gitBlobOID(right), "b/"+rd
	}
	b.WriteString("index " + lo + ".." + ro + "\n")
	b.WriteString(unifiedDiff(left, right, 3, oldHeader, newHeader))
	return b.String()
}

func (t *DiffTracker) display(path string) string {
	if rel, err := filepath.Rel(t.root, path); err == nil && within(t.root, path) && rel != "." {
		return filepath.ToSlash(rel)
	}
	return filepath.ToSlash(path)
}
