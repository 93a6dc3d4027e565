package registry_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/registry/planning"
	"github.com/appserver/appserver/internal/skills"
	"github.com/appserver/appserver/internal/tools/agents"
	"github.com/appserver/appserver/internal/tools/applypatch"
	"github.com/appserver/appserver/internal/tools/execsession"
	"github.com/appserver/appserver/internal/tools/files"
	"github.com/appserver/appserver/internal/tools/goals"
	"github.com/appserver/appserver/internal/tools/shell"
)

// builtinSpecs are the specs of the built-in tools whose constructors this
// package can reach (the MCP resource and tool_search specs are
// unexported in their package).
func builtinSpecs() []registry.ToolSpec {
	a := agents.New(agents.Config{})
	specs := []registry.ToolSpec{
		planning.Spec(),
		shell.ShellSpec(),
		shell.ShellCommandSpec(shell.SpecOptions{}),
		shell.ShellCommandSpec(shell.SpecOptions{NoLoginParam: true}),
		execsession.ExecCommandSpec(true),
		execsession.ExecCommandSpec(false),
		execsession.WriteStdinSpec(),
		applypatch.FunctionSpec(),
		applypatch.FreeformSpec(),
		files.ListDirSpec(),
		files.ReadFileSpec(),
		files.GrepFilesSpec(),
		files.ViewImageSpec(),
		files.RequestUserInputSpec(),
		skills.Spec(),
		a.Spec(),
		a.SpecV2(),
	}
	for _, g := range goals.Specs() {
		specs = append(specs, g)
	}
	return specs
}

// TestBuiltinSpecsEncodeAsBefore holds the hand-written encoding of every
// reachable built-in spec, in the current and the classic schema model, to
// the bytes encoding/json wrote for it.
func TestBuiltinSpecsEncodeAsBefore(t *testing.T) {
	for _, spec := range builtinSpecs() {
		for _, s := range []registry.ToolSpec{spec, registry.ClassicSpec(spec)} {
			want, err := registry.ReflectiveSpecJSON(s)
			require.NoError(t, err)
			got, err := json.Marshal(s)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got), s.ToolName())
			// The turn loop sends what MarshalJSON writes, without
			// json.Marshal's check and copy.
			direct, err := s.MarshalJSON()
			require.NoError(t, err)
			require.Equal(t, string(want), string(direct), s.ToolName())

			f, ok := s.(registry.FunctionSpec)
			if !ok {
				continue
			}
			want, err = registry.ReflectiveChatJSON(f)
			require.NoError(t, err)
			chat, ok, err := registry.ChatCompletionsTool(f)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, string(want), string(chat), "chat "+s.ToolName())
		}
	}
}
