package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
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
//
// With a journal, the ends waiting for the durable store are also kept in
// a file, written (and synced) before add returns, so before the client is
// told the end: should the daemon stop (or die) before the store takes
// them, the next start's Recover stores them as the client saw them
// instead of marking those turns interrupted.
type turnEnds struct {
	log *slog.Logger
	// durable is the store whose ends the journal keeps (ephemeral
	// threads' ends die with the process anyway); journal is the file's
	// path, "" for none.
	durable store.Store
	journal string

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

func newTurnEnds(log *slog.Logger, durable store.Store, journal string) *turnEnds {
	ctx, stop := context.WithCancel(context.Background())
	return &turnEnds{log: log, durable: durable, journal: journal, ctx: ctx, stop: stop}
}

// add queues a turn's end for writing, starting the goroutine if need be.
func (e *turnEnds) add(st store.Store, patch store.TurnPatch) {
	p := pendingEnd{st: st, patch: patch}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		// Turns end before the Manager stops; should one not, Recover
		// settles it at the next start.
		e.log.Error("turn end not stored: shutting down", "thread", patch.ThreadID, "turn", patch.ID)
		return
	}
	e.pending = append(e.pending, p)
	if st == e.durable {
		e.saveLocked()
	}
	if !e.running {
		e.running = true
		e.done = make(chan struct{})
		go e.loop(e.done)
	}
}

// told returns the end of a turn that waits for the store: the one its
// clients were told.
func (e *turnEnds) told(threadID, turnID string) (store.TurnPatch, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.pending {
		if p.patch.ThreadID == threadID && p.patch.ID == turnID {
			return p.patch, true
		}
	}
	return store.TurnPatch{}, false
}

// pendingFor reports whether an end of one of the thread's turns waits
// for the store.
func (e *turnEnds) pendingFor(threadID string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.pending {
		if p.patch.ThreadID == threadID {
			return true
		}
	}
	return false
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
// (the store is unavailable, or a lease fence refuses it: see
// endRefusedForGood). An end the store refuses for good (its turn is
// gone) is logged and dropped.
func (e *turnEnds) flush(ctx context.Context) bool {
	e.mu.Lock()
	todo := e.pending
	e.mu.Unlock()
	n := 0
	for _, p := range todo {
		err := p.st.Write(ctx, &store.Batch{UpdateTurns: []store.TurnPatch{p.patch}})
		if err != nil && !endRefusedForGood(err) {
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
	if n > 0 {
		e.saveLocked()
	}
	return n == len(todo)
}

// saveLocked writes the journal: the pending ends of the durable store,
// or no file when there are none; e.mu must be held. A journal that
// cannot be written is logged: the end is still retried while the daemon
// runs.
func (e *turnEnds) saveLocked() {
	if e.journal == "" {
		return
	}
	var patches []store.TurnPatch
	for _, p := range e.pending {
		if p.st == e.durable {
			patches = append(patches, p.patch)
		}
	}
	if err := writeJournal(e.journal, patches); err != nil {
		e.log.Error("turn ends not saved for the next start", "path", e.journal, "err", err)
	}
}

// writeJournal replaces the journal at path with patches (removes it when
// there are none), synced: a new file renamed over the old one.
func writeJournal(path string, patches []store.TurnPatch) error {
	if len(patches) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	data, err := json.Marshal(patches)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		_ = dir.Sync()
		_ = dir.Close()
	}
	return nil
}

// readJournal returns the ends a journal at path holds (none when there is
// no file).
func readJournal(path string) ([]store.TurnPatch, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var patches []store.TurnPatch
	if err := json.Unmarshal(data, &patches); err != nil {
		return nil, fmt.Errorf("turn ends journal %s: %w", path, err)
	}
	return patches, nil
}

// permanent reports whether writing again cannot help.
func permanent(err error) bool {
	switch apperr.CodeOf(err) {
	case apperr.NotFound, apperr.Invalid, apperr.Conflict:
		return true
	}
	return false
}

// endRefusedForGood reports whether a pending end's write failed in a way
// that no later attempt can mend. A Conflict is not such a refusal: a
// lone turn patch meets a Conflict only from the lease fence, and the
// fence a write carries is the token of whichever turn of the thread
// holds the lease here at that moment, not the token of the turn that
// ended. Once this daemon has lost that lease, the token stays in place
// until that turn lets go of the thread, and every write of the thread is
// refused until then; afterwards the write goes out unfenced and the
// store takes it. Dropping the end on that Conflict would leave the turn
// inProgress for a failover scan to mark interrupted, while its clients
// were told how it really ended (failed, or interrupted itself).
func endRefusedForGood(err error) bool {
	return permanent(err) && !apperr.Is(err, apperr.Conflict)
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
