package dynamic

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// leakCheck verifies, after every other cleanup of the test, that no
// goroutine is left behind. Call it first.
func leakCheck(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// fakeRouter behaves like the websocket transport: connections subscribe to
// threads, each item/tool/call goes to one live subscriber (or to all of
// them in broadcast mode), the answer comes back from the connection's own
// goroutine, and on Withdraw every live holder that did not win is told the
// request is resolved (serverRequest/resolved).
type fakeRouter struct {
	b         *Broker
	broadcast bool

	mu           sync.Mutex
	conns        []*fakeConn
	holders      map[*Pending]map[*fakeConn]bool
	withdrawn    map[string]Outcome // call id → outcome of the last withdrawn call
	withdrawnIDs map[uint64]bool
	offers       int
	nextID       int
}

func newFakeRouter() *fakeRouter {
	return &fakeRouter{holders: map[*Pending]map[*fakeConn]bool{}, withdrawn: map[string]Outcome{}, withdrawnIDs: map[uint64]bool{}}
}

// behaviour is what a connection does with one request; it runs on the
// connection's goroutine.
type behaviour func(c *fakeConn, p *Pending)

type fakeConn struct {
	id      int
	r       *fakeRouter
	threads map[string]bool
	act     behaviour
	inbox   chan *Pending
	done    chan struct{}
	got     chan *Pending // every request received, for tests to wait on

	// guarded by r.mu
	alive    bool
	received []string
	won      map[uint64]bool
	notices  []string // call ids of serverRequest/resolved received
	answers  []bool   // ResolveResponse results, in order
}

// connect opens a connection subscribed to threads and re-offers their
// pending calls, as thread/resume does.
func (r *fakeRouter) connect(act behaviour, threads ...string) *fakeConn {
	r.mu.Lock()
	r.nextID++
	c := &fakeConn{
		id: r.nextID, r: r, threads: map[string]bool{}, act: act, alive: true,
		inbox: make(chan *Pending, 1024), done: make(chan struct{}), got: make(chan *Pending, 1024),
		won: map[uint64]bool{},
	}
	for _, t := range threads {
		c.threads[t] = true
	}
	r.conns = append(r.conns, c)
	r.mu.Unlock()
	go c.loop()
	for _, t := range threads {
		r.b.Reoffer(t)
	}
	return c
}

func (c *fakeConn) loop() {
	defer close(c.done)
	for p := range c.inbox {
		c.got <- p
		if c.act != nil {
			c.act(c, p)
		}
	}
}

// reply sends the connection's answer the way the transport does: a result,
// or an error reply.
func (c *fakeConn) reply(p *Pending, result string, clientErr error) bool {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	if !c.alive {
		return false
	}
	ok := p.ResolveResponse(json.RawMessage(result), clientErr)
	c.answers = append(c.answers, ok)
	if ok {
		c.won[p.ID()] = true
	}
	return ok
}

// disconnect closes the connection; the transport re-offers the pending
// calls of its threads.
func (c *fakeConn) disconnect() {
	r := c.r
	r.mu.Lock()
	c.alive = false
	for _, hs := range r.holders {
		delete(hs, c)
	}
	close(c.inbox)
	r.mu.Unlock()
	<-c.done
	for t := range c.threads {
		r.b.Reoffer(t)
	}
}

// closeAll stops every live connection's goroutine (test cleanup).
func (r *fakeRouter) closeAll() {
	r.mu.Lock()
	var live []*fakeConn
	for _, c := range r.conns {
		if c.alive {
			c.alive = false
			close(c.inbox)
			live = append(live, c)
		}
	}
	r.mu.Unlock()
	for _, c := range live {
		<-c.done
	}
}

func (r *fakeRouter) Offer(ctx context.Context, p *Pending) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.offers++
	hs := r.holders[p]
	held := false
	for c := range hs {
		if c.alive {
			held = true
		}
	}
	if held && !r.broadcast {
		return nil
	}
	sent := false
	for _, c := range r.conns {
		if !c.alive || !c.threads[p.ThreadID()] || hs[c] {
			continue
		}
		select {
		case c.inbox <- p:
		default:
			continue
		}
		if hs == nil {
			hs = map[*fakeConn]bool{}
			r.holders[p] = hs
		}
		hs[c] = true
		c.received = append(c.received, p.CallID())
		sent = true
		if !r.broadcast {
			break
		}
	}
	if sent || held {
		return nil
	}
	return ErrNoConnection
}

func (r *fakeRouter) Withdraw(p *Pending, outcome Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.withdrawnIDs[p.ID()] {
		panic("Withdraw called twice for " + p.CallID())
	}
	r.withdrawnIDs[p.ID()] = true
	r.withdrawn[p.CallID()] = outcome
	for c := range r.holders[p] {
		if c.alive && !c.won[p.ID()] {
			c.notices = append(c.notices, p.CallID())
		}
	}
	delete(r.holders, p)
}

func (r *fakeRouter) withdrawnOutcome(callID string) (Outcome, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.withdrawn[callID]
	return o, ok
}

func (r *fakeRouter) holderCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.holders)
}

func (c *fakeConn) state() (received, notices []string, answers []bool) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return append([]string(nil), c.received...), append([]string(nil), c.notices...), append([]bool(nil), c.answers...)
}

// waitGot waits until the connection received a request.
func (c *fakeConn) waitGot(t *testing.T) *Pending {
	t.Helper()
	select {
	case p := <-c.got:
		return p
	case <-time.After(5 * time.Second):
		t.Fatalf("connection %d got no request", c.id)
		return nil
	}
}

// Behaviours.

func answerWith(result string) behaviour {
	return func(c *fakeConn, p *Pending) { c.reply(p, result, nil) }
}

func answerTwice(first, second string) behaviour {
	return func(c *fakeConn, p *Pending) {
		c.reply(p, first, nil)
		c.reply(p, second, nil)
	}
}

func answerError() behaviour {
	return func(c *fakeConn, p *Pending) { c.reply(p, "", errors.New("client exploded")) }
}

// hold receives requests and never answers.
func hold() behaviour { return nil }

// metricsRecorder is a Metrics that records everything.
type metricsRecorder struct {
	mu       sync.Mutex
	outcomes map[Outcome]int
	ignored  map[IgnoredReason]int
	pending  int
	peak     int
	maxLat   time.Duration
}

func newMetrics() *metricsRecorder {
	return &metricsRecorder{outcomes: map[Outcome]int{}, ignored: map[IgnoredReason]int{}}
}

func (m *metricsRecorder) CallCompleted(o Outcome, lat time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.outcomes[o]++
	m.maxLat = max(m.maxLat, lat)
}

func (m *metricsRecorder) AddPending(delta int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending += delta
	m.peak = max(m.peak, m.pending)
}

func (m *metricsRecorder) AnswerIgnored(r IgnoredReason) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ignored[r]++
}

func (m *metricsRecorder) outcome(o Outcome) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.outcomes[o]
}

func (m *metricsRecorder) ignoredCount(r IgnoredReason) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ignored[r]
}

func (m *metricsRecorder) pendingNow() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pending
}

func (m *metricsRecorder) pendingPeak() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
