package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns"
)

// DefaultRequestTimeout bounds how long a server request that only HTTP
// clients can answer waits for an answer.
const DefaultRequestTimeout = 10 * time.Minute

// maxSettledRequests is how many settled request ids are remembered (to
// answer a late answer 409 rather than 404).
const maxSettledRequests = 1024

// Requests delivers the server requests of built-in tools (command and
// file change approvals, user input) to HTTP clients as well as to the
// websocket: it wraps the websocket's turns.ServerRequester. When the
// thread has an event log, the request also appears on the thread's event
// stream with a "requestId", and whichever answer comes first is used: a
// websocket client's, or POST /v1/threads/{id}/approvals/{requestId}.
// Without a log it is the websocket's requester unchanged.
type Requests struct {
	next    turns.ServerRequester
	timeout time.Duration
	api     atomic.Pointer[API]
	seq     atomic.Uint64

	mu      sync.Mutex
	pending map[reqKey]*pendingRequest
	settled map[reqKey]bool
	order   []reqKey // settled keys, oldest first
}

type reqKey struct{ thread, id string }

// pendingRequest is one request shown to HTTP clients.
type pendingRequest struct {
	method string
	answer chan json.RawMessage // buffered; the first answer
	done   atomic.Bool          // settled, by an answer or otherwise
}

// NewRequests wraps next, the websocket's requester; timeout bounds the
// wait for an HTTP answer once no websocket client can take the request
// (0 means DefaultRequestTimeout). Give it to Config.Requests.
func NewRequests(next turns.ServerRequester, timeout time.Duration) *Requests {
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	return &Requests{next: next, timeout: timeout, pending: map[reqKey]*pendingRequest{}, settled: map[reqKey]bool{}}
}

// wsResult is what the websocket's requester returned.
type wsResult struct {
	res  json.RawMessage
	id   api.RequestID
	sent bool
	err  error
}

// Request implements turns.ServerRequester.
func (q *Requests) Request(ctx context.Context, threadID, method string, params any) (json.RawMessage, api.RequestID, bool, error) {
	var l *eventLog
	if a := q.api.Load(); a != nil {
		l = a.logs.lookup(threadID)
	}
	if l == nil {
		return q.next.Request(ctx, threadID, method, params)
	}
	id := "http-" + strconv.FormatUint(q.seq.Add(1), 10)
	key := reqKey{threadID, id}
	pr := &pendingRequest{method: method, answer: make(chan json.RawMessage, 1)}
	q.mu.Lock()
	q.pending[key] = pr
	q.mu.Unlock()
	defer q.settle(key, pr)
	if !l.showRequest(method, params, id) {
		q.mu.Lock()
		delete(q.pending, key)
		q.mu.Unlock()
		return q.next.Request(ctx, threadID, method, params)
	}

	// The websocket's client may answer too; it gets its own request.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wsDone := make(chan wsResult, 1)
	go func() {
		res, rid, sent, err := q.next.Request(wctx, threadID, method, params)
		wsDone <- wsResult{res, rid, sent, err}
	}()
	var ws *wsResult // set once the websocket side returned
	waitWS := func() wsResult {
		if ws == nil {
			cancel()
			r := <-wsDone
			ws = &r
		}
		return *ws
	}
	timer := time.NewTimer(q.timeout)
	defer timer.Stop()
	httpID := api.StringRequestID(id)
	// resolvedFor returns the id the turns layer announces as resolved:
	// the websocket's when its client holds the request (so it can
	// dismiss it); the log then gets its own resolved for the HTTP id.
	resolvedFor := func(r wsResult) (api.RequestID, bool) {
		if r.sent {
			l.resolved(threadID, id)
			return r.id, true
		}
		return httpID, true
	}
	wsCh := wsDone
	for {
		select {
		case raw := <-pr.answer:
			rid, sent := resolvedFor(waitWS())
			return raw, rid, sent, nil
		case r := <-wsCh:
			ws, wsCh = &r, nil
			if errors.Is(r.err, turns.ErrNoClient) {
				continue // no websocket client: only an HTTP answer can come
			}
			if !pr.done.CompareAndSwap(false, true) {
				// An HTTP answer won the race.
				raw := <-pr.answer
				rid, sent := resolvedFor(r)
				return raw, rid, sent, nil
			}
			l.resolved(threadID, id)
			return r.res, r.id, r.sent, r.err
		case <-timer.C:
			if pr.done.CompareAndSwap(false, true) {
				r := waitWS()
				rid, sent := resolvedFor(r)
				return nil, rid, sent, turns.ErrNoClient
			}
		case <-ctx.Done():
			if pr.done.CompareAndSwap(false, true) {
				r := waitWS()
				rid, sent := resolvedFor(r)
				return nil, rid, sent, ctx.Err()
			}
		}
	}
}

// settle forgets a pending request and remembers that it was settled.
func (q *Requests) settle(key reqKey, pr *pendingRequest) {
	pr.done.Store(true)
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.pending, key)
	q.settled[key] = true
	q.order = append(q.order, key)
	if len(q.order) > maxSettledRequests {
		delete(q.settled, q.order[0])
		q.order = q.order[1:]
	}
}

// answer delivers an HTTP client's answer: 404 for an unknown request, 409
// for one already settled.
func (q *Requests) answer(threadID, id string, decode func(method string) (json.RawMessage, *problem)) *problem {
	key := reqKey{threadID, id}
	q.mu.Lock()
	pr := q.pending[key]
	settled := q.settled[key]
	q.mu.Unlock()
	if pr == nil {
		if settled {
			return conflict("request %s was already answered or has ended", id)
		}
		return notFound("no pending request %s in thread %s", id, threadID)
	}
	raw, p := decode(pr.method)
	if p != nil {
		return p
	}
	if !pr.done.CompareAndSwap(false, true) {
		return conflict("request %s was already answered or has ended", id)
	}
	pr.answer <- raw
	return nil
}

// showRequest records a server request on the stream; false when the log
// was detached meanwhile.
func (l *eventLog) showRequest(method string, params any, id string) bool {
	p, err := json.Marshal(params)
	if err != nil {
		return false
	}
	data, err := json.Marshal(api.HTTPEvent{Method: method, Params: p, EmittedAtMs: l.logs.a.now().UnixMilli(), RequestID: &id})
	if err != nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.detached {
		return false
	}
	l.appendLocked(method, data)
	return true
}

// resolved records serverRequest/resolved for an HTTP request id.
func (l *eventLog) resolved(threadID, id string) {
	data, err := encodeEvent(l.logs.a.now(), "serverRequest/resolved",
		api.ServerRequestResolvedNotification{ThreadID: threadID, RequestID: api.StringRequestID(id)})
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.appendLocked("serverRequest/resolved", data)
}

// decodeRequestAnswer checks an answer against the request's method: the
// result a websocket client would send, strictly decoded.
func decodeRequestAnswer(b []byte) func(method string) (json.RawMessage, *problem) {
	return func(method string) (json.RawMessage, *problem) {
		var present map[string]json.RawMessage
		if err := json.Unmarshal(b, &present); err != nil || present == nil {
			return nil, invalid("the answer must be a JSON object")
		}
		switch method {
		case "item/commandExecution/requestApproval":
			var v api.CommandExecutionRequestApprovalResult
			if p := decodeStrict(b, &v); p != nil {
				return nil, p
			}
			if _, ok := present["decision"]; !ok {
				return nil, invalid("missing field decision")
			}
		case "item/fileChange/requestApproval":
			var v api.FileChangeRequestApprovalResult
			if p := decodeStrict(b, &v); p != nil {
				return nil, p
			}
			switch v.Decision {
			case api.DecisionAccept, api.DecisionAcceptForSession, api.DecisionDecline, api.DecisionCancel:
			default:
				return nil, invalid("decision must be accept, acceptForSession, decline or cancel")
			}
		case "item/tool/requestUserInput":
			var v api.ToolRequestUserInputResult
			if p := decodeStrict(b, &v); p != nil {
				return nil, p
			}
			if _, ok := present["answers"]; !ok {
				return nil, invalid("missing field answers")
			}
		}
		return json.RawMessage(b), nil
	}
}

// answerApproval serves POST /v1/threads/{id}/approvals/{requestId}: the
// answer to a request shown on the event stream with that requestId,
// exactly the result a websocket client would send ({"decision": …} for
// approvals, {"answers": …} for user input). The first answer is used,
// over either transport; a later one gets 409.
func (a *API) answerApproval(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	if a.cfg.Requests == nil {
		return newProblem(http.StatusNotImplemented, api.ProblemNotImplemented, "approvals are not available yet")
	}
	b, p := a.readBody(w, r, false)
	if p != nil {
		return p
	}
	id := chi.URLParam(r, "requestID")
	if p := a.cfg.Requests.answer(th.ID, id, decodeRequestAnswer(b)); p != nil {
		return p
	}
	writeJSON(w, http.StatusOK, api.HTTPRequestAnswered{ThreadID: th.ID, RequestID: id})
	return nil
}
