package execsession

import (
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
)

// The tool names.
const (
	// ExecCommandName starts a session.
	ExecCommandName = "exec_command"
	// WriteStdinName writes to (or polls) a session.
	WriteStdinName = "write_stdin"
)

// The tools' descriptions.
const (
	// ExecCommandDescription is exec_command's description.
	ExecCommandDescription = "Start a shell command and answer with what it printed before it exited or the wait ran out. A command still running then keeps a session_id, to be given to write_stdin to type into it or read more of its output."
	// WriteStdinDescription is write_stdin's description.
	WriteStdinDescription = "Type text into the stdin of a command exec_command left running, or send nothing to only wait, and answer with the output it printed since the last read."
)

// maxOutputTokensDescription is shared by both tools.
const maxOutputTokensDescription = "Most tokens of output to answer with: 10000 when omitted; a policy limit may lower it."

// ExecCommandSpec returns exec_command's spec (strict:false), with the
// approval parameters sandbox_permissions, justification and prefix_rule.
// The login parameter is advertised only when allowLogin is true. Each of
// the two is built once and shared (registry.Static).
func ExecCommandSpec(allowLogin bool) registry.FunctionSpec {
	if allowLogin {
		return execCommandLoginSpec()
	}
	return execCommandSpec()
}

var (
	execCommandSpec      = registry.Static(func() registry.FunctionSpec { return buildExecCommandSpec(false) })
	execCommandLoginSpec = registry.Static(func() registry.FunctionSpec { return buildExecCommandSpec(true) })
)

// buildExecCommandSpec builds ExecCommandSpec's values.
func buildExecCommandSpec(allowLogin bool) registry.FunctionSpec {
	sandbox := registry.String(policy.SandboxPermissionsDescription)
	sandbox.Enum = []any{"use_default", "require_escalated"}
	props := map[string]*registry.Schema{
		"cmd":                 registry.String("The command line the shell runs."),
		"justification":       registry.String(policy.JustificationDescription),
		"max_output_tokens":   registry.Number(maxOutputTokensDescription),
		"prefix_rule":         registry.Array(registry.String(""), policy.PrefixRuleDescription),
		"sandbox_permissions": sandbox,
		"shell":               registry.String("The shell program to run the command with; the user's shell when omitted."),
		"tty":                 registry.Boolean("Run the command on a pseudo-terminal when true; it gets plain pipes when false or omitted."),
		"workdir":             registry.String("Directory to run the command in, absolute or relative to the turn's working directory (the default)."),
		"yield_time_ms":       registry.Number("How long to wait for output before answering, in milliseconds: 10000 when omitted, and never under 250 or over 30000."),
	}
	if allowLogin {
		props["login"] = registry.Boolean("Start the shell as a login shell, which reads the user's profile, when true (the default); false starts a plain shell.")
	}
	return registry.FunctionSpec{
		Name:        ExecCommandName,
		Description: ExecCommandDescription,
		Parameters:  registry.Object(props, []string{"cmd"}, registry.AllowAdditional(false)),
	}
}

// buildWriteStdinSpec builds WriteStdinSpec's value.
func buildWriteStdinSpec() registry.FunctionSpec {
	props := map[string]*registry.Schema{
		"chars":             registry.String("Text to type into the command's stdin. Empty or omitted sends nothing and only collects new output."),
		"max_output_tokens": registry.Number(maxOutputTokensDescription),
		"session_id":        registry.Number("The session_id exec_command answered with for a command still running."),
		"yield_time_ms":     registry.Number("How long to wait for output before answering, in milliseconds. After writing text: 250 when omitted, at most 30000. When sending nothing: at least 5000 and at most 300000."),
	}
	return registry.FunctionSpec{
		Name:        WriteStdinName,
		Description: WriteStdinDescription,
		Parameters:  registry.Object(props, []string{"session_id"}, registry.AllowAdditional(false)),
	}
}

var writeStdinSpecStatic = registry.Static(buildWriteStdinSpec)

// WriteStdinSpec returns write_stdin's spec (strict:false).
// It is built once and shared (registry.Static).
func WriteStdinSpec() registry.FunctionSpec { return writeStdinSpecStatic() }
