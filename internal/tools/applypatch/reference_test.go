package applypatch

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAgainstReference runs generated patches through this package and
// through the real Codex applier, and compares the resulting files. It
// runs only when APPLYPATCH_REFERENCE names the reference binary: the
// codex executable of @openai/codex (0.169.0) invoked through a symlink
// named apply_patch, e.g.
//
//	ln -s .../vendor/x86_64-unknown-linux-musl/bin/codex /tmp/apply_patch
//	APPLYPATCH_REFERENCE=/tmp/apply_patch go test -run TestAgainstReference ./internal/tools/applypatch/
//
// APPLYPATCH_REFERENCE_CASES sets the number of generated cases (400).
//
// Where the reference fails part-way (it does not verify later hunks
// against earlier ones), this package must fail up front and leave the
// files untouched.
func TestAgainstReference(t *testing.T) {
	ref := os.Getenv("APPLYPATCH_REFERENCE")
	if ref == "" {
		t.Skip("APPLYPATCH_REFERENCE is not set")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 400
	if v, err := strconv.Atoi(os.Getenv("APPLYPATCH_REFERENCE_CASES")); err == nil {
		n = v
	}
	for i := range n {
		files, patch := genCase(rng)
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			refDir, ourDir := t.TempDir(), t.TempDir()
			writeTree(t, refDir, files)
			writeTree(t, ourDir, files)
			cmd := exec.Command(ref, patch)
			cmd.Dir = refDir
			out, refErr := cmd.CombinedOutput()
			_, ourErr := applyIn(t, ourDir, patch)
			refTree, ourTree := readTree(t, refDir), readTree(t, ourDir)
			ctx := fmt.Sprintf("patch:\n%s\nfiles: %q\nreference output: %s\nour error: %v", patch, files, out, ourErr)
			switch {
			case refErr == nil:
				require.NoError(t, ourErr, ctx)
				assert.Equal(t, refTree, ourTree, ctx)
			case ourErr == nil:
				t.Fatalf("reference failed, we succeeded\n%s", ctx)
			default:
				assert.Equal(t, readTreeOf(t, files), ourTree, "a failed patch writes nothing\n"+ctx)
			}
		})
	}
}

func readTreeOf(t *testing.T, files map[string]string) map[string]string {
	dir := t.TempDir()
	writeTree(t, dir, files)
	return readTree(t, dir)
}

// Lines chosen to exercise the matching passes: repeats, whitespace
// variants, typographic punctuation, blank lines.
var genLines = []string{
	"alpha", "beta", "gamma", "alpha", "", "  alpha", "alpha  ", "\talpha\t",
	"it\u2019s \u201cquoted\u201d", "it's \"quoted\"", "a \u2014 b", "a - b", "x\u00a0y", "x y",
	"func f() {", "}", "return 1", "    return 1",
}

func genContent(rng *rand.Rand) string {
	n := rng.IntN(8)
	var b strings.Builder
	crlf := rng.IntN(6) == 0
	for i := range n {
		b.WriteString(genLines[rng.IntN(len(genLines))])
		if i < n-1 || rng.IntN(5) != 0 {
			if crlf || rng.IntN(20) == 0 {
				b.WriteString("\r\n")
			} else {
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}

func genCase(rng *rand.Rand) (map[string]string, string) {
	names := []string{"a.txt", "b.txt", "dir/c.txt"}
	files := map[string]string{}
	for _, n := range names {
		if rng.IntN(4) != 0 {
			files[n] = genContent(rng)
		}
	}
	var b strings.Builder
	b.WriteString("*** Begin Patch\n")
	used := map[string]bool{}
	for range 1 + rng.IntN(3) {
		name := names[rng.IntN(len(names))]
		if used[name] {
			continue
		}
		used[name] = true
		switch k := rng.IntN(6); {
		case k == 0:
			b.WriteString("*** Add File: " + name + "\n")
			for range rng.IntN(4) {
				b.WriteString("+" + genLines[rng.IntN(len(genLines))] + "\n")
			}
		case k == 1:
			b.WriteString("*** Delete File: " + name + "\n")
		default:
			b.WriteString("*** Update File: " + name + "\n")
			if rng.IntN(6) == 0 {
				b.WriteString("*** Move to: moved/" + name + "\n")
			}
			genChunks(rng, &b, files[name])
		}
	}
	b.WriteString("*** End Patch")
	return files, b.String()
}

// genChunks writes chunks that mostly match the file (taken from it, with
// perturbations) and sometimes do not.
func genChunks(rng *rand.Rand, b *strings.Builder, content string) {
	lines := parseSource(content).texts()
	pick := func() string {
		if len(lines) == 0 || rng.IntN(5) == 0 {
			return genLines[rng.IntN(len(genLines))]
		}
		return lines[rng.IntN(len(lines))]
	}
	for c := range 1 + rng.IntN(2) {
		switch {
		case c == 0 && rng.IntN(3) == 0:
		case rng.IntN(4) == 0:
			b.WriteString("@@ " + strings.TrimSpace(pick()) + "\n")
		default:
			b.WriteString("@@\n")
		}
		start := 0
		if len(lines) > 0 {
			start = rng.IntN(len(lines))
		}
		n := rng.IntN(4)
		wrote := false
		for i := 0; i < n && start+i < len(lines); i++ {
			l := lines[start+i]
			switch rng.IntN(4) {
			case 0:
				b.WriteString("-" + l + "\n")
			case 1:
				b.WriteString(" " + strings.TrimSpace(l) + "\n")
			default:
				b.WriteString(" " + l + "\n")
			}
			wrote = true
		}
		if !wrote || rng.IntN(2) == 0 {
			b.WriteString("+" + pick() + "\n")
		}
		if rng.IntN(5) == 0 {
			b.WriteString("*** End of File\n")
		}
	}
}
