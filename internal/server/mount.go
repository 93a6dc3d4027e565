package server

import "net/http"

// Mount serves h under pattern (for example "/v1") on the listener, behind
// the origin guard. Call it before Serve.
func (s *Server) Mount(pattern string, h http.Handler) { s.router.Mount(pattern, h) }

// Draining reports whether the server has started shutting down.
func (s *Server) Draining() bool { return s.draining.Load() }
