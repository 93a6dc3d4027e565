package applypatch

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/fsguard"
)

// writeTree creates files (path → content) under dir.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
}

// readTree returns every regular file under dir (path → content), and
// symlinks as "-> target".
func readTree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			require.NoError(t, err)
			out[rel] = "-> " + target
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			out[rel] = string(b)
		case d.IsDir() && rel != ".":
			out[rel+"/"] = ""
		}
		return nil
	}))
	return out
}

func applyIn(t *testing.T, dir, patch string) (Result, error) {
	t.Helper()
	return applyScoped(t, dir, Scope{}, patch)
}

// applyScoped plans and applies patch in dir under scope.
func applyScoped(t *testing.T, dir string, scope Scope, patch string) (Result, error) {
	t.Helper()
	p, err := NewPlan(dir, scope, patch)
	if err != nil {
		return Result{}, err
	}
	return p.Apply()
}

func TestApplyScenarios(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		patch   string
		want    map[string]string // whole tree afterwards
		summary string
	}{
		{
			name:  "add, update with move into a new directory, delete",
			files: map[string]string{"a.txt": "l1\nl2\nl3\n", "d.txt": "x\n"},
			patch: "*** Begin Patch\n*** Add File: new.txt\n+n\n*** Update File: a.txt\n*** Move to: moved/a2.txt\n@@\n-l2\n+L2\n" +
				"*** Delete File: d.txt\n*** End Patch",
			want:    map[string]string{"new.txt": "n\n", "moved/": "", "moved/a2.txt": "l1\nL2\nl3\n"},
			summary: "Success. Updated the following files:\nA new.txt\nM moved/a2.txt\nD d.txt\n",
		},
		{
			name:  "multiple chunks in one file",
			files: map[string]string{"m.txt": "a\nb\nc\nd\ne\nf\ng\n"},
			patch: "*** Begin Patch\n*** Update File: m.txt\n@@\n a\n-b\n+B\n c\n@@\n e\n-f\n+F\n*** End Patch",
			want:  map[string]string{"m.txt": "a\nB\nc\nd\ne\nF\ng\n"},
		},
		{
			name:  "context header narrows the search",
			files: map[string]string{"m.py": "class A:\n  def f():\n    pass\nclass B:\n  def f():\n    pass\n"},
			patch: "*** Begin Patch\n*** Update File: m.py\n@@ class B:\n   def f():\n-    pass\n+    return 1\n*** End Patch",
			want:  map[string]string{"m.py": "class A:\n  def f():\n    pass\nclass B:\n  def f():\n    return 1\n"},
		},
		{
			name:  "end of file anchors at the last lines",
			files: map[string]string{"t.txt": "x\ny\nx\ny\n"},
			patch: "*** Begin Patch\n*** Update File: t.txt\n@@\n x\n-y\n+Y\n*** End of File\n*** End Patch",
			want:  map[string]string{"t.txt": "x\ny\nx\nY\n"},
		},
		{
			name:  "pure addition goes to the end",
			files: map[string]string{"t.txt": "a\n"},
			patch: "*** Begin Patch\n*** Update File: t.txt\n@@\n+b\n*** End Patch",
			want:  map[string]string{"t.txt": "a\nb\n"},
		},
		{
			name:  "pure addition goes after a final empty line (0.169)",
			files: map[string]string{"t.txt": "a\n\n"},
			patch: "*** Begin Patch\n*** Update File: t.txt\n@@\n+b\n*** End Patch",
			want:  map[string]string{"t.txt": "a\n\nb\n"},
		},
		{
			name:  "update adds a missing final newline",
			files: map[string]string{"n.txt": "a\nb"},
			patch: "*** Begin Patch\n*** Update File: n.txt\n@@\n-a\n+A\n*** End Patch",
			want:  map[string]string{"n.txt": "A\nb\n"},
		},
		{
			name:  "deletion only",
			files: map[string]string{"l.txt": "1\n2\n3\n"},
			patch: "*** Begin Patch\n*** Update File: l.txt\n@@\n 1\n-2\n 3\n*** End Patch",
			want:  map[string]string{"l.txt": "1\n3\n"},
		},
		{
			name:  "trailing empty old line stands for the final newline",
			files: map[string]string{"l.txt": "1\n2\n"},
			patch: "*** Begin Patch\n*** Update File: l.txt\n@@\n-2\n+two\n \n*** End Patch",
			want:  map[string]string{"l.txt": "1\ntwo\n"},
		},
		{
			name:  "lenient: trailing whitespace",
			files: map[string]string{"w.txt": "foo   \nbar\t\n"},
			patch: "*** Begin Patch\n*** Update File: w.txt\n@@\n-foo\n+FOO\n bar\n*** End Patch",
			// Context lines keep the file's text.
			want: map[string]string{"w.txt": "FOO\nbar\t\n"},
		},
		{
			name:  "lenient: leading and trailing whitespace",
			files: map[string]string{"w.txt": "    foo  \n\tbar\n"},
			patch: "*** Begin Patch\n*** Update File: w.txt\n@@\n-foo\n+FOO\n bar\n*** End Patch",
			want:  map[string]string{"w.txt": "FOO\n\tbar\n"},
		},
		{
			name:  "lenient: unicode punctuation",
			files: map[string]string{"u.txt": "he said \u201chi\u201d \u2014 it\u2019s\u00a0fine\n"},
			patch: "*** Begin Patch\n*** Update File: u.txt\n@@\n-he said \"hi\" - it's fine\n+ok\n*** End Patch",
			want:  map[string]string{"u.txt": "ok\n"},
		},
		{
			name:  "exact match wins over an earlier lenient one",
			files: map[string]string{"e.txt": "x \nx\n"},
			patch: "*** Begin Patch\n*** Update File: e.txt\n@@\n-x\n+X\n*** End Patch",
			want:  map[string]string{"e.txt": "x \nX\n"},
		},
		{
			name:  "CRLF file keeps CRLF; new lines get CRLF",
			files: map[string]string{"c.txt": "a\r\nb\r\nc\r\n"},
			patch: "*** Begin Patch\n*** Update File: c.txt\n@@\n a\n-b\n+B\n+C\n*** End Patch",
			want:  map[string]string{"c.txt": "a\r\nB\r\nC\r\nc\r\n"},
		},
		{
			name:  "mixed endings: untouched lines keep theirs, new lines take the first line's",
			files: map[string]string{"c.txt": "a\r\nb\nc\n"},
			patch: "*** Begin Patch\n*** Update File: c.txt\n@@\n-c\n+C\n*** End Patch",
			want:  map[string]string{"c.txt": "a\r\nb\nC\r\n"},
		},
		{
			name:  "add overwrites an existing file",
			files: map[string]string{"dup.txt": "old\n"},
			patch: "*** Begin Patch\n*** Add File: dup.txt\n+new\n*** End Patch",
			want:  map[string]string{"dup.txt": "new\n"},
		},
		{
			name:  "move overwrites an existing destination",
			files: map[string]string{"old/name.txt": "from\n", "renamed/dir/name.txt": "existing\n"},
			patch: "*** Begin Patch\n*** Update File: old/name.txt\n*** Move to: renamed/dir/name.txt\n@@\n-from\n+new\n*** End Patch",
			want:  map[string]string{"old/": "", "renamed/": "", "renamed/dir/": "", "renamed/dir/name.txt": "new\n"},
		},
		{
			name:  "move onto itself is an in-place update",
			files: map[string]string{"a.txt": "a\n"},
			patch: "*** Begin Patch\n*** Update File: a.txt\n*** Move to: ./a.txt\n@@\n-a\n+b\n*** End Patch",
			want:  map[string]string{"a.txt": "b\n"},
		},
		{
			name:  "later hunks see earlier ones: move then update the destination",
			files: map[string]string{"a.txt": "l1\n", "b.txt": "b\n"},
			patch: "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-l1\n+L\n*** Update File: b.txt\n@@\n-L\n+B\n*** End Patch",
			want:  map[string]string{"b.txt": "B\n"},
		},
		{
			name:  "paths with .. that stay inside, absolute paths",
			files: map[string]string{"sub/x.txt": "x\n"},
			patch: "*** Begin Patch\n*** Add File: sub/../up.txt\n+u\n*** Update File: ./sub/x.txt\n@@\n-x\n+y\n*** End Patch",
			want:  map[string]string{"up.txt": "u\n", "sub/": "", "sub/x.txt": "y\n"},
		},
		{
			name:  "heredoc-wrapped patch",
			files: map[string]string{},
			patch: "<<'EOF'\n*** Begin Patch\n*** Add File: h.txt\n+h\n*** End Patch\nEOF\n",
			want:  map[string]string{"h.txt": "h\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tt.files)
			res, err := applyIn(t, dir, tt.patch)
			require.NoError(t, err)
			assert.Equal(t, tt.want, readTree(t, dir))
			if tt.summary != "" {
				assert.Equal(t, tt.summary, res.Summary())
			}
		})
	}
}

func TestAbsolutePathInsideRoot(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(dir, "abs.txt")
	res, err := applyIn(t, dir, "*** Begin Patch\n*** Add File: "+abs+"\n+a\n*** End Patch")
	require.NoError(t, err)
	assert.Equal(t, "Success. Updated the following files:\nA "+abs+"\n", res.Summary())
	assert.Equal(t, map[string]string{"abs.txt": "a\n"}, readTree(t, dir))
}

func TestVerificationFailuresWriteNothing(t *testing.T) {
	files := map[string]string{"a.txt": "hello\nworld\n", "b.txt": "l1\nl2\n", "dir/f.txt": "f\n", "bin.txt": "\xff\xfe\n"}
	tests := []struct {
		name  string
		patch string
		want  string // the model text; %s is the workspace
		kind  ErrorKind
	}{
		{"lines not found after an add", "*** Begin Patch\n*** Add File: c.txt\n+c\n*** Update File: a.txt\n@@\n-nothere\n+X\n*** End Patch",
			"apply_patch verification failed: Failed to find expected lines in %s/a.txt:\nnothere", ErrVerify},
		{"second chunk fails", "*** Begin Patch\n*** Update File: b.txt\n@@\n-l1\n+L1\n@@\n-zz\n+Q\n*** End Patch",
			"apply_patch verification failed: Failed to find expected lines in %s/b.txt:\nzz", ErrVerify},
		{"later hunk on a moved file fails", "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-hello\n+H\n*** Update File: b.txt\n@@\n-l1\n+B\n*** End Patch",
			"apply_patch verification failed: Failed to find expected lines in %s/b.txt:\nl1", ErrVerify},
		{"context not found", "*** Begin Patch\n*** Update File: a.txt\n@@ nothere\n-hello\n+y\n*** End Patch",
			"apply_patch verification failed: Failed to find context 'nothere' in %s/a.txt", ErrVerify},
		{"end of file lines only mid-file", "*** Begin Patch\n*** Update File: a.txt\n@@\n-hello\n+H\n*** End of File\n*** End Patch",
			"apply_patch verification failed: Failed to find expected lines in %s/a.txt:\nhello", ErrVerify},
		{"delete missing file", "*** Begin Patch\n*** Add File: c.txt\n+c\n*** Delete File: nope.txt\n*** End Patch",
			"apply_patch verification failed: Failed to read %s/nope.txt: No such file or directory (os error 2)", ErrVerify},
		{"update missing file", "*** Begin Patch\n*** Update File: nope.txt\n@@\n-a\n+b\n*** End Patch",
			"apply_patch verification failed: Failed to read file to update %s/nope.txt: No such file or directory (os error 2)", ErrVerify},
		{"delete a directory", "*** Begin Patch\n*** Delete File: dir\n*** End Patch",
			"apply_patch verification failed: Failed to read %s/dir: path `%s/dir` is not a file", ErrVerify},
		{"update a directory", "*** Begin Patch\n*** Update File: dir\n@@\n-a\n+b\n*** End Patch",
			"apply_patch verification failed: Failed to read file to update %s/dir: path `%s/dir` is not a file", ErrVerify},
		{"add over a directory", "*** Begin Patch\n*** Add File: c.txt\n+c\n*** Add File: dir\n+x\n*** End Patch",
			"apply_patch verification failed: Failed to write file %s/dir: Is a directory (os error 21)", ErrVerify},
		{"add below a file", "*** Begin Patch\n*** Add File: a.txt/sub.txt\n+x\n*** End Patch",
			"apply_patch verification failed: Failed to create parent directories for %s/a.txt/sub.txt: %s/a.txt is not a directory", ErrVerify},
		{"add below a file added earlier", "*** Begin Patch\n*** Add File: n\n+x\n*** Add File: n/m\n+y\n*** End Patch",
			"apply_patch verification failed: Failed to create parent directories for %s/n/m: %s/n is not a directory", ErrVerify},
		{"update a non-UTF-8 file", "*** Begin Patch\n*** Update File: bin.txt\n@@\n-a\n+b\n*** End Patch",
			"apply_patch verification failed: Failed to read file to update %s/bin.txt: invalid utf-8 sequence of 1 bytes from index 0", ErrVerify},
		{"two hunks on one file", "*** Begin Patch\n*** Update File: b.txt\n@@\n-l1\n+A\n*** Update File: ./b.txt\n@@\n-l2\n+C\n*** End Patch",
			"apply_patch verification failed: invalid patch: multiple operations target %s/b.txt", ErrVerify},
		{"add and delete one file", "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Delete File: a.txt\n*** End Patch",
			"apply_patch verification failed: invalid patch: multiple operations target %s/a.txt", ErrVerify},
		{"parse error", "*** Begin Patch\n*** Frob File: a.txt\n*** End Patch",
			"apply_patch verification failed: invalid hunk at line 2, '*** Frob File: a.txt' is not a valid hunk header. " + headerHelp, ErrParse},
		{"not a patch", "garbage",
			"apply_patch verification failed: invalid patch: The first line of the patch must be '*** Begin Patch'", ErrParse},
		{"empty patch", "*** Begin Patch\n*** End Patch", "patch rejected: empty patch", ErrEmpty},
		{"environment", "*** Begin Patch\n*** Environment ID: x\n*** Add File: c\n+c\n*** End Patch",
			"apply_patch environment selection is unavailable for this turn", ErrEnvironment},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, files)
			before := readTree(t, dir)
			_, err := NewPlan(dir, Scope{}, tt.patch)
			require.Error(t, err)
			assert.Equal(t, strings.ReplaceAll(tt.want, "%s", dir), err.Error())
			assert.Equal(t, tt.kind, KindOf(err))
			assert.Equal(t, before, readTree(t, dir), "nothing may be written")
		})
	}
}

func TestConfinement(t *testing.T) {
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret.txt": "secret\n"})
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		patch string
	}{
		{"dot-dot escape", nil, "*** Begin Patch\n*** Add File: ../escape.txt\n+x\n*** End Patch"},
		{"absolute path outside", nil, "*** Begin Patch\n*** Delete File: " + filepath.Join(outside, "secret.txt") + "\n*** End Patch"},
		{"move destination outside", func(t *testing.T, dir string) { writeTree(t, dir, map[string]string{"in.txt": "a\n"}) },
			"*** Begin Patch\n*** Update File: in.txt\n*** Move to: ../../escape.txt\n@@\n-a\n+b\n*** End Patch"},
		{"symlinked directory", func(t *testing.T, dir string) { require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link"))) },
			"*** Begin Patch\n*** Add File: link/new.txt\n+x\n*** End Patch"},
		{"symlinked file", func(t *testing.T, dir string) {
			require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "s.txt")))
		}, "*** Begin Patch\n*** Update File: s.txt\n@@\n-secret\n+pwned\n*** End Patch"},
		{"dangling symlink to a new file outside", func(t *testing.T, dir string) {
			require.NoError(t, os.Symlink(filepath.Join(outside, "created.txt"), filepath.Join(dir, "d.txt")))
		}, "*** Begin Patch\n*** Add File: d.txt\n+x\n*** End Patch"},
		{"relative symlink chain", func(t *testing.T, dir string) {
			require.NoError(t, os.Mkdir(filepath.Join(dir, "a"), 0o755))
			rel, err := filepath.Rel(filepath.Join(dir, "a"), outside)
			require.NoError(t, err)
			require.NoError(t, os.Symlink(rel, filepath.Join(dir, "a", "b")))
			require.NoError(t, os.Symlink("a/b", filepath.Join(dir, "c")))
		}, "*** Begin Patch\n*** Add File: c/x.txt\n+x\n*** End Patch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			before, beforeOut := readTree(t, dir), readTree(t, outside)
			_, err := NewPlan(dir, Scope{}, tt.patch)
			require.Error(t, err)
			assert.Equal(t, ErrOutsideRoots, KindOf(err), err.Error())
			assert.Contains(t, err.Error(), "outside the workspace roots")
			assert.Equal(t, before, readTree(t, dir))
			assert.Equal(t, beforeOut, readTree(t, outside))
		})
	}
}

func TestSymlinksInsideRootsAreFollowed(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"real/f.txt": "a\n", "gone.txt": "g\n"})
	require.NoError(t, os.Symlink("real", filepath.Join(dir, "alias")))
	require.NoError(t, os.Symlink("gone.txt", filepath.Join(dir, "link.txt")))
	_, err := applyIn(t, dir, "*** Begin Patch\n*** Update File: alias/f.txt\n@@\n-a\n+b\n*** Delete File: link.txt\n*** End Patch")
	require.NoError(t, err)
	// The update wrote through the directory link; the delete removed the
	// link itself, not its target.
	assert.Equal(t, map[string]string{"real/": "", "real/f.txt": "b\n", "alias": "-> real", "gone.txt": "g\n"}, readTree(t, dir))
}

func TestExtraRoots(t *testing.T) {
	cwd, other := t.TempDir(), t.TempDir()
	patch := "*** Begin Patch\n*** Add File: " + filepath.Join(other, "o.txt") + "\n+o\n*** End Patch"
	_, err := NewPlan(cwd, Scope{}, patch)
	require.Equal(t, ErrOutsideRoots, KindOf(err))
	p, err := NewPlan(cwd, Scope{Access: fsguard.Dirs(cwd, other)}, patch)
	require.NoError(t, err)
	assert.Equal(t, []string{cwd, other}, p.Roots())
	_, err = p.Apply()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"o.txt": "o\n"}, readTree(t, other))
}

func TestApplyDetectsChangesSincePlan(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	p, err := NewPlan(dir, Scope{}, "*** Begin Patch\n*** Add File: n.txt\n+n\n*** Update File: a.txt\n@@\n-a\n+b\n*** End Patch")
	require.NoError(t, err)
	writeTree(t, dir, map[string]string{"a.txt": "a\nmore\n"})
	_, err = p.Apply()
	require.Error(t, err)
	assert.Equal(t, ErrStale, KindOf(err))
	assert.Equal(t, map[string]string{"a.txt": "a\nmore\n"}, readTree(t, dir))

	_, err = p.Apply()
	require.Error(t, err, "a plan applies once")
}

func TestApplyDetectsSymlinkSwapSincePlan(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeTree(t, dir, map[string]string{"sub/f.txt": "a\n"})
	writeTree(t, outside, map[string]string{"f.txt": "a\n"})
	p, err := NewPlan(dir, Scope{}, "*** Begin Patch\n*** Update File: sub/f.txt\n@@\n-a\n+b\n*** End Patch")
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "sub")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "sub")))
	_, err = p.Apply()
	require.Error(t, err)
	assert.Equal(t, ErrOutsideRoots, KindOf(err))
	assert.Equal(t, map[string]string{"f.txt": "a\n"}, readTree(t, outside))
}

func TestApplyRollsBackOnWriteFailure(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n", "ro/b.txt": "b\n"})
	p, err := NewPlan(dir, Scope{}, "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+A\n*** Add File: new/n.txt\n+n\n*** Delete File: ro/b.txt\n*** End Patch")
	require.NoError(t, err)
	p.inject = func(path string) error {
		if filepath.Base(path) == "b.txt" {
			return syscall.EACCES
		}
		return nil
	}
	_, err = p.Apply()
	require.Error(t, err)
	assert.Equal(t, ErrIO, KindOf(err))
	assert.Contains(t, err.Error(), "Failed to delete file "+filepath.Join(dir, "ro/b.txt")+": Permission denied (os error 13)")
	assert.Contains(t, err.Error(), "undone")
	assert.Equal(t, map[string]string{"a.txt": "a\n", "ro/": "", "ro/b.txt": "b\n"}, readTree(t, dir))
}

func TestRollbackRestoresEverything(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n", "m.txt": "m\n", "d.txt": "d\n"})
	require.NoError(t, os.Chmod(filepath.Join(dir, "a.txt"), 0o600))
	require.NoError(t, os.Symlink("d.txt", filepath.Join(dir, "l.txt")))
	before := readTree(t, dir)
	p, err := NewPlan(dir, Scope{}, "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+A\n*** Add File: x/y/n.txt\n+n\n"+
		"*** Update File: m.txt\n*** Move to: z/m.txt\n@@\n-m\n+M\n*** Delete File: l.txt\n*** End Patch")
	require.NoError(t, err)
	tree, err := p.guard.Tree(p.access)
	require.NoError(t, err)
	defer tree.Close()
	w := newWriter(tree, nil)
	for _, op := range p.ops {
		require.NoError(t, w.run(op))
	}
	require.NotEqual(t, before, readTree(t, dir))
	err = w.fail(os.ErrPermission)
	assert.Equal(t, ErrIO, KindOf(err))
	assert.Equal(t, before, readTree(t, dir))
	fi, err := os.Stat(filepath.Join(dir, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
}

func TestFileChanges(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"a.txt": "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n", "d.txt": "gone\n", "m.txt": "m1\nm2\n", "nonl.txt": "a\nb",
	})
	p, err := NewPlan(dir, Scope{}, "*** Begin Patch\n*** Add File: new.txt\n+n1\n+n2\n*** Update File: a.txt\n@@\n-l2\n+L2\n@@\n l8\n-l9\n+L9\n+L9b\n"+
		"*** Delete File: d.txt\n*** Update File: m.txt\n*** Move to: sub/m2.txt\n@@\n-m2\n+M2\n*** Update File: nonl.txt\n@@\n-b\n+B\n*** End Patch")
	require.NoError(t, err)
	moved := filepath.Join(dir, "sub/m2.txt")
	// Observed from codex-cli 0.169 app-server for the same patch.
	want := []FileChange{
		{Path: filepath.Join(dir, "a.txt"), Kind: ChangeKind{Type: ChangeUpdate}, Diff: "@@ -1,3 +1,3 @@\n l1\n-l2\n+L2\n l3\n@@ -8,3 +8,4 @@\n l8\n-l9\n+L9\n+L9b\n l10\n"},
		{Path: filepath.Join(dir, "d.txt"), Kind: ChangeKind{Type: ChangeDelete}, Diff: "gone\n"},
		{Path: filepath.Join(dir, "m.txt"), Kind: ChangeKind{Type: ChangeUpdate, MovePath: &moved}, Diff: "@@ -1,2 +1,2 @@\n m1\n-m2\n+M2\n\n\nMoved to: " + moved},
		{Path: filepath.Join(dir, "new.txt"), Kind: ChangeKind{Type: ChangeAdd}, Diff: "n1\nn2\n"},
		{Path: filepath.Join(dir, "nonl.txt"), Kind: ChangeKind{Type: ChangeUpdate}, Diff: "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+B\n"},
	}
	assert.Equal(t, want, p.Changes())
	assert.Equal(t, []string{filepath.Join(dir, "new.txt"), filepath.Join(dir, "a.txt"), filepath.Join(dir, "d.txt"),
		filepath.Join(dir, "m.txt"), moved, filepath.Join(dir, "nonl.txt")}, p.Paths())

	// Nothing is written by planning.
	_, err = os.Stat(filepath.Join(dir, "new.txt"))
	require.ErrorIs(t, err, fs.ErrNotExist)

	res, err := p.Apply()
	require.NoError(t, err)
	assert.Equal(t, want, res.Changes)
	assert.Equal(t, []string{"new.txt"}, res.Added)
	assert.Equal(t, []string{"a.txt", "sub/m2.txt", "nonl.txt"}, res.Modified)
	assert.Equal(t, []string{"d.txt"}, res.Deleted)
}

func TestFileChangeJSON(t *testing.T) {
	dest := "/w/b"
	b, err := json.Marshal([]FileChange{
		{Path: "/w/a", Kind: ChangeKind{Type: ChangeUpdate}, Diff: "d"},
		{Path: "/w/c", Kind: ChangeKind{Type: ChangeUpdate, MovePath: &dest}, Diff: "d"},
		{Path: "/w/n", Kind: ChangeKind{Type: ChangeAdd}, Diff: "x\n"},
		{Path: "/w/o", Kind: ChangeKind{Type: ChangeDelete}, Diff: ""},
	})
	require.NoError(t, err)
	assert.JSONEq(t, `[
		{"path":"/w/a","kind":{"type":"update","move_path":null},"diff":"d"},
		{"path":"/w/c","kind":{"type":"update","move_path":"/w/b"},"diff":"d"},
		{"path":"/w/n","kind":{"type":"add"},"diff":"x\n"},
		{"path":"/w/o","kind":{"type":"delete"},"diff":""}]`, string(b))
}

func TestNewPlanNeedsAbsoluteCwd(t *testing.T) {
	_, err := NewPlan("rel", Scope{}, "*** Begin Patch\n*** Add File: a\n+a\n*** End Patch")
	require.Error(t, err)
	assert.Equal(t, ErrVerify, KindOf(err))
}
