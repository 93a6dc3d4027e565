package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/lossy"
	"github.com/appserver/appserver/internal/registry"
)

// ListDirName is the tool name.
const ListDirName = "list_dir"

// list_dir defaults (docs/tools.md §2.7).
const (
	// ListDirDefaultLimit is the default number of entries returned.
	ListDirDefaultLimit = 25
	// ListDirDefaultDepth is the default traversal depth.
	ListDirDefaultDepth = 2
	// MaxEntryBytes is where entry names are cut.
	MaxEntryBytes = 500
)

// buildListDirSpec builds ListDirSpec's value.
func buildListDirSpec() registry.FunctionSpec {
	props := map[string]*registry.Schema{
		"dir_path": registry.String("The directory to list, as an absolute path."),
		"offset":   registry.Number("First entry to show, counting from 1. Defaults to 1."),
		"limit":    registry.Number("Most entries to show. Defaults to 25."),
		"depth":    registry.Number("How many levels of subdirectories to descend into, at least 1. Defaults to 2."),
	}
	return registry.FunctionSpec{
		Name:        ListDirName,
		Description: "Show the entries of a local directory and its subdirectories, numbered from 1, with a mark for the kind of each entry.",
		Parameters:  registry.Object(props, []string{"dir_path"}, registry.AllowAdditional(false)),
	}
}

var listDirSpecStatic = registry.Static(buildListDirSpec)

// ListDirSpec returns list_dir's spec (strict:false), as classic Codex sent
// it.
// It is built once and shared (registry.Static).
func ListDirSpec() registry.FunctionSpec { return listDirSpecStatic() }

// ListDir is the list_dir handler. The zero value lists below the turn's
// cwd, with nothing masked.
type ListDir struct {
	// Guard refuses the daemon's own paths; nil masks nothing.
	Guard *fsguard.Guard
	// Access returns what a call may read; nil is the turn's cwd.
	Access AccessFunc
}

var _ registry.Handler = (*ListDir)(nil)

// Register adds list_dir to b (parallel-capable).
func (h *ListDir) Register(b *registry.Builder) error { return b.Register(ListDirSpec(), h, true) }

// Kind returns registry.PayloadFunction.
func (*ListDir) Kind() registry.PayloadKind { return registry.PayloadFunction }

// IsMutating returns false.
func (*ListDir) IsMutating(context.Context, registry.Invocation) bool { return false }

type listDirArgs struct {
	DirPath *string `json:"dir_path"`
	Offset  *int64  `json:"offset"`
	Limit   *int64  `json:"limit"`
	Depth   *int64  `json:"depth"`
}

// dirEntry is one listed entry.
type dirEntry struct {
	sortKey string // relative path with '/', cut to MaxEntryBytes
	display string // the entry's own name, cut to MaxEntryBytes
	depth   int
	kind    byte // '/', '@', '?' or 0 for files
}

// Handle lists the directory: "Absolute path: <dir_path>", then one line per
// entry (two spaces of indent per level, "/" after directories, "@" after
// symlinks, "?" after other types), then "More than <n> entries found" when
// entries remain beyond the page.
func (h *ListDir) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	raw, err := functionArgs(ListDirName, inv)
	if err != nil {
		return registry.Output{}, err
	}
	var a listDirArgs
	if err := registry.DecodeArguments(raw, &a); err != nil {
		return registry.Output{}, err
	}
	if a.DirPath == nil {
		return registry.Output{}, registry.ArgumentsError(errors.New("missing field `dir_path`"))
	}
	offset, err := usize("offset", a.Offset, 1)
	if err != nil {
		return registry.Output{}, err
	}
	limit, err := usize("limit", a.Limit, ListDirDefaultLimit)
	if err != nil {
		return registry.Output{}, err
	}
	depth, err := usize("depth", a.Depth, ListDirDefaultDepth)
	if err != nil {
		return registry.Output{}, err
	}
	switch {
	case offset == 0:
		return registry.Output{}, errors.New("offset must be a 1-indexed entry number")
	case limit == 0:
		return registry.Output{}, errors.New("limit must be greater than zero")
	case depth == 0:
		return registry.Output{}, errors.New("depth must be greater than zero")
	case !filepath.IsAbs(*a.DirPath):
		return registry.Output{}, errors.New("dir_path must be an absolute path")
	}
	path := *a.DirPath
	lines, err := listDirSlice(func(dir string) ([]fs.DirEntry, error) {
		return h.Guard.ReadDir(ctx, accessOf(h.Access, inv), dir)
	}, path, offset, limit, depth)
	if err != nil {
		return registry.Output{}, err
	}
	out := append([]string{"Absolute path: " + path}, lines...)
	return registry.TextOutput(strings.Join(out, "\n"), true), nil
}

// readDirFunc lists one directory (through the guard, which leaves out
// what the caller may not see).
type readDirFunc func(dir string) ([]fs.DirEntry, error)

// listDirSlice walks path breadth-first to depth levels (entries of each
// directory sorted by name), takes the page [offset-1, offset-1+limit) of
// that order and sorts the page by relative path, so children follow their
// directory. Symlinks are listed, not followed.
func listDirSlice(readDir readDirFunc, path string, offset, limit, depth int) ([]string, error) {
	entries, err := collectEntries(readDir, path, depth)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, nil
	}
	start := offset - 1
	if start >= len(entries) {
		return nil, errors.New("offset exceeds directory entry count")
	}
	n := min(limit, len(entries)-start)
	end := start + n
	page := append([]dirEntry(nil), entries[start:end]...)
	sort.SliceStable(page, func(i, j int) bool { return page[i].sortKey < page[j].sortKey })
	lines := make([]string, 0, len(page)+1)
	for _, e := range page {
		line := strings.Repeat("  ", e.depth) + e.display
		if e.kind != 0 {
			line += string(e.kind)
		}
		lines = append(lines, line)
	}
	if end < len(entries) {
		lines = append(lines, fmt.Sprintf("More than %d entries found", n))
	}
	return lines, nil
}

func collectEntries(readDir readDirFunc, root string, depth int) ([]dirEntry, error) {
	type dir struct {
		path   string
		rel    string
		remain int
	}
	queue := []dir{{path: root, remain: depth}}
	var out []dirEntry
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		des, err := readDir(cur.path)
		if errors.Is(err, fsguard.ErrDenied) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("failed to read directory: %s", ioErrorText(err))
		}
		type item struct {
			e    dirEntry
			path string
			rel  string
		}
		items := make([]item, 0, len(des))
		level := 0
		if cur.rel != "" {
			level = strings.Count(cur.rel, "/") + 1
		}
		for _, de := range des {
			rel := de.Name()
			if cur.rel != "" {
				rel = cur.rel + "/" + de.Name()
			}
			var kind byte
			switch t := de.Type(); {
			case t&fs.ModeSymlink != 0:
				kind = '@'
			case t.IsDir():
				kind = '/'
			case t.IsRegular():
			default:
				kind = '?'
			}
			items = append(items, item{
				e: dirEntry{
					sortKey: cutBytes(lossy.String([]byte(rel)), MaxEntryBytes),
					display: cutBytes(lossy.String([]byte(de.Name())), MaxEntryBytes),
					depth:   level,
					kind:    kind,
				},
				path: filepath.Join(cur.path, de.Name()),
				rel:  rel,
			})
		}
		sort.SliceStable(items, func(i, j int) bool { return items[i].e.sortKey < items[j].e.sortKey })
		for _, it := range items {
			if it.e.kind == '/' && cur.remain > 1 {
				queue = append(queue, dir{path: it.path, rel: it.rel, remain: cur.remain - 1})
			}
			out = append(out, it.e)
		}
	}
	return out, nil
}
