package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// features.multi_agent and the [agents] limits are read; the other Codex
// feature switches and agent keys get the gentle warning; a negative
// limit is refused.
func TestFeaturesAndAgents(t *testing.T) {
	path := writeConfig(t, "[features]\nmulti_agent = true\nundo = true\n\n[agents]\nmax_threads = 3\nmax_depth = 2\njob_max_runtime_seconds = 5\n")
	cfg, warnings := mustLoad(t, Sources{File: path})
	require.True(t, cfg.Features.MultiAgent)
	require.Equal(t, Agents{MaxThreads: 3, MaxDepth: 2}, cfg.Agents)
	source := "config file " + path
	require.Equal(t, []Warning{codexWarning("agents.job_max_runtime_seconds", source), codexWarning("features.undo", source)}, warnings)

	require.False(t, Default().Features.MultiAgent, "off unless configured")
	require.Equal(t, map[string]bool{"shell_tool": true, "view_image": true, "unified_exec": true, "multi_agent": false, "multi_agent_v2": false, "goals": true},
		Default().Features.Map(), "the other switches are on unless configured")
	for _, f := range FeatureFlags {
		require.Equal(t, f.Default, Default().Features.Map()[f.Name], f.Name)
	}
	require.Len(t, Default().Features.Map(), len(FeatureFlags))
	msg := loadError(t, Sources{File: writeConfig(t, "[agents]\nmax_depth = -1\n")})
	require.Contains(t, msg, "agents.max_depth")
}
