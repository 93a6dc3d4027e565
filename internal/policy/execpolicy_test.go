package policy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
)

func mustRules(t *testing.T, src string) *policy.RuleSet {
	t.Helper()
	rs, err := policy.ParseRules("test.rules", src)
	require.NoError(t, err)
	return rs
}

func TestDecisionParse(t *testing.T) {
	for s, d := range map[string]policy.Decision{"allow": policy.Allow, "prompt": policy.Prompt, "forbidden": policy.Forbidden} {
		got, err := policy.ParseDecision(s)
		require.NoError(t, err)
		assert.Equal(t, d, got)
		assert.Equal(t, s, d.String())
	}
	_, err := policy.ParseDecision("deny")
	assert.Error(t, err)
	assert.Less(t, policy.Allow, policy.Prompt)
	assert.Less(t, policy.Prompt, policy.Forbidden)
}

func TestRuleSetCheck(t *testing.T) {
	rs := mustRules(t, `
# comments and blank lines are fine
prefix_rule(pattern=["git", ["fetch", "pull"]], decision="prompt", justification="network access")
prefix_rule(pattern=["git", "push"], decision="forbidden")
prefix_rule(pattern=["git"], decision="allow")
prefix_rule(pattern=[["npm", "pnpm"], "test"])
`)
	heuristic := func([]string) policy.Decision { return policy.Prompt }

	ev := rs.Check(argv("git fetch origin"), heuristic)
	assert.Equal(t, policy.Prompt, ev.Decision, "strictest of prompt and allow")
	require.Len(t, ev.Matches, 2)
	assert.Equal(t, []string{"git", "fetch"}, ev.Matches[0].MatchedPrefix)
	assert.Equal(t, "network access", ev.Matches[0].Justification)
	assert.Equal(t, policy.RuleMatch, ev.Matches[0].Kind)
	assert.Equal(t, []string{"git"}, ev.Matches[1].MatchedPrefix)

	assert.Equal(t, policy.Prompt, rs.Check(argv("git pull"), heuristic).Decision)
	assert.Equal(t, policy.Forbidden, rs.Check(argv("git push --force"), heuristic).Decision)
	assert.Equal(t, policy.Allow, rs.Check(argv("git status"), heuristic).Decision)
	assert.Equal(t, policy.Allow, rs.Check(argv("npm test"), heuristic).Decision, "decision defaults to allow")
	assert.Equal(t, policy.Allow, rs.Check(argv("pnpm test --watch"), heuristic).Decision, "alternative programs")

	ev = rs.Check(argv("npm install"), heuristic)
	assert.Equal(t, policy.Prompt, ev.Decision)
	require.Len(t, ev.Matches, 1)
	assert.Equal(t, policy.HeuristicMatch, ev.Matches[0].Kind)
	assert.Equal(t, argv("npm install"), ev.Matches[0].Command)
	assert.False(t, ev.HasRuleMatch())

	// A pattern longer than the command does not match; matching is exact
	// per word.
	assert.Equal(t, policy.HeuristicMatch, rs.Check(argv("npm"), heuristic).Matches[0].Kind)
	assert.Equal(t, policy.HeuristicMatch, rs.Check(argv("/usr/bin/git status"), heuristic).Matches[0].Kind)

	// Several commands: the strictest over all.
	ev = policy.Check([]*policy.RuleSet{rs}, [][]string{argv("git status"), argv("git push")}, heuristic)
	assert.Equal(t, policy.Forbidden, ev.Decision)
	ev = policy.Check([]*policy.RuleSet{rs}, [][]string{argv("git status")}, nil)
	assert.Equal(t, policy.Allow, ev.Decision)
	ev = policy.Check(nil, [][]string{argv("anything")}, nil)
	assert.Equal(t, policy.Allow, ev.Decision, "no rules and no fallback allow")
}

func TestRuleSetAddAndMerge(t *testing.T) {
	rs := policy.NewRuleSet()
	require.NoError(t, rs.AddPrefixRule(argv("cargo build"), policy.Allow))
	assert.Error(t, rs.AddPrefixRule(nil, policy.Allow))
	assert.Error(t, rs.Add(&policy.PrefixRule{}))
	assert.Error(t, rs.Add(&policy.PrefixRule{Pattern: [][]string{{"a", "b"}}}))
	assert.Error(t, rs.Add(&policy.PrefixRule{Pattern: [][]string{{"a"}, {}}}))
	assert.Error(t, rs.Add(&policy.PrefixRule{Pattern: [][]string{{"a"}}, Justification: "  "}))
	assert.Equal(t, policy.Allow, rs.Check(argv("cargo build --release"), nil).Decision)

	other := mustRules(t, `prefix_rule(pattern=["cargo"], decision="forbidden", justification="use make")`)
	rs.Merge(other)
	assert.Equal(t, policy.Forbidden, rs.Check(argv("cargo build"), nil).Decision)
	require.Len(t, rs.Rules(), 2)
	assert.Equal(t, `prefix_rule(pattern=["cargo", "build"], decision="allow")`, rs.Rules()[0].String())
	assert.Equal(t, `prefix_rule(pattern=["cargo"], decision="forbidden", justification="use make")`, rs.Rules()[1].String())
	var nilSet *policy.RuleSet
	assert.Nil(t, nilSet.Rules())
	assert.Equal(t, policy.Allow, policy.Check([]*policy.RuleSet{nilSet}, [][]string{argv("x")}, nil).Decision)
}

func TestParseRulesFile(t *testing.T) {
	rs := mustRules(t, `
prefix_rule(
    pattern = ["gh", "pr", ["view", "list"]],
    decision = "allow",
    justification = 'read-only GitHub queries',
    match = ["gh pr view 7", ["gh", "pr", "list", "--state", "open"]],
    not_match = ["gh pr merge 7", "gh issue list"],
)
prefix_rule(["rm"], "forbidden", None, None, """use trash
instead""")
prefix_rule(pattern=[r"C:\tools\x"], decision=None); prefix_rule(pattern=["esc\t\u00e9\x41\101"])
network_rule(host="API.Example.com.:443", protocol="https_connect", decision="deny", justification="no")
network_rule("[::1]:8080", "http", "allow")
host_executable(name="git", paths=["/usr/bin/git", "/usr/local/bin/git", "/usr/bin/git"])
prefix_rule(pattern=["git", "status"], match=["/usr/bin/git status"])
`)
	assert.Equal(t, policy.Allow, rs.Check(argv("gh pr view 7"), nil).Decision)
	ev := rs.Check(argv("rm -rf x"), nil)
	assert.Equal(t, policy.Forbidden, ev.Decision)
	assert.Equal(t, "use trash\ninstead", ev.Matches[0].Justification)
	assert.Equal(t, policy.RuleMatch, rs.Check([]string{`C:\tools\x`}, nil).Matches[0].Kind, "raw string keeps backslashes")
	assert.Equal(t, policy.RuleMatch, rs.Check([]string{"esc\téAA"}, nil).Matches[0].Kind, "escapes decoded")
	assert.Equal(t, []policy.NetworkRule{
		{Host: "api.example.com", Protocol: "https", Decision: policy.Forbidden, Justification: "no"},
		{Host: "::1", Protocol: "http", Decision: policy.Allow},
	}, rs.NetworkRules())
	// host_executable lets an absolute path listed for git use git's rules.
	ev = rs.Check(argv("/usr/local/bin/git status"), nil)
	require.Equal(t, policy.RuleMatch, ev.Matches[0].Kind)
	assert.Equal(t, argv("git status"), ev.Matches[0].MatchedPrefix)
	assert.Equal(t, policy.HeuristicMatch, rs.Check(argv("/opt/git status"), nil).Matches[0].Kind)
}

func TestParseRulesErrors(t *testing.T) {
	cases := map[string]string{
		"empty pattern":           `prefix_rule(pattern=[])`,
		"missing pattern":         `prefix_rule(decision="allow")`,
		"pattern not list":        `prefix_rule(pattern="git")`,
		"bad element":             `prefix_rule(pattern=[["a"], [None]])`,
		"empty alternatives":      `prefix_rule(pattern=["a", []])`,
		"bad decision":            `prefix_rule(pattern=["a"], decision="deny")`,
		"blank justification":     `prefix_rule(pattern=["a"], justification="  ")`,
		"match fails":             `prefix_rule(pattern=["git", "status"], match=["git diff"])`,
		"not_match matches":       `prefix_rule(pattern=["git"], not_match=["git status"])`,
		"bad example syntax":      `prefix_rule(pattern=["git"], match=["git 'unterminated"])`,
		"empty example":           `prefix_rule(pattern=["git"], match=[""])`,
		"empty example list":      `prefix_rule(pattern=["git"], match=[[]])`,
		"unknown keyword":         `prefix_rule(pattern=["a"], when="now")`,
		"duplicate argument":      `prefix_rule(["a"], pattern=["b"])`,
		"positional after kw":     `prefix_rule(pattern=["a"], "allow")`,
		"too many args":           `prefix_rule(["a"], "allow", None, None, "j", "extra")`,
		"unknown function":        `load("x.star", "y")`,
		"two statements one line": `prefix_rule(pattern=["a"]) prefix_rule(pattern=["b"])`,
		"unterminated string":     `prefix_rule(pattern=["a)`,
		"unclosed paren":          `prefix_rule(pattern=["a"]`,
		"stray close":             `)`,
		"bad escape":              `prefix_rule(pattern=["\q"])`,
		"network protocol":        `network_rule(host="a", protocol="ftp", decision="allow")`,
		"network wildcard":        `network_rule(host="*.a.com", protocol="http", decision="allow")`,
		"network path":            `network_rule(host="http://a.com/x", protocol="http", decision="allow")`,
		"network missing host":    `network_rule(protocol="http", decision="allow")`,
		"host exe path":           `host_executable(name="git", paths=["relative/git"])`,
		"host exe basename":       `host_executable(name="git", paths=["/usr/bin/hg"])`,
		"host exe name":           `host_executable(name="bin/git", paths=[])`,
	}
	for name, src := range cases {
		_, err := policy.ParseRules("x.rules", src)
		assert.Error(t, err, name)
	}
	_, err := policy.ParseRules("dir/x.rules", "\n\nprefix_rule(pattern=[], decision=\"allow\")")
	var re *policy.RulesError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 3, re.Line)
	assert.Contains(t, err.Error(), "dir/x.rules:3: pattern cannot be empty")

	// A failed parse adds nothing.
	rs := policy.NewRuleSet()
	require.Error(t, rs.Parse("x", `prefix_rule(pattern=["a"])`+"\n"+`prefix_rule(pattern=[])`))
	assert.Empty(t, rs.Rules())
}

func TestLoadRulesDirs(t *testing.T) {
	user := t.TempDir()
	project := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(user, "b.rules"), []byte(`prefix_rule(pattern=["make"], decision="prompt")`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(user, "a.rules"), []byte(`prefix_rule(pattern=["make", "test"])`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(user, "notes.txt"), []byte(`garbage(`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(project, "p.rules"), []byte(`prefix_rule(pattern=["make", "deploy"], decision="forbidden")`), 0o644))
	rs, err := policy.LoadRulesDirs(user, filepath.Join(user, "missing"), project)
	require.NoError(t, err)
	rules := rs.Rules()
	require.Len(t, rules, 3)
	assert.Equal(t, argv("make test"), []string{rules[0].Pattern[0][0], rules[0].Pattern[1][0]}, "sorted file order, lowest precedence first")
	assert.Equal(t, policy.Forbidden, rs.Check(argv("make deploy"), nil).Decision)

	require.NoError(t, os.WriteFile(filepath.Join(project, "q.rules"), []byte(`prefix_rule(`), 0o644))
	_, err = policy.LoadRulesDirs(user, project)
	assert.Error(t, err, "a parse error is reported so the caller can disable rules")
}

func TestAppendAllowRule(t *testing.T) {
	home := t.TempDir()
	path := policy.DefaultRulesFile(home)
	assert.Equal(t, filepath.Join(home, "rules", "default.rules"), path)
	require.NoError(t, policy.AppendAllowRule(path, []string{"echo", "Hello, world!"}))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "prefix_rule(pattern=[\"echo\", \"Hello, world!\"], decision=\"allow\")\n", string(b))

	// No duplicate; a missing final newline is repaired before appending.
	require.NoError(t, policy.AppendAllowRule(path, []string{"echo", "Hello, world!"}))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`prefix_rule(pattern=["ls"], decision="allow")`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, policy.AppendAllowRule(path, []string{"cargo", "<b>&"}))
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "prefix_rule(pattern=[\"echo\", \"Hello, world!\"], decision=\"allow\")\n"+
		"prefix_rule(pattern=[\"ls\"], decision=\"allow\")\n"+
		"prefix_rule(pattern=[\"cargo\", \"<b>&\"], decision=\"allow\")\n", string(b))
	assert.Error(t, policy.AppendAllowRule(path, nil))

	// What was written loads back and allows the prefix.
	rs, err := policy.LoadRulesDirs(filepath.Dir(path))
	require.NoError(t, err)
	assert.Equal(t, policy.Allow, rs.Check([]string{"echo", "Hello, world!", "again"}, func([]string) policy.Decision { return policy.Forbidden }).Decision)
}

func TestShellJoin(t *testing.T) {
	cases := []struct {
		in   []string
		want string
	}{
		{argv("git status"), "git status"},
		{[]string{"bash", "-lc", "rm -rf x"}, "bash -lc 'rm -rf x'"},
		{[]string{""}, "''"},
		{[]string{"it's"}, `"it's"`},
		{[]string{`'"`}, `"'\""`},
		{[]string{"a$b"}, "'a$b'"},
		{[]string{"--format=x"}, "'--format=x'"},
		{[]string{"^x"}, "'^x'"},
		{[]string{"a'$b"}, `"a'"'$b'`},
		{[]string{"é"}, "'é'"},
		{[]string{"/usr/bin/x", "a:b@c+d"}, "/usr/bin/x a:b@c+d"},
		{nil, ""},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, policy.ShellJoin(c.in), "%q", c.in)
		if c.in != nil {
			back, ok := policy.ShellSplit(c.want)
			require.True(t, ok, c.want)
			assert.Equal(t, c.in, back, "split(join(%q))", c.in)
		}
	}
}

func TestShellSplit(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		ok   bool
	}{
		{"foo$baz", []string{"foo$baz"}, true},
		{"foo baz", []string{"foo", "baz"}, true},
		{`foo"bar"baz`, []string{"foobarbaz"}, true},
		{`foo "bar"baz`, []string{"foo", "barbaz"}, true},
		{"   foo \nbar", []string{"foo", "bar"}, true},
		{"foo\\\nbar", []string{"foobar"}, true},
		{"\"foo\\\nbar\"", []string{"foobar"}, true},
		{`'baz\$b'`, []string{`baz\$b`}, true},
		{`'baz\''`, nil, false},
		{`\`, nil, false},
		{`"\`, nil, false},
		{`'\`, nil, false},
		{`"`, nil, false},
		{`'`, nil, false},
		{"foo #bar\nbaz", []string{"foo", "baz"}, true},
		{"foo #bar", []string{"foo"}, true},
		{"foo#bar", []string{"foo#bar"}, true},
		{`foo"#bar`, nil, false},
		{`'\n'`, []string{`\n`}, true},
		{`"a\qb"`, []string{`a\qb`}, true},
		{`a\ b`, []string{"a b"}, true},
		{"", nil, true},
	}
	for _, c := range cases {
		got, ok := policy.ShellSplit(c.in)
		assert.Equal(t, c.ok, ok, "%q", c.in)
		if c.ok {
			assert.Equal(t, c.want, got, "%q", c.in)
		}
	}
}
