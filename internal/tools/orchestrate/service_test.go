package orchestrate

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/registry/planning"
	"github.com/appserver/appserver/internal/tools/applypatch"
	"github.com/appserver/appserver/internal/tools/execsession"
	"github.com/appserver/appserver/internal/tools/files"
	"github.com/appserver/appserver/internal/tools/goals"
	"github.com/appserver/appserver/internal/tools/shell"
	"github.com/appserver/appserver/internal/turns"
)

// specNames lists the offered tools: function names, "freeform:<name>"
// for freeform tools, "web_search" and "ns:<name>" for namespaces.
func specNames(specs []registry.ConfiguredToolSpec) map[string]bool {
	out := map[string]bool{}
	for _, s := range specs {
		switch v := s.Spec.(type) {
		case registry.FunctionSpec:
			out[v.Name] = true
		case registry.FreeformSpec:
			out["freeform:"+v.Name] = true
		case registry.WebSearchSpec:
			out["web_search"] = true
		case registry.NamespaceSpec:
			out["ns:"+v.Name] = true
		}
	}
	return out
}

// The tool set follows the model's and provider's configuration.
func TestBuildToolSet(t *testing.T) {
	ws := workspace(t)
	for _, tc := range []struct {
		name    string
		cfg     Config
		model   string
		mode    string
		has     []string
		hasNot  []string
		provide string
		thread  map[string]string // the thread's config overrides, dotted
		// features are the feature switches of the thread's principal's
		// configuration (ToolContext.Features).
		features map[string]bool
	}{
		{name: "defaults", has: []string{"shell_command", "freeform:apply_patch", "exec_command", "write_stdin", "update_plan", "read_file", "list_dir", "grep_files", "view_image"},
			hasNot: []string{"shell", "request_user_input", "web_search", "apply_patch"}},
		{name: "chat provider gets the JSON apply_patch", cfg: Config{Providers: map[string]config.ModelProvider{"p": {WireAPI: config.WireAPIChat}}}, provide: "p",
			has: []string{"apply_patch"}, hasNot: []string{"freeform:apply_patch"}},
		{name: "apply_patch_tool_type wins", cfg: Config{Providers: map[string]config.ModelProvider{"p": {WireAPI: config.WireAPIChat}},
			Models: map[string]config.ModelEntry{"m": {ApplyPatchToolType: "freeform"}}}, provide: "p", model: "m",
			has: []string{"freeform:apply_patch"}},
		{name: "apply_patch_tool_type function", cfg: Config{Models: map[string]config.ModelEntry{"m": {ApplyPatchToolType: "function"}}}, model: "m",
			has: []string{"apply_patch"}, hasNot: []string{"freeform:apply_patch"}},
		{name: "argv shell", cfg: Config{Models: modelShell("m", "default")}, model: "m", has: []string{"shell", "exec_command"}, hasNot: []string{"shell_command"}},
		{name: "shell disabled", cfg: Config{Models: modelShell("m", "disabled")}, model: "m", hasNot: []string{"shell", "shell_command", "exec_command", "write_stdin"}},
		{name: "web search", cfg: Config{WebSearch: "live"}, has: []string{"web_search"}},
		{name: "plan mode asks the user", mode: "plan", has: []string{"request_user_input"}},
		{name: "unified exec off keeps the shell", thread: map[string]string{"features.unified_exec": "false"},
			has: []string{"shell_command", "freeform:apply_patch"}, hasNot: []string{"exec_command", "write_stdin"}},
		{name: "the configuration's switches turn tools off", features: map[string]bool{"unified_exec": false, "view_image": false, "goals": false},
			has: []string{"shell_command"}, hasNot: []string{"exec_command", "write_stdin", "view_image"}},
		{name: "the configuration's shell switch", features: map[string]bool{"shell_tool": false},
			has: []string{"update_plan"}, hasNot: []string{"shell_command", "exec_command", "read_file"}},
		{name: "the thread's own switch wins over the configuration's", features: map[string]bool{"shell_tool": false, "view_image": true},
			thread: map[string]string{"features.shell_tool": "true", "features.view_image": "false"},
			has:    []string{"shell_command", "exec_command"}, hasNot: []string{"view_image"}},
		{name: "update_plan off as a table", thread: map[string]string{"tools.update_plan.enabled": "false", "web_search": `"cached"`},
			has: []string{"shell_command", "web_search"}, hasNot: []string{"update_plan"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, tc.cfg)
			tu := newTurn(t, s, ws, turnOpts{model: tc.model, mode: tc.mode})
			tu.tc.Provider = tc.provide
			tu.tc.Features = tc.features
			for k, v := range tc.thread {
				if tu.tc.Config == nil {
					tu.tc.Config = map[string]json.RawMessage{}
				}
				tu.tc.Config[k] = json.RawMessage(v)
			}
			specs, _, err := s.Build(tu.tc)
			require.NoError(t, err)
			names := specNames(specs)
			for _, n := range tc.has {
				require.True(t, names[n], "%s offered; got %v", n, names)
			}
			for _, n := range tc.hasNot {
				require.False(t, names[n], "%s not offered; got %v", n, names)
			}
		})
	}
}

// titleThreadConfig is the config the real TUI (0.169.0) sends in the
// thread/start of its hidden title thread, as recorded.
func titleThreadConfig() map[string]string {
	return map[string]string{
		"features.tool_suggest": "false", "features.goals": "false", "features.unified_exec": "false",
		"features.enable_fanout": "false", "features.view_image": "false", "features.apps": "false",
		"features.memories": "false", "features.token_budget": "false", "skills.include_instructions": "false",
		"features.code_mode": "false", "mcp_servers": "{}", "features.image_generation": "false",
		"features.request_permissions_tool": "false", "features.shell_snapshot": "false",
		"features.context_management": "false", "features.standalone_web_search": "false",
		"tools.experimental_request_user_input.enabled": "false", "features.shell_tool": "false",
		"features.hooks": "false", "features.multi_agent": "false", "web_search": `"disabled"`,
		"features.code_mode_only": "false", "features.deferred_executor": "false", "features.plugins": "false",
		"default_permissions": `":read-only"`, "tools.update_plan.enabled": "false",
		"features.current_time_reminder": "false", "cloud.skills.enabled": "false", "features.multi_agent_v2": "false",
	}
}

// A thread whose config turns every tool off gets an empty tool set.
func TestBuildTitleThreadOffersNothing(t *testing.T) {
	s := newService(t, Config{WebSearch: "live"})
	tu := newTurn(t, s, workspace(t), turnOpts{mode: "plan"})
	// A thread that could keep a goal; features.goals = false still
	// offers no goal tools.
	tu.tc.Goals = &turns.ThreadGoals{}
	tu.tc.Config = map[string]json.RawMessage{}
	for k, v := range titleThreadConfig() {
		tu.tc.Config[k] = json.RawMessage(v)
	}
	specs, _, err := s.Build(tu.tc)
	require.NoError(t, err)
	require.Empty(t, specNames(specs))
}

// request_user_input in plan mode: the question goes to the client with
// the waitingOnUserInput flag and the thread id, and the answer is the
// tool's output; outside plan mode the call is refused without a request.
func TestRequestUserInput(t *testing.T) {
	args := map[string]any{"questions": []any{map[string]any{"id": "color", "header": "Color", "question": "Which color?",
		"options": []any{map[string]any{"label": "Red", "description": "Warm."}, map[string]any{"label": "Blue", "description": "Cool."}}}}}
	answer := func(_ context.Context, req turns.ClientRequest) (json.RawMessage, error) {
		return json.RawMessage(`{"answers":{"color":{"answers":["Blue"]}}}`), nil
	}
	ws := workspace(t)
	s := newService(t, Config{})
	tu := newTurn(t, s, ws, turnOpts{mode: "plan", answer: answer})
	out := tu.fn("call_q", "request_user_input", args)
	require.JSONEq(t, `{"answers":{"color":{"answers":["Blue"]}}}`, out.Text)
	reqs := tu.client.sent()
	require.Len(t, reqs, 1)
	require.Equal(t, "item/tool/requestUserInput", reqs[0].Method)
	require.Equal(t, api.FlagWaitingOnUserInput, reqs[0].Flag)
	p := reqs[0].Params.(api.ToolRequestUserInputParams)
	require.Equal(t, "thread-1", p.ThreadID)
	require.Equal(t, "call_q", p.ItemID)
	require.Equal(t, 0, tu.client.raisedNow())

	def := newTurn(t, s, ws, turnOpts{answer: answer})
	out = def.fn("call_q", "request_user_input", args)
	require.Contains(t, out.Text, "Default mode")
	require.Empty(t, def.client.sent())
}

// Dynamic tools: a registration may not take a built-in name; a thread's
// registration is offered next to the built-ins; without a broker such a
// thread's turn is refused rather than left to fail at call time.
func TestDynamicTools(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{}}`)
	_, err := ValidateDynamicTools([]api.DynamicToolSpec{{Type: api.DynamicToolFunction, Name: "shell", Description: "mine", InputSchema: schema}})
	require.Error(t, err)
	raw, err := ValidateDynamicTools([]api.DynamicToolSpec{{Type: api.DynamicToolFunction, Name: "lookup", Description: "Look up.", InputSchema: schema}})
	require.NoError(t, err)

	ws := workspace(t)
	s := newService(t, Config{})
	tu := newTurn(t, s, ws, turnOpts{})
	tu.tc.DynamicTools = raw
	_, _, err = s.Build(tu.tc)
	require.Error(t, err)

	broker := dynamic.NewBroker(dynamic.BrokerConfig{})
	defer broker.Close()
	withBroker, err := New(Config{}, broker, nil)
	require.NoError(t, err)
	defer withBroker.Close()
	specs, _, err := withBroker.Build(tu.tc)
	require.NoError(t, err)
	names := specNames(specs)
	require.True(t, names["lookup"], "%v", names)
	require.True(t, names["shell_command"], "%v", names)
}

// Close may be called on a service that never ran anything, and twice.
func TestCloseTwice(t *testing.T) {
	s, err := New(Config{}, nil, nil)
	require.NoError(t, err)
	s.Close()
	s.Close()
}

// A policy the daemon does not know falls back to the reference's
// defaults (on-request, read-only): a patch then asks first.
func TestUnknownPoliciesFallBack(t *testing.T) {
	s := newService(t, Config{})
	ws := workspace(t)
	tu := newTurn(t, s, ws, turnOpts{approval: "sometimes", sandbox: "everything", answer: decision(`"decline"`)})
	tu.call(t.Context(), "call_p", "apply_patch", registry.CustomPayload{Input: addHello})
	reqs := tu.client.sent()
	require.Len(t, reqs, 1, "read-only: the patch asks")
	require.Equal(t, "item/fileChange/requestApproval", reqs[0].Method)
	require.NoFileExists(t, filepath.Join(ws, "hello.txt"))
}

// The default tool set's specs are built once and their JSON encoded once
// (registry.Static): two turns' specs are the same values, and each one's
// JSON comes from memory, the bytes MarshalJSON writes, shared by both
// turns.
func TestDefaultSpecsAreStatic(t *testing.T) {
	ws := workspace(t)
	s := newService(t, Config{})
	first := newTurn(t, s, ws, turnOpts{}).specs
	second := newTurn(t, s, ws, turnOpts{threadID: "thread-2"}).specs
	require.Len(t, second, len(first))
	for i, sp := range first {
		require.Equal(t, sp.Spec, second[i].Spec)
		requireEncodedOnce(t, sp.Spec, second[i].Spec)
	}
}

// requireEncodedOnce checks that first and second, the same spec got
// twice, encode to the bytes MarshalJSON writes, and to the same bytes in
// memory: the JSON was not written again.
func requireEncodedOnce(t *testing.T, first, second registry.ToolSpec) {
	t.Helper()
	a, err := registry.EncodeSpec(first)
	require.NoError(t, err)
	b, err := registry.EncodeSpec(second)
	require.NoError(t, err)
	want, err := first.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, string(want), string(a))
	require.Same(t, &a[0], &b[0], "spec %s encoded again", first.ToolName())
}

// So are the other forms of the built-in tools, offered under other
// configurations.
func TestOtherBuiltinSpecsAreStatic(t *testing.T) {
	for _, spec := range []func() registry.ToolSpec{
		func() registry.ToolSpec { return shell.ShellSpec() },
		func() registry.ToolSpec { return shell.ShellCommandSpec(shell.SpecOptions{}) },
		func() registry.ToolSpec { return shell.ShellCommandSpec(shell.SpecOptions{NoLoginParam: true}) },
		func() registry.ToolSpec { return execsession.ExecCommandSpec(false) },
		func() registry.ToolSpec { return execsession.ExecCommandSpec(true) },
		func() registry.ToolSpec { return execsession.WriteStdinSpec() },
		func() registry.ToolSpec { return applypatch.FunctionSpec() },
		func() registry.ToolSpec { return applypatch.FreeformSpec() },
		func() registry.ToolSpec { return files.RequestUserInputSpec() },
		func() registry.ToolSpec { return files.GrepFilesSpec() },
		func() registry.ToolSpec { return planning.Spec() },
		func() registry.ToolSpec { return goals.Specs()[0] },
		func() registry.ToolSpec { return goals.Specs()[1] },
		func() registry.ToolSpec { return goals.Specs()[2] },
	} {
		requireEncodedOnce(t, spec(), spec())
	}
	// The two forms of a tool are two specs.
	login, err := registry.EncodeSpec(execsession.ExecCommandSpec(true))
	require.NoError(t, err)
	noLogin, err := registry.EncodeSpec(execsession.ExecCommandSpec(false))
	require.NoError(t, err)
	require.Contains(t, string(login), `"login"`)
	require.NotContains(t, string(noLogin), `"login"`)
}
