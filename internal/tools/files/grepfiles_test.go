package files

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appserver/appserver/internal/registry"
)

// requireRg skips a test that needs ripgrep when it is missing on a
// developer machine, and fails it under CI=true, where the project's test
// script installs ripgrep (a missing rg there is a broken setup).
func requireRg(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("rg"); err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("ripgrep (rg) is not installed, but CI=true: the test setup must install it (apt-get install -y ripgrep)")
	}
	t.Skip("ripgrep (rg) is not installed; install it (apt-get install -y ripgrep) to run the grep_files tests")
}

// touch sets a file's modification time to base+offset.
func touch(t *testing.T, p string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
}

func TestGrepFilesNewestFirst(t *testing.T) {
	requireRg(t)
	e := newEnv(t, &GrepFiles{Sandbox: testSandbox(t)})
	base := time.Now().Add(-time.Hour)
	old := e.write(t, "old.txt", "alpha beta")
	mid := e.write(t, "src/mid.rs", "fn alpha() {}")
	newest := e.write(t, "src/new.rs", "let alpha = 1;")
	e.write(t, "other.txt", "omega")
	touch(t, old, base)
	touch(t, mid, base.Add(time.Minute))
	touch(t, newest, base.Add(2*time.Minute))

	wantOK(t, e.call(t, GrepFilesName, map[string]any{"pattern": "alpha"}), strings.Join([]string{newest, mid, old}, "\n"))
	// The pattern is trimmed; include filters by glob; limit cuts.
	wantOK(t, e.call(t, GrepFilesName, map[string]any{"pattern": "  alph[a]  ", "include": "*.rs"}), newest+"\n"+mid)
	wantOK(t, e.call(t, GrepFilesName, map[string]any{"pattern": "alpha", "include": "*.{txt,md}"}), old)
	wantOK(t, e.call(t, GrepFilesName, map[string]any{"pattern": "alpha", "limit": 2}), newest+"\n"+mid)
	wantOK(t, e.call(t, GrepFilesName, map[string]any{"pattern": "alpha", "include": "   "}), strings.Join([]string{newest, mid, old}, "\n"))
	// A relative path resolves against the turn cwd; a file works too.
	wantOK(t, e.call(t, GrepFilesName, map[string]any{"pattern": "alpha", "path": "src"}), newest+"\n"+mid)
	wantOK(t, e.call(t, GrepFilesName, map[string]any{"pattern": "alpha", "path": old}), old)

	// No match is a failed call with the reference text.
	out := e.call(t, GrepFilesName, map[string]any{"pattern": "zeta"})
	if out.Succeeded() || out.Success == nil || out.Text != "No matches found." {
		t.Fatalf("no match: %+v", out)
	}
}

func TestGrepFilesLimitCap(t *testing.T) {
	requireRg(t)
	e := newEnv(t, &GrepFiles{Sandbox: testSandbox(t)})
	for i := 0; i < GrepMaxLimit+30; i++ {
		e.write(t, filepath.Join("d", fmt.Sprintf("f%04d.txt", i)), "needle\n")
	}
	out := e.call(t, GrepFilesName, map[string]any{"pattern": "needle", "limit": 100000})
	if n := len(strings.Split(out.Text, "\n")); !out.Succeeded() || n != GrepMaxLimit {
		t.Fatalf("limit is capped at %d, got %d lines", GrepMaxLimit, n)
	}
}

func TestGrepFilesErrors(t *testing.T) {
	requireRg(t)
	e := newEnv(t, &GrepFiles{Sandbox: testSandbox(t)})
	e.write(t, "a.txt", "alpha")
	cases := []struct {
		args any
		want string
	}{
		{map[string]any{"pattern": "   "}, "pattern must not be empty"},
		{map[string]any{"pattern": "alpha", "limit": 0}, "limit must be greater than zero"},
		{map[string]any{"pattern": "alpha", "path": "missing"}, "unable to access `" + e.path("missing") + "`: No such file or directory (os error 2)"},
		{map[string]any{"limit": 3}, "failed to parse function arguments: missing field `pattern`"},
	}
	for _, c := range cases {
		wantErr(t, e.call(t, GrepFilesName, c.args), c.want)
	}
	out := e.call(t, GrepFilesName, map[string]any{"pattern": "("})
	if out.Succeeded() || !strings.HasPrefix(out.Text, "rg failed: ") || !strings.Contains(out.Text, "regex") {
		t.Fatalf("invalid regex: %+v", out)
	}
}

// TestGrepFilesWithoutRipgrep needs no ripgrep: a missing binary is a clear
// error for the model, never an empty result.
func TestGrepFilesWithoutRipgrep(t *testing.T) {
	e := newEnv(t, &GrepFiles{RgPath: filepath.Join(t.TempDir(), "no-rg"), Sandbox: testSandbox(t)})
	e.write(t, "a.txt", "alpha")
	wantErr(t, e.call(t, GrepFilesName, map[string]any{"pattern": "alpha"}),
		"failed to launch rg: No such file or directory (os error 2). Ensure ripgrep is installed and on PATH.")

	t.Setenv("PATH", t.TempDir())
	h := &GrepFiles{Sandbox: testSandbox(t)}
	_, err := h.Handle(context.Background(), registry.Invocation{
		Call: registry.Call{Name: GrepFilesName, Payload: registry.FunctionPayload{Arguments: `{"pattern":"alpha"}`}},
		Turn: registry.TurnContext{Cwd: e.dir},
	})
	if !errors.Is(err, ErrRipgrepMissing) {
		t.Fatalf("rg not on PATH: %v", err)
	}
}

func TestGrepFilesTimeout(t *testing.T) {
	slow := filepath.Join(t.TempDir(), "rg")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, &GrepFiles{RgPath: slow, Timeout: 200 * time.Millisecond, Sandbox: testSandbox(t)})
	out := e.call(t, GrepFilesName, map[string]any{"pattern": "alpha"})
	if out.Succeeded() || !strings.HasPrefix(out.Text, "rg timed out after ") {
		t.Fatalf("timeout: %+v", out)
	}
}
