package policy_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/appserver/appserver/internal/policy"
)

func TestIsKnownSafeAlwaysSafePrograms(t *testing.T) {
	for _, prog := range []string{"cat", "cd", "cut", "echo", "expr", "false", "grep", "head", "id", "ls", "nl",
		"paste", "pwd", "rev", "seq", "stat", "tail", "tr", "true", "uname", "uniq", "wc", "which", "whoami"} {
		assert.True(t, policy.IsKnownSafe([]string{prog}), prog)
		assert.True(t, policy.IsKnownSafe([]string{prog, "-x", "some file", "--any=thing"}), prog+" with args")
		assert.True(t, policy.IsKnownSafe(lc(prog+" -a 'b c'")), "bash -lc "+prog)
		// Current Codex requires a bare program name.
		assert.False(t, policy.IsKnownSafe([]string{"/bin/" + prog}), "/bin/"+prog)
		assert.False(t, policy.IsKnownSafe([]string{"./" + prog}), "./"+prog)
	}
	linux := runtime.GOOS == "linux"
	assert.Equal(t, linux, policy.IsKnownSafe(argv("numfmt 1000")))
	assert.Equal(t, linux, policy.IsKnownSafe(argv("tac Cargo.toml")))
	assert.True(t, policy.IsKnownSafe(argv("nl -nrz Cargo.toml")))
}

func TestIsKnownSafeTable(t *testing.T) {
	cases := []struct {
		cmd  []string
		safe bool
	}{
		// base64 writes only with -o / --output.
		{argv("base64"), true},
		{argv("base64 file.bin"), true},
		{argv("base64 -d file.b64"), true},
		{argv("base64 -o out.bin"), false},
		{argv("base64 --output out.bin"), false},
		{argv("base64 --output=out.bin"), false},
		{argv("base64 -ob64.txt"), false},
		{argv("base64 in -o"), false},

		// find without actions that execute, delete or write.
		{argv("find . -name file.txt"), true},
		{argv("find . -type f -print"), true},
		{[]string{"find", ".", "-name", "file.txt", "-exec", "rm", "{}", ";"}, false},
		{[]string{"find", ".", "-name", "*.py", "-execdir", "python3", "{}", ";"}, false},
		{[]string{"find", ".", "-name", "file.txt", "-ok", "rm", "{}", ";"}, false},
		{[]string{"find", ".", "-name", "*.py", "-okdir", "python3", "{}", ";"}, false},
		{argv("find . -delete -name file.txt"), false},
		{argv("find . -fls /etc/passwd"), false},
		{argv("find . -fprint /etc/passwd"), false},
		{argv("find . -fprint0 /etc/passwd"), false},
		{[]string{"find", ".", "-fprintf", "/root/suid.txt", "%#m %u %p\n"}, false},

		// rg without preprocessors, hostname programs or decompression.
		{argv("rg Cargo.toml -n"), true},
		{argv("rg --files"), true},
		{argv("rg --search-zip files"), false},
		{argv("rg -z files"), false},
		{argv("rg --pre pwned files"), false},
		{argv("rg --pre=pwned files"), false},
		{argv("rg --hostname-bin pwned files"), false},
		{argv("rg --hostname-bin=pwned files"), false},

		// git read-only subcommands.
		{argv("git status"), true},
		{argv("git log"), true},
		{argv("git log --oneline -n 5"), true},
		{argv("git log -p -1"), true},
		{argv("git diff"), true},
		{argv("git diff --stat HEAD~1"), true},
		{argv("git diff --cached"), true},
		{argv("git show HEAD"), true},
		{argv("git --no-pager log"), true},
		{argv("git -P diff"), true},
		{argv("git branch"), true},
		{argv("git branch --show-current"), true},
		{argv("git branch --list"), true},
		{argv("git branch -l"), true},
		{argv("git branch -a"), true},
		{argv("git branch --all"), true},
		{argv("git branch -r"), true},
		{argv("git branch --remotes"), true},
		{argv("git branch -v"), true},
		{argv("git branch -vv"), true},
		{argv("git branch --verbose"), true},
		{argv("git branch --format=%(refname)"), true},
		{argv("git branch -a -v"), true},
		// other subcommands and mutating branch forms
		{argv("git fetch"), false},
		{argv("git push"), false},
		{argv("git checkout status"), false}, // the first word is the subcommand
		{argv("git"), false},
		{argv("git branch -d feature"), false},
		{argv("git branch -D feature"), false},
		{argv("git branch new-branch"), false},
		{argv("git branch -m old new"), false},
		{argv("git branch --list -d x"), false},
		// global options that redirect the repository, run programs or page
		{argv("git -C . status"), false},
		{argv("git -C. status"), false},
		{argv("git -C . branch --show-current"), false},
		{argv("git -c core.pager=cat log -n 1"), false},
		{argv("git -ccore.pager=cat status"), false},
		{argv("git -p log"), false},
		{argv("git --paginate log"), false},
		{argv("git --config-env core.pager=PAGER log"), false},
		{argv("git --config-env=core.pager=PAGER log"), false},
		{argv("git --exec-path /tmp status"), false},
		{argv("git --exec-path=/tmp status"), false},
		{argv("git --git-dir /tmp/x status"), false},
		{argv("git --git-dir=/tmp/x status"), false},
		{argv("git --namespace ns log"), false},
		{argv("git --namespace=ns log"), false},
		{argv("git --super-prefix p/ status"), false},
		{argv("git --super-prefix=p/ status"), false},
		{argv("git --work-tree /tmp status"), false},
		{argv("git --work-tree=/tmp status"), false},
		// subcommand flags that write files or run tools
		{argv("git log --output=/tmp/git-log-out-test -n 1"), false},
		{argv("git diff --output /tmp/git-diff-out-test"), false},
		{argv("git show --output=/tmp/git-show-out-test HEAD"), false},
		{argv("git diff --ext-diff"), false},
		{argv("git diff --textconv"), false},
		{argv("git log --exec=foo"), false},
		{argv("git log --exec foo"), false},
		{argv("git log --paginate"), false},
		{argv("git log -c"), false}, // a config-style -c anywhere is refused like the reference
		{argv("/usr/bin/git status"), false},

		// sed -n Np / N,Mp only
		{argv("sed -n 10p"), true},
		{argv("sed -n 1,5p file.txt"), true},
		{argv("sed -n 1,5p file.txt other"), false},
		{argv("sed -n xp file.txt"), false},
		{argv("sed -n 1,2,3p file.txt"), false},
		{argv("sed -n ,5p file.txt"), false},
		{argv("sed -n 1,p file.txt"), false},
		{argv("sed -n p file.txt"), false},
		{argv("sed -n 5 file.txt"), false},
		{argv("sed -i 1p file.txt"), false},
		{argv("sed -n"), false},
		{argv("sed s/a/b/ file"), false},

		// exact --version probes
		{argv("python3 --version"), true},
		{argv("cargo --version"), true},
		{argv("python3 --version extra"), false},
		{argv("python3 -V"), false},
		{argv("/usr/bin/python3 --version"), false},

		// everything else
		{argv("cargo check"), false},
		{argv("foo"), false},
		{argv("rm -rf /"), false},
		{argv("python3 -c print(1)"), false},
		{nil, false},
		{[]string{""}, false},
	}
	for _, c := range cases {
		assert.Equal(t, c.safe, policy.IsKnownSafe(c.cmd), "%q", c.cmd)
	}
}

func TestIsKnownSafeShellScripts(t *testing.T) {
	cases := []struct {
		cmd  []string
		safe bool
		why  string
	}{
		{lc("ls"), true, ""},
		{lc("ls -1"), true, ""},
		{lc(`grep -R "Cargo.toml" -n`), true, ""},
		{lc("sed -n 1,5p file.txt"), true, ""},
		{lc("sed -n '1,5p' file.txt"), true, ""},
		{lc("find . -name file.txt"), true, ""},
		{lc(`grep -R "Cargo.toml" -n || true`), true, ""},
		{lc("ls && pwd"), true, ""},
		{lc("echo 'hi' ; ls"), true, ""},
		{lc("ls | wc -l"), true, ""},
		{lc("ls\npwd"), true, "newline separates commands"},
		{lc("git status && git diff"), true, ""},
		{[]string{"zsh", "-lc", "ls"}, true, "zsh is treated like bash"},
		{[]string{"bash", "-c", "ls"}, true, "-c as in current Codex"},
		{[]string{"/bin/bash", "-lc", "ls && pwd"}, true, "shell by path"},

		{lc("git -C . branch -d feature"), false, ""},
		{lc("cargo build"), false, "not safe inside"},
		{[]string{"bash", "-lc", "git", "status"}, false, "four-arg form"},
		{lc("'git status'"), false, "quoted program name"},
		{lc("find . -name file.txt -delete"), false, "unsafe find option"},
		{lc("ls && rm -rf /"), false, "unsafe command in sequence"},
		{lc("(ls)"), false, "subshell"},
		{lc("ls || (pwd && echo hi)"), false, "nested subshell"},
		{lc("ls > out.txt"), false, "redirection"},
		{lc("ls 2>/dev/null"), false, "redirection"},
		{lc("cat < in"), false, "input redirection"},
		{lc("echo $(pwd)"), false, "command substitution"},
		{lc("echo `pwd`"), false, "backticks"},
		{lc("echo $HOME"), false, "variable"},
		{lc(`echo "hi $USER"`), false, "expansion in double quotes"},
		{lc("ls *.go"), false, "glob"},
		{lc("FOO=bar ls"), false, "assignment prefix"},
		{lc("ls &"), false, "background"},
		{lc("ls &&"), false, "trailing operator"},
		{lc(""), false, "no commands"},
		{[]string{"sh", "-x", "ls"}, false, "unknown flag"},
		{[]string{"python3", "-lc", "ls"}, false, "not a shell"},
	}
	for _, c := range cases {
		assert.Equal(t, c.safe, policy.IsKnownSafe(c.cmd), "%q %s", c.cmd, c.why)
	}
}

func TestMightBeDangerous(t *testing.T) {
	cases := []struct {
		cmd       []string
		dangerous bool
	}{
		{argv("git reset"), true},
		{argv("git reset --hard"), true},
		{argv("git rm file"), true},
		{argv("/usr/bin/git reset --hard"), true},
		{argv("sudo git reset --hard"), true},
		{argv("git -C . reset"), true},
		{argv("git -c color.ui=false branch -D feature"), true},
		{argv("git branch -d feature"), true},
		{argv("git branch -D feature"), true},
		{argv("git branch --delete feature"), true},
		{argv("git branch -dv feature"), true},
		{argv("git branch -vd feature"), true},
		{argv("git branch -vD feature"), true},
		{argv("git branch -Dvv feature"), true},
		{argv("git push --force origin main"), true},
		{argv("git push -f origin main"), true},
		{argv("git -C . push --force-with-lease origin main"), true},
		{argv("git push --force-with-lease=main origin main"), true},
		{argv("git push --force-if-includes origin main"), true},
		{argv("git push origin +main"), true},
		{argv("git push origin +refs/heads/main:refs/heads/main"), true},
		{argv("git push --delete origin feature"), true},
		{argv("git push -d origin feature"), true},
		{argv("git push origin :feature"), true},
		{argv("git clean -f"), true},
		{argv("git clean -fdx"), true},
		{argv("git clean -xdf"), true},
		{argv("git clean --force"), true},
		{argv("rm -f /"), true},
		{argv("rm -rf /"), true},
		{argv("rm -Rf x"), true},
		{argv("rm -fr x"), true},
		{argv("rm -fR x"), true},
		{argv("rm -r /tmp/foo"), true},
		{argv("rm --force x"), true},
		{argv("rm --recursive x"), true},
		{argv("rm -r -f target"), true},
		{argv("rm x -f"), true},
		{argv("rm --no-preserve-root /"), true},
		{argv("/bin/rm -fr target"), true},
		{argv("sudo rm -rf /"), true},
		{argv("sudo -u root /bin/rm --force target"), true},
		{argv("sudo -uroot /bin/rm -f target"), true},
		{argv("sudo -nu root /bin/rm -f target"), true},
		{argv("sudo --preserve-env sudo -n rm -rf target"), true},
		{argv("sudo -- rm -rf x"), true},
		{lc("git reset --hard"), true},
		{[]string{"zsh", "-lc", "git reset --hard"}, true},
		{lc("git branch --delete feature"), true},
		{lc("git -C . branch -d feature"), true},
		{lc("git push origin :feature"), true},
		{lc("ls && rm -rf /"), true},

		{argv("git status"), false},
		{lc("git status"), false},
		{argv("git checkout reset"), false}, // the first word is the subcommand
		{argv("git push origin main"), false},
		{argv("git branch feature"), false},
		{argv("git clean -n"), false},
		{argv("rm file"), false},
		{argv("rm -i file"), false},
		{argv("rm -- -f"), false},
		{argv("ls -rf"), false},
		{argv("sudo ls"), false},
		{argv("sudo"), false},
		{lc("rm -rf $DIR"), false}, // not a plain script, so not split
		{nil, false},
	}
	for _, c := range cases {
		assert.Equal(t, c.dangerous, policy.MightBeDangerous(c.cmd), "%q", c.cmd)
	}
}

// Known-safe and dangerous never overlap on the listed examples.
func TestSafeAndDangerousDisjoint(t *testing.T) {
	for _, s := range []string{"git status", "git branch -d x", "rm -rf x", "ls", "git reset"} {
		cmd := argv(s)
		assert.False(t, policy.IsKnownSafe(cmd) && policy.MightBeDangerous(cmd), fmt.Sprint(cmd))
	}
}
