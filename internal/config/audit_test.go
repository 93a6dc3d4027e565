package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// [audit] sets the audit log's retention, in days or any Go duration;
// clients may not write it.
func TestAuditRetention(t *testing.T) {
	cfg, _ := mustLoad(t, Sources{})
	require.Equal(t, 90*24*time.Hour, cfg.Audit.Retention)
	require.Equal(t, time.Hour, cfg.Audit.PruneInterval)

	cfg, warnings := mustLoad(t, Sources{File: writeConfig(t, "[audit]\nretention = \"30d\"\nprune_interval = \"10m\"")})
	require.Empty(t, warnings)
	require.Equal(t, 30*24*time.Hour, cfg.Audit.Retention)
	require.Equal(t, 10*time.Minute, cfg.Audit.PruneInterval)

	cfg, _ = mustLoad(t, Sources{File: writeConfig(t, "[audit]\nretention = \"36h\"")})
	require.Equal(t, 36*time.Hour, cfg.Audit.Retention)

	require.Contains(t, loadError(t, Sources{File: writeConfig(t, "[audit]\nretention = \"xd\"")}), "audit.retention")
	require.Contains(t, loadError(t, Sources{File: writeConfig(t, "[audit]\nretention = \"0d\"")}), "must be positive")
}
