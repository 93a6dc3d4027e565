package server

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/appserver/appserver/internal/server/rpcws"
)

// Metrics holds the daemon's Prometheus collectors on a private registry, so
// that tests and several servers in one process never collide.
type Metrics struct {
	Registry *prometheus.Registry

	OpenConnections  prometheus.Gauge
	Requests         *prometheus.CounterVec
	RequestDuration  *prometheus.HistogramVec
	Frames           *prometheus.CounterVec
	DroppedFrames    *prometheus.CounterVec
	Overloaded       prometheus.Counter
	SlowConsumers    prometheus.Counter
	Notifications    *prometheus.CounterVec
	StoreOpDuration  *prometheus.HistogramVec
	AuthFailures     *prometheus.CounterVec
	OriginRejections prometheus.Counter

	DynamicCalls          *prometheus.CounterVec
	DynamicPending        prometheus.Gauge
	DynamicLatency        prometheus.Histogram
	DynamicIgnoredAnswers *prometheus.CounterVec

	// inbound is the budget of the server using these metrics, read by
	// the appserver_inbound_inflight_bytes gauge when scraped.
	inbound atomic.Pointer[rpcws.InboundBudget]
}

// NewMetrics creates and registers every collector, plus the Go runtime and
// process collectors.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		OpenConnections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "appserver_open_connections",
			Help: "Websocket connections currently open.",
		}),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_requests_total",
			Help: "JSON-RPC requests handled, by method and result code (0 = success).",
		}, []string{"method", "code"}),
		RequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "appserver_request_duration_seconds",
			Help:    "Time from a JSON-RPC request being accepted to its response being queued.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method"}),
		Frames: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_frames_total",
			Help: "Websocket frames, by direction (in, out).",
		}, []string{"direction"}),
		DroppedFrames: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_dropped_frames_total",
			Help: "Inbound frames dropped without a reply, by reason (malformed, binary, overloaded).",
		}, []string{"reason"}),
		Overloaded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "appserver_overload_rejections_total",
			Help: "Frames refused because the inbound queue was full or they did not fit in the inbound byte budget (requests are answered -32001).",
		}),
		SlowConsumers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "appserver_slow_consumer_disconnects_total",
			Help: "Connections closed because their outbound queue filled.",
		}),
		Notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_notifications_total",
			Help: "Server notifications queued to connections, by method.",
		}, []string{"method"}),
		StoreOpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "appserver_store_operation_duration_seconds",
			Help:    "Duration of transcript store operations, by operation and outcome.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"op", "outcome"}),
		AuthFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_auth_failures_total",
			Help: "Websocket upgrades refused by authentication, by reason.",
		}, []string{"reason"}),
		OriginRejections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "appserver_origin_rejections_total",
			Help: "Requests refused with 403 because of a disallowed Origin header.",
		}),
		DynamicCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_dynamic_tool_calls_total",
			Help: "Client-registered (dynamic) tool calls, by outcome.",
		}, []string{"outcome"}),
		DynamicPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "appserver_dynamic_tool_calls_pending",
			Help: "Dynamic tool calls waiting for a client's answer.",
		}),
		DynamicLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "appserver_dynamic_tool_call_duration_seconds",
			Help:    "Round trip of a dynamic tool call, from the model's call to the client's answer.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		DynamicIgnoredAnswers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_dynamic_tool_ignored_answers_total",
			Help: "Client answers to dynamic tool calls that were not used, by reason (duplicate, unknown_call).",
		}, []string{"reason"}),
	}
	inflight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "appserver_inbound_inflight_bytes",
		Help: "Bytes of inbound websocket frames read and not yet done being handled, across connections.",
	}, func() float64 { return float64(m.inbound.Load().InFlight()) })
	reg.MustRegister(
		inflight, m.OpenConnections, m.Requests, m.RequestDuration, m.Frames, m.DroppedFrames,
		m.Overloaded, m.SlowConsumers, m.Notifications, m.StoreOpDuration,
		m.AuthFailures, m.OriginRejections,
		m.DynamicCalls, m.DynamicPending, m.DynamicLatency, m.DynamicIgnoredAnswers,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// ObserveStoreOp records one store operation; it matches the store
// backends' observer hook.
func (m *Metrics) ObserveStoreOp(op string, d time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.StoreOpDuration.WithLabelValues(op, outcome).Observe(d.Seconds())
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}
