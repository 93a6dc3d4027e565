package skills

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSkillFile(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want SkillMeta
	}{
		{"plain", "---\nname: deploy\ndescription: Deploy the app.\n---\nbody\n", SkillMeta{Name: "deploy", Description: "Deploy the app."}},
		{"crlf and bom", "\ufeff---\r\nname: deploy\r\ndescription: Ship it\r\n---\r\n", SkillMeta{Name: "deploy", Description: "Ship it"}},
		{"quoted", "---\nname: \"dep: loy\"\ndescription: 'it''s # not a comment'\n---\n", SkillMeta{Name: "dep: loy", Description: "it's # not a comment"}},
		{"escapes", "---\nname: \"a\\tb\\u00e9\"\ndescription: x\n---\n", SkillMeta{Name: "a bé", Description: "x"}},
		{"comments", "# top\n---\n", SkillMeta{}}, // replaced below: not front matter
		{"comment lines and trailing comment", "---\n# c\nname: deploy # trailing\ndescription: d\n---\n", SkillMeta{Name: "deploy", Description: "d"}},
		{"colon inside a plain value", "---\nname: deploy\ndescription: Use when:the user asks\n---\n", SkillMeta{Name: "deploy", Description: "Use when:the user asks"}},
		{"quoted colon and space", "---\nname: deploy\ndescription: \"Use this: when X\"\n---\n", SkillMeta{Name: "deploy", Description: "Use this: when X"}},
		{"multi-line plain", "---\nname: deploy\ndescription: first line\n  second   line\n\n  third\n---\n", SkillMeta{Name: "deploy", Description: "first line second line third"}},
		{"folded block", "---\nname: deploy\ndescription: >-\n  one\n  two\n\n  three\n---\n", SkillMeta{Name: "deploy", Description: "one two three"}},
		{"literal block", "---\nname: deploy\ndescription: |\n  line 1\n    indented\n---\n", SkillMeta{Name: "deploy", Description: "line 1 indented"}},
		{"metadata short description", "---\nname: n\ndescription: d\nmetadata:\n  short-description: short one\n  other: x\n---\n", SkillMeta{Name: "n", Description: "d", ShortDescription: "short one"}},
		{"metadata alias", "---\nname: n\ndescription: d\nmetadata:\n  shortDescription: alias\n---\n", SkillMeta{Name: "n", Description: "d", ShortDescription: "alias"}},
		{"sequences ignored", "---\nname: n\nallowed-tools:\n  - Bash\n  - Read\ntags:\n- a\n- b: c\n  d: e\ndescription: d\n---\n", SkillMeta{Name: "n", Description: "d"}},
		{"flow ignored", "---\nname: n\ntags: [a, b]\ndescription: d\n---\n", SkillMeta{Name: "n", Description: "d"}},
		{"flow metadata", "---\nname: n\ndescription: d\nmetadata: {short-description: Short one, other: [x, y]}\n---\n", SkillMeta{Name: "n", Description: "d", ShortDescription: "Short one"}},
		{"flow document", "---\n{name: n, description: \"d, e\"}\n---\n", SkillMeta{Name: "n", Description: "d, e"}},
		{"anchor and alias", "---\nbase: &d Deploy the app.\nname: deploy\ndescription: *d\n---\n", SkillMeta{Name: "deploy", Description: "Deploy the app."}},
		{"merge key", "---\ncommon: &m {short-description: shared}\nname: n\ndescription: d\nmetadata:\n  <<: *m\n---\n", SkillMeta{Name: "n", Description: "d", ShortDescription: "shared"}},
		{"tagged string", "---\nname: !!str deploy\ndescription: d\n---\n", SkillMeta{Name: "deploy", Description: "d"}},
		{"date-like name stays text", "---\nname: 2024-01-01\ndescription: d\n---\n", SkillMeta{Name: "2024-01-01", Description: "d"}},
		{"alias bomb not expanded", "---\n" + aliasBomb + "name: n\ndescription: d\nmetadata: *l9\n---\n", SkillMeta{Name: "n", Description: "d"}},
		{"document end marker", "---\nname: n\ndescription: d\n...\n---\n", SkillMeta{Name: "n", Description: "d"}},
		{"unicode", "---\nname: 部署 🚀\ndescription: 部署应用\n---\n", SkillMeta{Name: "部署 🚀", Description: "部署应用"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSkillFile([]byte(tc.in))
			if tc.name == "comments" {
				require.ErrorIs(t, err, errNoFrontMatter)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestParseSkillFileErrors pins the reference's error classes: missing
// front matter, invalid YAML, missing field, too long.
func TestParseSkillFileErrors(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"no front matter", "# Deploy\n", "missing YAML frontmatter"},
		{"unterminated", "---\nname: n\ndescription: d\n", "missing YAML frontmatter"},
		{"empty file", "", "missing YAML frontmatter"},
		{"missing name", "---\ndescription: d\n---\n", "missing field `name`"},
		{"empty name", "---\nname:\ndescription: d\n---\n", "missing field `name`"},
		{"blank name", "---\nname: \"  \"\ndescription: d\n---\n", "missing field `name`"},
		{"missing description", "---\nname: n\n---\n", "missing field `description`"},
		{"name not string", "---\nname:\n  a: b\ndescription: d\n---\n", "invalid name: expected a string"},
		{"name too long", "---\nname: " + strings.Repeat("x", 65) + "\ndescription: d\n---\n", "exceeds maximum length of 64"},
		{"description too long", "---\nname: n\ndescription: " + strings.Repeat("é", 1025) + "\n---\n", "exceeds maximum length of 1024"},
		{"short description too long", "---\nname: n\ndescription: d\nmetadata:\n  short-description: " + strings.Repeat("x", 501) + "\n---\n", "exceeds maximum length of 500"},
		{"colon and space in plain value", "---\nname: n\ndescription: Use this: when X\n---\n", "invalid YAML: line 3: mapping values are not allowed in this context"},
		{"tab indentation", "---\nname: n\nmetadata:\n\tx: y\ndescription: d\n---\n", "invalid YAML: line 4: found character that cannot start any token"},
		{"no colon", "---\nname: n\njust text\n---\n", "invalid YAML: line 3: could not find expected ':'"},
		{"duplicate key", "---\nname: n\nname: m\ndescription: d\n---\n", `invalid YAML: line 3: mapping key "name" already defined at line 2`},
		{"bad indentation", "---\nname: n\n  description: d\n---\n", "invalid YAML: line 3: mapping values are not allowed in this context"},
		{"unterminated quote", "---\nname: \"n\ndescription: d\n---\n", "invalid YAML: line 2: found unexpected end of stream"},
		{"bad escape", "---\nname: \"\\q\"\ndescription: d\n---\n", "invalid YAML: line 2: found unknown escape character"},
		{"text after quote", "---\nname: \"n\" x\ndescription: d\n---\n", "invalid YAML: line 1: did not find expected key"},
		{"sequence document", "---\n- a\n---\n", "invalid YAML: line 2: front matter must be a mapping, not a sequence"},
		{"scalar document", "---\njust text\n---\n", "front matter must be a mapping, not a scalar"},
		{"unknown alias", "---\nname: *a\ndescription: d\n---\n", "invalid YAML: unknown anchor 'a' referenced"},
		{"name is a number", "---\nname: 123\ndescription: d\n---\n", "invalid name: expected a string"},
		{"description is a list", "---\nname: n\ndescription: [a]\n---\n", "invalid description: expected a string"},
		{"short description is a map", "---\nname: n\ndescription: d\nmetadata: {short-description: {a: b}}\n---\n", "invalid metadata.short-description: expected a string"},
		{"alias bomb read", "---\n" + aliasBomb + "name: n\ndescription: *l9\n---\n", "invalid description: expected a string"},
		{"invalid utf8", "---\nname: \xff\ndescription: d\n---\n", "invalid YAML: line 2: invalid UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSkillFile([]byte(tc.in))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// aliasBomb is a "billion laughs" document: nine levels of ten aliases
// each, which a YAML parser without a bound would expand to 10^9 nodes.
var aliasBomb = func() string {
	s := "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 1; i <= 9; i++ {
		s += fmt.Sprintf("l%d: &l%d [", i, i) + strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 9) + fmt.Sprintf("*l%d]\n", i-1)
	}
	return s
}()

// FuzzParseSkillFile checks that arbitrary SKILL.md bytes never panic and
// that accepted metadata respects the limits.
func FuzzParseSkillFile(f *testing.F) {
	for _, s := range []string{
		"---\nname: n\ndescription: d\n---\n",
		"---\nname: |\n  x\ndescription: >+\n\n  y\n\n---\n",
		"---\na:\n- b: c\n  d:\n  - e\n- 'f'\nname: \"\\u00e9\"\ndescription: x\n---\n",
		"---\nmetadata:\n  short-description: s\nname: n\ndescription: d\n---",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseSkillFile(data)
		if err != nil {
			return
		}
		if m.Name == "" || m.Description == "" || strings.ContainsAny(m.Name+m.Description, "\n\r\t") {
			t.Fatalf("accepted bad metadata %+v", m)
		}
	})
}
