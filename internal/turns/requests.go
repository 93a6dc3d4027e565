package turns

import (
	"context"
	"encoding/json"

	"github.com/appserver/appserver/internal/turns/loop"
)

// ClientRequest is one server→client request a tool makes during a turn.
type ClientRequest = loop.ClientRequest

// ClientRequests lets a tool ask the thread's client during a turn.
type ClientRequests interface {
	// Request raises the request's flag, sends the request through the
	// Sink and waits for the answer. Once it is settled, and
	// before Request returns, serverRequest/resolved goes to the
	// subscribers (for a turn that is being interrupted, right after its
	// turn/completed instead, as the reference orders it). The flag stays
	// raised until release is called; release must be called exactly once
	// (further calls do nothing), so that the caller decides whether the
	// flag clears before or after the item completes.
	Request(ctx context.Context, req ClientRequest) (result json.RawMessage, release func(), err error)
}
