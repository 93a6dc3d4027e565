package turns

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// Backoff of turnEnds between attempts while the store is unavailable.
const (
	endRetryMin = 100 * time.Millisecond
	endRetryMax = 5 * time.Second
	// endRetryLast bounds the last attempt Stop makes.
	endRetryLast = time.Second
)

// turnEnds writes again the ends of turns whose end could not be stored
// (the store was down when the turn finished), with backoff, until the
// store takes them or the Manager stops. Clients were told those turns
// failed; without this, the store would keep them inProgress until a
// restart's Recover marked them interrupted. Its goroutine runs only while
// there is something to write.
type turnEnds struct {
	log *slog.Logger

	// ctx ends when Stop is called: it withdraws a write waiting for the
	// store.
	ctx  context.Context
	stop context.CancelFunc

	mu      sync.Mutex // guards the fields below
	pending []pendingEnd
	running bool          // a goroutine runs
	done    chan struct{} // closed when the last goroutine started returns
	stopped bool
}

// pendingEnd is a turn end waiting for the store that holds its turn.
type pendingEnd struct {
	st    store.Store
	patch store.TurnPatch
}

func newTurnEnds(log *slog.Logger) *turnEnds {
	ctx, stop := context.WithCancel(context.Background())
	return &turnEnds{log: log, ctx: ctx, stop: stop}
}

// add queues a turn's end for writing, starting the goroutine if need be.
func (e *turnEnds) add(st store.Store, patch store.TurnPatch) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		// Turns end before the Manager stops; should one not, Recover
		// settles it at the next start.
		e.log.Error("turn end not stored: shutting down", "thread", patch.ThreadID, "turn", patch.ID)
		return
	}
	e.pending = append(e.pending, pendingEnd{st: st, patch: patch})
	if !e.running {
		e.running = true
		e.done = make(chan struct{})
		go e.loop(e.done)
	}
}

// loop retries with doubling delays until nothing is pending, and makes one
// last, short attempt when stopped.
func (e *turnEnds) loop(done chan struct{}) {
	defer close(done)
	delay := endRetryMin
	for {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-e.ctx.Done():
			t.Stop()
			last, cancelLast := context.WithTimeout(context.Background(), endRetryLast)
			e.flush(last)
			cancelLast()
			e.mu.Lock()
			e.running = false
			e.mu.Unlock()
			return
		}
		if e.flush(e.ctx) {
			e.mu.Lock()
			if len(e.pending) == 0 {
				e.running = false
				e.mu.Unlock()
				return
			}
			e.mu.Unlock()
			delay = endRetryMin
			continue
		}
		delay = min(2*delay, endRetryMax)
	}
}

// flush writes the pending ends in order and reports whether it wrote them
// all; it stops at the first one that fails for a reason that may pass
// (the store is unavailable). An end the store refuses for good (its turn
// is gone) is logged and dropped.
func (e *turnEnds) flush(ctx context.Context) bool {
	e.mu.Lock()
	todo := e.pending
	e.mu.Unlock()
	n := 0
	for _, p := range todo {
		err := p.st.Write(ctx, &store.Batch{UpdateTurns: []store.TurnPatch{p.patch}})
		if err != nil && !permanent(err) {
			break
		}
		if err != nil {
			e.log.Error("turn end not stored", "thread", p.patch.ThreadID, "turn", p.patch.ID, "err", err)
		} else {
			e.log.Info("turn end stored after a store failure", "thread", p.patch.ThreadID, "turn", p.patch.ID)
		}
		n++
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pending = e.pending[n:]
	return n == len(todo)
}

// permanent reports whether writing again cannot help.
func permanent(err error) bool {
	switch apperr.CodeOf(err) {
	case apperr.NotFound, apperr.Invalid, apperr.Conflict:
		return true
	}
	return false
}

// Stop makes the last attempt and waits for the goroutine. It tolerates
// being called twice and before any use.
func (e *turnEnds) Stop() {
	e.mu.Lock()
	e.stopped = true
	done := e.done
	e.mu.Unlock()
	e.stop()
	if done != nil {
		<-done
	}
}
