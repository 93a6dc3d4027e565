package loop

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

// Request asks the thread's client for the turn's tools (the thread
// table's ClientRequests).
func (r *Run) Request(ctx context.Context, req ClientRequest) (json.RawMessage, func(), error) {
	t, at := r.t, r.at
	at.flagSet.add(req.Flag, 1)
	t.BroadcastStatus()
	var once sync.Once
	release := func() {
		once.Do(func() {
			at.flagSet.add(req.Flag, -1)
			// A turn that is ending announces its final status itself.
			if at.Ctx.Err() == nil {
				t.BroadcastStatus()
			}
		})
	}
	if req.BeforeSend != nil {
		req.BeforeSend()
	}
	res, id, sent, err := t.Request(ctx, req.Method, req.Params)
	if sent {
		r.resolved(id)
	}
	return res, release, err
}

// resolved announces a settled server request, or keeps it for after
// turn/completed when the turn is being interrupted (docs/protocol.md §8.2).
func (r *Run) resolved(id api.RequestID) {
	r.mu.Lock()
	if r.at.Ctx.Err() != nil && !r.finished {
		r.lateResolved = append(r.lateResolved, id)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.t.Emit("serverRequest/resolved", api.ServerRequestResolvedNotification{ThreadID: r.threadID, RequestID: id})
}

// flushResolved sends the serverRequest/resolved notifications held back
// while the turn ended.
func (r *Run) flushResolved() {
	r.mu.Lock()
	ids := r.lateResolved
	r.lateResolved = nil
	r.finished = true
	r.mu.Unlock()
	for _, id := range ids {
		r.t.Emit("serverRequest/resolved", api.ServerRequestResolvedNotification{ThreadID: r.threadID, RequestID: id})
	}
}
