package httpapi

import "github.com/prometheus/client_golang/prometheus"

// metrics are the API's Prometheus collectors.
type metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	authFailures prometheus.Counter
	streams      prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appserver_http_requests_total",
			Help: "HTTP API requests, by route pattern and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "appserver_http_request_duration_seconds",
			Help:    "Time to answer an HTTP API request (event streams: their whole life).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route"}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "appserver_http_auth_failures_total",
			Help: "HTTP API requests refused with 401.",
		}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "appserver_http_event_streams",
			Help: "Open HTTP API event streams (SSE).",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.duration, m.authFailures, m.streams} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
