package daemon

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/turns"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestMetricsLintClean holds every series of the daemon's registry, with
// each of the telemetry series observed once, to the Prometheus naming
// and unit conventions.
func TestMetricsLintClean(t *testing.T) {
	m := server.NewMetrics()
	tel := newTelemetry(m.Registry, "v1.2.3")
	tel.TurnEnded(api.TurnCompleted, 3*time.Second)
	tel.ModelRequest(turns.ModelRequestStats{Provider: "p", Model: "m", Outcome: "ok", Duration: time.Second,
		FirstEvent: 100 * time.Millisecond, Retries: 2, Usage: model.Usage{InputTokens: 10, CachedInputTokens: 4, OutputTokens: 3, ReasoningOutputTokens: 1}})
	tel.ToolCall("shell_command", "ok", 20*time.Millisecond)
	tel.ApprovalPending(1)
	tel.ApprovalDecided("approval", "accept")
	m.ObserveStoreOp("write", time.Millisecond, nil)

	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	require.NoError(t, err)
	require.Empty(t, problems)
	require.Equal(t, 2.0, testutil.ToFloat64(tel.modelRetries))
	require.Equal(t, 4.0, testutil.ToFloat64(tel.tokens.WithLabelValues("p", "m", tokensCachedInput)))
}
