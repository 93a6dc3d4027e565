// Package reqlog is the identity of a client's request in the daemon's
// logs: its request id, taken from the client's X-Request-Id when that is
// a safe one or made otherwise, carried in the context of the request and
// of the work it starts (a turn, a websocket session), and written on
// every log line logged with such a context by the slog handler
// NewHandler wraps around the daemon's own. It also holds what the access
// log learns of a request from the door that authenticated it: the
// principal.
//
// The front door starts a Request for each HTTP request it serves; the
// doors below it (the HTTP API, the websocket upgrade) name its principal;
// work that outlives the request keeps its id through Detach.
//
// It must not import anything of ours: every layer that logs may import
// it.
package reqlog
