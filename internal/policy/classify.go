package policy

import (
	"path/filepath"
	"runtime"
	"strings"
)

// IsKnownSafe reports whether argv is a known-safe read-only command
// (docs/tools.md §4.5): one of the always-safe programs, base64/find/rg/git/sed
// without their unsafe options, an exact `<program> --version` probe, or a
// `bash|zsh -lc` plain script (see ParsePlainScript) every command of which
// is itself known safe. zsh is treated like bash. Program names must be bare
// (no path), as in current Codex.
func IsKnownSafe(argv []string) bool {
	if len(argv) > 0 && argv[0] == "zsh" {
		argv = append([]string{"bash"}, argv[1:]...)
	}
	if safeToExec(argv) {
		return true
	}
	cmds, ok := ShellPlainCommands(argv)
	if !ok || len(cmds) == 0 {
		return false
	}
	for _, c := range cmds {
		if !safeToExec(c) {
			return false
		}
	}
	return true
}

var alwaysSafe = map[string]bool{
	"cat": true, "cd": true, "cut": true, "echo": true, "expr": true, "false": true,
	"grep": true, "head": true, "id": true, "ls": true, "nl": true, "paste": true,
	"pwd": true, "rev": true, "seq": true, "stat": true, "tail": true, "tr": true,
	"true": true, "uname": true, "uniq": true, "wc": true, "which": true, "whoami": true,
}

// safeToExec is the single-command check (no script splitting).
func safeToExec(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	prog := argv[0]
	if prog == "" || strings.ContainsRune(prog, '/') {
		return false
	}
	if len(argv) == 2 && argv[1] == "--version" {
		return true
	}
	if alwaysSafe[prog] {
		return true
	}
	args := argv[1:]
	switch prog {
	case "numfmt", "tac":
		return runtime.GOOS == "linux"
	case "base64":
		for _, a := range args {
			if a == "-o" || a == "--output" || strings.HasPrefix(a, "--output=") || strings.HasPrefix(a, "-o") && a != "-o" {
				return false
			}
		}
		return true
	case "find":
		for _, a := range args {
			switch a {
			case "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls", "-fprint", "-fprint0", "-fprintf":
				return false
			}
		}
		return true
	case "rg":
		for _, a := range args {
			switch {
			case a == "--search-zip", a == "-z",
				a == "--pre", strings.HasPrefix(a, "--pre="),
				a == "--hostname-bin", strings.HasPrefix(a, "--hostname-bin="):
				return false
			}
		}
		return true
	case "git":
		return gitIsSafe(args)
	case "sed":
		return len(argv) <= 4 && len(argv) >= 3 && argv[1] == "-n" && isSedPrintArg(argv[2])
	}
	return false
}

// gitUnsafeGlobal reports whether a: global option before the subcommand makes
// git unsafe to auto-run (it can redirect the repository, run programs or
// page through one).
func gitUnsafeGlobal(a string) bool {
	switch a {
	case "-C", "-c", "-p", "--paginate", "--config-env", "--exec-path", "--git-dir",
		"--namespace", "--super-prefix", "--work-tree":
		return true
	}
	for _, p := range []string{"--config-env=", "--exec-path=", "--git-dir=", "--namespace=", "--super-prefix=", "--work-tree="} {
		if strings.HasPrefix(a, p) {
			return true
		}
	}
	return len(a) > 2 && (strings.HasPrefix(a, "-C") || strings.HasPrefix(a, "-c"))
}

// gitIsSafe checks the arguments after "git".
func gitIsSafe(args []string) bool {
	// A config override anywhere (-c k=v, -ck=v, --config-env) can make git run
	// an arbitrary pager or helper.
	for _, a := range args {
		if a == "-c" || a == "--config-env" || len(a) > 2 && strings.HasPrefix(a, "-c") && !strings.HasPrefix(a, "--") || strings.HasPrefix(a, "--config-env=") {
			return false
		}
	}
	sub := -1
	for i, a := range args {
		if gitUnsafeGlobal(a) {
			return false
		}
		if strings.HasPrefix(a, "-") {
			continue // harmless global flags such as --no-pager or -P
		}
		sub = i
		break
	}
	if sub < 0 {
		return false
	}
	rest := args[sub+1:]
	for _, a := range rest {
		switch {
		case a == "--output", a == "--ext-diff", a == "--textconv", a == "--exec", a == "--paginate",
			strings.HasPrefix(a, "--output="), strings.HasPrefix(a, "--exec="):
			return false
		}
	}
	switch args[sub] {
	case "status", "log", "diff", "show":
		return true
	case "branch":
		return gitBranchReadOnly(rest)
	}
	return false
}

// gitBranchReadOnly accepts a bare `git branch` or one with only listing and
// display flags; anything else may create, rename or delete a branch.
func gitBranchReadOnly(args []string) bool {
	if len(args) == 0 {
		return true
	}
	for _, a := range args {
		switch a {
		case "--list", "-l", "--show-current", "-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose":
		default:
			if !strings.HasPrefix(a, "--format=") {
				return false
			}
		}
	}
	return true
}

// isSedPrintArg matches /^(\d+,)?\d+p$/.
func isSedPrintArg(s string) bool {
	core, ok := strings.CutSuffix(s, "p")
	if !ok {
		return false
	}
	a, b, two := strings.Cut(core, ",")
	if !allDigits(a) {
		return false
	}
	return !two || allDigits(b)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// MightBeDangerous reports whether argv looks destructive (docs/tools.md §4.6):
// `git reset`, `git rm`, `git branch -d/-D/--delete`, force or deleting
// `git push` forms, `git clean -f`, `rm` with a force or recursive flag (or
// --no-preserve-root), each also behind `sudo [options]` and inside a
// `bash|zsh -lc` plain script.
func MightBeDangerous(argv []string) bool {
	if dangerousToExec(argv) {
		return true
	}
	if cmds, ok := ShellPlainCommands(argv); ok {
		for _, c := range cmds {
			if dangerousToExec(c) {
				return true
			}
		}
	}
	return false
}

func dangerousToExec(argv []string) bool {
	for len(argv) > 0 {
		prog := argv[0]
		switch {
		case strings.HasSuffix(prog, "git"):
			return gitIsDangerous(argv[1:])
		case filepath.Base(prog) == "rm":
			return rmIsDangerous(argv[1:])
		case filepath.Base(prog) == "sudo":
			argv = sudoCommand(argv)
		default:
			return false
		}
	}
	return false
}

// gitValueGlobal reports whether a is a git global option whose value is the
// next argument.
func gitValueGlobal(a string) bool {
	switch a {
	case "-C", "-c", "--config-env", "--exec-path", "--git-dir", "--namespace", "--super-prefix", "--work-tree":
		return true
	}
	return false
}

// gitSubcommand finds git's subcommand (the first non-option word after the
// global options and their values).
func gitSubcommand(args []string) (int, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if gitValueGlobal(a) {
			i++
			continue
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		return i, true
	}
	return 0, false
}

func gitIsDangerous(args []string) bool {
	i, ok := gitSubcommand(args)
	if !ok {
		return false
	}
	rest := args[i+1:]
	switch args[i] {
	case "reset", "rm":
		return true
	case "branch":
		for _, a := range rest {
			if a == "--delete" || strings.HasPrefix(a, "--delete=") || shortFlagHas(a, 'd') || shortFlagHas(a, 'D') {
				return true
			}
		}
	case "push":
		for _, a := range rest {
			switch {
			case a == "--force", a == "--force-with-lease", a == "--force-if-includes", a == "--delete",
				strings.HasPrefix(a, "--force-with-lease="), strings.HasPrefix(a, "--force-if-includes="),
				strings.HasPrefix(a, "--delete="),
				shortFlagHas(a, 'f'), shortFlagHas(a, 'd'),
				// +<refspec> forces an update, :<dst> deletes a remote ref.
				len(a) > 1 && (a[0] == '+' || a[0] == ':'):
				return true
			}
		}
	case "clean":
		for _, a := range rest {
			if a == "--force" || strings.HasPrefix(a, "--force=") || shortFlagHas(a, 'f') {
				return true
			}
		}
	}
	return false
}

// shortFlagHas reports whether a is a short-flag group (-x, -xyz) containing c.
func shortFlagHas(a string, c byte) bool {
	return len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.IndexByte(a[1:], c) >= 0
}

// rmIsDangerous flags rm with -f/--force, -r/-R/--recursive (alone or in a
// short-flag group) or --no-preserve-root before "--"; a plain `rm file` is
// not flagged.
func rmIsDangerous(args []string) bool {
	for _, a := range args {
		switch {
		case a == "--":
			return false
		case a == "--force", a == "--recursive", a == "--no-preserve-root":
			return true
		case shortFlagHas(a, 'f'), shortFlagHas(a, 'r'), shortFlagHas(a, 'R'):
			return true
		}
	}
	return false
}

// sudoCommand returns the command sudo would run, skipping sudo's options and
// their values; nil when there is none.
func sudoCommand(argv []string) []string {
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			return argv[i+1:]
		}
		if a == "-" || !strings.HasPrefix(a, "-") {
			return argv[i:]
		}
		switch a {
		case "--auth-type", "--chdir", "--chroot", "--close-from", "--command-timeout",
			"--group", "--host", "--prompt", "--role", "--type", "--user":
			i++
			continue
		}
		if !strings.HasPrefix(a, "--") {
			// In a short-option group the first option taking a value consumes
			// the rest of the word, or the next argument when it ends the word.
			for j := 1; j < len(a); j++ {
				if strings.IndexByte("aCDghpRrTtu", a[j]) >= 0 {
					if j == len(a)-1 {
						i++
					}
					break
				}
			}
		}
	}
	return nil
}
