package files

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
)

// fakeDaemon is a daemon's own state next to the test's workspace: a data
// directory with the store and the user config overlay, a config file and
// a websocket token file, masked by the guard as internal/daemon masks
// them.
type fakeDaemon struct {
	data, config, token string
	guard               *fsguard.Guard
}

func newFakeDaemon(t *testing.T, data string) *fakeDaemon {
	t.Helper()
	etc, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDaemon{data: data, config: filepath.Join(etc, "config.toml"), token: filepath.Join(etc, "ws.token")}
	for path, body := range map[string]string{
		filepath.Join(data, "appserver.db"):     "SQLite format 3\x00 s3cret",
		filepath.Join(data, "user-config.toml"): "model = \"s3cret\"\n",
		d.config:                                "model = \"s3cret\"\n",
		d.token:                                 "s3cret\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if d.guard, err = fsguard.New(fsguard.Config{Masked: []string{d.data, d.config, d.token}}); err != nil {
		t.Fatal(err)
	}
	return d
}

// threadTools is every file tool of a thread under sandbox policy p,
// wired as the orchestrator wires them.
func (d *fakeDaemon) threadTools(t *testing.T, p policy.SandboxPolicy) *env {
	t.Helper()
	return d.threadToolsIn(t, p, t.TempDir())
}

// threadToolsIn is threadTools with the workspace ws.
func (d *fakeDaemon) threadToolsIn(t *testing.T, p policy.SandboxPolicy, ws string) *env {
	t.Helper()
	access := func(inv registry.Invocation) fsguard.Access { return fsguard.ForThread(p, inv.Turn.Cwd, nil) }
	return newEnvIn(t, ws,
		&ReadFile{Guard: d.guard, Access: access},
		&ListDir{Guard: d.guard, Access: access},
		&GrepFiles{Guard: d.guard, Access: access, Sandbox: testSandbox(t, d.guard.Masked()...)},
		&ViewImage{Guard: d.guard, Access: access},
	)
}

// toolCalls are the calls of every tool on path.
func toolCalls(path string) map[string]map[string]any {
	return map[string]map[string]any{
		ReadFileName:  {"file_path": path},
		ListDirName:   {"dir_path": path},
		GrepFilesName: {"pattern": "s3cret", "path": path},
		ViewImageName: {"path": path},
	}
}

var threadKinds = map[string]policy.SandboxPolicy{
	"read-only":          {Kind: policy.ReadOnly},
	"workspace-write":    {Kind: policy.WorkspaceWrite},
	"danger-full-access": {Kind: policy.DangerFullAccess},
}

// No file tool reads the daemon's own files or its /proc entries, for any
// thread: named directly, through a symlink in the workspace, or through
// "..". The answer names the path and the reason, and is the same whether
// the file exists or not.
func TestToolsRefuseTheDaemonsFiles(t *testing.T) {
	requireRg(t)
	data, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := newFakeDaemon(t, data)
	for kind, p := range threadKinds {
		t.Run(kind, func(t *testing.T) {
			e := d.threadTools(t, p)
			if err := os.Symlink(d.data, e.path("state")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(d.token, e.path("token")); err != nil {
				t.Fatal(err)
			}
			rel, err := filepath.Rel(e.dir, filepath.Join(d.data, "appserver.db"))
			if err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{
				d.token, filepath.Join(d.data, "appserver.db"), d.config, d.data,
				filepath.Join(d.data, "user-config.toml"), filepath.Join(d.data, "missing"),
				"/proc/self/environ", "/proc/self", "/proc/" + strconv.Itoa(os.Getpid()) + "/environ", "/proc/thread-self/environ",
				e.path("state", "appserver.db"), e.path("token"), e.dir + "/" + rel,
			} {
				for tool, args := range toolCalls(path) {
					out := e.call(t, tool, args)
					want := "access denied: `" + filepath.Clean(path) + "` is a protected path of the daemon (its own data, configuration, credentials or process); no tool may read or change it"
					if out.Succeeded() || out.Text != want {
						t.Errorf("%s %s: got (success=%v) %q", tool, path, out.Succeeded(), out.Text)
					}
				}
			}
		})
	}
}

// A sandboxed thread's file tools read its workspace roots only:
// /etc/shadow and a symlink out of the workspace are refused, a symlink
// inside it still works.
func TestToolsOfSandboxedThreadsStayInTheirRoots(t *testing.T) {
	requireRg(t)
	data, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := newFakeDaemon(t, data)
	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "notes.txt"), []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := d.threadTools(t, policy.SandboxPolicy{Kind: policy.ReadOnly})
	e.write(t, "src/a.txt", "s3cret\n")
	if err := os.Symlink(outside, e.path("out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src", e.path("alias")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/etc/shadow", e.dir + "/../" + filepath.Base(outside), "/proc/cpuinfo"} {
		for tool, args := range toolCalls(path) {
			out := e.call(t, tool, args)
			if out.Succeeded() || !strings.HasPrefix(out.Text, "access denied: `"+filepath.Clean(path)+"` is ") {
				t.Errorf("%s %s: got (success=%v) %q", tool, path, out.Succeeded(), out.Text)
			}
		}
	}
	out := e.call(t, ReadFileName, map[string]any{"file_path": e.path("out", "notes.txt")})
	wantErr(t, out, "access denied: `"+e.path("out", "notes.txt")+"` resolves to `"+filepath.Join(outside, "notes.txt")+"`, which is outside the workspace roots ("+e.dir+")")
	wantOK(t, e.call(t, ReadFileName, map[string]any{"file_path": e.path("alias", "a.txt")}), "L1: s3cret")
	wantOK(t, e.call(t, GrepFilesName, map[string]any{"pattern": "s3cret", "path": e.path("alias")}), e.path("alias", "a.txt"))
}

// The data directory inside a workspace: list_dir leaves it out, and
// ripgrep, run in the sandbox that hides the guard's paths, does not find
// what it holds.
func TestToolsDoNotSeeADataDirInTheWorkspace(t *testing.T) {
	requireRg(t)
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := newFakeDaemon(t, filepath.Join(ws, "state"))
	e := d.threadToolsIn(t, policy.SandboxPolicy{Kind: policy.DangerFullAccess}, ws)
	e.write(t, "src/a.txt", "s3cret\n")
	wantOK(t, e.call(t, ListDirName, map[string]any{"dir_path": ws}), "Absolute path: "+ws+"\nsrc/\n  a.txt")
	wantOK(t, e.call(t, GrepFilesName, map[string]any{"pattern": "s3cret"}), e.path("src", "a.txt"))
}

// ripgrep runs with PATH and HOME only: nothing of the daemon's
// environment (its API keys) reaches it, so nothing it reads of its own
// process can tell them.
func TestGrepFilesEnvironment(t *testing.T) {
	t.Setenv("APPSERVER_TEST_API_KEY", "s3cret")
	rg := filepath.Join(t.TempDir(), "rg")
	if err := os.WriteFile(rg, []byte("#!/bin/sh\nenv\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := newFakeDaemon(t, t.TempDir())
	e := newEnv(t, &GrepFiles{RgPath: rg, Guard: d.guard, Sandbox: testSandbox(t, d.guard.Masked()...)})
	out := e.call(t, GrepFilesName, map[string]any{"pattern": "s3cret"})
	if !out.Succeeded() || strings.Contains(out.Text, "s3cret") || !strings.Contains(out.Text, "PATH=") {
		t.Fatalf("ripgrep's environment: %q", out.Text)
	}
}
