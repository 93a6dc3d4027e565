package daemon

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/config"
)

// Sandboxed commands with network access are refused exactly while the
// listener takes requests without authentication, with the setting to
// change named.
func TestNetworkRefusal(t *testing.T) {
	cfg := &config.Config{Listen: "ws://127.0.0.1:7878"}
	require.Contains(t, NetworkRefusal(cfg), "ws_auth")
	require.Contains(t, NetworkRefusal(cfg), "ws://127.0.0.1:7878")
	for _, mode := range []config.WSAuthMode{config.WSAuthCapabilityToken, config.WSAuthSignedBearerToken} {
		cfg.WSAuth = mode
		require.Empty(t, NetworkRefusal(cfg), mode)
	}
}
