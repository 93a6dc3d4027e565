package files

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/sandbox"
)

// registrar is what every handler of this package offers.
type registrar interface {
	registry.Handler
	Register(b *registry.Builder) error
}

// env is a registry holding the tools under test and a dispatcher for one
// turn whose cwd is a real temp workspace.
type env struct {
	dir   string
	specs []registry.ConfiguredToolSpec
	d     *registry.Dispatcher
}

func newEnv(t *testing.T, tools ...registrar) *env {
	t.Helper()
	return newEnvIn(t, t.TempDir(), tools...)
}

// newEnvIn is newEnv with the workspace dir.
func newEnvIn(t *testing.T, dir string, tools ...registrar) *env {
	t.Helper()
	b := registry.NewBuilder(registry.Config{})
	for _, h := range tools {
		if err := h.Register(b); err != nil {
			t.Fatal(err)
		}
	}
	specs, reg := b.Build()
	// Resolve /tmp symlinks so paths in outputs compare equal.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return &env{dir: dir, specs: specs, d: reg.NewDispatcher(registry.DispatcherConfig{Turn: registry.TurnContext{TurnID: "turn-1", Cwd: dir}})}
}

// call dispatches one call; args is a JSON string or a value to encode.
func (e *env) call(t *testing.T, name string, args any) registry.Output {
	t.Helper()
	return e.callCtx(t, context.Background(), name, args)
}

func (e *env) callCtx(t *testing.T, ctx context.Context, name string, args any) registry.Output {
	t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	item, err := e.d.Dispatch(ctx, registry.Call{CallID: "call-1", Name: name, Payload: registry.FunctionPayload{Arguments: raw}})
	if err != nil {
		t.Fatalf("dispatch %s: %v", name, err)
	}
	return item.Output
}

// path returns an absolute path in the workspace.
func (e *env) path(parts ...string) string {
	return filepath.Join(append([]string{e.dir}, parts...)...)
}

// write creates a file (and its directories) in the workspace.
func (e *env) write(t *testing.T, rel, content string) string {
	t.Helper()
	p := e.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// testSandbox is a sandbox hiding hidden from commands, closed with the
// test.
func testSandbox(t *testing.T, hidden ...string) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.New(sandbox.Options{Hidden: hidden})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	return sb
}

func wantOK(t *testing.T, out registry.Output, want string) {
	t.Helper()
	if !out.Succeeded() || out.Text != want {
		t.Fatalf("got (success=%v)\n%q\nwant\n%q", out.Succeeded(), out.Text, want)
	}
}

func wantErr(t *testing.T, out registry.Output, want string) {
	t.Helper()
	if out.Succeeded() || out.Text != want {
		t.Fatalf("got (success=%v)\n%q\nwant error\n%q", out.Succeeded(), out.Text, want)
	}
}
