package shell

import "github.com/appserver/appserver/internal/registry"

// Tool names (docs/tools.md §2.1). Every alias is registered whichever tool is
// offered, so old transcripts keep working.
const (
	// ShellName is the argv tool.
	ShellName = "shell"
	// ShellCommandName is the string tool.
	ShellCommandName = "shell_command"
	// ContainerExecName is an older alias of shell.
	ContainerExecName = "container.exec"
	// LocalShellName is the Responses-native tool (local_shell_call items).
	LocalShellName = registry.LocalShellName
)

// ShellDescription is the shell tool's description on Unix, as Codex sends it.
const ShellDescription = "Runs a shell command and returns its output.\n" +
	"- The arguments to `shell` will be passed to execvp(). Most terminal commands should be prefixed with [\"bash\", \"-lc\"].\n" +
	"- Always set the `workdir` param when using the shell function. Do not use `cd` unless absolutely necessary."

// ShellCommandDescription is the shell_command tool's description on Unix.
const ShellCommandDescription = "Runs a shell command and returns its output.\n" +
	"- Always set the `workdir` param when using the shell_command function. Do not use `cd` unless absolutely necessary."

// Parameter descriptions. The approval parameters use the wording of the
// 0.169 binary (observed on its exec_command spec, which shares them).
const (
	descShellCommandArgv   = "The command to execute"
	descShellCommandScript = "The shell script to execute in the user's default shell"
	descWorkdir            = "The working directory to execute the command in"
	descTimeout            = "The timeout for the command in milliseconds"
	descLogin              = "Whether to run the shell with login shell semantics. Defaults to true."
	descSandboxPermissions = "Per-command sandbox override. Defaults to `use_default`; use `require_escalated` for unsandboxed execution."
	descJustification      = "User-facing approval question for `require_escalated`; omit otherwise."
	descPrefixRule         = "Reusable approval prefix for `cmd`, only with `sandbox_permissions: \"require_escalated\"`; for example [\"git\", \"pull\"]."
)

// SpecOptions selects the optional parts of the specs.
type SpecOptions struct {
	// NoLoginParam leaves out shell_command's `login` parameter, as Codex
	// does when login shells are not allowed by config.
	NoLoginParam bool
}

func approvalParams(props map[string]*registry.Schema) {
	perms := registry.String(descSandboxPermissions)
	perms.Enum = []any{"use_default", "require_escalated"}
	props["sandbox_permissions"] = perms
	props["justification"] = registry.String(descJustification)
	props["prefix_rule"] = registry.Array(registry.String(""), descPrefixRule)
}

// ShellSpec is the `shell` function spec (argv form, docs/tools.md §2.2).
func ShellSpec() registry.FunctionSpec {
	props := map[string]*registry.Schema{
		"command":    registry.Array(registry.String(""), descShellCommandArgv),
		"workdir":    registry.String(descWorkdir),
		"timeout_ms": registry.Number(descTimeout),
	}
	approvalParams(props)
	return registry.FunctionSpec{
		Name:        ShellName,
		Description: ShellDescription,
		Parameters:  registry.Object(props, []string{"command"}, registry.AllowAdditional(false)),
	}
}

// ShellCommandSpec is the `shell_command` function spec (string form,
// docs/tools.md §2.3).
func ShellCommandSpec(opts SpecOptions) registry.FunctionSpec {
	props := map[string]*registry.Schema{
		"command":    registry.String(descShellCommandScript),
		"workdir":    registry.String(descWorkdir),
		"timeout_ms": registry.Number(descTimeout),
	}
	if !opts.NoLoginParam {
		props["login"] = registry.Boolean(descLogin)
	}
	approvalParams(props)
	return registry.FunctionSpec{
		Name:        ShellCommandName,
		Description: ShellCommandDescription,
		Parameters:  registry.Object(props, []string{"command"}, registry.AllowAdditional(false)),
	}
}
