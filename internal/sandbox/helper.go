package sandbox

import (
	"fmt"
	"os"
)

// The re-executed binary has three jobs: a probe (`<exe>
// __appserver-sandbox --probe` exits 0 at once, which tells whether the
// kernel lets us start a process in new user and network namespaces), the
// init of each Landlock launcher's PID namespace (--init,
// isolate_linux.go), and the launcher of each pooled bubblewrap sandbox
// (--box, boxlauncher_linux.go). Other commands start on launcher threads
// (launcher_linux.go) or under bubblewrap, with no helper process in
// between.
const flagProbe = "--probe"

// flagInit makes the helper the init of a Landlock launcher's PID
// namespace (isolate_linux.go).
const flagInit = "--init"

// flagBox makes the helper a pooled sandbox's launcher
// (boxlauncher_linux.go).
const flagBox = "--box"

// helperPrefix starts every message the helper prints about itself.
const helperPrefix = "appserver sandbox: "

// MaybeRunHelper runs the sandbox helper and exits when the process was
// started as one (os.Args[1] == HelperCommand); otherwise it returns at once.
// Call it first thing in main, before flags, signals or goroutines.
func MaybeRunHelper() {
	if len(os.Args) > 1 && os.Args[1] == HelperCommand {
		os.Exit(HelperMain(os.Args[2:]))
	}
}

// HelperMain is the helper's entry point: args are the arguments after
// HelperCommand. It returns the exit code: 0 for a probe, init's when
// acting as a PID namespace's init, the launcher's when acting as a
// pooled sandbox's, 2 for anything else.
func HelperMain(args []string) int {
	if len(args) == 1 && args[0] == flagProbe {
		return 0
	}
	if len(args) == 1 && args[0] == flagInit {
		return runInit()
	}
	if len(args) == 1 && args[0] == flagBox {
		return runBox()
	}
	fmt.Fprintf(os.Stderr, "%sunexpected arguments %q\n", helperPrefix, args)
	return 2
}
