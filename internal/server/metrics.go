package server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/appserver/appserver/internal/server/rpcws"
)

// Metrics holds the series of the JSON-RPC sessions (and the store's and
// dynamic tools' the daemon records through them), registered on the
// daemon's registry, which the front door serves.
type Metrics struct {
	OpenConnections prometheus.Gauge
	Requests        *prometheus.CounterVec
	RequestDuration *prometheus.HistogramVec
	Frames          *prometheus.CounterVec
	DroppedFrames   *prometheus.CounterVec
	Overloaded      prometheus.Counter
	SlowConsumers   prometheus.Counter
	Notifications   *prometheus.CounterVec
	StoreOpDuration *prometheus.HistogramVec
	AuthFailures    *prometheus.CounterVec
	PingTimeouts    prometheus.Counter

	DynamicCalls          *prometheus.CounterVec
	DynamicPending        prometheus.Gauge
	DynamicLatency        prometheus.Histogram
	DynamicIgnoredAnswers *prometheus.CounterVec

	// inbound is the budget of the server using these metrics, read by
	// the appserver_inbound_inflight_bytes gauge when scraped.
	inbound atomic.Pointer[rpcws.InboundBudget]
	// notified holds the Notifications counter of each method, so that a
	// broadcast to every connection looks its labels up once per method,
	// not once per connection (BenchmarkCrowdTurns/threads=400: the label
	// lookup was a quarter of queueing a notification).
	notified sync.Map // method → prometheus.Counter
}

// notification counts a notification of method queued to a connection.
func (m *Metrics) notification(method string) {
	if c, ok := m.notified.Load(method); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	c := m.Notifications.WithLabelValues(method)
	m.notified.Store(method, c)
	c.Inc()
}

// NewMetrics creates every collector on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		OpenConnections: f.NewGauge(prometheus.GaugeOpts{
			Name: "appserver_open_connections",
			Help: "JSON-RPC connections currently open (websocket, unix socket, stdio).",
		}),
		Requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_requests_total",
			Help: "JSON-RPC requests handled, by method and result code (0 = success).",
		}, []string{"method", "code"}),
		RequestDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "appserver_request_duration_seconds",
			Help:    "Time from a JSON-RPC request being accepted to its response being queued.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method"}),
		Frames: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_frames_total",
			Help: "JSON-RPC frames (websocket messages, stdio lines), by direction (in, out).",
		}, []string{"direction"}),
		DroppedFrames: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_dropped_frames_total",
			Help: "Inbound frames dropped without a reply, by reason (malformed, binary, overloaded).",
		}, []string{"reason"}),
		Overloaded: f.NewCounter(prometheus.CounterOpts{
			Name: "appserver_overload_rejections_total",
			Help: "Frames refused because the inbound queue was full or they did not fit in the inbound byte budget (requests are answered -32001).",
		}),
		SlowConsumers: f.NewCounter(prometheus.CounterOpts{
			Name: "appserver_slow_consumer_disconnects_total",
			Help: "Connections closed because their outbound queue filled.",
		}),
		Notifications: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_notifications_total",
			Help: "Server notifications queued to connections, by method.",
		}, []string{"method"}),
		StoreOpDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "appserver_store_operation_duration_seconds",
			Help:    "Duration of transcript store operations, by operation and outcome.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"op", "outcome"}),
		AuthFailures: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_auth_failures_total",
			Help: "Websocket upgrades refused by authentication, by reason.",
		}, []string{"reason"}),
		PingTimeouts: f.NewCounter(prometheus.CounterOpts{
			Name: "appserver_ws_ping_timeouts_total",
			Help: "Websocket connections closed because a ping got no pong within ws_pong_timeout.",
		}),
		DynamicCalls: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_dynamic_tool_calls_total",
			Help: "Client-registered (dynamic) tool calls, by outcome.",
		}, []string{"outcome"}),
		DynamicPending: f.NewGauge(prometheus.GaugeOpts{
			Name: "appserver_dynamic_tool_calls_pending",
			Help: "Dynamic tool calls waiting for a client's answer.",
		}),
		DynamicLatency: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "appserver_dynamic_tool_call_duration_seconds",
			Help:    "Round trip of a dynamic tool call, from the model's call to the client's answer.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		DynamicIgnoredAnswers: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_dynamic_tool_ignored_answers_total",
			Help: "Client answers to dynamic tool calls that were not used, by reason (duplicate, unknown_call).",
		}, []string{"reason"}),
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "appserver_inbound_inflight_bytes",
		Help: "Bytes of inbound frames read and not yet done being handled, across connections.",
	}, func() float64 { return float64(m.inbound.Load().InFlight()) })
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
