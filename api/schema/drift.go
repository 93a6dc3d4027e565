package schema

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Drift lists where the methods of p and appserver disagree: a method that
// is neither served (for a client request: in the server's method table;
// for the other kinds: sent or read by the daemon, see Named) nor listed in
// unserved with a reason, one that is both, and an entry of unserved the
// schema does not have. served reports whether appserver serves m.
func Drift(p *Protocol, served func(m Method) bool, unserved map[string]string) []string {
	var out []string
	inSchema := map[string]bool{}
	for _, m := range p.Methods {
		inSchema[m.Name] = true
		reason, listed := unserved[m.Name]
		switch s := served(m); {
		case s && listed:
			out = append(out, fmt.Sprintf("%s %s is served, but api.Unserved lists it (%q): drop the entry", m.Kind, m.Name, reason))
		case !s && !listed:
			out = append(out, fmt.Sprintf("%s %s of the %s schema is neither served nor listed in api.Unserved with a reason", m.Kind, m.Name, p.Version))
		case listed && strings.TrimSpace(reason) == "":
			out = append(out, fmt.Sprintf("api.Unserved gives no reason for %s", m.Name))
		}
	}
	for name := range unserved {
		if !inSchema[name] {
			out = append(out, fmt.Sprintf("api.Unserved lists %s, which the %s schema does not have", name, p.Version))
		}
	}
	sort.Strings(out)
	return out
}

// clientPackages are the folders of clients of the protocol that live in
// this repository (the e2e harness of the tests among them): naming a
// notification there means receiving it.
var clientPackages = map[string]bool{"internal/execclient": true, "sdk": true, "internal/apptest": true}

// Named finds where the daemon's code names each of the given method names:
// as a string literal, or through a string constant of package api (e.g.
// api.MethodTurnStarted), in the non-test Go files under root outside the
// api folder and the daemon's own clients (clientPackages), which read
// notifications rather than send them. It returns the files (relative to root) by method name; a
// method it does not return is named nowhere. It is how the drift test
// tells the notifications and server requests appserver sends (or, for
// client notifications, reads): a method the code never names is never
// sent.
func Named(root string, names []string) (map[string][]string, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	consts, err := apiConstants(filepath.Join(root, "api"))
	if err != nil {
		return nil, err
	}
	found := map[string]map[string]bool{}
	note := func(name, file string) {
		if !want[name] {
			return
		}
		if found[name] == nil {
			found[name] = map[string]bool{}
		}
		found[name][file] = true
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			switch base := d.Name(); {
			case rel == "api", clientPackages[filepath.ToSlash(rel)], base == "testdata", base == "vendor", base == "node_modules", rel != "." && strings.HasPrefix(base, "."):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		apiName := importName(f, "github.com/appserver/appserver/api")
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.BasicLit:
				if x.Kind == token.STRING {
					if s, err := strconv.Unquote(x.Value); err == nil {
						note(s, rel)
					}
				}
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && apiName != "" && id.Name == apiName {
					if v, ok := consts[x.Sel.Name]; ok {
						note(v, rel)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for name, files := range found {
		for f := range files {
			out[name] = append(out[name], f)
		}
		sort.Strings(out[name])
	}
	return out, nil
}

// importName is the name file f uses for the package at path, "" if it
// does not import it.
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return filepath.Base(path)
		}
	}
	return ""
}

// apiConstants maps the names of the string constants declared in the
// non-test Go files of dir to their values.
func apiConstants(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := eachConst(dir, func(name, _, value string) { out[name] = value })
	return out, err
}

// Enums maps each named type of the Go package in dir to the values of
// the string constants declared with that type, e.g. ThreadItemType to
// "userMessage", "agentMessage", ….
func Enums(dir string) (map[string][]string, error) {
	out := map[string][]string{}
	err := eachConst(dir, func(_, typ, value string) {
		if typ != "" {
			out[typ] = append(out[typ], value)
		}
	})
	return out, err
}

// eachConst calls fn with the name, the declared type ("" when untyped)
// and the value of every constant of the non-test Go files of dir whose
// value is a string literal. Within a const block a spec without a type
// or value repeats neither here: the api package writes both out.
func eachConst(dir string, fn func(name, typ, value string)) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				typ := ""
				if id, ok := vs.Type.(*ast.Ident); ok {
					typ = id.Name
				}
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						break
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					if v, err := strconv.Unquote(lit.Value); err == nil {
						fn(name.Name, typ, v)
					}
				}
			}
		}
	}
	return nil
}
