package skills

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/appserver/appserver/internal/registry"
)

// benchEnv is a catalog over n local skills behind a real registry
// dispatcher, as a turn would call it.
type benchEnv struct {
	root string
	cat  *Catalog
	disp *registry.Dispatcher
}

func newBenchEnv(b *testing.B, n int) *benchEnv {
	b.Helper()
	root := b.TempDir()
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("group-%02d", i%20), fmt.Sprintf("skill-%04d", i))
		writeFile(b, filepath.Join(dir, SkillFileName), fmt.Sprintf(
			"---\nname: skill-%04d\ndescription: >-\n  Skill %d. Use it when the task involves area %d;\n  it explains the steps in detail.\nmetadata:\n  short-description: Skill %d\n---\n\n# Skill %d\n\n%s",
			i, i, i%37, i, i, strings.Repeat("Step: do the thing carefully.\n", 60)))
	}
	cat, err := New(Config{Roots: []string{root}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	rb := registry.NewBuilder(registry.Config{})
	if err := Register(rb, cat); err != nil {
		b.Fatal(err)
	}
	_, reg := rb.Build()
	return &benchEnv{root: root, cat: cat, disp: reg.NewDispatcher(registry.DispatcherConfig{Turn: registry.TurnContext{Cwd: root}})}
}

func (e *benchEnv) call(b *testing.B, name string, args any) string {
	raw, err := json.Marshal(args)
	if err != nil {
		b.Fatal(err)
	}
	item, err := e.disp.Dispatch(context.Background(), registry.Call{CallID: "c", Namespace: Namespace, Name: name, Payload: registry.FunctionPayload{Arguments: string(raw)}})
	if err != nil {
		b.Fatal(err)
	}
	if !item.Output.Succeeded() || len(item.Output.Text) > MaxResultBytes {
		b.Fatalf("skills.%s: %s", name, item.Output.Text)
	}
	return item.Output.Text
}

// reportLatency adds p50 and p99 of the per-call latencies.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// BenchmarkSkillsList measures skills.list calls (first and continuation
// pages alternately) with 1,000 local skills. Target: p99 < 2 ms.
func BenchmarkSkillsList(b *testing.B) {
	env := newBenchEnv(b, 1000)
	var first ListResult
	if err := json.Unmarshal([]byte(env.call(b, ListTool, map[string]any{})), &first); err != nil || first.NextCursor == nil {
		b.Fatalf("no second page: %v", err)
	}
	args := []map[string]any{{}, {"cursor": *first.NextCursor}}
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		env.call(b, ListTool, args[i%2])
		lat = append(lat, time.Since(start))
	}
	reportLatency(b, lat)
}

// BenchmarkSkillsRead measures skills.read calls with 1,000 local skills:
// the main resource of a different skill each time (revalidation included)
// and continuation pieces of a 50 KB resource. Target: p99 < 2 ms.
func BenchmarkSkillsRead(b *testing.B) {
	env := newBenchEnv(b, 1000)
	l, err := env.cat.Local().List(context.Background(), Query{Cwd: env.root})
	if err != nil || len(l.Entries) != 1000 {
		b.Fatalf("catalog: %d entries, %v", len(l.Entries), err)
	}
	auth := Authority{Kind: KindLocal, ID: LocalAuthorityID}
	big := l.Entries[0]
	writeFile(b, filepath.Join(filepath.Dir(big.Path), "big.md"), strings.Repeat("部署 deploy 🚀 \"step\"\n", 2000))
	bigArgs := map[string]any{"authority": auth, "package": big.Package, "resource": big.Package + "/big.md"}
	var page ReadResult
	if err := json.Unmarshal([]byte(env.call(b, ReadTool, bigArgs)), &page); err != nil || page.NextCursor == nil {
		b.Fatalf("big resource is one page: %v", err)
	}
	cont := map[string]any{"authority": auth, "package": big.Package, "resource": big.Package + "/big.md", "cursor": *page.NextCursor}
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		args := cont
		if i%2 == 0 {
			e := l.Entries[(i/2)%len(l.Entries)]
			args = map[string]any{"authority": auth, "package": e.Package, "resource": e.MainResource}
		}
		start := time.Now()
		env.call(b, ReadTool, args)
		lat = append(lat, time.Since(start))
	}
	reportLatency(b, lat)
}

// BenchmarkCatalogScan measures a full, uncached scan of 1,000 local
// skills. Target: < 100 ms per scan.
func BenchmarkCatalogScan(b *testing.B) {
	env := newBenchEnv(b, 1000)
	lp := env.cat.Local()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		l, err := lp.Scan(context.Background(), env.root)
		if err != nil || len(l.Entries) != 1000 {
			b.Fatalf("scan: %d entries, %v", len(l.Entries), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/scan")
}
