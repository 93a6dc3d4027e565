package applypatch

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnifiedDiff(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		context  int
		want     string
	}{
		{"replace one line", "a\nb\nc\n", "a\nB\nc\n", 1, "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"},
		{"identical", "a\n", "a\n", 3, ""},
		{"new file", "", "n1\nn2\n", 3, "@@ -0,0 +1,2 @@\n+n1\n+n2\n"},
		{"deleted file", "gone\n", "", 3, "@@ -1 +0,0 @@\n-gone\n"},
		{"missing newline hint", "a\nb", "a\nB\n", 1, "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+B\n"},
		{"hunks split beyond twice the context", "1\n2\n3\n4\n5\n6\n7\n8\n", "x\n2\n3\n4\n5\n6\n7\ny\n", 1,
			"@@ -1,2 +1,2 @@\n-1\n+x\n 2\n@@ -7,2 +7,2 @@\n 7\n-8\n+y\n"},
		{"hunks merge within twice the context", "1\n2\n3\n4\n", "x\n2\n3\ny\n", 1,
			"@@ -1,4 +1,4 @@\n-1\n+x\n 2\n 3\n-4\n+y\n"},
		{"insertion of a repeated line slides down", "a\nx\nb\n", "a\nx\nx\nb\n", 3, "@@ -1,3 +1,4 @@\n a\n x\n+x\n b\n"},
		{"CRLF lines", "x\r\ny\r\nz\r\n", "x\r\nY\r\nY2\r\nz\r\n", 1, "@@ -1,3 +1,4 @@\n x\r\n-y\r\n+Y\r\n+Y2\r\n z\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, unifiedDiff(tt.old, tt.new, tt.context, "", ""))
		})
	}
}

// TestDiffIsAValidScript checks on many inputs that the edit script turns
// old into new.
func TestDiffIsAValidScript(t *testing.T) {
	words := []string{"a\n", "b\n", "c\n", "a\n", "\n"}
	gen := func(seed, n int) []string {
		out := make([]string, 0, n)
		for i := range n {
			out = append(out, words[(seed*7+i*i*3+i)%len(words)])
		}
		return out
	}
	for s := range 60 {
		oldL, newL := gen(s, s%9), gen(s+3, (s*5)%11)
		ops := diffLines(oldL, newL)
		var rebuilt []string
		oi := 0
		for _, o := range ops {
			switch o.tag {
			case opEqual:
				require.Equal(t, oldL[o.oldIndex:o.oldEnd()], newL[o.newIndex:o.newEnd()])
				rebuilt = append(rebuilt, newL[o.newIndex:o.newEnd()]...)
				oi = o.oldEnd()
			case opDelete:
				require.Equal(t, oi, o.oldIndex)
				oi = o.oldEnd()
			case opInsert:
				rebuilt = append(rebuilt, newL[o.newIndex:o.newEnd()]...)
			}
		}
		require.Equal(t, len(oldL), oi, "all old lines consumed")
		require.Equal(t, strings.Join(newL, ""), strings.Join(rebuilt, ""), "seed %d", s)
	}
}

func TestGitBlobOID(t *testing.T) {
	// `git hash-object` values, as in the reference's turn diffs.
	assert.Equal(t, "286c5f5776916d7d7d5849988ca9d83e722cf9c2", gitBlobOID("gone\n"))
	assert.Equal(t, "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391", gitBlobOID(""))
}

// TestTrackerMatchesReference replays the patch of an observed codex-cli
// 0.169 app-server turn and compares turn/diff/updated byte for byte.
func TestTrackerMatchesReference(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"a.txt": "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n", "d.txt": "gone\n", "m.txt": "m1\nm2\n",
	})
	p, err := NewPlan(dir, Scope{}, "*** Begin Patch\n*** Add File: new.txt\n+n1\n+n2\n*** Update File: a.txt\n@@\n-l2\n+L2\n@@\n l8\n-l9\n+L9\n+L9b\n"+
		"*** Delete File: d.txt\n*** Update File: m.txt\n*** Move to: sub/m2.txt\n@@\n-m2\n+M2\n*** End Patch")
	require.NoError(t, err)
	want := `diff --git a/a.txt b/a.txt
index 01f84f8898b03622081248c75d0e5d749371595b..e27c7518528303cdb6024a1295feb5da74201138
--- a/a.txt
+++ b/a.txt
@@ -1,10 +1,11 @@
 l1
-l2
+L2
 l3
 l4
 l5
 l6
 l7
 l8
-l9
+L9
+L9b
 l10
diff --git a/d.txt b/d.txt
deleted file mode 100644
index 286c5f5776916d7d7d5849988ca9d83e722cf9c2..0000000000000000000000000000000000000000
--- a/d.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
diff --git a/m.txt b/sub/m2.txt
index b5692e52ea4c05b80534a2959c7f5f31659a65b0..d85aeed96a7b65bd25cc8be5ff67e569d57d7414
--- a/m.txt
+++ b/sub/m2.txt
@@ -1,2 +1,2 @@
 m1
-m2
+M2
diff --git a/new.txt b/new.txt
new file mode 100644
index 0000000000000000000000000000000000000000..2fe4df4058e9498fd54d7881330292ca2a755ee5
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+n1
+n2
`
	assert.Equal(t, want, p.UnifiedDiff())

	tr := NewDiffTracker(dir)
	_, err = p.Apply()
	require.NoError(t, err)
	tr.Track(p)
	assert.Equal(t, want, tr.Diff())
}

func TestTrackerAccumulatesATurn(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	tr := NewDiffTracker(dir)
	step := func(patch string) {
		t.Helper()
		p, err := NewPlan(dir, Scope{}, patch)
		require.NoError(t, err)
		_, err = p.Apply()
		require.NoError(t, err)
		tr.Track(p)
	}
	assert.Equal(t, "", tr.Diff())
	step("*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+A\n*** Add File: t.txt\n+t\n*** End Patch")
	step("*** Begin Patch\n*** Update File: a.txt\n@@\n-A\n+a\n*** Delete File: t.txt\n*** Update File: b.txt\n*** Move to: c.txt\n@@\n-b\n+B\n*** End Patch")
	// a.txt is back to its baseline and t.txt came and went: only the move
	// remains.
	assert.Equal(t, "diff --git a/b.txt b/c.txt\nindex "+gitBlobOID("b\n")+".."+gitBlobOID("B\n")+
		"\n--- a/b.txt\n+++ b/c.txt\n@@ -1 +1 @@\n-b\n+B\n", tr.Diff())
	step("*** Begin Patch\n*** Update File: c.txt\n*** Move to: b.txt\n@@\n-B\n+b\n*** End Patch")
	assert.Equal(t, "", tr.Diff())
}

func TestTrackerShowsOutsidePathsAbsolute(t *testing.T) {
	root := t.TempDir()
	tr := NewDiffTracker(filepath.Join(root, "sub"))
	p, err := NewPlan(root, Scope{}, "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch")
	require.NoError(t, err)
	_, err = p.Apply()
	require.NoError(t, err)
	tr.Track(p)
	abs := filepath.ToSlash(filepath.Join(root, "x.txt"))
	assert.Contains(t, tr.Diff(), "diff --git a/"+abs+" b/"+abs+"\n")
}
