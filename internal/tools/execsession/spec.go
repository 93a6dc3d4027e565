package execsession

import "github.com/appserver/appserver/internal/registry"

// The tool names.
const (
	// ExecCommandName starts a session.
	ExecCommandName = "exec_command"
	// WriteStdinName writes to (or polls) a session.
	WriteStdinName = "write_stdin"
)

// Descriptions as codex-cli 0.169 sends them.
const (
	// ExecCommandDescription is exec_command's description.
	ExecCommandDescription = "Runs a command in a PTY, returning output or a session ID for ongoing interaction."
	// WriteStdinDescription is write_stdin's description.
	WriteStdinDescription = "Writes characters to an existing unified exec session and returns recent output."
)

// maxOutputTokensDescription is shared by both tools.
const maxOutputTokensDescription = "Output token budget. Defaults to 10000 tokens; larger requests may be capped by policy."

// ExecCommandSpec returns exec_command's spec (strict:false), with the
// approval parameters sandbox_permissions, justification and prefix_rule.
// The login parameter is advertised only when allowLogin is true.
func ExecCommandSpec(allowLogin bool) registry.FunctionSpec {
	sandbox := registry.String("Per-command sandbox override. Defaults to `use_default`; use `require_escalated` for unsandboxed execution.")
	sandbox.Enum = []any{"use_default", "require_escalated"}
	props := map[string]*registry.Schema{
		"cmd":                 registry.String("Shell command to execute."),
		"justification":       registry.String("User-facing approval question for `require_escalated`; omit otherwise."),
		"max_output_tokens":   registry.Number(maxOutputTokensDescription),
		"prefix_rule":         registry.Array(registry.String(""), "Reusable approval prefix for `cmd`, only with `sandbox_permissions: \"require_escalated\"`; for example [\"git\", \"pull\"]."),
		"sandbox_permissions": sandbox,
		"shell":               registry.String("Shell binary to launch. Defaults to the user's default shell."),
		"tty":                 registry.Boolean("True allocates a PTY for the command; false or omitted uses plain pipes."),
		"workdir":             registry.String("Working directory for the command. Defaults to the turn cwd."),
		"yield_time_ms":       registry.Number("Wait before yielding output. Defaults to 10000 ms; effective range is 250-30000 ms."),
	}
	if allowLogin {
		props["login"] = registry.Boolean("True runs the shell with -l/-i semantics; false disables them. Defaults to true.")
	}
	return registry.FunctionSpec{
		Name:        ExecCommandName,
		Description: ExecCommandDescription,
		Parameters:  registry.Object(props, []string{"cmd"}, registry.AllowAdditional(false)),
	}
}

// WriteStdinSpec returns write_stdin's spec (strict:false).
func WriteStdinSpec() registry.FunctionSpec {
	props := map[string]*registry.Schema{
		"chars":             registry.String("Bytes to write to stdin. Defaults to empty, which polls without writing."),
		"max_output_tokens": registry.Number(maxOutputTokensDescription),
		"session_id":        registry.Number("Identifier of the running unified exec session."),
		"yield_time_ms":     registry.Number("Wait before yielding output. Non-empty writes default to 250 ms and cap at 30000 ms; empty polls wait 5000-300000 ms by default."),
	}
	return registry.FunctionSpec{
		Name:        WriteStdinName,
		Description: WriteStdinDescription,
		Parameters:  registry.Object(props, []string{"session_id"}, registry.AllowAdditional(false)),
	}
}
