package fsguard

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
)

// daemonFiles is a fake daemon's state next to a workspace: a data
// directory holding the store, the exec-policy rules and the user config
// overlay, a config file and a token file, all masked; and a workspace
// with a file of its own.
type daemonFiles struct {
	ws, data, config, token, outside string
	g                                *Guard
}

func newDaemonFiles(t *testing.T, walk bool) *daemonFiles {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	d := &daemonFiles{
		ws:      filepath.Join(base, "ws"),
		data:    filepath.Join(base, "data"),
		config:  filepath.Join(base, "etc", "config.toml"),
		token:   filepath.Join(base, "etc", "ws.token"),
		outside: filepath.Join(base, "outside"),
	}
	for path, body := range map[string]string{
		filepath.Join(d.ws, "src", "main.go"):           "package main\n",
		filepath.Join(d.data, "appserver.db"):           "SQLite format 3\x00",
		filepath.Join(d.data, "user-config.toml"):       "model = \"x\"\n",
		filepath.Join(d.data, "rules", "default.rules"): "",
		d.config:                      "model = \"y\"\n",
		d.token:                       "s3cret-token\n",
		filepath.Join(d.outside, "f"): "outside\n",
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	}
	d.g, err = New(Config{Masked: []string{d.data, d.config, d.token, ""}, WalkOnly: walk})
	require.NoError(t, err)
	return d
}

// forEachResolver runs f with openat2 resolution and with the component
// walk that stands in for it on older kernels.
func forEachResolver(t *testing.T, f func(t *testing.T, walk bool)) {
	t.Run("openat2", func(t *testing.T) { f(t, false) })
	t.Run("walk", func(t *testing.T) { f(t, true) })
}

func requireReason(t *testing.T, err error, want Reason) *Error {
	t.Helper()
	var e *Error
	require.ErrorAs(t, err, &e, "%v", err)
	require.Equal(t, want, e.Reason, "%v", err)
	require.ErrorIs(t, err, ErrDenied)
	return e
}

// every single-step entry point, for a path.
func everyOp(g *Guard, a Access, p string) map[string]error {
	ctx := context.Background()
	out := map[string]error{}
	if f, err := g.OpenRead(ctx, a, p); err == nil {
		f.Close()
	} else {
		out["OpenRead"] = err
	}
	_, out["Stat"] = g.Stat(ctx, a, p)
	_, out["ReadDir"] = g.ReadDir(ctx, a, p)
	if f, err := g.OpenWrite(ctx, a, p, os.O_CREATE|os.O_TRUNC, 0o644); err == nil {
		f.Close()
	} else {
		out["OpenWrite"] = err
	}
	out["Mkdir"] = g.Mkdir(ctx, a, p, 0o755)
	out["Remove"] = g.Remove(ctx, a, p)
	out["Rename from"] = g.Rename(ctx, a, p, p+".moved")
	return out
}

// The masked paths are refused to everyone (full access included), by
// every entry point, named directly, below, through a symlink in the
// workspace, or through ".."; the refusal reads the same whether the file
// exists or not, and nothing is read or changed.
func TestMaskedPathsAreRefusedToEveryone(t *testing.T) {
	forEachResolver(t, func(t *testing.T, walk bool) {
		d := newDaemonFiles(t, walk)
		require.NoError(t, os.Symlink(filepath.Join(d.data, "appserver.db"), filepath.Join(d.ws, "db")))
		require.NoError(t, os.Symlink(d.data, filepath.Join(d.ws, "data")))
		require.NoError(t, os.Symlink(filepath.Dir(d.token), filepath.Join(d.ws, "etc")))
		// A symlink kept in the data directory that leads back into the
		// workspace: following it would tell what the data directory holds.
		require.NoError(t, os.Symlink(filepath.Join(d.ws, "src", "main.go"), filepath.Join(d.data, "back")))
		require.NoError(t, os.Symlink(filepath.Join(d.data, "back"), filepath.Join(d.ws, "peek")))
		rel, err := filepath.Rel(d.ws, d.token)
		require.NoError(t, err)
		paths := []string{
			d.data, filepath.Join(d.data, "appserver.db"), filepath.Join(d.data, "rules", "evil.rules"),
			filepath.Join(d.data, "user-config.toml"), d.config, d.token,
			filepath.Join(d.ws, "db"), filepath.Join(d.ws, "data", "user-config.toml"), filepath.Join(d.ws, "etc", "ws.token"),
			d.ws + "/" + rel, filepath.Join(d.ws, "data", "..", "data", "appserver.db"), filepath.Join(d.ws, "peek"),
		}
		before := snapshotTree(t, filepath.Dir(d.data))
		for _, a := range []Access{Dirs("/"), ForThread(policy.SandboxPolicy{Kind: policy.DangerFullAccess}, d.ws, nil)} {
			for _, p := range paths {
				for op, err := range everyOp(d.g, a, p) {
					e := requireReason(t, err, DaemonPath)
					assert.Equal(t, "access denied: `"+filepath.Clean(p)+"` is a protected path of the daemon (its own data, configuration, credentials or process); no tool may read or change it", e.Error(), op)
				}
			}
		}
		// Existing or not, the same answer.
		_, errMissing := d.g.Stat(context.Background(), Dirs("/"), filepath.Join(d.data, "missing"))
		_, errPresent := d.g.Stat(context.Background(), Dirs("/"), filepath.Join(d.data, "appserver.db"))
		assert.Equal(t, strings.Replace(errMissing.Error(), "missing", "appserver.db", 1), errPresent.Error())
		assert.Equal(t, before, snapshotTree(t, filepath.Dir(d.data)), "something changed")
	})
}

// The daemon's /proc entries are refused to every caller; the rest of
// /proc only to callers without HostProc (sandboxed threads).
func TestDaemonProcIsRefused(t *testing.T) {
	forEachResolver(t, func(t *testing.T, walk bool) {
		d := newDaemonFiles(t, walk)
		require.NoError(t, os.Symlink("/proc/self/environ", filepath.Join(d.ws, "env")))
		require.NoError(t, os.Symlink("/proc/self", filepath.Join(d.ws, "me")))
		pid := strconv.Itoa(os.Getpid())
		tid := otherThread(t)
		full := ForThread(policy.SandboxPolicy{Kind: policy.DangerFullAccess}, d.ws, nil)
		for _, p := range []string{
			"/proc/self/environ", "/proc/self", "/proc/thread-self/environ", "/proc/" + pid + "/environ",
			"/proc/" + pid + "/root" + d.token, "/proc/" + tid + "/environ", "/proc/" + pid + "/task/" + tid + "/environ",
			"/dev/fd/0", filepath.Join(d.ws, "env"), filepath.Join(d.ws, "me", "environ"), "/proc/net/tcp",
		} {
			_, err := d.g.OpenRead(context.Background(), full, p)
			requireReason(t, err, DaemonPath)
			_, err = d.g.Stat(context.Background(), full, p)
			requireReason(t, err, DaemonPath)
		}
		// Another process's entries and /proc's own files: only with
		// HostProc.
		f, err := d.g.OpenRead(context.Background(), full, "/proc/cpuinfo")
		require.NoError(t, err)
		f.Close()
		_, err = d.g.OpenRead(context.Background(), full, "/proc/1/cmdline")
		require.NoError(t, err)
		ww := ForThread(policy.SandboxPolicy{Kind: policy.WorkspaceWrite}, "/", nil)
		_, err = d.g.OpenRead(context.Background(), ww, "/proc/cpuinfo")
		requireReason(t, err, NoHostProc)
		// A listing of /proc leaves the daemon out.
		des, err := d.g.ReadDir(context.Background(), full, "/proc")
		require.NoError(t, err)
		for _, de := range des {
			assert.NotContains(t, []string{"self", "thread-self", pid}, de.Name())
		}
		assert.Contains(t, names(des), "1")
	})
}

// otherThread returns the id of a thread of this process other than its
// main one.
func otherThread(t *testing.T) string {
	t.Helper()
	des, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	for _, de := range des {
		if de.Name() != strconv.Itoa(os.Getpid()) {
			return de.Name()
		}
	}
	t.Fatal("the test process has one thread")
	return ""
}

func names(des []fs.DirEntry) []string {
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// Paths outside the roots are refused, named so, through "..", or through
// a symlink; symlinks that stay inside work as before.
func TestRoots(t *testing.T) {
	forEachResolver(t, func(t *testing.T, walk bool) {
		d := newDaemonFiles(t, walk)
		ctx := context.Background()
		a := ForThread(policy.SandboxPolicy{Kind: policy.ReadOnly}, d.ws, nil)
		require.NoError(t, os.Symlink(d.outside, filepath.Join(d.ws, "out")))
		require.NoError(t, os.Symlink("src", filepath.Join(d.ws, "alias")))

		for _, p := range []string{"/etc/shadow", "/etc/passwd", d.ws + "/../outside/f", filepath.Join(d.outside, "f")} {
			e := requireReason(t, everyOp(d.g, a, p)["OpenRead"], OutsideRoots)
			assert.Equal(t, "access denied: `"+filepath.Clean(p)+"` is outside the workspace roots ("+d.ws+")", e.Error())
		}
		e := requireReason(t, everyOp(d.g, a, filepath.Join(d.ws, "out", "f"))["OpenRead"], OutsideRoots)
		assert.Equal(t, "access denied: `"+d.ws+"/out/f` resolves to `"+d.outside+"/f`, which is outside the workspace roots ("+d.ws+")", e.Error())

		f, err := d.g.OpenRead(ctx, a, filepath.Join(d.ws, "alias", "main.go"))
		require.NoError(t, err)
		b, err := io.ReadAll(f)
		f.Close()
		require.NoError(t, err)
		assert.Equal(t, "package main\n", string(b))
		des, err := d.g.ReadDir(ctx, a, filepath.Join(d.ws, "alias"))
		require.NoError(t, err)
		assert.Equal(t, []string{"main.go"}, names(des))
		fi, err := d.g.Stat(ctx, a, filepath.Join(d.ws, "alias"))
		require.NoError(t, err)
		assert.True(t, fi.IsDir())
		_, err = d.g.OpenRead(ctx, a, filepath.Join(d.ws, "src"))
		require.ErrorIs(t, err, syscall.EISDIR)
		_, err = d.g.OpenRead(ctx, a, filepath.Join(d.ws, "missing"))
		require.ErrorIs(t, err, fs.ErrNotExist)
		_, err = d.g.OpenRead(ctx, a, "relative")
		require.Error(t, err)

		// The data directory inside the workspace: left out of listings,
		// refused by name.
		g, err := New(Config{Masked: []string{filepath.Join(d.ws, "src")}, WalkOnly: walk})
		require.NoError(t, err)
		des, err = g.ReadDir(ctx, a, d.ws)
		require.NoError(t, err)
		assert.Equal(t, []string{"alias", "out"}, names(des))
	})
}

// Writes honour the read-only subpaths of writable roots, never create
// directories outside them, and do not move a directory holding a masked
// path; what may be written is written.
func TestWrites(t *testing.T) {
	forEachResolver(t, func(t *testing.T, walk bool) {
		d := newDaemonFiles(t, walk)
		ctx := context.Background()
		require.NoError(t, os.MkdirAll(filepath.Join(d.ws, ".git"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d.ws, ".git", "config"), []byte("[core]\n"), 0o644))
		a := ForThread(policy.SandboxPolicy{Kind: policy.WorkspaceWrite, ExcludeSlashTmp: true, ExcludeTmpdirEnvVar: true}, d.ws, nil)

		for _, p := range []string{filepath.Join(d.ws, ".git", "config"), filepath.Join(d.ws, ".git", "hooks"), filepath.Join(d.ws, ".codex", "config.toml")} {
			for op, err := range everyOp(d.g, a, p) {
				if op == "OpenRead" || op == "Stat" || op == "ReadDir" {
					continue
				}
				requireReason(t, err, ReadOnlySubpath)
			}
		}
		f, err := d.g.OpenRead(ctx, a, filepath.Join(d.ws, ".git", "config"))
		require.NoError(t, err, "read-only subpaths are readable")
		f.Close()
		requireReason(t, d.g.Rename(ctx, a, filepath.Join(d.ws, "src", "main.go"), filepath.Join(d.ws, ".git", "x")), ReadOnlySubpath)
		requireReason(t, d.g.Mkdir(ctx, a, filepath.Join(d.outside, "x"), 0o755), OutsideRoots)

		w, err := d.g.OpenWrite(ctx, a, filepath.Join(d.ws, "new.txt"), os.O_CREATE|os.O_EXCL, 0o600)
		require.NoError(t, err)
		_, err = w.WriteString("new\n")
		require.NoError(t, err)
		require.NoError(t, w.Close())
		require.NoError(t, d.g.Mkdir(ctx, a, filepath.Join(d.ws, "dir"), 0o755))
		require.NoError(t, d.g.Rename(ctx, a, filepath.Join(d.ws, "new.txt"), filepath.Join(d.ws, "dir", "moved.txt")))
		b, err := os.ReadFile(filepath.Join(d.ws, "dir", "moved.txt"))
		require.NoError(t, err)
		assert.Equal(t, "new\n", string(b))
		require.NoError(t, d.g.Remove(ctx, a, filepath.Join(d.ws, "dir", "moved.txt")))
		require.NoError(t, d.g.Remove(ctx, a, filepath.Join(d.ws, "dir")))
		require.Error(t, d.g.Remove(ctx, a, d.ws), "a root is not removed")
		assert.NoDirExists(t, filepath.Join(d.ws, "dir"))

		// A directory holding a masked path does not move.
		g, err := New(Config{Masked: []string{filepath.Join(d.ws, "src", "main.go")}, WalkOnly: walk})
		require.NoError(t, err)
		requireReason(t, g.Rename(ctx, a, filepath.Join(d.ws, "src"), filepath.Join(d.ws, "elsewhere")), DaemonPath)
		assert.FileExists(t, filepath.Join(d.ws, "src", "main.go"))

		// A Tree makes missing directories below the deepest existing
		// write root only.
		tree, err := d.g.Tree(a)
		require.NoError(t, err)
		defer tree.Close()
		var made []string
		require.NoError(t, tree.MkdirAll(filepath.Join(d.ws, "a", "b"), &made))
		assert.Equal(t, []string{filepath.Join(d.ws, "a"), filepath.Join(d.ws, "a", "b")}, made)
		requireReason(t, tree.MkdirAll(filepath.Join(d.outside, "a", "b"), &made), OutsideRoots)
		assert.NoDirExists(t, filepath.Join(d.outside, "a"))
	})
}

// A path checked by a Tree and changed into a symlink before it is used
// fails the operation instead of following the symlink (into a masked
// path here).
func TestTreeDoesNotFollowASymlinkSwappedIn(t *testing.T) {
	forEachResolver(t, func(t *testing.T, walk bool) {
		d := newDaemonFiles(t, walk)
		a := Dirs(d.ws)
		tree, err := d.g.Tree(a)
		require.NoError(t, err)
		defer tree.Close()
		tg, err := tree.Resolve(d.ws, "src/appserver.db", Read)
		require.NoError(t, err)
		require.NoError(t, os.Rename(filepath.Join(d.ws, "src"), filepath.Join(d.ws, "src.moved")))
		require.NoError(t, os.Symlink(d.data, filepath.Join(d.ws, "src")))
		_, err = tree.ReadFile(tg.Real, 1<<20)
		require.ErrorIs(t, err, ErrSymlinkAppeared)
		err = tree.WriteFile(tg.Real, []byte("x"))
		require.ErrorIs(t, err, ErrSymlinkAppeared)
		_, err = tree.Lstat(tg.Real)
		require.ErrorIs(t, err, ErrSymlinkAppeared)
		b, err := os.ReadFile(filepath.Join(d.data, "appserver.db"))
		require.NoError(t, err)
		assert.Equal(t, "SQLite format 3\x00", string(b))
	})
}

// ForThread follows the sandbox policy; the read-only subpaths a Tree
// keeps are the sandbox's.
func TestForThread(t *testing.T) {
	cwd := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(cwd, ".git"), 0o755))
	granted := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(granted, ".agents"), 0o755))

	full := ForThread(policy.SandboxPolicy{Kind: policy.DangerFullAccess}, cwd, nil)
	assert.Equal(t, Access{Read: []string{"/"}, Write: []policy.WritableRoot{{Root: "/"}}, HostProc: true}, full)
	assert.Equal(t, full, ForThread(policy.SandboxPolicy{Kind: policy.ExternalSandbox}, cwd, []string{granted}))

	ro := ForThread(policy.SandboxPolicy{Kind: policy.ReadOnly}, cwd, []string{granted})
	assert.Equal(t, []string{cwd, granted}, ro.Read)
	assert.False(t, ro.HostProc)
	tree, err := (*Guard)(nil).Tree(ro)
	require.NoError(t, err)
	defer tree.Close()
	assert.Equal(t, []policy.WritableRoot{policy.NewWritableRoot(cwd, true), policy.NewWritableRoot(granted, false)}, tree.writeRoots())

	extra := t.TempDir()
	t.Setenv("TMPDIR", "")
	ww := ForThread(policy.SandboxPolicy{Kind: policy.WorkspaceWrite, WritableRoots: []string{extra}}, cwd, nil)
	assert.Equal(t, []string{extra, cwd, "/tmp"}, ww.Read)
	assert.False(t, ww.HostProc)
	tree, err = (*Guard)(nil).Tree(ww)
	require.NoError(t, err)
	defer tree.Close()
	assert.Equal(t, policy.SandboxPolicy{Kind: policy.WorkspaceWrite, WritableRoots: []string{extra}}.WritableRootsWithCwd(cwd), tree.writeRoots())
}

// New refuses to mask "/", which would refuse everything.
func TestNewRefusesRoot(t *testing.T) {
	_, err := New(Config{Masked: []string{"/"}})
	require.Error(t, err)
	var g *Guard
	assert.Empty(t, g.Masked())
	_, err = g.Stat(context.Background(), Dirs("/"), "/proc/self/status")
	requireReason(t, err, DaemonPath)
}

// snapshotTree maps every path below root to its content (directories to
// "", symlinks to their target).
func snapshotTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case de.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[p] = "-> " + target
			return err
		case de.IsDir():
			out[p+"/"] = ""
		default:
			b, err := os.ReadFile(p)
			out[p] = string(b)
			return err
		}
		return nil
	}))
	return out
}

// CheckName refuses by name what the other entry points refuse, without
// looking at the disk.
func TestCheckName(t *testing.T) {
	d := newDaemonFiles(t, false)
	all := Access{Read: []string{"/"}, Write: []policy.WritableRoot{{Root: "/"}}, HostProc: true}
	require.NoError(t, d.g.CheckName(all, filepath.Join(d.ws, "src", "main.go"), Read))
	require.NoError(t, d.g.CheckName(all, filepath.Join(d.ws, "not", "there"), Write))
	for _, p := range []string{d.data, filepath.Join(d.data, "appserver.db"), d.token, "/proc/self/environ"} {
		err := d.g.CheckName(all, p, Read)
		require.ErrorIs(t, err, ErrDenied, p)
		require.Equal(t, DaemonPath, err.(*Error).Reason, p)
	}
	ws := Dirs(d.ws)
	require.NoError(t, d.g.CheckName(ws, filepath.Join(d.ws, "x", "..", "src"), Read))
	err := d.g.CheckName(ws, filepath.Join(d.outside, "f"), Read)
	require.ErrorIs(t, err, ErrDenied)
	require.Equal(t, OutsideRoots, err.(*Error).Reason)
	require.Error(t, d.g.CheckName(ws, "relative", Read))
}

// Within is the one rule of "this path or below" for every package that
// compares paths: "/" holds every path, and a prefix that is not a whole
// path element does not count.
func TestWithin(t *testing.T) {
	for _, c := range []struct {
		root, p string
		want    bool
	}{
		{"/", "/", true},
		{"/", "/x", true},
		{"/a", "/a", true},
		{"/a", "/a/b", true},
		{"/a", "/ab", false},
		{"/a/b", "/a", false},
	} {
		require.Equal(t, c.want, Within(c.root, c.p), "Within(%q, %q)", c.root, c.p)
	}
}
