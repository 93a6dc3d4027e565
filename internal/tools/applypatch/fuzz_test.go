package applypatch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var fuzzSeeds = []string{
	"*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch",
	"*** Begin Patch\n*** Delete File: keep.txt\n*** End Patch",
	"*** Begin Patch\n*** Update File: keep.txt\n*** Move to: sub/moved.txt\n@@ ctx\n keep\n-line\n+LINE\n*** End of File\n*** End Patch",
	"<<'EOF'\n*** Begin Patch\n*** Update File: keep.txt\n line\n+x\n*** End Patch\nEOF\n",
	"*** Begin Patch\n*** Environment ID: e\n*** Add File: x\n+x\n*** End Patch",
	"*** Begin Patch\n*** Add File: ../outside/pwn.txt\n+x\n*** End Patch",
	"*** Begin Patch\n*** Add File: link/pwn.txt\n+x\n*** End Patch",
	"*** Begin Patch\n*** Update File: link/secret.txt\n@@\n-secret\n+pwned\n*** End Patch",
	"*** Begin Patch\n*** Update File: keep.txt\n*** Move to: ../../x\n@@\n-line\n*** End Patch",
	"*** Begin Patch\n*** Update File: crlf.txt\n@@\n-b\n+B\n\n*** End Patch",
	"*** Begin Patch\n*** Update File: keep.txt\n@@\n+\n@@\n \n*** End of File\n*** End Patch",
	"*** Begin Patch\n*** Add File: dir/\n+x\n*** Delete File: /etc/passwd\n*** End Patch",
}

// FuzzParse checks that the parser never panics and that, where the text
// can be rendered back (no carriage return ends a line), parsing the
// rendered patch gives the same patch.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		p, err := Parse(text)
		if err != nil {
			var pe *ParseError
			require.ErrorAs(t, err, &pe)
			require.NotEmpty(t, pe.Message)
			return
		}
		if !renderable(p) {
			return
		}
		again, err := Parse(p.String())
		require.NoError(t, err, "rendered:\n%s", p.String())
		assert.Equal(t, p.Hunks, again.Hunks)
		assert.Equal(t, p.EnvironmentID, again.EnvironmentID)
		assert.Equal(t, p.String(), again.String())
	})
}

func renderable(p *Patch) bool {
	for _, h := range p.Hunks {
		for _, l := range splitContents(h.Contents) {
			if strings.HasSuffix(l, "\r") {
				return false
			}
		}
		for _, c := range h.Chunks {
			for _, l := range c.Lines {
				if strings.HasSuffix(l.Text, "\r") {
					return false
				}
			}
		}
	}
	return true
}

// FuzzApply plans and applies arbitrary patches in a small workspace next
// to an "outside" directory (also reachable through a symlink inside the
// workspace) and checks that nothing outside the workspace changes, and
// that a patch that fails verification changes nothing at all.
func FuzzApply(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		base := t.TempDir()
		root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
		writeTree(t, root, map[string]string{"keep.txt": "keep\nline\n", "crlf.txt": "a\r\nb\r\n", "dir/f": "f\n"})
		writeTree(t, outside, map[string]string{"secret.txt": "secret\n"})
		require.NoError(t, os.Symlink(outside, filepath.Join(root, "link")))
		baseBefore, rootBefore := readTree(t, base), readTree(t, root)

		p, err := NewPlan(root, Scope{}, text)
		if err != nil {
			require.NotZero(t, KindOf(err), "%v", err)
			assert.Equal(t, baseBefore, readTree(t, base), "a rejected patch must not write")
			return
		}
		for _, path := range p.Paths() {
			require.True(t, within(root, path), "planned path %s outside the root", path)
		}
		_, err = p.Apply()
		if err != nil {
			assert.Equal(t, rootBefore, readTree(t, root), "a failed apply must roll back")
		}
		after := readTree(t, base)
		for path, content := range baseBefore {
			if !strings.HasPrefix(path, "root"+string(filepath.Separator)) && path != "root/" {
				assert.Equal(t, content, after[path], "outside path %s changed", path)
			}
		}
		for path := range after {
			if !strings.HasPrefix(path, "root"+string(filepath.Separator)) && path != "root/" {
				_, existed := baseBefore[path]
				assert.True(t, existed, "new path %s outside the root", path)
			}
		}
	})
}
