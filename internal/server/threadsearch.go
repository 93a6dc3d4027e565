package server

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns"
)

// searchTimeout bounds one thread/search or thread/search/stream: past it
// the search stops and answers an error rather than holding the store.
const searchTimeout = time.Minute

// errSearchCancelled is the cause a search/cancel gives its search.
var errSearchCancelled = errors.New("thread search cancelled")

// searchKey names a running search: its connection, its kind (the method)
// and the request's id on that connection. A cancel reaches only the
// searches of its own connection.
type searchKey struct {
	conn   uint64
	method string
	id     api.RequestID
}

// searches holds the cancel functions of the running thread searches. A
// search runs on its request's goroutine, under the connection's
// context: the connection's end stops it, a cancel only hastens that.
type searches struct {
	mu      sync.Mutex
	running map[searchKey]context.CancelCauseFunc
}

// start registers the search of c and returns its context, bounded by
// searchTimeout, and the function that ends it.
func (r *searches) start(ctx context.Context, c *Call) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	ctx, stop := context.WithTimeout(ctx, searchTimeout)
	if c.req == nil || c.req.IsNotification() {
		return ctx, func() { stop(); cancel(nil) }
	}
	k := searchKey{conn: c.Session.id, method: c.Method, id: c.req.ID()}
	r.mu.Lock()
	if r.running == nil {
		r.running = map[searchKey]context.CancelCauseFunc{}
	}
	r.running[k] = cancel
	r.mu.Unlock()
	return ctx, func() {
		r.mu.Lock()
		delete(r.running, k)
		r.mu.Unlock()
		stop()
		cancel(nil)
	}
}

// cancel stops the search method's request id on conn, if it runs.
func (r *searches) cancel(conn uint64, method string, id api.RequestID) {
	r.mu.Lock()
	cancel := r.running[searchKey{conn: conn, method: method, id: id}]
	r.mu.Unlock()
	if cancel != nil {
		cancel(errSearchCancelled)
	}
}

// searchError is what a search that stopped early answers.
func searchError(ctx context.Context, err error) error {
	switch {
	case errors.Is(context.Cause(ctx), errSearchCancelled):
		return InvalidRequest("thread search cancelled")
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return InvalidRequest("thread search timed out after %s", searchTimeout)
	}
	return err
}

// registerSearch serves thread/search, thread/search/stream and their
// cancels.
func (s *Server) registerSearch(m Reader) {
	run := func(ctx context.Context, c *Call, p api.ThreadSearchParams, partial func(api.List[api.ThreadSearchHit])) (api.ThreadSearchResult, turns.After, error) {
		if strings.TrimSpace(p.SearchTerm) == "" {
			return api.ThreadSearchResult{}, nil, InvalidRequest("thread/search requires a non-empty searchTerm")
		}
		ctx, end := s.searches.start(ctx, c)
		defer end()
		res, err := m.StreamSearchThreads(ctx, c.Session.who, p, partial)
		if err != nil {
			return api.ThreadSearchResult{}, nil, searchError(ctx, err)
		}
		return res, nil, nil
	}
	s.Handle("thread/search", threadMethod([]string{"searchTerm"}, func(ctx context.Context, c *Call, p api.ThreadSearchParams) (api.ThreadSearchResult, turns.After, error) {
		return run(ctx, c, p, nil)
	}))
	s.Handle("thread/search/stream", threadMethod([]string{"searchTerm"}, func(ctx context.Context, c *Call, p api.ThreadSearchParams) (api.ThreadSearchResult, turns.After, error) {
		if n := len(strings.TrimSpace(p.SearchTerm)); n > api.ThreadSearchStreamTermMax {
			return api.ThreadSearchResult{}, nil, InvalidParams("thread/search/stream searchTerm exceeds %d UTF-8 bytes", api.ThreadSearchStreamTermMax)
		}
		var id api.RequestID
		if c.req != nil {
			id = c.req.ID()
		}
		return run(ctx, c, p, func(hits api.List[api.ThreadSearchHit]) {
			n, err := s.NewNotification("thread/search/partial", api.ThreadSearchPartialNotification{RequestID: id, Data: hits})
			if err == nil {
				c.Session.Notify(n)
			}
		})
	}))
	cancel := func(target string) Method {
		return threadMethod([]string{"requestId"}, func(_ context.Context, c *Call, p api.ThreadSearchCancelParams) (api.ThreadSearchCancelResult, turns.After, error) {
			s.searches.cancel(c.Session.id, target, p.RequestID)
			return api.ThreadSearchCancelResult{}, nil, nil
		})
	}
	s.Handle("thread/search/cancel", cancel("thread/search"))
	s.Handle("thread/search/stream/cancel", cancel("thread/search/stream"))
}
