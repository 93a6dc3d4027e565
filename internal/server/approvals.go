package server

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns"
)

// DefaultClientRequestTimeout is how long a request waits for a subscribed
// connection when ClientRequests is given no timeout.
const DefaultClientRequestTimeout = 30 * time.Second

// ClientRequests delivers the server requests that built-in tools make
// during a turn (item/commandExecution/requestApproval,
// item/fileChange/requestApproval, item/tool/requestUserInput) to a
// connection subscribed to the thread. It implements turns.ServerRequester.
//
// Rules:
//   - A request goes to one live subscriber of its thread, the oldest
//     connection first.
//   - When that connection closes before answering, the request is sent
//     again to another subscriber (a new request id).
//   - While no subscriber can take it, the request waits for one (a client
//     that resumes the thread) for at most the timeout, counted from the
//     moment no connection was available; then it fails with
//     turns.ErrNoClient and the tool declines the call with a message the
//     model can read. A turn never hangs on an absent client.
//   - A connection that unsubscribed but is still connected may still
//     answer a request it holds.
//
// The answer (or the client's JSON-RPC error) is returned as is; the turns
// layer sends serverRequest/resolved and keeps the thread's status flags.
type ClientRequests struct {
	s       *Server
	subs    func(threadID string) []turns.ConnID
	timeout time.Duration

	mu      sync.Mutex
	changed chan struct{} // closed (and replaced) when subscriptions change
}

// NewClientRequests returns the request router of this server; subs lists
// a thread's subscribers and timeout bounds the wait for one (0 means
// DefaultClientRequestTimeout).
func (s *Server) NewClientRequests(subs func(threadID string) []turns.ConnID, timeout time.Duration) *ClientRequests {
	if timeout <= 0 {
		timeout = DefaultClientRequestTimeout
	}
	return &ClientRequests{s: s, subs: subs, timeout: timeout, changed: make(chan struct{})}
}

// SubscribersChanged wakes the requests waiting for a subscriber; call it
// whenever a connection subscribes to or leaves a thread.
func (c *ClientRequests) SubscribersChanged(string) {
	c.mu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *ClientRequests) wakeup() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// Request implements turns.ServerRequester.
func (c *ClientRequests) Request(ctx context.Context, threadID, method string, params any) (json.RawMessage, api.RequestID, bool, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, api.RequestID{}, false, err
		}
		wake := c.wakeup() // before listing: a change after the listing wakes us
		subs := c.subs(threadID)
		slices.Sort(subs) // connection ids grow: oldest first
		resent := false
		for _, conn := range subs {
			sess := c.s.byID.get(uint64(conn))
			if sess == nil {
				continue
			}
			id, wait, err := sess.StartRequest(ctx, method, params)
			if err != nil {
				continue // that connection is going away; try the next
			}
			if timer != nil {
				timer.Stop()
				timer = nil
			}
			res, err := wait(ctx)
			if errors.Is(err, ErrConnectionClosed) && ctx.Err() == nil {
				// The holder left without answering: offer it again.
				sess.log.Debug("client left before answering; offering the request again", "method", method, "request_id", id)
				resent = true
				break
			}
			if err != nil && ctx.Err() != nil {
				err = ctx.Err()
			}
			return res, api.IntRequestID(id), true, err
		}
		if resent {
			continue
		}
		if timer == nil {
			timer = time.NewTimer(c.timeout)
		}
		select {
		case <-wake:
		case <-timer.C:
			return nil, api.RequestID{}, false, turns.ErrNoClient
		case <-ctx.Done():
			return nil, api.RequestID{}, false, ctx.Err()
		}
	}
}
