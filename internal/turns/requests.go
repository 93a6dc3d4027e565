package turns

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/appserver/appserver/api"
)

// ClientRequest is one server→client request a tool makes during a turn.
type ClientRequest struct {
	// Method and Params are the request.
	Method string
	Params any
	// Flag is the thread's active flag while the request is pending
	// (waitingOnApproval or waitingOnUserInput).
	Flag api.ThreadActiveFlag
	// BeforeSend, when set, runs after the flag was raised (and its
	// thread/status/changed sent) and before the request goes out; command
	// approvals start their item there, as the reference does.
	BeforeSend func()
}

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

// flagSet counts the pending requests per active flag of a turn.
type flagSet struct {
	mu     sync.Mutex
	counts map[api.ThreadActiveFlag]int
}

// flagOrder is the order flags are reported in.
var flagOrder = []api.ThreadActiveFlag{api.FlagWaitingOnApproval, api.FlagWaitingOnUserInput}

func (f *flagSet) add(flag api.ThreadActiveFlag, delta int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counts == nil {
		f.counts = map[api.ThreadActiveFlag]int{}
	}
	f.counts[flag] += delta
	if f.counts[flag] <= 0 {
		delete(f.counts, flag)
	}
}

func (f *flagSet) list() []api.ThreadActiveFlag {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []api.ThreadActiveFlag{}
	for _, fl := range flagOrder {
		if f.counts[fl] > 0 {
			out = append(out, fl)
		}
	}
	return out
}

// Request implements ClientRequests for the turn's tools.
func (r *turnRun) Request(ctx context.Context, req ClientRequest) (json.RawMessage, func(), error) {
	t, at := r.t, r.at
	at.flagSet.add(req.Flag, 1)
	t.broadcastStatus()
	var once sync.Once
	release := func() {
		once.Do(func() {
			at.flagSet.add(req.Flag, -1)
			// A turn that is ending announces its final status itself.
			if at.ctx.Err() == nil {
				t.broadcastStatus()
			}
		})
	}
	if req.BeforeSend != nil {
		req.BeforeSend()
	}
	res, id, sent, err := t.m.cfg.Sink.Request(ctx, ServerRequest{ThreadID: t.id, Ancestors: t.ancestors, Method: req.Method, Params: req.Params, Ephemeral: t.ephemeral()})
	if sent {
		r.resolved(id)
	}
	return res, release, err
}

// resolved announces a settled server request, or keeps it for after
// turn/completed when the turn is being interrupted (docs/protocol.md §8.2).
func (r *turnRun) resolved(id api.RequestID) {
	r.mu.Lock()
	if r.at.ctx.Err() != nil && !r.finished {
		r.lateResolved = append(r.lateResolved, id)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.t.emit("serverRequest/resolved", api.ServerRequestResolvedNotification{ThreadID: r.t.id, RequestID: id})
}

// flushResolved sends the serverRequest/resolved notifications held back
// while the turn ended.
func (r *turnRun) flushResolved() {
	r.mu.Lock()
	ids := r.lateResolved
	r.lateResolved = nil
	r.finished = true
	r.mu.Unlock()
	for _, id := range ids {
		r.t.emit("serverRequest/resolved", api.ServerRequestResolvedNotification{ThreadID: r.t.id, RequestID: id})
	}
}
