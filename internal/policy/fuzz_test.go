package policy_test

import (
	"encoding/json"
	"testing"

	"github.com/appserver/appserver/internal/policy"
)

// FuzzParseRules checks the rules-file parser never panics and that every
// rule it accepts renders to text that parses back to the same rule.
func FuzzParseRules(f *testing.F) {
	for _, s := range []string{
		`prefix_rule(pattern=["git", ["fetch", "pull"]], decision="prompt", justification="x", match=["git fetch"], not_match=[["git", "push"]])`,
		"prefix_rule([\"a\"], \"allow\")\nnetwork_rule(\"h.com\", \"https\", \"deny\")",
		`host_executable(name="git", paths=["/usr/bin/git"])`,
		`prefix_rule(pattern=["""a'b"""], decision=None)`,
		`prefix_rule(pattern=[r"\x"])`, `prefix_rule(pattern=["\u00e9\101"])`, "(", `"`, "# only a comment",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		rs, err := policy.ParseRules("fuzz.rules", src)
		if err != nil {
			return
		}
		for _, r := range rs.Rules() {
			back, err := policy.ParseRules("again.rules", r.String())
			if err != nil {
				t.Fatalf("rule %s does not parse back: %v", r, err)
			}
			got := back.Rules()
			if len(got) != 1 || got[0].String() != r.String() {
				t.Fatalf("rule %s parsed back as %v", r, got)
			}
		}
	})
}

// FuzzShellSplit checks ShellSplit never panics and that ShellJoin output
// splits back to the same words.
func FuzzShellSplit(f *testing.F) {
	for _, s := range []string{`a "b c" 'd'`, `x\ y`, "# c\nz", `"\$"`, `'`, `^a !b`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		words, ok := policy.ShellSplit(src)
		if !ok {
			return
		}
		back, ok := policy.ShellSplit(policy.ShellJoin(words))
		if !ok || len(back) != len(words) {
			t.Fatalf("join/split of %q: %q", words, back)
		}
		for i := range words {
			if back[i] != words[i] {
				a, _ := json.Marshal(words)
				b, _ := json.Marshal(back)
				t.Fatalf("join/split changed %s into %s", a, b)
			}
		}
	})
}
