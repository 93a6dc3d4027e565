package mcp

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Outcomes of an MCP tool call, the outcome label of appserver_mcp_calls_total.
const (
	// OutcomeOK: the server answered and the result is not an error.
	OutcomeOK = "ok"
	// OutcomeToolError: the server answered with isError.
	OutcomeToolError = "tool_error"
	// OutcomeFailed: the call failed (server down, protocol error, crash).
	OutcomeFailed = "failed"
	// OutcomeTimeout: tool_timeout_sec passed.
	OutcomeTimeout = "timeout"
	// OutcomeRejected: the approval was declined or not asked (policy never).
	OutcomeRejected = "rejected"
)

// Metrics are the MCP client measurements. A nil *Metrics records nothing.
type Metrics struct {
	calls   *prometheus.CounterVec
	latency *prometheus.HistogramVec
	up      *prometheus.GaugeVec
}

// NewMetrics registers the MCP metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		calls: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_mcp_calls_total",
			Help: "MCP tool calls by server and outcome (ok, tool_error, failed, timeout, rejected).",
		}, []string{"server", "outcome"}),
		latency: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "appserver_mcp_call_duration_seconds",
			Help:    "Duration of MCP tools/call requests, from sending to the answer.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"server"}),
		up: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "appserver_mcp_server_up",
			Help: "1 while the MCP server is connected, 0 while it is starting, restarting or failed.",
		}, []string{"server"}),
	}
}

func (m *Metrics) observeCall(server, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(server, outcome).Inc()
	if outcome != OutcomeRejected {
		m.latency.WithLabelValues(server).Observe(d.Seconds())
	}
}

func (m *Metrics) setUp(server string, up bool) {
	if m == nil {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	m.up.WithLabelValues(server).Set(v)
}

// forget drops the series of a server removed by a reload.
func (m *Metrics) forget(server string) {
	if m == nil {
		return
	}
	m.up.DeleteLabelValues(server)
}
