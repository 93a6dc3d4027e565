package loop

import (
	"fmt"
	"sync"

	"github.com/appserver/appserver/api"
)

// FirstCommit is the write of a turn's record and first user message,
// which the thread table makes before turn/start answers, seen from the
// turn's goroutine: that goroutine sends the first model request while
// the write runs (RunInputOverlapped), and announces nothing of the turn
// until the write has succeeded and the answer has been handed over.
type FirstCommit struct {
	once    sync.Once
	decided chan struct{} // closed once err is set (Stored)
	err     error
	aonce   sync.Once // Answered's
	// ready is closed once the turn may go on: answered (Answered), or
	// decided with a failure (one wake of the turn's goroutine, not two).
	ready chan struct{}
	rdone sync.Once

	mu sync.Mutex // guards the two below
	// then runs on Answered's goroutine once the answer went
	// (whenAnswered); gone is set from then on.
	then func()
	gone bool
}

// NewFirstCommit returns a first commit neither decided nor answered.
func NewFirstCommit() *FirstCommit {
	return &FirstCommit{decided: make(chan struct{}), ready: make(chan struct{})}
}

// Stored reports the write's outcome, once; a failure leaves the turn
// without a trace: its goroutine announces nothing, writes nothing and
// returns false from RunInputOverlapped.
func (f *FirstCommit) Stored(err error) {
	f.once.Do(func() {
		f.err = err
		close(f.decided)
		if err != nil {
			f.rdone.Do(func() { close(f.ready) })
		}
	})
}

// Answered tells the turn that turn/start has been answered: the turn's
// announcements may follow. It must be called once the write succeeded
// (the turn's After); the turn announces nothing before. Unless the
// turn's goroutine waits for it already, the turn's first announcement
// (its status, turn/started, the user message) runs on the caller's
// goroutine before Answered returns: the caller must hold no lock of the
// thread.
func (f *FirstCommit) Answered() {
	f.aonce.Do(func() {
		f.rdone.Do(func() { close(f.ready) })
		f.mu.Lock()
		f.gone = true
		then := f.then
		f.mu.Unlock()
		if then != nil {
			then()
		}
	})
}

// whenAnswered has fn run by Answered, on its caller's goroutine, once
// the answer went; or now, on this one, when it went already.
func (f *FirstCommit) whenAnswered(fn func()) {
	f.mu.Lock()
	if !f.gone {
		f.then = fn
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	fn()
}

// goesOn reports whether the turn may go on from its first commit
// (ready): the answer went, or the write failed.
func (f *FirstCommit) goesOn() bool {
	select {
	case <-f.ready:
		return true
	default:
		return false
	}
}

// failed waits for the write's outcome and reports whether it failed.
func (f *FirstCommit) failed() bool {
	<-f.decided
	return f.err != nil
}

// RunInputOverlapped is RunInput for a turn whose first user message
// (first) is still being written by the table (fc): the write is the
// loop's pending commit (roundCommitter), which the first model request
// overlaps. Its announce (the thread's status, turn/started, the user
// message) goes out once the write has succeeded and the answer has been
// handed over; the turn goroutine settles it before it writes anything
// itself, and holds what it announces of an answer read meanwhile
// (holdable), which follows the turn's own. A turn whose
// budget is watched waits for it before its first round (a budget check
// may ask the client), as RunInput does. It reports false, having
// announced and written nothing and left Done open, when the write
// failed; the table then abandons the turn.
func (r *Run) RunInputOverlapped(first api.ThreadItem, fc *FirstCommit) bool {
	// The announcement runs on no goroutine of its own: on the one that
	// hands the answer over, as soon as it has (the model may take
	// seconds), or on the turn goroutine when that settles before the
	// answer is handed over (it does when the model answers before the
	// write is over, and always for a turn whose budget is watched). Then
	// the turn goes on from its announcement without another goroutine
	// waking it.
	c := &roundCommit{done: make(chan error, 1), what: "turn", inline: true}
	c.announce = func(Emit) { r.announceStart(first) }
	c.run = func() {
		// A panic of the announcement, which may run on a goroutine that
		// recovers (a tool's, an HTTP handler's), must not leave the
		// turn waiting for it.
		defer func() {
			if p := recover(); p != nil {
				c.done <- fmt.Errorf("announcing the turn: panic: %v", p)
				panic(p)
			}
		}()
		// Answered comes after Stored, so that decided is closed once
		// ready is.
		<-fc.ready
		if fc.failed() {
			c.done <- fc.err
			return
		}
		c.announce(r.t.Emit)
		// What the turn goroutine read of the answer meanwhile
		// (holdable) follows.
		r.sendHeld()
		c.done <- nil
	}
	r.first = fc
	r.commits.pipeline(c)
	// Announced as soon as it may be, not when the turn next settles.
	fc.whenAnswered(c.start)
	var err error
	if r.budget != nil {
		err = r.settle()
	}
	if err == nil {
		err = r.loop()
	}
	if fc.failed() {
		// Whatever ended the loop, the turn never was: nothing of it was
		// announced nor written after the failed write.
		return false
	}
	defer close(r.at.Done)
	r.finish(err)
	return true
}

// announceStart announces a turn started by input: the thread's status,
// turn/started and the turn's stored user message.
func (r *Run) announceStart(first api.ThreadItem) {
	t := r.t
	t.BroadcastStatus()
	t.Emit("turn/started", api.TurnStartedNotification{ThreadID: r.threadID, Turn: r.apiTurn(api.TurnInProgress, nil, nil)})
	r.announceUserMessage(first)
}

// abandoned reports whether the turn's first commit, overlapped with its
// first request, failed; it waits for that commit's outcome.
func (r *Run) abandoned() bool { return r.first != nil && r.first.failed() }
