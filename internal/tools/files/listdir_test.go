package files

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestListDir(t *testing.T) {
	e := newEnv(t, &ListDir{})
	e.write(t, "entry.txt", "content")
	e.write(t, "nested/child.txt", "child")
	e.write(t, "nested/deeper/grandchild.txt", "grandchild")
	if err := os.Symlink(e.path("entry.txt"), e.path("link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(e.path("pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	header := "Absolute path: " + e.dir + "\n"
	wantOK(t, e.call(t, ListDirName, map[string]any{"dir_path": e.dir, "limit": 20, "depth": 3}),
		header+"entry.txt\nlink@\nnested/\n  child.txt\n  deeper/\n    grandchild.txt\npipe?")
	// Defaults: depth 2.
	wantOK(t, e.call(t, ListDirName, map[string]any{"dir_path": e.dir}),
		header+"entry.txt\nlink@\nnested/\n  child.txt\n  deeper/\npipe?")
	wantOK(t, e.call(t, ListDirName, map[string]any{"dir_path": e.dir, "depth": 1}),
		header+"entry.txt\nlink@\nnested/\npipe?")
	// The page is taken in breadth-first order, then sorted by path.
	wantOK(t, e.call(t, ListDirName, map[string]any{"dir_path": e.dir, "limit": 4, "depth": 3}),
		header+"entry.txt\nlink@\nnested/\npipe?\nMore than 4 entries found")
	wantOK(t, e.call(t, ListDirName, map[string]any{"dir_path": e.dir, "offset": 5, "limit": 2, "depth": 3}),
		header+"  child.txt\n  deeper/\nMore than 2 entries found")
	wantOK(t, e.call(t, ListDirName, map[string]any{"dir_path": e.dir, "offset": 7, "limit": 100, "depth": 3}),
		header+"    grandchild.txt")
}

// The cases below are the reference implementation's unit tests.
func TestListDirReferenceCases(t *testing.T) {
	e := newEnv(t, &ListDir{})
	e.write(t, "root.txt", "root")
	e.write(t, "nested/child.txt", "child")
	e.write(t, "nested/deeper/grandchild.txt", "deep")
	header := "Absolute path: " + e.dir + "\n"
	wantOK(t, e.call(t, ListDirName, map[string]any{"dir_path": e.dir, "limit": 10, "depth": 1}), header+"nested/\nroot.txt")
	wantOK(t, e.call(t, ListDirName, map[string]any{"dir_path": e.dir, "limit": 20, "depth": 2}), header+"nested/\n  child.txt\n  deeper/\nroot.txt")
	wantOK(t, e.call(t, ListDirName, map[string]any{"dir_path": e.dir, "limit": 30, "depth": 3}), header+"nested/\n  child.txt\n  deeper/\n    grandchild.txt\nroot.txt")
	// BFS truncation: the third entry in walk order is nested/child.txt.
	wantOK(t, e.call(t, ListDirName, map[string]any{"dir_path": e.dir, "limit": 3, "depth": 3}), header+"nested/\n  child.txt\nroot.txt\nMore than 3 entries found")
	wantErr(t, e.call(t, ListDirName, map[string]any{"dir_path": e.dir, "offset": 10, "limit": 1, "depth": 2}), "offset exceeds directory entry count")

	many := newEnv(t, &ListDir{})
	for i := 0; i < 40; i++ {
		many.write(t, fmt.Sprintf("file_%02d.txt", i), "content")
	}
	out := many.call(t, ListDirName, map[string]any{"dir_path": many.dir, "depth": 1})
	lines := strings.Split(out.Text, "\n")
	if len(lines) != 27 || lines[26] != "More than 25 entries found" || lines[25] != "file_24.txt" {
		t.Fatalf("default limit 25: %d lines, tail %q", len(lines), lines[len(lines)-2:])
	}
	wantOK(t, many.call(t, ListDirName, map[string]any{"dir_path": many.dir, "offset": 39, "limit": 1 << 62, "depth": 1}),
		"Absolute path: "+many.dir+"\nfile_38.txt\nfile_39.txt")
}

func TestListDirErrors(t *testing.T) {
	e := newEnv(t, &ListDir{})
	empty := e.path("empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	wantOK(t, e.call(t, ListDirName, map[string]any{"dir_path": empty}), "Absolute path: "+empty)
	f := e.write(t, "file.txt", "x")
	cases := []struct {
		args any
		want string
	}{
		{map[string]any{"dir_path": e.dir, "offset": 0}, "offset must be a 1-indexed entry number"},
		{map[string]any{"dir_path": e.dir, "limit": 0}, "limit must be greater than zero"},
		{map[string]any{"dir_path": e.dir, "depth": 0}, "depth must be greater than zero"},
		{map[string]any{"dir_path": "relative/dir"}, "dir_path must be an absolute path"},
		{map[string]any{"dir_path": e.path("missing")}, "failed to read directory: No such file or directory (os error 2)"},
		{map[string]any{"dir_path": f}, "failed to read directory: Not a directory (os error 20)"},
		{map[string]any{}, "failed to parse function arguments: missing field `dir_path`"},
	}
	for _, c := range cases {
		wantErr(t, e.call(t, ListDirName, c.args), c.want)
	}
}
