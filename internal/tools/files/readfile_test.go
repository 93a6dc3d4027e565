package files

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/registry"
)

func TestReadFileSlice(t *testing.T) {
	e := newEnv(t, &ReadFile{})
	p := e.write(t, "a.txt", "alpha\nbeta\ngamma\n")
	wantOK(t, e.call(t, ReadFileName, map[string]any{"file_path": p}), "L1: alpha\nL2: beta\nL3: gamma")
	wantOK(t, e.call(t, ReadFileName, map[string]any{"file_path": p, "offset": 2, "limit": 2}), "L2: beta\nL3: gamma")
	wantOK(t, e.call(t, ReadFileName, map[string]any{"file_path": p, "limit": 2}), "L1: alpha\nL2: beta")
	wantOK(t, e.call(t, ReadFileName, map[string]any{"file_path": p, "offset": 3, "mode": "slice"}), "L3: gamma")

	crlf := e.write(t, "crlf.txt", "one\r\ntwo\r\nlast\r")
	wantOK(t, e.call(t, ReadFileName, map[string]any{"file_path": crlf}), "L1: one\nL2: two\nL3: last\r")

	bad := e.write(t, "bad.txt", "\xff\xfe\nplain\n")
	wantOK(t, e.call(t, ReadFileName, map[string]any{"file_path": bad}), "L1: \uFFFD\uFFFD\nL2: plain")

	long := e.write(t, "long.txt", strings.Repeat("x", MaxLineBytes+50)+"\n"+strings.Repeat("é", 300)+"\n")
	out := e.call(t, ReadFileName, map[string]any{"file_path": long})
	want := "L1: " + strings.Repeat("x", MaxLineBytes) + "\nL2: " + strings.Repeat("é", MaxLineBytes/2)
	wantOK(t, out, want)

	// A huge single line is read without holding it whole.
	huge := e.write(t, "huge.txt", strings.Repeat("y", 3<<20)+"\nafter\n")
	wantOK(t, e.call(t, ReadFileName, map[string]any{"file_path": huge, "offset": 2}), "L2: after")
}

func TestReadFileDefaultLimitIs2000(t *testing.T) {
	e := newEnv(t, &ReadFile{})
	var b strings.Builder
	for i := 1; i <= 2500; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	p := e.write(t, "big.txt", b.String())
	out := e.call(t, ReadFileName, map[string]any{"file_path": p})
	lines := strings.Split(out.Text, "\n")
	if len(lines) != ReadFileDefaultLimit || lines[0] != "L1: line 1" || lines[1999] != "L2000: line 2000" {
		t.Fatalf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
	out = e.call(t, ReadFileName, map[string]any{"file_path": p, "offset": 2401})
	if lines := strings.Split(out.Text, "\n"); len(lines) != 100 || lines[99] != "L2500: line 2500" {
		t.Fatalf("tail page: %d lines", len(lines))
	}
}

func TestReadFileErrors(t *testing.T) {
	e := newEnv(t, &ReadFile{})
	p := e.write(t, "only.txt", "only\n")
	empty := e.write(t, "empty.txt", "")
	fifo := e.path("fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args any
		want string
	}{
		{map[string]any{"file_path": p, "offset": 3}, "offset exceeds file length"},
		{map[string]any{"file_path": empty}, "offset exceeds file length"},
		{map[string]any{"file_path": p, "offset": 0}, "offset must be a 1-indexed line number"},
		{map[string]any{"file_path": p, "limit": 0}, "limit must be greater than zero"},
		{map[string]any{"file_path": "only.txt"}, "file_path must be an absolute path"},
		{map[string]any{"file_path": e.path("missing.txt")}, "failed to read file: No such file or directory (os error 2)"},
		{map[string]any{"file_path": e.dir}, "failed to read file: Is a directory (os error 21)"},
		{map[string]any{"file_path": fifo}, "failed to read file: `" + fifo + "` is not a regular file"},
		{map[string]any{"offset": 1}, "failed to parse function arguments: missing field `file_path`"},
		{map[string]any{"file_path": p, "mode": "lines"}, "failed to parse function arguments: unknown variant `lines`, expected `slice` or `indentation`"},
		{map[string]any{"file_path": p, "offset": -1}, "failed to parse function arguments: invalid value: integer `-1`, expected usize for field `offset`"},
		{map[string]any{"file_path": p, "mode": "indentation", "indentation": map[string]any{"anchor_line": 0}}, "anchor_line must be a 1-indexed line number"},
		{map[string]any{"file_path": p, "mode": "indentation", "indentation": map[string]any{"anchor_line": 5}}, "anchor_line exceeds file length"},
		{map[string]any{"file_path": p, "mode": "indentation", "indentation": map[string]any{"max_lines": 0}}, "max_lines must be greater than zero"},
		{map[string]any{"file_path": empty, "mode": "indentation"}, "anchor_line exceeds file length"},
	}
	for _, c := range cases {
		wantErr(t, e.call(t, ReadFileName, c.args), c.want)
	}
}

func TestReadFileRoots(t *testing.T) {
	e := newEnv(t, &ReadFile{Access: func(inv registry.Invocation) fsguard.Access { return fsguard.Dirs(inv.Turn.Cwd) }})
	p := e.write(t, "in.txt", "inside\n")
	wantOK(t, e.call(t, ReadFileName, map[string]any{"file_path": p}), "L1: inside")
	out := e.call(t, ReadFileName, map[string]any{"file_path": "/etc/hostname"})
	if out.Succeeded() || !strings.HasPrefix(out.Text, "access denied: `/etc/hostname` is outside the workspace roots") {
		t.Fatalf("outside root: %+v", out)
	}
}

// The indentation cases are the reference implementation's unit tests.
func TestReadFileIndentation(t *testing.T) {
	e := newEnv(t, &ReadFile{})
	read := func(content string, offset, limit int, ind map[string]any) string {
		t.Helper()
		p := e.write(t, "src.txt", content)
		out := e.call(t, ReadFileName, map[string]any{"file_path": p, "offset": offset, "limit": limit, "mode": "indentation", "indentation": ind})
		if !out.Succeeded() {
			t.Fatalf("error: %s", out.Text)
		}
		return out.Text
	}
	lines := func(ls ...string) string { return strings.Join(ls, "\n") }

	block := "fn outer() {\n    if cond {\n        inner();\n    }\n    tail();\n}\n"
	if got, want := read(block, 3, 10, map[string]any{"anchor_line": 3, "include_siblings": false, "max_levels": 1}),
		lines("L2:     if cond {", "L3:         inner();", "L4:     }"); got != want {
		t.Errorf("captures block:\n%s", got)
	}

	nested := "mod root {\n    fn outer() {\n        if cond {\n            inner();\n        }\n    }\n}\n"
	if got, want := read(nested, 4, 50, map[string]any{"anchor_line": 4, "max_levels": 2}),
		lines("L2:     fn outer() {", "L3:         if cond {", "L4:             inner();", "L5:         }", "L6:     }"); got != want {
		t.Errorf("expands parents (2):\n%s", got)
	}
	if got, want := read(nested, 4, 50, map[string]any{"anchor_line": 4, "max_levels": 3}),
		lines("L1: mod root {", "L2:     fn outer() {", "L3:         if cond {", "L4:             inner();", "L5:         }", "L6:     }", "L7: }"); got != want {
		t.Errorf("expands parents (3):\n%s", got)
	}

	siblings := "fn wrapper() {\n    if first {\n        do_first();\n    }\n    if second {\n        do_second();\n    }\n}\n"
	if got, want := read(siblings, 3, 50, map[string]any{"anchor_line": 3, "include_siblings": false, "max_levels": 1}),
		lines("L2:     if first {", "L3:         do_first();", "L4:     }"); got != want {
		t.Errorf("no siblings:\n%s", got)
	}
	if got, want := read(siblings, 3, 50, map[string]any{"anchor_line": 3, "include_siblings": true, "max_levels": 1}),
		lines("L2:     if first {", "L3:         do_first();", "L4:     }", "L5:     if second {", "L6:         do_second();", "L7:     }"); got != want {
		t.Errorf("siblings:\n%s", got)
	}

	python := "class Foo:\n    def __init__(self, size):\n        self.size = size\n    def double(self, value):\n        if value is None:\n            return 0\n        result = value * self.size\n        return result\nclass Bar:\n    def compute(self):\n        helper = Foo(2)\n        return helper.double(5)\n"
	if got, want := read(python, 1, 200, map[string]any{"anchor_line": 7, "include_siblings": true, "max_levels": 1}),
		lines("L2:     def __init__(self, size):", "L3:         self.size = size", "L4:     def double(self, value):", "L5:         if value is None:",
			"L6:             return 0", "L7:         result = value * self.size", "L8:         return result"); got != want {
		t.Errorf("python:\n%s", got)
	}

	cpp := "#include <vector>\n#include <string>\n\nnamespace sample {\nclass Runner {\npublic:\n    void setup() {\n        if (enabled_) {\n            init();\n        }\n    }\n\n    // Run the code\n    int run() const {\n        switch (mode_) {\n            case Mode::Fast:\n                return fast();\n            case Mode::Slow:\n                return slow();\n            default:\n                return fallback();\n        }\n    }\n\nprivate:\n    bool enabled_ = false;\n    Mode mode_ = Mode::Fast;\n\n    int fast() const {\n        return 1;\n    }\n};\n}  // namespace sample\n"
	switchBody := []string{"L15:         switch (mode_) {", "L16:             case Mode::Fast:", "L17:                 return fast();", "L18:             case Mode::Slow:",
		"L19:                 return slow();", "L20:             default:", "L21:                 return fallback();", "L22:         }"}
	if got, want := read(cpp, 18, 200, map[string]any{"include_siblings": false, "anchor_line": 18, "max_levels": 1}), lines(switchBody...); got != want {
		t.Errorf("cpp shallow:\n%s", got)
	}
	runFn := append(append([]string{"L14:     int run() const {"}, switchBody...), "L23:     }")
	if got, want := read(cpp, 18, 200, map[string]any{"include_siblings": false, "anchor_line": 18, "max_levels": 2}),
		lines(append([]string{"L13:     // Run the code"}, runFn...)...); got != want {
		t.Errorf("cpp with header comment:\n%s", got)
	}
	if got, want := read(cpp, 18, 200, map[string]any{"include_siblings": false, "include_header": false, "anchor_line": 18, "max_levels": 2}),
		lines(runFn...); got != want {
		t.Errorf("cpp without header:\n%s", got)
	}
	setup := []string{"L7:     void setup() {", "L8:         if (enabled_) {", "L9:             init();", "L10:         }", "L11:     }", "L12: ", "L13:     // Run the code"}
	if got, want := read(cpp, 18, 200, map[string]any{"include_siblings": true, "include_header": false, "anchor_line": 18, "max_levels": 2}),
		lines(append(setup, runFn...)...); got != want {
		t.Errorf("cpp siblings:\n%s", got)
	}

	// The anchor defaults to offset; limit and max_lines cap the block; a
	// single line is the anchor alone.
	if got, want := read(block, 3, 1, nil), "L3:         inner();"; got != want {
		t.Errorf("single line: %q", got)
	}
	if got, want := read(block, 3, 50, map[string]any{"max_lines": 3}), lines("L2:     if cond {", "L3:         inner();", "L4:     }"); got != want {
		t.Errorf("max_lines:\n%s", got)
	}
	// max_levels 0 is unlimited: the whole file around the anchor.
	if got := read(block, 3, 50, nil); !strings.HasPrefix(got, "L1: fn outer() {") || !strings.HasSuffix(got, "L6: }") {
		t.Errorf("unlimited levels:\n%s", got)
	}
	// Tabs count four columns.
	tabs := "a:\n\tb:\n\t\tc\n\td\ne\n"
	if got, want := read(tabs, 3, 50, map[string]any{"max_levels": 1}), lines("L2: \tb:", "L3: \t\tc", "L4: \td"); got != want {
		t.Errorf("tabs:\n%s", got)
	}
}
