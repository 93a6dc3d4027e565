package clientfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/principal"
)

// benchTree makes a source tree of 50,000 files (50 top directories of 50
// directories of 20 files, names like a project's) with a .gitignore
// leaving out one directory in ten.
func benchTree(b *testing.B) string {
	b.Helper()
	root := b.TempDir()
	words := []string{"main", "button", "server", "client", "utils", "config", "handler", "model", "view", "store"}
	for i := range 50 {
		for j := range 50 {
			dir := filepath.Join(root, fmt.Sprintf("%s%02d", words[i%10], i), fmt.Sprintf("%s_%s%02d", words[j%10], words[(i+j)%10], j))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			for k := range 20 {
				name := fmt.Sprintf("%s%s_%d.go", words[k%10], words[(k+j)%10], k)
				if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	if err := os.WriteFile(filepath.Join(root, ".gitignore"), []byte("*_store0*/\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	return root
}

// BenchmarkSearch50k is one fuzzyFileSearch over a 50,000-file tree: the
// walk (through the path rule, ignore files read) and the ranking.
//
//	go test -run '^$' -bench 'Search50k' -benchtime 10x ./internal/clientfs/
func BenchmarkSearch50k(b *testing.B) {
	root := benchTree(b)
	svc := New(Config{})
	defer svc.Stop()
	a, _ := AccessOf(principal.Operator())
	c := Conn{ID: 1, Access: a, Notify: func(string, any) {}}
	var n int
	for b.Loop() {
		res, err := svc.Search(context.Background(), c, api.FuzzyFileSearchParams{Query: "btnhdl", Roots: []string{root}})
		if err != nil {
			b.Fatal(err)
		}
		n = len(res.Files)
	}
	b.ReportMetric(float64(n), "files")
}

// BenchmarkRank50k is a session's answer to a query over a walked
// 50,000-file index: what each keystroke costs once the walk is done.
//
//	go test -run '^$' -bench 'Rank50k' ./internal/clientfs/
func BenchmarkRank50k(b *testing.B) {
	root := benchTree(b)
	svc := New(Config{})
	defer svc.Stop()
	a, _ := AccessOf(principal.Operator())
	var idx []entry
	w := &walker{s: svc, a: a, roots: []string{root}, max: DefaultMaxSearchEntries, emit: func(e entry) error {
		idx = append(idx, e)
		return nil
	}}
	if err := w.walk(context.Background()); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		rank(idx, []string{root}, []string{root}, "btnhdl")
	}
	b.ReportMetric(float64(len(idx)), "entries")
}
