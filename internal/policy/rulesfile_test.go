package policy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
)

// TestParseRulesStarlark loads rules files that use the Starlark a Codex
// user may write: variables, loops, functions, list concatenation,
// comprehensions and string methods. The rules they declare, forbidden ones
// above all, must all be in force.
func TestParseRulesStarlark(t *testing.T) {
	rs := mustRules(t, `
GIT_READ = ["status", "diff", "log"]
GIT_NET = ["fetch", "pull"]
DANGEROUS = [["rm", "-rf"], ["git", "push", "--force"]]

def forbid(pattern, why):
    prefix_rule(pattern = pattern, decision = "forbidden", justification = why)

for p in DANGEROUS:
    forbid(p, "destructive: " + " ".join(p))

prefix_rule(pattern = ["git", GIT_READ + GIT_NET], match = ["git " + s for s in GIT_READ])
prefix_rule(pattern = ["git"] + [GIT_NET], decision = "prompt")

tools = {"npm": "test", "cargo": "check"}
for prog, sub in sorted(tools.items()):
    prefix_rule(pattern = [prog, sub], match = ["%s %s --verbose" % (prog, sub)])

if len(GIT_READ) > 2:
    prefix_rule(pattern = ["make", "lint"])
x = "first"
x = "second"
prefix_rule(pattern = [x])
`)
	ev := rs.Check(argv("rm -rf /"), nil)
	assert.Equal(t, policy.Forbidden, ev.Decision)
	assert.Equal(t, "destructive: rm -rf", ev.Matches[0].Justification)
	assert.Equal(t, policy.Forbidden, rs.Check(argv("git push --force origin"), nil).Decision)
	assert.Equal(t, policy.Prompt, rs.Check(argv("git pull"), nil).Decision)
	assert.Equal(t, policy.Allow, rs.Check(argv("git log -1"), nil).Decision)
	prompt := func([]string) policy.Decision { return policy.Prompt }
	assert.Equal(t, policy.Allow, rs.Check(argv("cargo check"), prompt).Decision)
	assert.Equal(t, policy.Allow, rs.Check(argv("npm test"), prompt).Decision)
	assert.Equal(t, policy.Allow, rs.Check(argv("make lint"), prompt).Decision)
	assert.Equal(t, policy.Allow, rs.Check(argv("second"), prompt).Decision, "a reassigned global")
	assert.Equal(t, policy.Prompt, rs.Check(argv("first"), prompt).Decision)
}

// TestParseRulesLocatedErrors checks that every kind of failure names the
// file and the line of the statement at fault.
func TestParseRulesLocatedErrors(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"syntax error", "prefix_rule(pattern=[\"a\"])\nprefix_rule(pattern=[\"b\"]\n", "d/x.rules:3:"},
		{"unknown name", "\nprefix_rul(pattern=[\"a\"])", "d/x.rules:2: undefined: prefix_rul"},
		{"failing match example", `
def allow(p, ex):
    prefix_rule(pattern = p, match = ex)

allow(["git", "status"], ["git status"])
allow(["git", "diff"], ["git diff", "git show"])
`, "d/x.rules:3: examples do not match the rule: git show"},
		{"failing not_match example in a loop", `
for p in [["ls"], ["cat"]]:
    prefix_rule(
        pattern = p,
        not_match = ["cat /etc/passwd"],
    )
`, "d/x.rules:3: example cat /etc/passwd matches rule"},
		{"bad argument in a loop", "for d in [\"allow\", \"deny\"]:\n  prefix_rule(pattern=[\"a\"], decision=d)", "d/x.rules:2: invalid decision: deny"},
		{"unpack error", "\n\nprefix_rule(pattern=[\"a\"], when=\"now\")", "d/x.rules:3: prefix_rule: unexpected keyword argument \"when\""},
		{"type error in expression", "x = [\"a\"] + \"b\"", "d/x.rules:1: unknown binary op: list + string"},
		{"fail()", "\n\nfail(\"no\")", "d/x.rules:3: fail: no"},
		{"load", `load("other.rules", "x")`, "d/x.rules:1:"},
		{"while", "i = 0\nwhile i < 1:\n  i += 1", "d/x.rules:2: this Starlark dialect does not support while loops"},
		{"recursion", "def f(n):\n  return f(n - 1)\nf(3)", "d/x.rules:2: function f called recursively"},
		{"non-string pattern word", `prefix_rule(pattern=["a", 1])`, "d/x.rules:1: pattern element must be a string or list of strings (got int)"},
		{"tuple pattern", `prefix_rule(pattern=("a",))`, "d/x.rules:1: pattern must be a list (got tuple)"},
		{"not UTF-8 word", `prefix_rule(pattern=["é"[:1]])`, "d/x.rules:1: pattern element is not valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := policy.ParseRules("d/x.rules", c.src)
			require.Error(t, err)
			var re *policy.RulesError
			require.ErrorAs(t, err, &re)
			assert.Contains(t, err.Error(), c.want)
			assert.Positive(t, re.Line)
		})
	}
}

// TestParseRulesBounded checks that a hostile rules file cannot hang the
// daemon: loops over huge ranges stop at the step limit.
func TestParseRulesBounded(t *testing.T) {
	for _, src := range []string{
		"for i in range(1 << 40):\n  pass",
		"for i in range(100000):\n  for j in range(100000):\n    pass",
		"def f():\n  return [x for x in range(1 << 40)]\nf()",
	} {
		_, err := policy.ParseRules("hostile.rules", src)
		require.Error(t, err, src)
		assert.Contains(t, err.Error(), "too many steps", src)
	}
	// A large but honest file stays well within the limit.
	src := ""
	for i := range 2000 {
		src += fmt.Sprintf("prefix_rule(pattern=[\"tool%d\", [\"a\", \"b\"]], decision=\"prompt\", match=[\"tool%d a\"], not_match=[\"tool%d c\"])\n", i, i, i)
	}
	rs, err := policy.ParseRules("big.rules", src)
	require.NoError(t, err)
	assert.Len(t, rs.Rules(), 2000)
}

// TestParseRulesHostExecutableLater checks that examples are checked after
// the whole file ran, so a host_executable declared below a prefix_rule
// counts for its examples.
func TestParseRulesHostExecutableLater(t *testing.T) {
	rs := mustRules(t, `
prefix_rule(pattern=["git", "status"], match=["/usr/bin/git status"])
host_executable(name="git", paths=["/usr/bin/git"])
`)
	assert.Equal(t, policy.RuleMatch, rs.Check(argv("/usr/bin/git status"), nil).Matches[0].Kind)
}

// TestLoadRulesDirsStarlarkError checks that a file using Starlark the
// daemon cannot evaluate reports its path and line to the caller, which
// disables rules with that warning.
func TestLoadRulesDirsStarlarkError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.rules")
	require.NoError(t, os.WriteFile(path, []byte("X = [\"a\"]\nprefix_rule(pattern=X + [], decision=\"sometimes\")\n"), 0o644))
	_, err := policy.LoadRulesDirs(dir)
	require.Error(t, err)
	assert.Equal(t, path+":2: invalid decision: sometimes", err.Error())
}
