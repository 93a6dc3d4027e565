package frontdoor

import "sync/atomic"

// Drain is the daemon's drain state, shared by the front door, the
// JSON-RPC sessions and the HTTP API: built first, so that each of them
// gets it at construction. The zero Drain is not draining.
type Drain struct{ on atomic.Bool }

// Start starts draining: /readyz answers 503, upgrades are refused and
// requests get the draining error. It cannot be undone.
func (d *Drain) Start() { d.on.Store(true) }

// Draining reports whether draining has started.
func (d *Drain) Draining() bool { return d.on.Load() }
