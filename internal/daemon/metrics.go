package daemon

import (
	"context"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns"
)

// Histogram buckets, in seconds. Turns run from a second to many minutes;
// a model request from a few hundred milliseconds to minutes, its first
// token usually within seconds; tool calls from a millisecond (a file
// read) to the exec timeout.
var (
	turnBuckets       = []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
	modelBuckets      = []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300}
	firstTokenBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2, 4, 8, 15, 30, 60}
	toolBuckets       = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
)

// Token types, the type label of appserver_model_tokens_total.
const (
	tokensInput           = "input"
	tokensCachedInput     = "cached_input"
	tokensOutput          = "output"
	tokensReasoningOutput = "reasoning_output"
)

// telemetry holds the turn, model, tool and approval series. It is the
// turns manager's Observer and the hub's ApprovalMetrics.
type telemetry struct {
	turns          *prometheus.CounterVec
	turnDuration   *prometheus.HistogramVec
	modelRequests  *prometheus.CounterVec
	modelDuration  *prometheus.HistogramVec
	modelFirst     *prometheus.HistogramVec
	modelRetries   *prometheus.CounterVec
	tokens         *prometheus.CounterVec
	toolCalls      *prometheus.CounterVec
	toolDuration   *prometheus.HistogramVec
	approvals      prometheus.Gauge
	approvalsTaken *prometheus.CounterVec
	commitBatches  prometheus.Histogram
}

// newTelemetry registers the series on reg, with appserver_build_info.
func newTelemetry(reg prometheus.Registerer, version string) *telemetry {
	f := promauto.With(reg)
	m := &telemetry{
		turns: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_turns_total",
			Help: "Turns ended, by status (completed, interrupted, failed).",
		}, []string{"status"}),
		turnDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "appserver_turn_duration_seconds",
			Help:    "Duration of turns from turn/start to their end, by status.",
			Buckets: turnBuckets,
		}, []string{"status"}),
		modelRequests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_model_requests_total",
			Help: "Model requests of turns, by provider, model and outcome (ok, canceled, error, or the model error's kind such as unauthorized or rate_limited).",
		}, []string{"provider", "model", "outcome"}),
		modelDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "appserver_model_request_duration_seconds",
			Help:    "Duration of model requests from sending to the end of the response, retries included, by provider and model.",
			Buckets: modelBuckets,
		}, []string{"provider", "model"}),
		modelFirst: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "appserver_model_time_to_first_token_seconds",
			Help:    "Time from sending a model request to its first streamed event, by provider and model.",
			Buckets: firstTokenBuckets,
		}, []string{"provider", "model"}),
		modelRetries: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_model_retries_total",
			Help: "Model requests repeated after a transient failure (429, 5xx, connection errors), by provider and model.",
		}, []string{"provider", "model"}),
		tokens: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_model_tokens_total",
			Help: "Tokens reported by model responses, by provider, model and type (input and output include cached_input and reasoning_output respectively).",
		}, []string{"provider", "model", "type"}),
		toolCalls: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_tool_calls_total",
			Help: "Tool calls of turns, by tool and outcome (ok, failed, aborted, unsupported, fatal).",
		}, []string{"tool", "outcome"}),
		toolDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "appserver_tool_call_duration_seconds",
			Help:    "Duration of tool calls from dispatch to output, approval and lock waits included, by tool.",
			Buckets: toolBuckets,
		}, []string{"tool"}),
		approvals: f.NewGauge(prometheus.GaugeOpts{
			Name: "appserver_approvals_pending",
			Help: "Approval requests (commands, file changes, MCP elicitations) waiting for a client's decision.",
		}),
		approvalsTaken: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_approval_decisions_total",
			Help: "Approval requests settled, by kind (approval, elicitation) and decision (accept, acceptForSession, decline, cancel, ..., no_client, canceled, error).",
		}, []string{"kind", "decision"}),
		commitBatches: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "appserver_store_group_commit_batches",
			Help:    "Callers' batches carried by each group commit (one transaction); its latency is appserver_store_operation_duration_seconds{op=\"write\"}.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
		}),
	}
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	f.NewGauge(prometheus.GaugeOpts{
		Name:        "appserver_build_info",
		Help:        "Always 1; the labels say which build is running.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()},
	}).Set(1)
	return m
}

// counter is what the loaded-thread and running-turn gauges read when
// scraped: the turns manager.
type counter interface {
	Counts() (loaded, running int)
}

// registerCounts registers the gauges read from mgr when scraped.
func registerCounts(reg prometheus.Registerer, mgr counter) {
	f := promauto.With(reg)
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "appserver_threads_loaded",
		Help: "Threads loaded in memory.",
	}, func() float64 { loaded, _ := mgr.Counts(); return float64(loaded) })
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "appserver_turns_running",
		Help: "Turns running now.",
	}, func() float64 { _, running := mgr.Counts(); return float64(running) })
}

// TurnStarted implements turns.Observer; the series need nothing at the
// start.
func (m *telemetry) TurnStarted(ctx context.Context, _ turns.TurnInfo) context.Context { return ctx }

// ModelRequestStarted implements turns.Observer; the series count a
// request when it ended.
func (m *telemetry) ModelRequestStarted(ctx context.Context, _, _ string) context.Context {
	return ctx
}

// TurnAbandoned implements turns.Observer: a turn that never was is not
// counted.
func (m *telemetry) TurnAbandoned(context.Context) {}

// TurnEnded implements turns.Observer.
func (m *telemetry) TurnEnded(_ context.Context, status api.TurnStatus, d time.Duration) {
	m.turns.WithLabelValues(string(status)).Inc()
	m.turnDuration.WithLabelValues(string(status)).Observe(d.Seconds())
}

// ModelRequest implements turns.Observer.
func (m *telemetry) ModelRequest(_ context.Context, s turns.ModelRequestStats) {
	m.modelRequests.WithLabelValues(s.Provider, s.Model, s.Outcome).Inc()
	m.modelDuration.WithLabelValues(s.Provider, s.Model).Observe(s.Duration.Seconds())
	if s.FirstEvent > 0 {
		m.modelFirst.WithLabelValues(s.Provider, s.Model).Observe(s.FirstEvent.Seconds())
	}
	if s.Retries > 0 {
		m.modelRetries.WithLabelValues(s.Provider, s.Model).Add(float64(s.Retries))
	}
	for typ, n := range map[string]int64{
		tokensInput: s.Usage.InputTokens, tokensCachedInput: s.Usage.CachedInputTokens,
		tokensOutput: s.Usage.OutputTokens, tokensReasoningOutput: s.Usage.ReasoningOutputTokens,
	} {
		if n > 0 {
			m.tokens.WithLabelValues(s.Provider, s.Model, typ).Add(float64(n))
		}
	}
}

// ToolCall implements turns.Observer.
func (m *telemetry) ToolCall(_ context.Context, tool, outcome string, d time.Duration) {
	m.toolCalls.WithLabelValues(tool, outcome).Inc()
	m.toolDuration.WithLabelValues(tool).Observe(d.Seconds())
}

// ApprovalPending implements hub.ApprovalMetrics.
func (m *telemetry) ApprovalPending(delta int) { m.approvals.Add(float64(delta)) }

// ApprovalDecided implements hub.ApprovalMetrics.
func (m *telemetry) ApprovalDecided(kind, decision string) {
	m.approvalsTaken.WithLabelValues(kind, decision).Inc()
}

// ObserveCommit records one group commit (store.GroupCommitConfig's
// OnCommit).
func (m *telemetry) ObserveCommit(batches int, _ time.Duration) {
	m.commitBatches.Observe(float64(batches))
}
