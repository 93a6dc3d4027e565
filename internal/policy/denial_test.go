package policy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/appserver/appserver/internal/policy"
)

func TestLooksLikeSandboxDenial(t *testing.T) {
	cases := []struct {
		name   string
		code   int
		output string
		denied bool
	}{
		{"success is never a denial", 0, "Permission denied", false},
		{"operation not permitted", 1, "touch: cannot touch '/etc/x': Operation not permitted", true},
		{"permission denied", 1, "bash: /etc/x: Permission denied", true},
		{"read-only file system", 1, "touch: cannot touch 'x': Read-only file system", true},
		{"seccomp", 1, "killed by SECCOMP", true},
		{"sandbox", 1, "blocked by the Sandbox", true},
		{"landlock", 1, "landlock: restricted", true},
		{"failed to write file", 1, "error: FAILED TO WRITE FILE out.bin", true},
		{"keyword wins over exit 126", 126, "bash: ./x: Permission denied", true},
		{"keyword wins over exit 127", 127, "sandbox-exec: not found", true},
		{"keyword wins over exit 2", 2, "Operation not permitted", true},
		{"plain failure", 1, "assertion failed", false},
		{"misuse of builtin", 2, "", false},
		{"not executable", 126, "", false},
		{"not found", 127, "bash: foo: command not found", false},
		{"SIGSYS", 128 + 31, "", true},
		{"other signal", 128 + 9, "", false},
		{"generic exit code", 3, "", false},
		{"negative code", -1, "", false},
	}
	for _, c := range cases {
		assert.Equal(t, c.denied, policy.LooksLikeSandboxDenial(c.code, c.output), c.name)
	}
	// Any of several outputs may carry the keyword.
	assert.True(t, policy.LooksLikeSandboxDenial(1, "", "", "mkdir: Permission denied"))
	assert.False(t, policy.LooksLikeSandboxDenial(1))
}

func TestIsSandboxDenial(t *testing.T) {
	base := policy.SandboxRun{Sandboxed: true, ExitCode: 1, Stderr: "Read-only file system"}
	assert.True(t, policy.IsSandboxDenial(base))
	r := base
	r.Sandboxed = false
	assert.False(t, policy.IsSandboxDenial(r), "an unsandboxed run is never a sandbox denial")
	r = base
	r.TimedOut = true
	assert.False(t, policy.IsSandboxDenial(r), "a timeout is not a denial")
	r = policy.SandboxRun{Sandboxed: true, ExitCode: 1, Stdout: "sandbox says no"}
	assert.True(t, policy.IsSandboxDenial(r))
	r = policy.SandboxRun{Sandboxed: true, ExitCode: 159}
	assert.True(t, policy.IsSandboxDenial(r))
	r = policy.SandboxRun{Sandboxed: true, ExitCode: 1, Aggregated: "ok"}
	assert.False(t, policy.IsSandboxDenial(r))
}
