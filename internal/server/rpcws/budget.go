package rpcws

import "sync/atomic"

// DefaultInboundBytes is the default bound on the inbound frame bytes in
// flight across every connection sharing an InboundBudget: eight
// frames of the largest size (16 MiB) the server reads.
const DefaultInboundBytes = 128 << 20

// OverloadedMessage is the message of the api.CodeServerOverloaded error a
// request gets when its frame does not fit in the inbound budget: the
// answer the server gives any request it has no room for, so clients
// retry it the same way.
const OverloadedMessage = "Server overloaded; retry later."

// InboundBudget bounds, in bytes, the inbound frames in flight across the
// connections that share it: a frame counts from its first byte read until
// it is done being handled (a request until Conn.Finish, anything else
// once it has been dispatched).
//
// A frame that does not fit is refused, not waited for: its reading goes
// on but its bytes are discarded (only its first chunk, at most 64 KiB, is
// kept outside the budget to find its id), and a request is answered
// api.CodeServerOverloaded. Waiting instead (not reading until bytes are released)
// would stall the connection's other traffic too, among it the client's
// answers to approval requests that the in-flight requests may be waiting
// for, and frames read part way on many connections could each wait for
// bytes the others hold.
//
// A nil *InboundBudget bounds nothing.
type InboundBudget struct {
	limit int64
	used  atomic.Int64
	peak  atomic.Int64
}

// NewInboundBudget returns a budget of limit bytes; limit ≤ 0 means
// DefaultInboundBytes.
func NewInboundBudget(limit int64) *InboundBudget {
	if limit <= 0 {
		limit = DefaultInboundBytes
	}
	return &InboundBudget{limit: limit}
}

// Limit returns the budget's bound in bytes.
func (b *InboundBudget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// InFlight returns the bytes held now, for metrics.
func (b *InboundBudget) InFlight() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Peak returns the most bytes ever held at once, for tests and metrics.
func (b *InboundBudget) Peak() int64 {
	if b == nil {
		return 0
	}
	return b.peak.Load()
}

// reserve takes n bytes unless that would exceed the limit.
func (b *InboundBudget) reserve(n int64) bool {
	if b == nil || n == 0 {
		return true
	}
	for {
		used := b.used.Load()
		if used+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			b.notePeak(used + n)
			return true
		}
	}
}

func (b *InboundBudget) notePeak(v int64) {
	for {
		p := b.peak.Load()
		if v <= p || b.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

// release gives back n bytes taken by reserve.
func (b *InboundBudget) release(n int64) {
	if b != nil && n != 0 {
		b.used.Add(-n)
	}
}
