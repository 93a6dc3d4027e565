// Package frontdoor is appserver's listeners and what they serve: one chi
// router on the network listener (ws://, wss://) with the health probes
// (/healthz, /readyz), the Prometheus registry on /metrics, the origin
// guard, the mounts given at construction (the /v1 HTTP API, /mcp) and
// the websocket upgrade for every other path; and the unix control socket
// (unix://), which serves only the JSON-RPC websocket, to the daemon's own
// user. It also owns the daemon's drain state, which the sessions and the
// HTTP API read: once draining, /readyz answers 503 and new work is
// refused while open connections stay open.
//
// Every request of both listeners gets a request id (the client's
// X-Request-Id when internal/reqlog finds it safe, else a new one),
// answered in X-Request-Id and carried in its context, and one access log
// line at info once it is served (the probes and /metrics at debug),
// naming its route pattern, never its path, query or headers. The
// composition root's server spans wrap each request inside that
// (Config.Tracing).
//
// It knows no protocol: the mounts, the upgrade and the control socket's
// handler are http.Handlers built by the composition root. It must not
// import anything of ours but internal/reqlog.
package frontdoor
