package server

import (
	"context"
	"errors"
	"sync"

	"github.com/appserver/appserver/internal/tools/shell"
)

// Refusals of procTable.claim.
var (
	errProcDuplicate  = errors.New("the id names a live process of this connection")
	errProcConnLimit  = errors.New("the connection has as many live processes as it may")
	errProcTotalLimit = errors.New("the server has as many live processes as it may")
	errProcConnClosed = errors.New("the connection is closed")
)

// procTable keeps the processes a client names by an id of its own
// (command/exec's processId, process/spawn's processHandle): scoped to the
// connection, claimed before the process starts, found by the follow-up
// methods once it runs, killed when the connection closes. Each claim is a
// run the connection's close waits for, so the goroutines that run the
// processes end before the connection's teardown does. Lock order: mu
// only.
type procTable struct {
	// perConn and total bound the live processes of one connection and of
	// all; 0 is no bound.
	perConn, total int

	mu    sync.Mutex
	conns map[uint64]*procConn
	live  int
}

// procConn is one connection's processes.
type procConn struct {
	procs  map[string]*procEntry
	closed bool
	runs   sync.WaitGroup // one per claim, until procEntry.done
}

// procEntry is one claimed id. ready is closed once proc is set (the
// process started) or the run ended without one.
type procEntry struct {
	id    string
	conn  *procConn
	ready chan struct{}
	proc  *shell.Process
	gone  bool // released: ready is closed
}

func newProcTable(perConn, total int) *procTable {
	return &procTable{perConn: perConn, total: total, conns: map[uint64]*procConn{}}
}

// connOf returns the connection's processes, registering the kill of
// them all on the connection's close the first time.
func (t *procTable) connOf(sess *Session) *procConn {
	t.mu.Lock()
	c := t.conns[sess.id]
	created := c == nil
	if created {
		c = &procConn{procs: map[string]*procEntry{}}
		t.conns[sess.id] = c
	}
	t.mu.Unlock()
	if created {
		// Registered before any claim counts as a run: on a connection
		// already closed the hook runs at once and waits for nothing.
		sess.OnClose(func() { t.closeConn(sess.id, c) })
	}
	return c
}

// claim registers id as a live process of the connection. Every claim
// ends with release and then done.
func (t *procTable) claim(sess *Session, id string) (*procEntry, error) {
	c := t.connOf(sess)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case c.closed:
		return nil, errProcConnClosed
	case c.procs[id] != nil:
		return nil, errProcDuplicate
	case t.perConn > 0 && len(c.procs) >= t.perConn:
		return nil, errProcConnLimit
	case t.total > 0 && t.live >= t.total:
		return nil, errProcTotalLimit
	}
	e := &procEntry{id: id, conn: c, ready: make(chan struct{})}
	c.procs[id] = e
	t.live++
	c.runs.Add(1)
	return e, nil
}

// started records the running process of e, for lookup.
func (t *procTable) started(e *procEntry, p *shell.Process) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e.proc = p
	close(e.ready)
}

// release frees e's id (and its place under the limits) once its process
// ended or never started.
func (t *procTable) release(e *procEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.gone {
		return
	}
	e.gone = true
	if e.proc == nil {
		close(e.ready)
	}
	if e.conn.procs[e.id] == e {
		delete(e.conn.procs, e.id)
	}
	t.live--
}

// done ends e's run: the last thing its goroutine does.
func (e *procEntry) done() { e.conn.runs.Done() }

// lookup returns the started process of id on the connection; ok is
// false when there is none (never claimed, ended, or ended before it
// started).
func (t *procTable) lookup(ctx context.Context, sess *Session, id string) (p *shell.Process, ok bool, err error) {
	t.mu.Lock()
	var e *procEntry
	if c := t.conns[sess.id]; c != nil {
		e = c.procs[id]
	}
	t.mu.Unlock()
	if e == nil {
		return nil, false, nil
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return e.proc, e.proc != nil, nil
}

// closeConn kills the processes of a closed connection and waits until
// their runs ended; later claims on it are refused.
func (t *procTable) closeConn(id uint64, c *procConn) {
	t.mu.Lock()
	c.closed = true
	if t.conns[id] == c {
		delete(t.conns, id)
	}
	var procs []*shell.Process
	for _, e := range c.procs {
		if e.proc != nil {
			procs = append(procs, e.proc)
		}
	}
	t.mu.Unlock()
	for _, p := range procs {
		p.Terminate()
	}
	c.runs.Wait()
}
