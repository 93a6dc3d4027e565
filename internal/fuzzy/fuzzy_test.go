package fuzzy

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The reference's scores for paths, from fuzzyFileSearch answers of the
// real binary (the low 16 bits of its score; the bits above are its file
// name tiers, which package clientfs adds): query, path, score, indices.
var referencePaths = []struct {
	query, path string
	score       uint32
	indices     []uint32
}{
	{"main", "main.go", 109, []uint32{0, 1, 2, 3}},
	{"main", "src/components/MainButton.tsx", 109, []uint32{15, 16, 17, 18}},
	{"main", "src/main_test.go", 109, []uint32{4, 5, 6, 7}},
	{"btn", "src/components/Button.tsx", 59, []uint32{15, 17, 20}},
	{"btn", "src/components/button_helper.ts", 59, []uint32{15, 17, 20}},
	{"btn", "src/components/MainButton.tsx", 51, []uint32{19, 21, 24}},
	{"readme", "README.md", 159, []uint32{0, 1, 2, 3, 4, 5}},
	{"README", "docs/readme_old.md", 159, []uint32{5, 6, 7, 8, 9, 10}},
	{"src", "src/components", 84, []uint32{0, 1, 2}},
	{"secret", ".hidden/secret.txt", 159, []uint32{8, 9, 10, 11, 12, 13}},
	{"config", ".git/config", 159, []uint32{5, 6, 7, 8, 9, 10}},
	{"upper", "Test/Upper.TXT", 134, []uint32{5, 6, 7, 8, 9}},
	{"main go", "main.go", 165, []uint32{0, 1, 2, 3, 5, 6}},
	{"main go", "src/main_test.go", 165, []uint32{4, 5, 6, 7, 14, 15}},
	{"^src", "src/utils/str.go", 84, []uint32{0, 1, 2}},
	{"str", "utils/str.go", 84, []uint32{6, 7, 8}},
	{"str", "Test/Upper.TXT", 45, []uint32{2, 3, 9}},
	{"str", "components/button_helper.ts", 32, []uint32{9, 13, 23}},
	{"abc", "axbxc.txt", 60, []uint32{0, 2, 4}},
	{"abc", "xabc.txt", 56, []uint32{1, 2, 3}},
	{"abc", "xaxbxc", 42, []uint32{1, 3, 5}},
	{"file", "many/file10.txt", 109, []uint32{5, 6, 7, 8}},
	{"abc.txt", "d1/abc.txt", 184, []uint32{3, 4, 5, 6, 7, 8, 9}},
	{"abc.txt", "abcd.txt", 177, []uint32{0, 1, 2, 4, 5, 6, 7}},
	{"abc.txt", "axbxc.txt", 156, []uint32{0, 2, 4, 5, 6, 7, 8}},
	{"abc.txt", "xabc.txt", 152, []uint32{1, 2, 3, 4, 5, 6, 7}},
	{"abc.txt", "zz/abc/q.txt", 176, []uint32{3, 4, 5, 8, 9, 10, 11}},
	{"abc.txt", "ABC2/q.txt", 175, []uint32{0, 1, 2, 6, 7, 8, 9}},
	{"d1/abc", "d1/abc.txt", 159, []uint32{0, 1, 2, 3, 4, 5}},
	{"abc$", "d2/ABC", 84, []uint32{3, 4, 5}},
	{"a c", "axbxc.txt", 50, []uint32{0, 4}},
	{"a c", "xabc.txt", 32, []uint32{1, 3}},
	{"'bc", "zz/abc/q.txt", 36, []uint32{4, 5}},
	{"x", "xabc.txt", 34, []uint32{0}},
	{"x", "many/file1.txt", 16, []uint32{12}},
	{"ab c", "abcd.txt", 75, []uint32{0, 1, 2}},
	{"ab c", "axbxc.txt", 63, []uint32{0, 2, 4}},
	{"ab c", "xaxbxc", 45, []uint32{1, 3, 5}},
	{"zz", "zz/abc/q.txt", 59, []uint32{0, 1}},
	{"deep/er", "deep/er/abc", 184, []uint32{0, 1, 2, 3, 4, 5, 6}},
}

func TestScoresMatchTheReference(t *testing.T) {
	var m Matcher
	for _, c := range referencePaths {
		p := Parse(c.query)
		s, idx, ok := m.Indices(&p, c.path)
		require.True(t, ok, "%q in %q", c.query, c.path)
		require.Equal(t, c.score, s, "%q in %q", c.query, c.path)
		require.Equal(t, c.indices, idx, "%q in %q", c.query, c.path)
		s2, ok := m.Score(&p, c.path)
		require.True(t, ok)
		require.Equal(t, s, s2, "Score and Indices agree")
	}
}

func TestNoMatch(t *testing.T) {
	var m Matcher
	for _, c := range []struct{ query, path string }{
		{"index", "src/main.go"},
		{"abc", "ab"},
		{"zzz", "hello"},
		{"^bc", "abc"},
		{"ab$", "abc"},
		{"'ac", "abc"},
		{"!abc abc", "xabc"},
		{"main nope", "main.go"},
		{"é", "e"},
	} {
		p := Parse(c.query)
		_, ok := m.Score(&p, c.path)
		require.False(t, ok, "%q in %q", c.query, c.path)
	}
	p := Parse("!zzz main")
	s, ok := m.Score(&p, "main.go")
	require.True(t, ok, "a negative atom that misses does not exclude")
	require.Equal(t, uint32(109), s)
}

// The scoring of text (the reference's default configuration), on
// examples whose scores follow from the constants: the same code with
// other bonuses must give them too.
func TestTextScores(t *testing.T) {
	m := Matcher{cf: &defaultConfig}
	white, delim := uint32(defaultConfig.boundaryWhite), uint32(defaultConfig.boundaryDelimiter)
	for _, c := range []struct {
		hay, query string
		indices    []uint32
		bonus      uint32 // beyond 16 per character
	}{
		{"fooBarbaz1", "obr", []uint32{2, 3, 5}, bonusCamel123 - penaltyGapStart},
		{"/usr/share/doc/at/ChangeLog", "changelog", []uint32{18, 19, 20, 21, 22, 23, 24, 25, 26}, (bonusFirstCharMultiplier + 8) * delim},
		{"fooBarbaz1", "br", []uint32{3, 5}, bonusCamel123*bonusFirstCharMultiplier - penaltyGapStart},
		{"foo bar baz", "fbb", []uint32{0, 4, 8}, white*bonusFirstCharMultiplier + white*2 - 2*penaltyGapStart - 4*penaltyGapExtension},
		{"/AutomatorDocument.icns", "rdoc", []uint32{9, 10, 11, 12}, bonusCamel123 + 2*bonusConsecutive},
		{"/man1/zshcompctl.1", "zshc", []uint32{6, 7, 8, 9}, delim * (bonusFirstCharMultiplier + 3)},
		{"/.oh-my-zsh/cache", "zshc", []uint32{8, 9, 10, 12}, bonusBoundary*(bonusFirstCharMultiplier+2) - penaltyGapStart + delim},
		{"ab0123 456", "12356", []uint32{3, 4, 5, 8, 9}, bonusConsecutive*3 - penaltyGapStart - penaltyGapExtension},
		{"foo/bar/baz", "fbb", []uint32{0, 4, 8}, white*bonusFirstCharMultiplier + delim*2 - 2*penaltyGapStart - 4*penaltyGapExtension},
		{"fooBarBaz", "fbb", []uint32{0, 3, 6}, white*bonusFirstCharMultiplier + bonusCamel123*2 - 2*penaltyGapStart - 2*penaltyGapExtension},
		{"fooBar Baz", "foob", []uint32{0, 1, 2, 3}, white * (bonusFirstCharMultiplier + 3)},
		{"xFoo-Bar Baz", "foo-b", []uint32{1, 2, 3, 4, 5}, bonusCamel123*(bonusFirstCharMultiplier+2) + 2*bonusNonWord},
		{"foo bar baz", "'foo", []uint32{0, 1, 2}, white * (bonusFirstCharMultiplier + 2)},
		{" foo bar baz", "^FOO", []uint32{1, 2, 3}, white * (bonusFirstCharMultiplier + 2)},
		{"foo bar baz ", "baz$", []uint32{8, 9, 10}, white * (bonusFirstCharMultiplier + 2)},
		{"/.oh-my-zsh/cache", "'zsh/c", []uint32{8, 9, 10, 11, 12}, bonusBoundary*(bonusFirstCharMultiplier+2) + bonusNonWord + delim},
		{"Fȫô bar baz", "'fȫô", []uint32{0, 1, 2}, white * (bonusFirstCharMultiplier + 2)},
		{"Foo ฿ar baz", "foo", []uint32{0, 1, 2}, white * (bonusFirstCharMultiplier + 2)},
	} {
		p := Parse(c.query)
		s, idx, ok := m.Indices(&p, c.hay)
		require.True(t, ok, "%q in %q", c.query, c.hay)
		n := len([]rune(p.atoms[0].needle))
		require.Equal(t, c.bonus+uint32(16*n), s, "%q in %q", c.query, c.hay)
		require.Equal(t, c.indices, idx, "%q in %q", c.query, c.hay)
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		query string
		want  string
	}{
		{"abc", "[fuzzy abc]"},
		{"  a   b ", "[fuzzy a fuzzy b]"},
		{"^ab 'cd ef$ ^gh$ !ij", "[prefix ab substring cd postfix ef exact gh !substring ij]"},
		{`\^ab \'cd ef\$ \!x`, "[fuzzy ^ab fuzzy 'cd fuzzy ef$ fuzzy !x]"},
		{`a\ b`, "[fuzzy a b]"},
		{"ABC Ä", "[fuzzy abc fuzzy ä]"},
		{"^ ! $", "[]"},
	} {
		p := Parse(c.query)
		var got []string
		for _, a := range p.atoms {
			neg := ""
			if a.negative {
				neg = "!"
			}
			got = append(got, fmt.Sprintf("%s%s %s", neg, [...]string{"fuzzy", "substring", "prefix", "postfix", "exact"}[a.kind], string(a.needle)))
		}
		require.Equal(t, c.want, fmt.Sprint(joinOrEmpty(got)), c.query)
	}
}

func joinOrEmpty(s []string) string {
	out := "["
	for i, v := range s {
		if i > 0 {
			out += " "
		}
		out += v
	}
	return out + "]"
}

// Latin letters with diacritics match their base letter unless the
// query has diacritics itself; case never matters.
func TestUnicode(t *testing.T) {
	var m Matcher
	p := Parse("cafe")
	s, idx, ok := m.Indices(&p, "docs/Café Menu.md")
	require.True(t, ok)
	require.Equal(t, []uint32{5, 6, 7, 8}, idx)
	require.Equal(t, uint32(16*4+9*2+9*3), s)
	p = Parse("café")
	_, ok = m.Score(&p, "docs/cafe.md")
	require.False(t, ok, "a query with diacritics wants them")
	_, ok = m.Score(&p, "docs/CAFÉ.md")
	require.True(t, ok)
}

// A haystack too long for the exact alignment falls back to the greedy
// one, as the reference does, instead of failing.
func TestLongHaystack(t *testing.T) {
	var m Matcher
	long := ""
	for range 3000 {
		long += "ab/"
	}
	p := Parse("abzab")
	_, ok := m.Score(&p, long+"z/ab")
	require.True(t, ok)
}

func BenchmarkScore(b *testing.B) {
	var m Matcher
	p := Parse("btn")
	for b.Loop() {
		m.Score(&p, "src/components/forms/inputs/MainButton.test.tsx")
	}
}
