package applypatch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/fsguard"
)

// forEachResolver runs f with a guard resolving with openat2 (where the
// kernel has it) and with one using the component walk that stands in
// for it on older kernels.
func forEachResolver(t *testing.T, f func(t *testing.T, scope Scope)) {
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			g, err := fsguard.New(fsguard.Config{WalkOnly: walk})
			require.NoError(t, err)
			f(t, Scope{Guard: g})
		})
	}
}

// TestApplyNeverFollowsUncheckedSymlinks changes the workspace after Apply
// has checked it, just before each write or removal, the way a racing
// process would: a parent directory or the file itself becomes a symlink
// to a directory outside the workspace. Whatever the operation and however
// the path is spelled, nothing outside may change; the patch fails with a
// model-readable error and is rolled back, except where the operation
// never follows the final symlink (deleting it removes the link itself).
func TestApplyNeverFollowsUncheckedSymlinks(t *testing.T) {
	forms := []struct {
		name   string
		prefix func(root string) string
	}{
		{"relative", func(string) string { return "" }},
		{"dot-dot", func(string) string { return "e/../" }},
		{"absolute", func(root string) string { return root + "/" }},
	}
	tests := []struct {
		name  string
		patch string // %s is the path prefix
		when  string // base name of the write or removal the change comes before
		swap  string // made a symlink to the outside: a directory, or a file (to outside/<its name>)
		dir   bool
		fails bool
	}{
		{"add, parent", "*** Add File: %sd/n\n+new\n", "n", "d", true, true},
		{"add, final component", "*** Add File: %sd/n\n+new\n", "n", "d/n", false, true},
		{"update, parent", "*** Update File: %sd/f\n@@\n-a\n+b\n", "f", "d", true, true},
		{"update, final component", "*** Update File: %sd/f\n@@\n-a\n+b\n", "f", "d/f", false, true},
		{"delete, parent", "*** Delete File: %sd/f\n", "f", "d", true, true},
		{"delete, final component", "*** Delete File: %sd/f\n", "f", "d/f", false, false},
		{"move destination, parent", "*** Update File: %ss/f\n*** Move to: %sd/n\n@@\n-a\n+b\n", "n", "d", true, true},
		{"move destination, final component", "*** Update File: %ss/f\n*** Move to: %sd/n\n@@\n-a\n+b\n", "n", "d/n", false, true},
		{"move source, parent", "*** Update File: %sd/f\n*** Move to: %st/n\n@@\n-a\n+b\n", "f", "d", true, true},
		{"move source, final component", "*** Update File: %sd/f\n*** Move to: %st/n\n@@\n-a\n+b\n", "f", "d/f", false, false},
	}
	forEachResolver(t, func(t *testing.T, scope Scope) {
		for _, form := range forms {
			for _, tt := range tests {
				t.Run(form.name+"/"+tt.name, func(t *testing.T) {
					base := t.TempDir()
					root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
					writeTree(t, root, map[string]string{"d/f": "a\n", "s/f": "a\n", "e/x": "x\n"})
					// The outside holds what the patch expects, so a
					// redirected update would go through.
					writeTree(t, outside, map[string]string{"f": "a\n"})
					outsideBefore := readTree(t, outside)
					prefix := form.prefix(root)
					patch := "*** Begin Patch\n" + fmtPrefix(tt.patch, prefix) + "*** End Patch"
					p, err := NewPlan(root, scope, patch)
					require.NoError(t, err)
					// What the root holds once rolled back: as before, with
					// the change made.
					want := readTree(t, root)
					if tt.dir {
						for k, v := range want {
							if rest, ok := strings.CutPrefix(k, tt.swap+"/"); ok {
								delete(want, k)
								want[tt.swap+".moved/"+rest] = v
							}
						}
						want[tt.swap+".moved/"] = ""
						want[tt.swap] = "-> " + outside
					} else {
						want[tt.swap] = "-> " + filepath.Join(outside, filepath.Base(tt.swap))
					}
					swapped := false
					p.inject = func(path string) error {
						if swapped || filepath.Base(path) != tt.when {
							return nil
						}
						at := filepath.Join(root, tt.swap)
						if tt.dir {
							require.NoError(t, os.Rename(at, at+".moved"))
							require.NoError(t, os.Symlink(outside, at))
						} else {
							require.NoError(t, os.RemoveAll(at))
							require.NoError(t, os.Symlink(filepath.Join(outside, filepath.Base(at)), at))
						}
						swapped = true
						return nil
					}
					_, err = p.Apply()
					require.True(t, swapped, "the workspace was not changed")
					assert.Equal(t, outsideBefore, readTree(t, outside), "the outside changed")
					if !tt.fails {
						require.NoError(t, err)
						return
					}
					require.Error(t, err)
					assert.Equal(t, ErrIO, KindOf(err))
					assert.Contains(t, err.Error(), "a symlink appeared on the path after it was checked; it is not followed")
					assert.Contains(t, err.Error(), "undone")
					assert.Equal(t, want, readTree(t, root), "not rolled back")
				})
			}
		}
	})
}

// TestUpdateDoesNotWriteThroughHardLinks: a file of the workspace that is
// a hard link to a file outside it gets a new inode when patched; the
// outside file keeps its content, and the patched file its mode.
func TestUpdateDoesNotWriteThroughHardLinks(t *testing.T) {
	forEachResolver(t, func(t *testing.T, scope Scope) {
		base := t.TempDir()
		root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
		writeTree(t, outside, map[string]string{"h": "a\n"})
		require.NoError(t, os.Mkdir(root, 0o755))
		require.NoError(t, os.Chmod(filepath.Join(outside, "h"), 0o751))
		require.NoError(t, os.Link(filepath.Join(outside, "h"), filepath.Join(root, "h")))
		_, err := applyScoped(t, root, scope, "*** Begin Patch\n*** Update File: h\n@@\n-a\n+b\n*** End Patch")
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"h": "a\n"}, readTree(t, outside))
		assert.Equal(t, map[string]string{"h": "b\n"}, readTree(t, root))
		fi, err := os.Stat(filepath.Join(root, "h"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o751), fi.Mode().Perm())
	})
}

// fmtPrefix puts prefix in front of every path of a patch template.
func fmtPrefix(tmpl, prefix string) string {
	return strings.ReplaceAll(tmpl, "%s", prefix)
}
