package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/appserver/appserver/internal/apperr"
)

// ReadyGate is a turn's tool-call gate (docs/tools.md §1.8): a readiness
// barrier mutating calls wait on until it is marked ready, e.g. once a
// pre-turn snapshot finished. It does not serialize calls. The zero value is
// not usable; a nil *ReadyGate is always ready.
type ReadyGate struct {
	once sync.Once
	ch   chan struct{}
}

// NewReadyGate returns a gate that is not ready yet.
func NewReadyGate() *ReadyGate { return &ReadyGate{ch: make(chan struct{})} }

// MarkReady opens the gate; it is safe to call more than once.
func (g *ReadyGate) MarkReady() {
	if g != nil {
		g.once.Do(func() { close(g.ch) })
	}
}

// Wait blocks until the gate is ready or ctx is done.
func (g *ReadyGate) Wait(ctx context.Context) error {
	if g == nil {
		return nil
	}
	select {
	case <-g.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// state reports the lock's holders and queue length, for tests.
func (l *callLock) state() (readers int, writer bool, queued int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.readers, l.writer, len(l.queue)
}

// lockWaiter is one request for the parallel lock.
type lockWaiter struct {
	exclusive bool
	ready     chan struct{} // closed when granted
	granted   bool          // guarded by callLock.mu
}

// callLock is the per-turn parallel lock: a reader/writer lock whose
// requests are granted strictly in arrival order (like tokio's fair RwLock
// used by Codex), so a waiting exclusive call holds back later shared ones.
// Waiting honours context cancellation.
type callLock struct {
	mu      sync.Mutex
	readers int
	writer  bool
	queue   []*lockWaiter
}

// enqueue registers a request without blocking and grants it at once when
// possible.
func (l *callLock) enqueue(exclusive bool) *lockWaiter {
	w := &lockWaiter{exclusive: exclusive, ready: make(chan struct{})}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queue = append(l.queue, w)
	l.grantLocked()
	return w
}

// grantLocked grants queued requests from the front while they fit.
func (l *callLock) grantLocked() {
	for len(l.queue) > 0 {
		w := l.queue[0]
		if w.exclusive {
			if l.writer || l.readers > 0 {
				return
			}
			l.writer = true
		} else {
			if l.writer {
				return
			}
			l.readers++
		}
		w.granted = true
		close(w.ready)
		l.queue = l.queue[1:]
	}
}

// wait blocks until w is granted or ctx is done; on cancellation the request
// is withdrawn (or, if it was granted meanwhile, released). Cancellation wins
// over a grant that arrives at the same time.
func (l *callLock) wait(ctx context.Context, w *lockWaiter) error {
	select {
	case <-w.ready:
		if ctx.Err() == nil {
			return nil
		}
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.granted {
		l.releaseLocked(w)
	} else {
		l.queue = slices.DeleteFunc(l.queue, func(x *lockWaiter) bool { return x == w })
		l.grantLocked()
	}
	return ctx.Err()
}

// release gives back a granted request.
func (l *callLock) release(w *lockWaiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked(w)
}

func (l *callLock) releaseLocked(w *lockWaiter) {
	if w.exclusive {
		l.writer = false
	} else {
		l.readers--
	}
	l.grantLocked()
}

// DispatcherConfig configures the dispatcher of one turn.
type DispatcherConfig struct {
	// Turn is passed to handlers in every Invocation.
	Turn TurnContext
	// Gate, when non-nil, holds mutating calls until it is marked ready.
	Gate *ReadyGate
	// Observe, when non-nil, is told how each call ended (for metrics and
	// logs), on the goroutine that ran it; it must not block.
	Observe func(CallResult)
}

// Outcomes of a call, CallResult.Outcome.
const (
	// CallOK: the handler ran and its output is not marked failed.
	CallOK = "ok"
	// CallFailed: the output is marked failed (the handler's error, a
	// failed command, a panic).
	CallFailed = "failed"
	// CallAborted: the turn was interrupted before or while the call ran.
	CallAborted = "aborted"
	// CallUnsupported: no handler has the tool's name.
	CallUnsupported = "unsupported"
	// CallFatal: the call ends the turn (ErrFatal, an aborting hook).
	CallFatal = "fatal"
)

// CallResult is how one call ended, for DispatcherConfig.Observe.
type CallResult struct {
	// CallID is the model's call id; Tool the tool's display name.
	CallID, Tool string
	// Outcome is one of CallOK, CallFailed, CallAborted, CallUnsupported
	// and CallFatal.
	Outcome string
	// Duration is from the round's dispatch to the call's end, waiting
	// for the parallel lock included.
	Duration time.Duration
	// Output is what the model is answered (empty for CallFatal).
	Output Output
	// Err is the fatal error of a CallFatal call.
	Err error
}

// Dispatcher runs the tool calls of one turn. It owns the turn's parallel
// lock: a call runs exclusively when its spec is not parallel-capable or its
// handler reports it mutating (our stricter rule, docs/tools.md §1.8); other calls
// share the lock and run concurrently. Calls are admitted in the order they
// are dispatched. It is safe for concurrent use.
type Dispatcher struct {
	reg     *Registry
	turn    TurnContext
	gate    *ReadyGate
	observe func(CallResult)
	lock    callLock
}

// NewDispatcher returns the dispatcher for one turn.
func (r *Registry) NewDispatcher(cfg DispatcherConfig) *Dispatcher {
	return &Dispatcher{reg: r, turn: cfg.Turn, gate: cfg.Gate, observe: cfg.Observe}
}

// Dispatch runs one call; see DispatchAll.
func (d *Dispatcher) Dispatch(ctx context.Context, call Call) (ResponseItem, error) {
	items, err := d.DispatchAll(ctx, []Call{call})
	if err != nil {
		return ResponseItem{}, err
	}
	return items[0], nil
}

// DispatchAll runs the calls of one model response and returns their output
// items in call order.
//
// An unknown tool is answered to the model ("unsupported call: <name>", or
// "unsupported custom tool call: <name>" for freeform payloads). Handler
// errors and panics become failed outputs. A payload that the tool's handler
// does not accept, a handler error matching ErrFatal and an aborting hook
// return an error matching ErrFatal, and no items: the turn must fail. On a
// payload mismatch no call runs; on the other fatal errors the remaining calls
// are cancelled.
//
// When ctx is cancelled (the turn is interrupted), calls that have not
// finished are answered "aborted by user after <S.s>s" (for shell_command and
// exec sessions "Wall time: <S.s> seconds\naborted by user") and DispatchAll
// still returns every item with a nil error, so the history stays paired.
// It returns once every handler has returned.
func (d *Dispatcher) DispatchAll(ctx context.Context, calls []Call) ([]ResponseItem, error) {
	started := d.reg.cfg.Now()
	handlers := make([]Handler, len(calls))
	for i, c := range calls {
		h, ok := d.reg.Handler(c.Namespace, c.Name)
		if !ok {
			continue
		}
		if !matchesKind(h, c.Payload) {
			msg := fmt.Sprintf("tool %s invoked with incompatible payload", c.DisplayName())
			d.reg.cfg.Logger.Warn(msg, slog.String("call_id", c.CallID))
			return nil, &FatalError{Message: msg}
		}
		handlers[i] = h
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	items := make([]ResponseItem, len(calls))
	errs := make([]error, len(calls))
	type admitted struct {
		inv      Invocation
		h        Handler
		mutating bool
		w        *lockWaiter
		idx      int
	}
	var queued []admitted
	for i, c := range calls {
		h := handlers[i]
		if h == nil {
			d.reg.cfg.Logger.Warn("unsupported tool call", slog.String("tool_name", c.DisplayName()), slog.String("call_id", c.CallID))
			out := failureOutput(unsupportedMessage(c))
			items[i] = responseItemFor(c, out)
			d.observed(c, CallUnsupported, started, out, nil)
			continue
		}
		inv := Invocation{Call: c, Turn: d.turn}
		mutating := d.isMutating(runCtx, h, inv)
		exclusive := mutating || !d.reg.SupportsParallel(c.Namespace, c.Name)
		// Every request is queued, in call order, before any call starts, so
		// admission follows the model's order.
		queued = append(queued, admitted{inv: inv, h: h, mutating: mutating, w: d.lock.enqueue(exclusive), idx: i})
	}
	runOne := func(a admitted) {
		item, out, aborted, err := d.run(runCtx, a.inv, a.h, a.mutating, a.w, started)
		items[a.idx] = item
		outcome := CallOK
		switch {
		case err != nil:
			outcome = CallFatal
		case aborted:
			outcome = CallAborted
		case out.Success != nil && !*out.Success:
			outcome = CallFailed
		}
		d.observed(a.inv.Call, outcome, started, out, err)
		if err != nil {
			errs[a.idx] = err
			cancel()
		}
	}
	// The last call runs on this goroutine, which would only wait: a
	// round of one call (the common case) starts no goroutine, and its
	// answer is not handed from one goroutine to another on its way back.
	var wg sync.WaitGroup
	if n := len(queued); n > 0 {
		for _, a := range queued[:n-1] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runOne(a)
			}()
		}
		runOne(queued[n-1])
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return items, nil
}

// observed tells d's observer how call ended.
func (d *Dispatcher) observed(call Call, outcome string, started time.Time, out Output, err error) {
	if d.observe == nil {
		return
	}
	d.observe(CallResult{CallID: call.CallID, Tool: call.DisplayName(), Outcome: outcome,
		Duration: d.reg.cfg.Now().Sub(started), Output: out, Err: err})
}

// run executes one admitted call: lock, gate, handler, hooks. It returns
// the output it answers with and whether the call was aborted.
func (d *Dispatcher) run(ctx context.Context, inv Invocation, h Handler, mutating bool, w *lockWaiter, started time.Time) (ResponseItem, Output, bool, error) {
	if err := d.lock.wait(ctx, w); err != nil {
		return d.aborted(inv.Call, started), Output{}, true, nil
	}
	defer d.lock.release(w)
	if mutating {
		if err := d.gate.Wait(ctx); err != nil {
			return d.aborted(inv.Call, started), Output{}, true, nil
		}
	}
	if ctx.Err() != nil {
		// Interrupted as the gate opened: do not start the handler.
		return d.aborted(inv.Call, started), Output{}, true, nil
	}

	out, err := d.callHandler(ctx, h, inv)
	var fatal error
	switch {
	case errors.Is(err, errHandlerPanic):
		out = failureOutput(fmt.Sprintf("tool %s failed with an internal error", inv.DisplayName()))
	case err == nil:
	case ctx.Err() != nil:
		return d.aborted(inv.Call, started), Output{}, true, nil
	case errors.Is(err, ErrFatal):
		fatal = err
		out = failureOutput(err.Error())
	default:
		out = failureOutput(errorText(err))
		d.reg.cfg.Logger.Debug("tool call failed", slog.String("tool_name", inv.DisplayName()),
			slog.String("call_id", inv.CallID), slog.Any("error", err))
	}

	out, hookErr := d.reg.runHooks(ctx, AfterToolUseEvent{
		TurnID:    d.turn.TurnID,
		CallID:    inv.CallID,
		ToolName:  inv.DisplayName(),
		ToolKind:  inv.Payload.Kind(),
		ToolInput: inv.Payload,
		Executed:  true,
		Duration:  d.reg.cfg.Now().Sub(started),
		Mutating:  mutating,
		Output:    out,
	})
	if hookErr != nil {
		return ResponseItem{}, Output{}, false, hookErr
	}
	if fatal != nil {
		return ResponseItem{}, Output{}, false, fatal
	}
	return responseItemFor(inv.Call, out), out, false, nil
}

// isMutating asks the handler, treating a panic as "mutating".
func (d *Dispatcher) isMutating(ctx context.Context, h Handler, inv Invocation) (mutating bool) {
	defer func() {
		if p := recover(); p != nil {
			d.reg.cfg.Logger.Error("tool IsMutating panicked", slog.String("tool_name", inv.DisplayName()),
				slog.String("call_id", inv.CallID), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			mutating = true
		}
	}()
	return h.IsMutating(ctx, inv)
}

// errHandlerPanic reports a recovered handler panic.
var errHandlerPanic = errors.New("tool handler panicked")

// callHandler runs Handle, recovering a panic (as errHandlerPanic) so it
// never crashes the daemon.
func (d *Dispatcher) callHandler(ctx context.Context, h Handler, inv Invocation) (out Output, err error) {
	defer func() {
		if p := recover(); p != nil {
			d.reg.cfg.Logger.Error("tool handler panicked", slog.String("tool_name", inv.DisplayName()),
				slog.String("call_id", inv.CallID), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			out, err = Output{}, errHandlerPanic
		}
	}()
	return h.Handle(ctx, inv)
}

// wallTimeAbortTools get the exec-style abort text (top-level names only).
// "unified_exec" is the name the reference matches literally.
var wallTimeAbortTools = map[string]bool{
	"shell_command": true,
	"exec_command":  true,
	"write_stdin":   true,
	"unified_exec":  true,
}

// aborted is the output of a call interrupted by the turn's cancellation.
func (d *Dispatcher) aborted(c Call, started time.Time) ResponseItem {
	secs := max(d.reg.cfg.Now().Sub(started).Seconds(), 0.1)
	var text string
	if c.Namespace == "" && wallTimeAbortTools[c.Name] {
		text = fmt.Sprintf("Wall time: %.1f seconds\naborted by user", secs)
	} else {
		text = fmt.Sprintf("aborted by user after %.1fs", secs)
	}
	return responseItemFor(c, failureOutput(text))
}

// unsupportedMessage is the reference answer to an unknown tool.
func unsupportedMessage(c Call) string {
	if c.Payload != nil && c.Payload.Kind() == PayloadCustom {
		return "unsupported custom tool call: " + c.DisplayName()
	}
	return "unsupported call: " + c.DisplayName()
}

// errorText is the model-visible text of a respond-to-model error: the
// client-safe message of a top-level *apperr.Error, else the error text.
func errorText(err error) string {
	if e, ok := err.(*apperr.Error); ok {
		return e.Message
	}
	return err.Error()
}
