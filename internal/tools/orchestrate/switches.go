package orchestrate

import (
	"encoding/json"
	"strings"

	"github.com/appserver/appserver/internal/mcp"
)

// switches are the tool switches of a turn: the feature switches of the
// configuration of the thread's principal (turns.ToolContext.Features),
// under the thread's config overrides (turns.ToolContext.Config), as the
// real TUI sends them for its hidden title thread. Every switch but
// multi_agent defaults to "on".
type switches struct {
	// shell is features.shell_tool: false offers no tool that reaches the
	// workspace (the shell tools, exec_command, apply_patch, read_file,
	// list_dir, grep_files); a thread without a shell is one that must
	// not touch the workspace.
	shell bool
	// unifiedExec is features.unified_exec: false offers no
	// exec_command/write_stdin.
	unifiedExec bool
	// applyPatch is include_apply_patch_tool.
	applyPatch bool
	// viewImage is features.view_image (or tools.view_image).
	viewImage bool
	// skills is skills.include_instructions: false offers no skills
	// namespace (the form our skills take in the model's request).
	skills bool
	// multiAgent is features.multi_agent: true offers the multi_agent_v1
	// collaboration tools; the daemon's setting is the default (off unless
	// configured, as in the reference).
	multiAgent bool
	// multiAgentV2 is features.multi_agent_v2: true offers the v2
	// collaboration namespace instead of multi_agent_v1.
	multiAgentV2 bool
	// goals is features.goals: false offers no goal tools.
	goals bool
	// mcp is false when the thread's config empties mcp_servers
	// (`mcp_servers = {}`, as the TUI's title thread sends it): no MCP
	// tool and no resource tool is offered, whatever the daemon has
	// connected.
	mcp bool
	// mcpOff are the servers the thread's config turns off
	// (mcp_servers.<name>.enabled = false): their tools are not offered,
	// and with every server off neither are the resource tools.
	mcpOff map[string]bool
	// webSearch is web_search ("disabled", "cached", "live"), "" when the
	// thread did not choose.
	webSearch string
	// disabled are the tools named by tools.<name>.enabled = false
	// (tools.update_plan.enabled,
	// tools.experimental_request_user_input.enabled).
	disabled map[string]bool
}

// parseSwitches reads the tool switches of a turn: the feature switches of
// features (keys without "features."), then the thread's config over
// them; multiAgent is the default of multi_agent when features has none.
// Values of the wrong type are ignored as absent, as unknown keys are.
func parseSwitches(cfg map[string]json.RawMessage, features map[string]bool, multiAgent bool) switches {
	sw := switches{shell: true, unifiedExec: true, applyPatch: true, viewImage: true, skills: true, goals: true, mcp: true, multiAgent: multiAgent}
	flag := func(key string, dst *bool) {
		if name, ok := strings.CutPrefix(key, "features."); ok {
			if on, ok := features[name]; ok {
				*dst = on
			}
		}
		var b bool
		if v, ok := cfg[key]; ok && json.Unmarshal(v, &b) == nil {
			*dst = b
		}
	}
	flag("features.shell_tool", &sw.shell)
	flag("features.unified_exec", &sw.unifiedExec)
	flag("include_apply_patch_tool", &sw.applyPatch)
	flag("features.view_image", &sw.viewImage)
	flag("tools.view_image", &sw.viewImage)
	flag("skills.include_instructions", &sw.skills)
	flag("features.multi_agent", &sw.multiAgent)
	flag("features.multi_agent_v2", &sw.multiAgentV2)
	flag("features.goals", &sw.goals)
	var noMCP bool
	sw.mcpOff, noMCP = mcp.ThreadSwitches(cfg)
	sw.mcp = !noMCP
	if v, ok := cfg["web_search"]; ok {
		_ = json.Unmarshal(v, &sw.webSearch)
	}
	for k, v := range cfg {
		name, ok := strings.CutPrefix(k, "tools.")
		if !ok {
			continue
		}
		name, ok = strings.CutSuffix(name, ".enabled")
		var on bool
		if !ok || json.Unmarshal(v, &on) != nil || on {
			continue
		}
		if sw.disabled == nil {
			sw.disabled = map[string]bool{}
		}
		// The reference names request_user_input's switch after its
		// experimental status.
		sw.disabled[strings.TrimPrefix(name, "experimental_")] = true
	}
	return sw
}
