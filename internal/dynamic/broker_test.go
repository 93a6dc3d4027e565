package dynamic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
)

const okResult = `{"contentItems":[{"type":"inputText","text":"42 degrees"}],"success":true}`

type callOutcome struct {
	res api.DynamicToolCallResult
	err error
}

// newTestBroker returns a broker wired to a fake router, with cleanup that
// closes every connection.
func newTestBroker(t *testing.T, cfg BrokerConfig) (*Broker, *fakeRouter, *metricsRecorder) {
	t.Helper()
	r := newFakeRouter()
	m := newMetrics()
	cfg.Router = r
	cfg.Metrics = m
	b := NewBroker(cfg)
	r.b = b
	t.Cleanup(r.closeAll)
	return b, r, m
}

func req(thread, call string) CallRequest {
	return CallRequest{ThreadID: thread, TurnID: "turn-1", CallID: call, Tool: "lookup", Arguments: json.RawMessage(`{"city":"Paris"}`)}
}

// startCall runs Call on its own goroutine.
func startCall(ctx context.Context, b *Broker, r CallRequest) <-chan callOutcome {
	ch := make(chan callOutcome, 1)
	go func() {
		res, err := b.Call(ctx, r)
		ch <- callOutcome{res, err}
	}()
	return ch
}

func wait(t *testing.T, ch <-chan callOutcome) callOutcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("call did not return")
		return callOutcome{}
	}
}

func TestAnswerSuccess(t *testing.T) {
	leakCheck(t)
	b, r, m := newTestBroker(t, BrokerConfig{})
	c := r.connect(answerWith(okResult), "th")

	res, err := b.Call(context.Background(), req("th", "call-1"))
	require.NoError(t, err)
	assert.True(t, res.Success)
	assert.Equal(t, api.List[api.DynamicToolCallOutputContentItem]{{Type: api.ContentInputText, Text: "42 degrees"}}, res.ContentItems)

	assert.Equal(t, 1, m.outcome(OutcomeSuccess))
	assert.Equal(t, 0, m.pendingNow())
	assert.Equal(t, 0, b.Len())
	o, ok := r.withdrawnOutcome("call-1")
	assert.True(t, ok)
	assert.Equal(t, OutcomeSuccess, o)
	received, notices, answers := c.state()
	assert.Equal(t, []string{"call-1"}, received)
	assert.Empty(t, notices, "the answering connection is not told")
	assert.Equal(t, []bool{true}, answers)
	assert.Equal(t, 0, r.holderCount())
}

func TestAnswerFailure(t *testing.T) {
	leakCheck(t)
	b, r, m := newTestBroker(t, BrokerConfig{})
	r.connect(answerWith(`{"contentItems":[{"type":"inputText","text":"no such city"}],"success":false}`), "th")

	res, err := b.Call(context.Background(), req("th", "call-1"))
	require.NoError(t, err)
	assert.False(t, res.Success)
	assert.Equal(t, "no such city", res.ContentItems[0].Text)
	assert.Equal(t, 1, m.outcome(OutcomeFailure))
}

func TestAnswerClientErrorAndInvalid(t *testing.T) {
	leakCheck(t)
	b, r, m := newTestBroker(t, BrokerConfig{})
	r.connect(answerError(), "err")
	r.connect(answerWith(`{"contentItems":[{"type":"text","text":"wrong variant"}],"success":true}`), "bad")

	res, err := b.Call(context.Background(), req("err", "call-1"))
	require.NoError(t, err)
	assert.Equal(t, FailedResult(RequestFailedText), res)

	res, err = b.Call(context.Background(), req("bad", "call-2"))
	require.NoError(t, err)
	assert.Equal(t, FailedResult(InvalidResponseText), res)

	assert.Equal(t, 1, m.outcome(OutcomeClientError))
	assert.Equal(t, 1, m.outcome(OutcomeInvalidResponse))
}

func TestDoubleAnswerIgnored(t *testing.T) {
	leakCheck(t)
	b, r, m := newTestBroker(t, BrokerConfig{})
	c := r.connect(answerTwice(okResult, `{"contentItems":[],"success":false}`), "th")

	res, err := b.Call(context.Background(), req("th", "call-1"))
	require.NoError(t, err)
	assert.True(t, res.Success, "the first answer is used")
	waitFor(t, "second answer", func() bool { _, _, a := c.state(); return len(a) == 2 })
	_, _, answers := c.state()
	assert.Equal(t, []bool{true, false}, answers)
	assert.Equal(t, 1, m.ignoredCount(IgnoredDuplicate))
	assert.Equal(t, 1, m.outcome(OutcomeSuccess))
}

func TestUnknownCallIgnored(t *testing.T) {
	leakCheck(t)
	b, _, m := newTestBroker(t, BrokerConfig{})
	assert.False(t, b.Resolve("th", "nope", api.DynamicToolCallResult{Success: true}))
	assert.False(t, b.ResolveResponse("th", "nope", json.RawMessage(okResult), nil))
	assert.Equal(t, 2, m.ignoredCount(IgnoredUnknownCall))
}

func TestResolveByCallID(t *testing.T) {
	leakCheck(t)
	b, r, _ := newTestBroker(t, BrokerConfig{})
	c := r.connect(hold(), "th")
	ch := startCall(context.Background(), b, req("th", "call-1"))
	c.waitGot(t)
	assert.False(t, b.Resolve("other-thread", "call-1", api.DynamicToolCallResult{Success: true}), "call ids are per thread")
	assert.True(t, b.Resolve("th", "call-1", api.DynamicToolCallResult{Success: true}))
	o := wait(t, ch)
	require.NoError(t, o.err)
	assert.True(t, o.res.Success)
}

func TestInterruptWhilePending(t *testing.T) {
	leakCheck(t)
	b, r, m := newTestBroker(t, BrokerConfig{})
	c := r.connect(hold(), "th")
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("turn interrupted")
	ch := startCall(ctx, b, req("th", "call-1"))
	p := c.waitGot(t)
	cancel(cause)

	o := wait(t, ch)
	var ce *CallError
	require.ErrorAs(t, o.err, &ce)
	assert.Equal(t, OutcomeCancelled, ce.Outcome)
	assert.Equal(t, CancelledText, o.err.Error())
	assert.ErrorIs(t, o.err, cause)

	outcome, ok := r.withdrawnOutcome("call-1")
	assert.True(t, ok, "the router is told")
	assert.Equal(t, OutcomeCancelled, outcome)
	_, notices, _ := c.state()
	assert.Equal(t, []string{"call-1"}, notices, "the holder gets serverRequest/resolved")
	assert.Equal(t, 0, b.Len())
	assert.Equal(t, 0, r.holderCount())
	assert.Equal(t, 1, m.outcome(OutcomeCancelled))
	assert.Equal(t, 0, m.pendingNow())

	// A late answer is ignored.
	assert.False(t, c.reply(p, okResult, nil))
	assert.Equal(t, 1, m.ignoredCount(IgnoredDuplicate))
}

func TestInterruptWhileWaitingForConnection(t *testing.T) {
	leakCheck(t)
	b, r, m := newTestBroker(t, BrokerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	ch := startCall(ctx, b, req("th", "call-1"))
	waitFor(t, "pending", func() bool { return b.Len() == 1 })
	cancel()
	o := wait(t, ch)
	assert.ErrorIs(t, o.err, context.Canceled)
	_, withdrawn := r.withdrawnOutcome("call-1")
	assert.False(t, withdrawn, "never offered, nothing to withdraw")
	assert.Equal(t, 1, m.outcome(OutcomeCancelled))
}

func TestDisconnectReofferedToOtherSubscriber(t *testing.T) {
	leakCheck(t)
	b, r, m := newTestBroker(t, BrokerConfig{})
	first := r.connect(hold(), "th")
	ch := startCall(context.Background(), b, req("th", "call-1"))
	first.waitGot(t)
	second := r.connect(answerWith(okResult), "th")
	// Subscribing re-offers, but the call is held by a live connection: no
	// duplicate request.
	received, _, _ := second.state()
	assert.Empty(t, received)

	first.disconnect()
	o := wait(t, ch)
	require.NoError(t, o.err)
	assert.True(t, o.res.Success)
	received, _, _ = second.state()
	assert.Equal(t, []string{"call-1"}, received)
	assert.Equal(t, 1, m.outcome(OutcomeSuccess))
}

func TestDisconnectThenReconnectWithinTimeout(t *testing.T) {
	leakCheck(t)
	b, r, m := newTestBroker(t, BrokerConfig{ReconnectTimeout: 5 * time.Second})
	first := r.connect(hold(), "th")
	ch := startCall(context.Background(), b, req("th", "call-1"))
	first.waitGot(t)
	first.disconnect() // no other subscriber: the call waits

	select {
	case <-ch:
		t.Fatal("call returned while waiting for a reconnect")
	case <-time.After(20 * time.Millisecond):
	}
	p, ok := b.Lookup("th", "call-1")
	require.True(t, ok)
	p.offerMu.Lock()
	waiting := p.waiting != nil
	p.offerMu.Unlock()
	assert.True(t, waiting, "reconnect timer running")

	// The client reconnects and resumes the thread: the call is re-offered.
	again := r.connect(answerWith(okResult), "th")
	o := wait(t, ch)
	require.NoError(t, o.err)
	assert.True(t, o.res.Success)
	received, _, _ := again.state()
	assert.Equal(t, []string{"call-1"}, received)
	assert.Equal(t, 1, m.outcome(OutcomeSuccess))
}

func TestNoConnectionAtStartThenConnect(t *testing.T) {
	leakCheck(t)
	b, r, _ := newTestBroker(t, BrokerConfig{})
	ch := startCall(context.Background(), b, req("th", "call-1"))
	waitFor(t, "pending", func() bool { return b.Len() == 1 })
	r.connect(answerWith(okResult), "th")
	o := wait(t, ch)
	require.NoError(t, o.err)
	assert.True(t, o.res.Success)
}

func TestReconnectTimeoutExpires(t *testing.T) {
	leakCheck(t)
	b, r, m := newTestBroker(t, BrokerConfig{ReconnectTimeout: 30 * time.Millisecond})
	c := r.connect(hold(), "th")
	r2 := req("th", "call-1")
	r2.Namespace = "ns"
	ch := startCall(context.Background(), b, r2)
	c.waitGot(t)
	c.disconnect()

	o := wait(t, ch)
	var ce *CallError
	require.ErrorAs(t, o.err, &ce)
	assert.Equal(t, OutcomeTimeout, ce.Outcome)
	assert.Equal(t, "dynamic tool call failed: no client that can run ns.lookup was connected within 30ms", ce.Message)
	assert.Equal(t, 1, m.outcome(OutcomeTimeout))
	assert.Equal(t, 0, b.Len())
	o2, ok := r.withdrawnOutcome("call-1")
	assert.True(t, ok)
	assert.Equal(t, OutcomeTimeout, o2)
}

func TestReconnectTimeoutWithoutAnyConnection(t *testing.T) {
	leakCheck(t)
	b, _, m := newTestBroker(t, BrokerConfig{ReconnectTimeout: 10 * time.Millisecond})
	_, err := b.Call(context.Background(), req("th", "call-1"))
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, OutcomeTimeout, ce.Outcome)
	assert.Equal(t, 1, m.outcome(OutcomeTimeout))
}

func TestAnswerTimeout(t *testing.T) {
	leakCheck(t)
	b, r, m := newTestBroker(t, BrokerConfig{AnswerTimeout: 20 * time.Millisecond})
	c := r.connect(hold(), "th")
	_, err := b.Call(context.Background(), req("th", "call-1"))
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, OutcomeUnanswered, ce.Outcome)
	assert.Contains(t, ce.Message, "did not answer lookup within 20ms")
	assert.Equal(t, 1, m.outcome(OutcomeUnanswered))
	_, notices, _ := c.state()
	assert.Equal(t, []string{"call-1"}, notices)
}

func TestSeveralSubscribersExactlyOneAnswerUsed(t *testing.T) {
	leakCheck(t)
	b, r, m := newTestBroker(t, BrokerConfig{})
	r.broadcast = true // the request goes to every subscriber, like Codex
	conns := []*fakeConn{
		r.connect(answerWith(`{"contentItems":[{"type":"inputText","text":"a"}],"success":true}`), "th"),
		r.connect(answerWith(`{"contentItems":[{"type":"inputText","text":"b"}],"success":true}`), "th"),
		r.connect(answerWith(`{"contentItems":[{"type":"inputText","text":"c"}],"success":true}`), "th"),
	}
	res, err := b.Call(context.Background(), req("th", "call-1"))
	require.NoError(t, err)
	waitFor(t, "all answers", func() bool {
		n := 0
		for _, c := range conns {
			_, _, a := c.state()
			n += len(a)
		}
		return n == 3
	})
	winners, notified := 0, 0
	var winnerText string
	for i, c := range conns {
		received, notices, answers := c.state()
		assert.Equal(t, []string{"call-1"}, received)
		require.Len(t, answers, 1)
		if answers[0] {
			winners++
			winnerText = string(rune('a' + i))
			assert.Empty(t, notices)
		} else if len(notices) == 1 {
			notified++
		}
	}
	assert.Equal(t, 1, winners, "exactly one answer is used")
	assert.Equal(t, winnerText, res.ContentItems[0].Text, "the used answer is the returned one")
	// A loser's answer may arrive before or after the Withdraw; those that
	// had not answered yet were told it is resolved.
	assert.LessOrEqual(t, notified, 2)
	assert.Equal(t, 2, m.ignoredCount(IgnoredDuplicate))
	assert.Equal(t, 1, m.outcome(OutcomeSuccess))
}

func TestSeveralSubscribersLosersNotified(t *testing.T) {
	leakCheck(t)
	b, r, _ := newTestBroker(t, BrokerConfig{})
	r.broadcast = true
	quiet1 := r.connect(hold(), "th")
	quiet2 := r.connect(hold(), "th")
	answering := r.connect(hold(), "th")
	ch := startCall(context.Background(), b, req("th", "call-1"))
	p := answering.waitGot(t)
	quiet1.waitGot(t)
	quiet2.waitGot(t)
	require.True(t, answering.reply(p, okResult, nil))
	o := wait(t, ch)
	require.NoError(t, o.err)
	for _, c := range []*fakeConn{quiet1, quiet2} {
		_, notices, _ := c.state()
		assert.Equal(t, []string{"call-1"}, notices, "connection %d told it is resolved", c.id)
	}
	_, notices, _ := answering.state()
	assert.Empty(t, notices)
}

func TestCallIDReuseSupersedes(t *testing.T) {
	leakCheck(t)
	b, r, m := newTestBroker(t, BrokerConfig{})
	c := r.connect(hold(), "th")
	first := startCall(context.Background(), b, req("th", "call-1"))
	p1 := c.waitGot(t)
	second := startCall(context.Background(), b, req("th", "call-1"))
	o := wait(t, first)
	var ce *CallError
	require.ErrorAs(t, o.err, &ce)
	assert.Equal(t, OutcomeSuperseded, ce.Outcome)

	p2 := c.waitGot(t)
	assert.NotSame(t, p1, p2)
	assert.False(t, c.reply(p1, okResult, nil), "a stale pending cannot answer the new call")
	assert.True(t, c.reply(p2, okResult, nil))
	o = wait(t, second)
	require.NoError(t, o.err)
	assert.Equal(t, 1, m.outcome(OutcomeSuperseded))
	assert.Equal(t, 0, b.Len())
}

func TestClose(t *testing.T) {
	leakCheck(t)
	b, r, m := newTestBroker(t, BrokerConfig{})
	c := r.connect(hold(), "th")
	ch := startCall(context.Background(), b, req("th", "call-1"))
	c.waitGot(t)
	b.Close()
	o := wait(t, ch)
	var ce *CallError
	require.ErrorAs(t, o.err, &ce)
	assert.Equal(t, OutcomeClosed, ce.Outcome)
	_, err := b.Call(context.Background(), req("th", "call-2"))
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, OutcomeClosed, ce.Outcome)
	assert.Equal(t, 2, m.outcome(OutcomeClosed))
}

func TestCallNeedsIDs(t *testing.T) {
	b, _, _ := newTestBroker(t, BrokerConfig{})
	_, err := b.Call(context.Background(), CallRequest{ThreadID: "th"})
	require.Error(t, err)
}

func TestNoRouterWaitsThenSetRouter(t *testing.T) {
	leakCheck(t)
	b := NewBroker(BrokerConfig{})
	ch := startCall(context.Background(), b, req("th", "call-1"))
	waitFor(t, "pending", func() bool { return b.Len() == 1 })
	r := newFakeRouter()
	r.b = b
	defer r.closeAll()
	b.SetRouter(r)
	r.connect(answerWith(okResult), "th")
	o := wait(t, ch)
	require.NoError(t, o.err)
}

func TestParamsShape(t *testing.T) {
	r := req("th", "call-1")
	b, err := json.Marshal(r.Params())
	require.NoError(t, err)
	assert.JSONEq(t, `{"threadId":"th","turnId":"turn-1","callId":"call-1","namespace":null,"tool":"lookup","arguments":{"city":"Paris"}}`, string(b))
	r.Namespace = "ns"
	b, err = json.Marshal(r.Params())
	require.NoError(t, err)
	assert.JSONEq(t, `{"threadId":"th","turnId":"turn-1","callId":"call-1","namespace":"ns","tool":"lookup","arguments":{"city":"Paris"}}`, string(b))
}

// TestConcurrentCallsAndChurn runs many calls on several threads while
// connections come and go: every thread first has a connection that holds
// requests without answering; once all calls are out, an answering
// connection subscribes and the holder drops. Every call must end answered,
// and nothing may be left behind.
func TestConcurrentCallsAndChurn(t *testing.T) {
	leakCheck(t)
	b, r, m := newTestBroker(t, BrokerConfig{ReconnectTimeout: 5 * time.Second})
	const threads, calls = 4, 50
	holders := make([]*fakeConn, threads)
	for i := range threads {
		holders[i] = r.connect(hold(), fmt.Sprintf("th-%d", i))
	}
	done := make(chan error, threads*calls)
	for i := range threads {
		for j := range calls {
			go func() {
				_, err := b.Call(context.Background(), req(fmt.Sprintf("th-%d", i), fmt.Sprintf("call-%d", j)))
				done <- err
			}()
		}
	}
	for _, h := range holders {
		for range calls {
			h.waitGot(t)
		}
	}
	var drops sync.WaitGroup
	for i := range threads {
		r.connect(answerWith(okResult), fmt.Sprintf("th-%d", i))
		drops.Go(holders[i].disconnect)
	}
	for range threads * calls {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("calls did not finish")
		}
	}
	assert.Equal(t, threads*calls, m.outcome(OutcomeSuccess))
	assert.Equal(t, 0, m.pendingNow())
	assert.Equal(t, threads*calls, m.pendingPeak())
	assert.Equal(t, 0, b.Len())
	assert.Equal(t, 0, r.holderCount())
	drops.Wait()
}

// inlineRouter answers from inside Offer.
type inlineRouter struct{ withdrawn int }

func (r *inlineRouter) Offer(_ context.Context, p *Pending) error {
	p.Resolve(api.DynamicToolCallResult{Success: true})
	return nil
}

func (r *inlineRouter) Withdraw(*Pending, Outcome) { r.withdrawn++ }

func TestRouterMayResolveInsideOffer(t *testing.T) {
	leakCheck(t)
	r := &inlineRouter{}
	b := NewBroker(BrokerConfig{Router: r})
	res, err := b.Call(context.Background(), req("th", "call-1"))
	require.NoError(t, err)
	assert.True(t, res.Success)
	assert.Equal(t, 1, r.withdrawn)
	assert.Equal(t, 0, b.Len())
}
