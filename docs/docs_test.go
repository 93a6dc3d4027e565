package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// documents are the Markdown files whose links are checked, relative to
// the repository's root.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	require.NoError(t, err)
	out := []string{"README.md", "bench/README.md", "deploy/README.md", "internal/dynamic/README.md", "sdk/typescript/README.md"}
	for _, d := range docs {
		out = append(out, filepath.Join("docs", d))
	}
	return out
}

// readRoot reads a file given relative to the repository's root.
func readRoot(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", name))
	require.NoError(t, err)
	return string(b)
}

func TestREADMEIsAFrontPage(t *testing.T) {
	readme := readRoot(t, "README.md")
	n := strings.Count(readme, "\n")
	require.LessOrEqual(t, n, MaxREADMELines,
		"README.md has %d lines; move reference material to docs/ (at most %d)", n, MaxREADMELines)
}

func TestRelativeLinksResolve(t *testing.T) {
	type file struct {
		text   string
		exists bool
	}
	read := map[string]file{}
	open := func(name string) (string, bool) {
		if f, ok := read[name]; ok {
			return f.text, f.exists
		}
		var f file
		if b, err := os.ReadFile(filepath.Join("..", name)); err == nil {
			f = file{string(b), true}
		} else if _, err := os.Stat(filepath.Join("..", name)); err == nil {
			f.exists = true // a directory
		}
		read[name] = f
		return f.text, f.exists
	}
	for _, doc := range documents(t) {
		for _, problem := range brokenLinks(doc, readRoot(t, doc), open) {
			t.Error(problem)
		}
	}
}

// TestBrokenLinksFindsEachKind shows that brokenLinks reports a missing
// file and a missing heading, here and in another document, and leaves
// alone what is fine: external links, links in code, and headings that
// exist.
func TestBrokenLinksFindsEachKind(t *testing.T) {
	files := map[string]string{
		"docs/other.md": "# Other\n\n## 4.2 `thread/start`\n\n## Same\n\n## Same\n",
	}
	open := func(name string) (string, bool) { s, ok := files[name]; return s, ok }
	doc := "# Doc\n\n## Our part\n\n" +
		"[ok](other.md) [ok](other.md#42-threadstart) [ok](other.md#same-1) [ok](#our-part)\n" +
		"[ok](https://example.com/x.md) `[code](missing.md)`\n```\n[code](missing.md)\n```\n" +
		"[bad](missing.md) [bad](other.md#nope) [bad](#nope) [bad](other.md#same-2)\n"
	got := brokenLinks("docs/doc.md", doc, open)
	require.Equal(t, []string{
		"docs/doc.md: link missing.md: docs/missing.md does not exist",
		"docs/doc.md: link other.md#nope: docs/other.md has no heading #nope",
		"docs/doc.md: link #nope: docs/doc.md has no heading #nope",
		"docs/doc.md: link other.md#same-2: docs/other.md has no heading #same-2",
	}, got)
}

var (
	// codeSpan is inline code.
	codeSpan = regexp.MustCompile("`[^`\n]*`")
	// link is an inline link or image: [text](target "title").
	link = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	// heading is an ATX heading line.
	heading = regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t#]*$`)
)

// withoutFences drops the fenced code blocks of a Markdown text, whose
// lines are not Markdown.
func withoutFences(text string) string {
	var b strings.Builder
	in := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line)
		}
	}
	return b.String()
}

// brokenLinks lists the relative links of doc (a path from the root, with
// its text) that name a file open cannot find, or a heading the target
// lacks. open returns a file's text by its path from the root, and false
// when it does not exist.
func brokenLinks(doc, text string, open func(name string) (string, bool)) []string {
	var out []string
	ids := map[string][]string{} // the anchors of each target read so far
	prose := codeSpan.ReplaceAllString(withoutFences(text), "")
	for _, m := range link.FindAllStringSubmatch(prose, -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(target, "#")
		name, body := doc, text
		if file != "" {
			name = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(doc), file)))
			var ok bool
			if body, ok = open(name); !ok {
				out = append(out, fmt.Sprintf("%s: link %s: %s does not exist", doc, target, name))
				continue
			}
		}
		if anchor == "" || !strings.HasSuffix(name, ".md") {
			continue
		}
		if _, ok := ids[name]; !ok {
			ids[name] = anchors(body)
		}
		if !slices.Contains(ids[name], anchor) {
			out = append(out, fmt.Sprintf("%s: link %s: %s has no heading #%s", doc, target, name, anchor))
		}
	}
	return out
}

// anchors returns the ids GitHub gives the headings of a Markdown text:
// lower case, punctuation dropped but for '-' and '_', spaces as '-', and
// "-1", "-2", … after repeats.
func anchors(text string) []string {
	seen := map[string]int{}
	var out []string
	for _, m := range heading.FindAllStringSubmatch(withoutFences(text), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", id, n))
		} else {
			out = append(out, id)
		}
		seen[id]++
	}
	return out
}
