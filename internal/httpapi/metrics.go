package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics are the API's Prometheus collectors.
type metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	authFailures prometheus.Counter
	streams      prometheus.Gauge
}

// newMetrics makes the collectors and registers them on reg; a nil reg
// registers nothing.
func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_http_requests_total",
			Help: "HTTP API requests, by route pattern and status code.",
		}, []string{"route", "code"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "appserver_http_request_duration_seconds",
			Help:    "Time to answer an HTTP API request (event streams: their whole life).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route"}),
		authFailures: f.NewCounter(prometheus.CounterOpts{
			Name: "appserver_http_auth_failures_total",
			Help: "HTTP API requests refused with 401.",
		}),
		streams: f.NewGauge(prometheus.GaugeOpts{
			Name: "appserver_http_event_streams",
			Help: "Open HTTP API event streams (SSE).",
		}),
	}
}
