package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/frontdoor"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/turns"
)

// seriesName finds the daemon's series names in a PromQL expression.
var seriesName = regexp.MustCompile(`\bappserver_[a-z_]+`)

// TestMetricsLintClean holds every series of the daemon's registry, with
// each of the telemetry series observed once, to the Prometheus naming
// and unit conventions, and checks that deploy/grafana-dashboard.json
// queries only those.
func TestMetricsLintClean(t *testing.T) {
	reg := frontdoor.NewRegistry()
	m := server.NewMetrics(reg)
	_, err := frontdoor.New(frontdoor.Config{Registry: reg})
	require.NoError(t, err)
	tel := newTelemetry(reg, "v1.2.3")
	ctx := context.Background()
	tel.TurnEnded(ctx, api.TurnCompleted, 3*time.Second)
	tel.ModelRequest(ctx, turns.ModelRequestStats{Provider: "p", Model: "m", Outcome: "ok", Duration: time.Second,
		FirstEvent: 100 * time.Millisecond, Retries: 2, Usage: model.Usage{InputTokens: 10, CachedInputTokens: 4, OutputTokens: 3, ReasoningOutputTokens: 1}})
	tel.ToolCall(ctx, "shell_command", "ok", 20*time.Millisecond)
	tel.ApprovalPending(1)
	tel.ApprovalDecided("approval", "accept")
	m.ObserveStoreOp("write", time.Millisecond, nil)
	registerCounts(reg, fixedCounts{loaded: 3, running: 2})
	tel.ObserveCommit(3, time.Millisecond)

	mfs, err := reg.Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	require.NoError(t, err)
	require.Empty(t, problems)

	// Every series the Grafana dashboard queries is one of these.
	families := map[string]bool{}
	gauges := map[string]float64{}
	for _, mf := range mfs {
		families[mf.GetName()] = true
		if g := mf.GetMetric()[0].GetGauge(); g != nil {
			gauges[mf.GetName()] = g.GetValue()
		}
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana-dashboard.json"))
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	queried := 0
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			names := seriesName.FindAllString(tg.Expr, -1)
			require.NotEmpty(t, names, "%s: %s", p.Title, tg.Expr)
			for _, name := range names {
				queried++
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
				require.True(t, families[base], "%s queries %s, which the daemon does not export", p.Title, name)
			}
		}
	}
	require.Greater(t, queried, 10)
	require.Equal(t, 3.0, gauges["appserver_threads_loaded"])
	require.Equal(t, 2.0, gauges["appserver_turns_running"])
	require.Equal(t, 1.0, gauges["appserver_build_info"])
	require.Equal(t, 2.0, testutil.ToFloat64(tel.modelRetries))
	require.Equal(t, 4.0, testutil.ToFloat64(tel.tokens.WithLabelValues("p", "m", tokensCachedInput)))
}

// fixedCounts stands for the turns manager in registerCounts.
type fixedCounts struct{ loaded, running int }

func (c fixedCounts) Counts() (int, int) { return c.loaded, c.running }

// BenchmarkTelemetryPerTurn is what the series cost a turn of one model
// request and one tool call.
func BenchmarkTelemetryPerTurn(b *testing.B) {
	tel := newTelemetry(prometheus.NewRegistry(), "bench")
	stats := turns.ModelRequestStats{Provider: "openai", Model: "gpt-5.1-codex", Outcome: "ok", Duration: time.Second,
		FirstEvent: 300 * time.Millisecond, Usage: model.Usage{InputTokens: 1000, CachedInputTokens: 800, OutputTokens: 50, ReasoningOutputTokens: 20}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		tel.ModelRequest(ctx, stats)
		tel.ToolCall(ctx, "shell_command", "ok", 20*time.Millisecond)
		tel.TurnEnded(ctx, api.TurnCompleted, 2*time.Second)
	}
}
