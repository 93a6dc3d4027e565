package dynamic

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
)

// DefaultReconnectTimeout is how long a call waits for a connection that can
// take it when BrokerConfig.ReconnectTimeout is zero.
const DefaultReconnectTimeout = 5 * time.Minute

// ErrNoConnection is returned by Router.Offer when no live connection
// subscribed to the call's thread can take the call.
var ErrNoConnection = errors.New("dynamic: no connection can take the call")

// Router delivers item/tool/call requests to client connections. The
// transport implements it. The broker calls it from the goroutine of the
// call (or of Reoffer) without holding any broker-wide lock; calls of Offer
// and Withdraw for the same Pending never overlap (a per-call lock), so the
// router may resolve the call from inside Offer but must not call Reoffer
// from there.
type Router interface {
	// Offer makes sure p's item/tool/call request (p.Params()) is
	// outstanding on at least one live connection subscribed to p's
	// thread. If a live connection already holds it, Offer does nothing and
	// returns nil. Otherwise it sends the request to one subscribed
	// connection (sending it to more is allowed: the first answer wins) and
	// returns nil once it is sent (queued); or it returns ErrNoConnection
	// when no connection can take it. When the answer arrives the transport
	// calls p.ResolveResponse (or Broker.ResolveResponse); its result tells
	// whether that answer was the one used. Offer must not block on a slow
	// client and must return promptly once ctx is done.
	Offer(ctx context.Context, p *Pending) error
	// Withdraw is called exactly once when p is settled, if an Offer for p
	// ever succeeded, after the last Offer for p returned; no Offer follows.
	// The transport tells every live connection that still holds the
	// request that it is settled (serverRequest/resolved) and forgets p.
	// outcome says how p ended. It must not block.
	Withdraw(p *Pending, outcome Outcome)
}

// BrokerConfig configures a Broker.
type BrokerConfig struct {
	// Router delivers calls to connections; it may also be set later with
	// SetRouter. Without a router every call waits for ReconnectTimeout.
	Router Router
	// ReconnectTimeout is how long a call waits while no connection can take
	// it (none subscribed at the start, or the holder disconnected with no
	// other subscriber), before it fails with a model-readable error. Zero
	// means DefaultReconnectTimeout; negative waits until the turn ends.
	ReconnectTimeout time.Duration
	// AnswerTimeout, when positive, bounds the whole call, even while a live
	// client holds it without answering. Zero (the default) waits for the
	// client as long as the turn runs, like the reference.
	AnswerTimeout time.Duration
	// Metrics receives measurements; nil discards them.
	Metrics Metrics
	// Logger receives warnings (ignored answers, reused call ids); nil
	// discards them.
	Logger *slog.Logger
	// Now is the clock used for latencies; nil uses time.Now.
	Now func() time.Time
}

// Broker forwards dynamic tool calls to clients and hands their answers
// back, one oneshot per call. It is shared by every thread of the daemon and
// safe for concurrent use.
type Broker struct {
	reconnect time.Duration
	answer    time.Duration
	metrics   Metrics
	log       *slog.Logger
	now       func() time.Time

	router atomic.Pointer[routerBox]
	seq    atomic.Uint64

	mu     sync.Mutex
	calls  map[callKey]*Pending
	closed bool
}

type routerBox struct{ r Router }

type callKey struct{ thread, call string }

// NewBroker returns a broker.
func NewBroker(cfg BrokerConfig) *Broker {
	b := &Broker{
		reconnect: cfg.ReconnectTimeout,
		answer:    cfg.AnswerTimeout,
		metrics:   cfg.Metrics,
		log:       cfg.Logger,
		now:       cfg.Now,
		calls:     map[callKey]*Pending{},
	}
	if b.reconnect == 0 {
		b.reconnect = DefaultReconnectTimeout
	}
	if b.metrics == nil {
		b.metrics = NopMetrics{}
	}
	if b.log == nil {
		b.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if b.now == nil {
		b.now = time.Now
	}
	if cfg.Router != nil {
		b.SetRouter(cfg.Router)
	}
	return b
}

// SetRouter installs (or, with nil, removes) the router. Calls offered
// afterwards use it; pending calls get it on their next Reoffer.
func (b *Broker) SetRouter(r Router) {
	if r == nil {
		b.router.Store(nil)
		return
	}
	b.router.Store(&routerBox{r})
}

func (b *Broker) currentRouter() Router {
	if box := b.router.Load(); box != nil {
		return box.r
	}
	return nil
}

// CallRequest is one dynamic tool call to forward.
type CallRequest struct {
	// ThreadID is the thread the call belongs to.
	ThreadID string
	// TurnID is the turn the call belongs to.
	TurnID string
	// CallID is the model's call id; with ThreadID it identifies the call.
	CallID string
	// Namespace is the tool's namespace, "" for a top-level tool.
	Namespace string
	// Tool is the tool name.
	Tool string
	// Arguments are the parsed arguments as JSON; nil is sent as null.
	Arguments json.RawMessage
}

// Params returns the params of the item/tool/call request.
func (r CallRequest) Params() api.DynamicToolCallParams {
	p := api.DynamicToolCallParams{
		ThreadID:  r.ThreadID,
		TurnID:    r.TurnID,
		CallID:    r.CallID,
		Tool:      r.Tool,
		Arguments: r.Arguments,
	}
	if r.Namespace != "" {
		p.Namespace = new(r.Namespace)
	}
	return p
}

// CallError is the error of a call that ended without a client answer. Its
// message is meant for the model.
type CallError struct {
	// Outcome is how the call ended (cancelled, timeout, unanswered,
	// superseded or closed).
	Outcome Outcome
	// Message is the model-readable text.
	Message string
	// Cause is the underlying reason, e.g. the context's cause; may be nil.
	Cause error
}

// Error returns Message.
func (e *CallError) Error() string { return e.Message }

// Unwrap returns Cause.
func (e *CallError) Unwrap() error { return e.Cause }

// settlement is how a Pending ended.
type settlement struct {
	outcome Outcome
	result  api.DynamicToolCallResult
	err     *CallError
}

// Pending is one call waiting for its answer. The Router receives it in
// Offer and keeps it to route the answer back; its methods are safe for
// concurrent use.
type Pending struct {
	id      uint64
	req     CallRequest
	b       *Broker
	ctx     context.Context // the call's context, given to Router.Offer
	started time.Time

	settled atomic.Bool
	done    chan struct{} // closed once res is written
	res     settlement

	offerMu sync.Mutex  // serializes Offer and Withdraw for this call
	offered bool        // an Offer succeeded; guarded by offerMu
	waiting *time.Timer // reconnect timer while no connection holds it; guarded by offerMu
}

// ID is unique among the broker's calls (also across threads and reused
// call ids); routers can key their bookkeeping by it.
func (p *Pending) ID() uint64 { return p.id }

// Request returns the call.
func (p *Pending) Request() CallRequest { return p.req }

// ThreadID returns the call's thread id.
func (p *Pending) ThreadID() string { return p.req.ThreadID }

// CallID returns the model's call id.
func (p *Pending) CallID() string { return p.req.CallID }

// Params returns the params of the item/tool/call request to send.
func (p *Pending) Params() api.DynamicToolCallParams { return p.req.Params() }

// Done is closed once the call is settled (answered, cancelled, timed out).
func (p *Pending) Done() <-chan struct{} { return p.done }

// Settled reports whether the call is settled.
func (p *Pending) Settled() bool { return p.settled.Load() }

// Resolve delivers the client's answer. Only the first settlement counts: it
// returns false, and logs and counts the answer as ignored, when the call
// was already answered or ended.
func (p *Pending) Resolve(res api.DynamicToolCallResult) bool {
	return p.answer(res, answeredOutcome(res))
}

// ResolveResponse is Resolve for a raw JSON-RPC reply: a result, or a
// non-nil clientErr for an error reply, converted by ResultFromResponse.
func (p *Pending) ResolveResponse(result json.RawMessage, clientErr error) bool {
	res, outcome := ResultFromResponse(result, clientErr)
	return p.answer(res, outcome)
}

func (p *Pending) answer(res api.DynamicToolCallResult, outcome Outcome) bool {
	if !p.settle(settlement{outcome: outcome, result: res}) {
		p.b.ignored(p.req.ThreadID, p.req.CallID, IgnoredDuplicate)
		return false
	}
	return true
}

// settle records s if the call is not settled yet.
func (p *Pending) settle(s settlement) bool {
	if !p.settled.CompareAndSwap(false, true) {
		return false
	}
	p.res = s
	close(p.done)
	return true
}

func (p *Pending) fail(outcome Outcome, msg string, cause error) bool {
	return p.settle(settlement{outcome: outcome, err: &CallError{Outcome: outcome, Message: msg, Cause: cause}})
}

// Call forwards one call and waits for its result. It returns the client's
// result (or the reference's substitute for an error or undecodable reply)
// with a nil error; or a *CallError whose message is meant for the model
// when the call ended without an answer: ctx done (OutcomeCancelled,
// wrapping the context's cause), no connection for ReconnectTimeout
// (OutcomeTimeout), AnswerTimeout (OutcomeUnanswered), the call id reused
// on the thread (OutcomeSuperseded) or the broker closed (OutcomeClosed). When
// Call returns, the call is forgotten and nothing it started is left running.
func (b *Broker) Call(ctx context.Context, req CallRequest) (api.DynamicToolCallResult, error) {
	if req.ThreadID == "" || req.CallID == "" {
		return api.DynamicToolCallResult{}, apperr.New(apperr.Invalid, "dynamic tool call needs a thread id and a call id")
	}
	p := &Pending{
		id:      b.seq.Add(1),
		req:     req,
		b:       b,
		ctx:     ctx,
		started: b.now(),
		done:    make(chan struct{}),
	}
	key := callKey{req.ThreadID, req.CallID}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.metrics.CallCompleted(OutcomeClosed, 0)
		return api.DynamicToolCallResult{}, &CallError{Outcome: OutcomeClosed, Message: CancelledText}
	}
	old := b.calls[key]
	b.calls[key] = p
	b.mu.Unlock()
	b.metrics.AddPending(1)
	if old != nil {
		b.log.Warn("dynamic tool call id reused while pending; cancelling the older call",
			slog.String("thread_id", req.ThreadID), slog.String("call_id", req.CallID))
		old.fail(OutcomeSuperseded, CancelledText, nil)
	}

	b.offer(p)
	var answerTimer *time.Timer
	if b.answer > 0 {
		answerTimer = time.AfterFunc(b.answer, func() {
			p.fail(OutcomeUnanswered, fmt.Sprintf("dynamic tool call failed: the client did not answer %s within %s",
				displayName(req.Namespace, req.Tool), b.answer), nil)
		})
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.fail(OutcomeCancelled, CancelledText, context.Cause(ctx))
		<-p.done // settled by us, or by an answer that won the race
	}
	if answerTimer != nil {
		answerTimer.Stop()
	}
	b.finish(p, key)
	if p.res.err != nil {
		return api.DynamicToolCallResult{}, p.res.err
	}
	return p.res.result, nil
}

// finish forgets a settled call, stops its timers and withdraws it from the
// router.
func (b *Broker) finish(p *Pending, key callKey) {
	b.mu.Lock()
	if b.calls[key] == p {
		delete(b.calls, key)
	}
	b.mu.Unlock()

	// Every Offer for p that started before the settlement has returned once
	// we hold offerMu, and every later one sees Settled and does nothing.
	p.offerMu.Lock()
	if p.waiting != nil {
		p.waiting.Stop()
		p.waiting = nil
	}
	offered := p.offered
	p.offerMu.Unlock()
	if offered {
		if r := b.currentRouter(); r != nil {
			r.Withdraw(p, p.res.outcome)
		}
	}
	b.metrics.AddPending(-1)
	b.metrics.CallCompleted(p.res.outcome, b.now().Sub(p.started))
}

// offer asks the router to make p outstanding on a connection. On failure it
// starts the reconnect timer unless it is already running. It reports
// whether p is outstanding.
func (b *Broker) offer(p *Pending) bool {
	p.offerMu.Lock()
	defer p.offerMu.Unlock()
	if p.Settled() || p.ctx.Err() != nil {
		return false
	}
	err := ErrNoConnection
	if r := b.currentRouter(); r != nil {
		err = r.Offer(p.ctx, p)
	}
	if err == nil {
		p.offered = true
		if p.waiting != nil {
			p.waiting.Stop()
			p.waiting = nil
			b.log.Debug("dynamic tool call re-offered", slog.String("thread_id", p.req.ThreadID), slog.String("call_id", p.req.CallID))
		}
		return true
	}
	if p.ctx.Err() != nil {
		return false // the call is being cancelled
	}
	if !errors.Is(err, ErrNoConnection) {
		b.log.Warn("dynamic tool call could not be offered", slog.String("thread_id", p.req.ThreadID),
			slog.String("call_id", p.req.CallID), slog.Any("error", err))
	}
	if p.waiting == nil && b.reconnect > 0 {
		d := b.reconnect
		display := displayName(p.req.Namespace, p.req.Tool)
		p.waiting = time.AfterFunc(d, func() {
			p.fail(OutcomeTimeout, fmt.Sprintf("dynamic tool call failed: no client that can run %s was connected within %s", display, d), nil)
		})
	}
	return false
}

// Reoffer offers every pending call of the thread again: each call that no
// live connection holds is sent to a subscribed connection, or keeps (or
// starts) waiting for one. The transport calls it whenever the connections
// that can serve the thread change: a subscriber disconnected or
// unsubscribed, or a connection subscribed (thread/start, thread/resume). It
// returns how many of the thread's calls are outstanding on a connection.
func (b *Broker) Reoffer(threadID string) int {
	n := 0
	for _, p := range b.Pending(threadID) {
		if b.offer(p) {
			n++
		}
	}
	return n
}

// Pending returns the thread's pending calls, oldest first.
func (b *Broker) Pending(threadID string) []*Pending {
	b.mu.Lock()
	var ps []*Pending
	for k, p := range b.calls {
		if k.thread == threadID {
			ps = append(ps, p)
		}
	}
	b.mu.Unlock()
	slices.SortFunc(ps, func(a, c *Pending) int { return cmp.Compare(a.id, c.id) })
	return ps
}

// Len returns the number of pending calls.
func (b *Broker) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.calls)
}

// Lookup returns the pending call with the given thread and call id.
func (b *Broker) Lookup(threadID, callID string) (*Pending, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.calls[callKey{threadID, callID}]
	return p, ok
}

// Resolve delivers the client's answer to the pending call with the given
// thread and call id. It returns false, and logs and counts the answer as
// ignored, when there is no such call or it was already settled. Routers
// that kept the *Pending should prefer Pending.Resolve, which cannot hit a
// newer call that reused the call id.
func (b *Broker) Resolve(threadID, callID string, res api.DynamicToolCallResult) bool {
	p, ok := b.Lookup(threadID, callID)
	if !ok {
		b.ignored(threadID, callID, IgnoredUnknownCall)
		return false
	}
	return p.Resolve(res)
}

// ResolveResponse is Resolve for a raw JSON-RPC reply (see
// Pending.ResolveResponse).
func (b *Broker) ResolveResponse(threadID, callID string, result json.RawMessage, clientErr error) bool {
	p, ok := b.Lookup(threadID, callID)
	if !ok {
		b.ignored(threadID, callID, IgnoredUnknownCall)
		return false
	}
	return p.ResolveResponse(result, clientErr)
}

func (b *Broker) ignored(threadID, callID string, reason IgnoredReason) {
	b.log.Warn("dynamic tool answer ignored", slog.String("thread_id", threadID),
		slog.String("call_id", callID), slog.String("reason", string(reason)))
	b.metrics.AnswerIgnored(reason)
}

// Close fails every pending call with OutcomeClosed and makes later calls
// fail at once. It does not wait for the calls to return.
func (b *Broker) Close() {
	b.mu.Lock()
	b.closed = true
	ps := make([]*Pending, 0, len(b.calls))
	for _, p := range b.calls {
		ps = append(ps, p)
	}
	b.mu.Unlock()
	for _, p := range ps {
		p.fail(OutcomeClosed, CancelledText, nil)
	}
}
