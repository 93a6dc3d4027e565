package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// wholeType is a type of ours that only its own package tree and the
// composition root may name: the packages above it declare the small
// interface they need instead, so that each says what it asks of it and
// none of them grows with it.
type wholeType struct {
	// pkg is the package that declares the type, relative to the module.
	pkg string
	// name is the type's name.
	name string
	// may are the packages, besides pkg and the packages below it, whose
	// non-test files may name the type: the composition root, which builds
	// it and hands it to the others.
	may []string
	// why is printed with every violation.
	why string
}

// wholeTypes are the types no package above them takes whole.
var wholeTypes = []wholeType{
	{
		pkg: "internal/turns", name: "Manager",
		may: []string{"internal/daemon", "cmd/appserver"},
		why: "the transports and tools declare the small interface they need of the thread table (server.Threads, httpapi.Threads, mcpserver.Threads); only the composition root holds the Manager",
	},
}

// namesOf returns where the Go source src names typ (pkgPath.name, pkgPath
// the full import path), as "line:column" positions.
func namesOf(fset *token.FileSet, f *ast.File, pkgPath, name string) []string {
	var local []string
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil || path != pkgPath {
			continue
		}
		switch {
		case imp.Name == nil:
			local = append(local, filepath.Base(path))
		case imp.Name.Name != "_" && imp.Name.Name != ".":
			local = append(local, imp.Name.Name)
		}
	}
	if len(local) == 0 {
		return nil
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != name {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && slices.Contains(local, id.Name) {
			p := fset.Position(sel.Pos())
			out = append(out, fmt.Sprintf("%d:%d", p.Line, p.Column))
		}
		return true
	})
	return out
}

// wholeViolations returns one line per non-test file of pkgs that names a
// whole type it may not. files maps a package (relative to module) to its
// non-test files' sources, read by read.
func wholeViolations(module string, files map[string][]string, read func(path string) (any, error), types []wholeType) []string {
	var out []string
	for _, wt := range types {
		for _, pkg := range sortedPkgs(files) {
			if pkg == wt.pkg || strings.HasPrefix(pkg, wt.pkg+"/") || slices.Contains(wt.may, pkg) {
				continue
			}
			for _, path := range files[pkg] {
				src, err := read(path)
				if err != nil {
					out = append(out, fmt.Sprintf("%s: %v", path, err))
					continue
				}
				fset := token.NewFileSet()
				f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
				if err != nil {
					out = append(out, fmt.Sprintf("%s: %v", path, err))
					continue
				}
				for _, at := range namesOf(fset, f, module+"/"+wt.pkg, wt.name) {
					out = append(out, fmt.Sprintf("%s (%s:%s) names %s.%s: %s", pkg, filepath.Base(path), at, filepath.Base(wt.pkg), wt.name, wt.why))
				}
			}
		}
	}
	return out
}

func sortedPkgs(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestNoPackageTakesTheThreadTableWhole holds wholeTypes on the module's
// non-test files (a test may assemble the real thing it tests against).
func TestNoPackageTakesTheThreadTableWhole(t *testing.T) {
	module, pkgs := goList(t)
	files := map[string][]string{}
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		for _, name := range slices.Concat(p.GoFiles, p.CgoFiles) {
			files[rel] = append(files[rel], filepath.Join(p.Dir, name))
		}
	}
	for _, v := range wholeViolations(module, files, func(path string) (any, error) { return nil, nil }, wholeTypes) {
		t.Error(v)
	}
}

// TestWholeViolationsFindsANamedType shows the check finds a package that
// names the type, under its own name or another, and leaves alone the
// type's own tree, the packages allowed to and the other types of the
// package.
func TestWholeViolationsFindsANamedType(t *testing.T) {
	const module = "example.com/m"
	srcs := map[string]string{
		"/a.go":   "package server\nimport \"example.com/m/internal/turns\"\ntype Config struct{ T *turns.Manager }\n",
		"/b.go":   "package mcp\nimport tt \"example.com/m/internal/turns\"\nvar _ = func(m *tt.Manager) {}\n",
		"/c.go":   "package httpapi\nimport \"example.com/m/internal/turns\"\ntype Threads interface{ F(turns.Caller) }\n",
		"/d.go":   "package daemon\nimport \"example.com/m/internal/turns\"\nvar M *turns.Manager\n",
		"/e.go":   "package loop\nimport \"example.com/m/internal/turns\"\nvar M *turns.Manager\n",
		"/f.go":   "package other\nimport \"example.com/m/internal/other/turns\"\nvar M *turns.Manager\n",
		"/bad.go": "package broken\nfunc {",
	}
	files := map[string][]string{
		"internal/server":     {"/a.go"},
		"internal/mcpserver":  {"/b.go"},
		"internal/httpapi":    {"/c.go"},
		"internal/daemon":     {"/d.go"},
		"internal/turns/loop": {"/e.go"},
		"internal/other":      {"/f.go"},
	}
	read := func(path string) (any, error) { return srcs[path], nil }
	got := wholeViolations(module, files, read, wholeTypes)
	if len(got) != 2 || !strings.HasPrefix(got[0], "internal/mcpserver (b.go:3:17) names turns.Manager") ||
		!strings.HasPrefix(got[1], "internal/server (a.go:3:24) names turns.Manager") {
		t.Fatalf("want the server and the MCP server, got:\n%s", strings.Join(got, "\n"))
	}
	files["internal/broken"] = []string{"/bad.go"}
	if got := wholeViolations(module, files, read, wholeTypes); len(got) != 3 {
		t.Fatalf("an unparsable file is reported, got:\n%s", strings.Join(got, "\n"))
	}
}
