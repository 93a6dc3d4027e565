package shell

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// UserShell is the shell shell_command runs scripts with.
type UserShell struct {
	// Path is the shell binary.
	Path string
}

// Kind is the shell's base name ("bash", "zsh", "sh", ...).
func (s UserShell) Kind() string { return filepath.Base(s.Path) }

// Argv builds the invocation of script (docs/tools.md §2.3): bash, zsh and sh
// get [path, "-lc"|"-c", script] (-lc for login semantics); other shells
// get [path, "-c", script].
func (s UserShell) Argv(script string, login bool) []string {
	flag := "-c"
	switch s.Kind() {
	case "bash", "zsh", "sh":
		if login {
			flag = "-lc"
		}
	}
	return []string{s.Path, flag, script}
}

// DetectUserShell returns the current user's login shell: the passwd
// entry's shell (as Codex reads it), else $SHELL, else /bin/bash or /bin/sh.
func DetectUserShell() UserShell {
	if sh := passwdShell(os.Getuid()); sh != "" && executable(sh) {
		return UserShell{Path: sh}
	}
	if sh := os.Getenv("SHELL"); filepath.IsAbs(sh) && executable(sh) {
		return UserShell{Path: sh}
	}
	if executable("/bin/bash") {
		return UserShell{Path: "/bin/bash"}
	}
	return UserShell{Path: "/bin/sh"}
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// passwdShell reads the shell of uid from /etc/passwd ("" when absent or a
// nologin placeholder).
func passwdShell(uid int) string {
	f, err := os.Open("/etc/passwd")
	if err != nil {
		return ""
	}
	defer f.Close()
	want := strconv.Itoa(uid)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) == 7 && fields[2] == want {
			sh := fields[6]
			if strings.HasSuffix(sh, "nologin") || strings.HasSuffix(sh, "/false") {
				return ""
			}
			return sh
		}
	}
	return ""
}
