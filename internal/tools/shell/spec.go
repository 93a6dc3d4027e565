package shell

import (
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
)

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

// ShellDescription is the shell tool's description on Unix.
const ShellDescription = "Run a program and answer with its output.\n" +
	"- `command` is the argv given to execvp(), not a shell line: to use shell syntax, run it through a shell, as in [\"bash\", \"-lc\", \"make test\"].\n" +
	"- Give `workdir` on every call rather than changing directory with `cd`."

// ShellCommandDescription is the shell_command tool's description on Unix.
const ShellCommandDescription = "Run a script in the user's shell and answer with its output.\n" +
	"- Give `workdir` on every call rather than changing directory with `cd`."

// Parameter descriptions; the escalation ones are policy's, shared with
// exec_command.
const (
	descShellCommandArgv   = "The program to run followed by its arguments"
	descShellCommandScript = "The script the user's shell runs"
	descWorkdir            = "Directory to run the command in"
	descTimeout            = "Time limit for the command, in milliseconds"
	descLogin              = "Start the shell as a login shell, which reads the user's profile. Defaults to true."
)

// SpecOptions selects the optional parts of the specs.
type SpecOptions struct {
	// NoLoginParam leaves out shell_command's `login` parameter, as Codex
	// does when login shells are not allowed by config.
	NoLoginParam bool
}

func approvalParams(props map[string]*registry.Schema) {
	perms := registry.String(policy.SandboxPermissionsDescription)
	perms.Enum = []any{"use_default", "require_escalated"}
	props["sandbox_permissions"] = perms
	props["justification"] = registry.String(policy.JustificationDescription)
	props["prefix_rule"] = registry.Array(registry.String(""), policy.PrefixRuleDescription)
}

// buildShellSpec builds ShellSpec's value.
func buildShellSpec() registry.FunctionSpec {
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

var shellSpecStatic = registry.Static(buildShellSpec)

// ShellSpec is the `shell` function spec (argv form, docs/tools.md §2.2).
// It is built once and shared (registry.Static).
func ShellSpec() registry.FunctionSpec { return shellSpecStatic() }

// ShellCommandSpec is the `shell_command` function spec (string form,
// docs/tools.md §2.3).
func ShellCommandSpec(opts SpecOptions) registry.FunctionSpec {
	if opts.NoLoginParam {
		return shellCommandNoLoginSpec()
	}
	return shellCommandSpec()
}

// The two forms of ShellCommandSpec, each built once and shared
// (registry.Static).
var (
	shellCommandSpec        = registry.Static(func() registry.FunctionSpec { return buildShellCommandSpec(SpecOptions{}) })
	shellCommandNoLoginSpec = registry.Static(func() registry.FunctionSpec { return buildShellCommandSpec(SpecOptions{NoLoginParam: true}) })
)

// buildShellCommandSpec builds ShellCommandSpec's values.
func buildShellCommandSpec(opts SpecOptions) registry.FunctionSpec {
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
