package files

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
)

// BenchmarkReadFileSmall is read_file of a 20-line file in the turn's
// workspace, through the handler as a workspace-write turn calls it
// (through the guard, with the daemon's four masked paths):
//
//	go test -run '^$' -bench ReadFileSmall -count 10 ./internal/tools/files
func BenchmarkReadFileSmall(b *testing.B) {
	dir, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "src", "main.go")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	var body []byte
	for range 20 {
		body = append(body, "func main() { println(\"hello, world\") }\n"...)
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		b.Fatal(err)
	}
	data := b.TempDir()
	g, err := fsguard.New(fsguard.Config{Masked: []string{data, filepath.Join(data, "..", "config.toml"), "/etc/appserver/ws.token", "/etc/appserver/secret"}})
	if err != nil {
		b.Fatal(err)
	}
	ww := policy.SandboxPolicy{Kind: policy.WorkspaceWrite}
	h := &ReadFile{Guard: g, Access: func(inv registry.Invocation) fsguard.Access { return fsguard.ForThread(ww, inv.Turn.Cwd, nil) }}
	inv := registry.Invocation{
		Call: registry.Call{CallID: "c", Name: ReadFileName, Payload: registry.FunctionPayload{Arguments: `{"file_path":"` + path + `"}`}},
		Turn: registry.TurnContext{TurnID: "t", Cwd: dir},
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		out, err := h.Handle(ctx, inv)
		if err != nil || !out.Succeeded() {
			b.Fatal(err, out.Text)
		}
	}
}
