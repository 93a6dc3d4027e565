package policy_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
)

func TestParsePlainScriptAccepts(t *testing.T) {
	cases := []struct {
		src  string
		want [][]string
	}{
		{"ls -1", [][]string{{"ls", "-1"}}},
		{"ls && pwd; echo 'hi there' | wc -l", [][]string{{"ls"}, {"pwd"}, {"echo", "hi there"}, {"wc", "-l"}}},
		{`echo "hello world"`, [][]string{{"echo", "hello world"}}},
		{"echo 'hi there'", [][]string{{"echo", "hi there"}}},
		{"git commit -m \"line1\nline2\"", [][]string{{"git", "commit", "-m", "line1\nline2"}}},
		{`echo "/usr"'/'"local"/bin`, [][]string{{"echo", "/usr/local/bin"}}},
		{`echo '/usr'"/"'local'/bin`, [][]string{{"echo", "/usr/local/bin"}}},
		{"echo 123 456", [][]string{{"echo", "123", "456"}}},
		{`rg -n "foo" -g"*.py"`, [][]string{{"rg", "-n", "foo", "-g*.py"}}},
		{"grep -n 'pattern' -g'*.txt'", [][]string{{"grep", "-n", "pattern", "-g*.txt"}}},
		{"ls || true", [][]string{{"ls"}, {"true"}}},
		{"ls;", [][]string{{"ls"}}},
		{"ls\n\npwd\n", [][]string{{"ls"}, {"pwd"}}},
		{"ls &&\n  pwd", [][]string{{"ls"}, {"pwd"}}},
		{"ls |\nwc", [][]string{{"ls"}, {"wc"}}},
		{"  ls\t-a  ", [][]string{{"ls", "-a"}}},
		{`echo ""`, [][]string{{"echo", ""}}},
		{`echo "a\"b" "c\\d" "e\f" "g\$h"`, [][]string{{"echo", `a"b`, `c\d`, `e\f`, `g$h`}}},
		{`echo 'a\b'`, [][]string{{"echo", `a\b`}}},
		{"git log --format=%H:%an@x,y+z^w~", [][]string{{"git", "log", "--format=%H:%an@x,y+z^w~"}}},
		{"echo --opt=a=b", [][]string{{"echo", "--opt=a=b"}}},
		{"echo héllo", [][]string{{"echo", "héllo"}}},
		{`echo "!bang"`, [][]string{{"echo", "!bang"}}},
		{"", nil},
		{"   \n ", nil},
	}
	for _, c := range cases {
		got, ok := policy.ParsePlainScript(c.src)
		require.True(t, ok, "%q should parse", c.src)
		assert.Equal(t, c.want, got, "%q", c.src)
	}
}

func TestParsePlainScriptRejects(t *testing.T) {
	for _, src := range []string{
		"(ls)",
		"ls || (pwd && echo hi)",
		"{ ls; }",
		"ls > out.txt",
		"ls >> out.txt",
		"ls 2>&1",
		"cat < in",
		"cat <<EOF\nhi\nEOF",
		"cat <<< hi",
		"echo hi & echo bye",
		"ls &",
		"ls |& wc",
		"echo $(pwd)",
		"echo `pwd`",
		"echo $HOME",
		"echo ${HOME}",
		`echo "$HOME"`,
		`echo "hi ${USER}"`,
		`echo "hi $(id)"`,
		"rg -g\"$VAR\" pattern",
		"rg -g\"${VAR}\" pattern",
		"rg -g\"$(pwd)\" pattern",
		"FOO=bar ls",
		"FOO+=bar ls",
		"ls &&",
		"&& ls",
		"ls ;; pwd",
		"ls ; ; pwd",
		"; ls",
		"ls | | wc",
		"ls ||",
		"ls |",
		"ls *.go",
		"ls file?",
		"ls [ab]",
		"echo {a,b}",
		"echo a\\ b",
		"ls \\\n -l",
		"ls # comment",
		"! ls",
		"if true; then ls; fi",
		"for f in a; do echo $f; done",
		"while true; do ls; done",
		"time ls",
		"function f { ls; }",
		"f() { ls; }",
		"[[ -f x ]]",
		"[ -f x ]",
		"'ls'",
		`"ls" -l`,
		`l"s"`,
		`echo ''""`,
		"echo 'unterminated",
		`echo "unterminated`,
		`echo "trailing\`,
		"ls\r",
		"echo a\x00b",
		"case x in x) ls;; esac",
		"ls;& pwd",
	} {
		_, ok := policy.ParsePlainScript(src)
		assert.False(t, ok, "%q should not parse", src)
	}
}

func TestShellPlainCommands(t *testing.T) {
	got, ok := policy.ShellPlainCommands([]string{"zsh", "-lc", "ls"})
	require.True(t, ok)
	assert.Equal(t, [][]string{{"ls"}}, got)
	got, ok = policy.ShellPlainCommands([]string{"/bin/sh", "-c", "a && b"})
	require.True(t, ok)
	assert.Equal(t, [][]string{{"a"}, {"b"}}, got)
	for _, bad := range [][]string{
		{"bash", "-lc"},
		{"bash", "-lc", "ls", "extra"},
		{"bash", "-l", "ls"},
		{"bash", "-cl", "ls"},
		{"fish", "-c", "ls"},
		{"bash", "-lc", "ls > x"},
	} {
		_, ok := policy.ShellPlainCommands(bad)
		assert.False(t, ok, "%q", bad)
	}
	script, ok := policy.ShellScript([]string{"bash", "-lc", "echo hi"})
	assert.True(t, ok)
	assert.Equal(t, "echo hi", script)
}

// FuzzParsePlainScript checks the script parser never panics and that what
// it accepts is consistent: every command has a bare program word, and
// joining the words back with ShellJoin and re-parsing gives the same
// commands.
func FuzzParsePlainScript(f *testing.F) {
	for _, s := range []string{
		"ls -1", "ls && pwd; echo 'hi there' | wc -l", `echo "a\"b"`, "echo $(pwd)",
		"ls ||", "(ls)", "git commit -m \"l1\nl2\"", `rg -g"*.py"`, "FOO=1 ls", "", "'", `"`, "\\",
		"ls &&\npwd", "echo 'x'\"y\"z", "a;b|c&&d||e",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		cmds, ok := policy.ParsePlainScript(src)
		_ = policy.IsKnownSafe([]string{"bash", "-lc", src})
		_ = policy.MightBeDangerous([]string{"bash", "-lc", src})
		if !ok {
			return
		}
		lines := make([]string, 0, len(cmds))
		for _, c := range cmds {
			if len(c) == 0 {
				t.Fatalf("empty command from %q", src)
			}
			if c[0] == "" || strings.ContainsAny(c[0], "'\" \t\n") {
				t.Fatalf("program %q from %q is not a bare word", c[0], src)
			}
			lines = append(lines, policy.ShellJoin(c))
		}
		if !utf8.ValidString(src) {
			return // quoting of invalid UTF-8 is not meant to round-trip
		}
		again, ok := policy.ParsePlainScript(strings.Join(lines, " ; "))
		if ok {
			assert.Equal(t, cmds, again, "round trip of %q", src)
		}
	})
}
