package policy

import "strings"

// sandboxDeniedKeywords are output fragments (matched case-insensitively)
// that mark a failure as a likely sandbox denial.
var sandboxDeniedKeywords = []string{
	"operation not permitted",
	"permission denied",
	"read-only file system",
	"seccomp",
	"sandbox",
	"landlock",
	"failed to write file",
}

// exitSIGSYS is the exit code of a process killed by seccomp's SIGSYS.
const exitSIGSYS = 128 + 31

// SandboxRun is the result of a sandboxed attempt, as the denial heuristic
// sees it.
type SandboxRun struct {
	// Sandboxed is false when the attempt ran without a sandbox.
	Sandboxed bool
	// ExitCode is the process's exit code (128+signal when killed).
	ExitCode int
	// TimedOut is set when the attempt was stopped by its timeout.
	TimedOut bool
	// Stdout, Stderr and Aggregated are the captured outputs; any of them
	// may be empty.
	Stdout, Stderr, Aggregated string
}

// IsSandboxDenial applies the sandbox-denial heuristic (docs/tools.md §4.9) to a
// run: only a sandboxed, failed run that did not time out can be a denial;
// it is one when any output contains a denial keyword, and otherwise when
// the exit code is neither 2, 126 nor 127 but is SIGSYS (128+31).
func IsSandboxDenial(r SandboxRun) bool {
	if !r.Sandboxed || r.TimedOut {
		return false
	}
	return LooksLikeSandboxDenial(r.ExitCode, r.Stdout, r.Stderr, r.Aggregated)
}

// LooksLikeSandboxDenial reports whether a failed sandboxed run (not a
// timeout) with this exit code and output looks denied by the sandbox. The
// order follows the reference's is_likely_sandbox_denied: exit 0 is never a
// denial; a denial keyword in any output is, whatever the exit code; then
// the shell's own failure codes 2, 126 and 127 are not; finally a SIGSYS
// exit is.
func LooksLikeSandboxDenial(exitCode int, outputs ...string) bool {
	if exitCode == 0 {
		return false
	}
	for _, out := range outputs {
		lower := strings.ToLower(out)
		for _, k := range sandboxDeniedKeywords {
			if strings.Contains(lower, k) {
				return true
			}
		}
	}
	switch exitCode {
	case 2, 126, 127:
		return false
	}
	return exitCode == exitSIGSYS
}
