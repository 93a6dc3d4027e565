package main

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/store/pgtest"
)

// Two daemons on one Postgres: a client of daemon B that resumed a thread
// sees every notification of a turn that daemon A runs, in A's order and
// with A's numbers, none twice; a client reconnecting to B with the last
// number it saw on A (thread/resume afterSeq) misses nothing.
func TestEventsAcrossDaemons(t *testing.T) {
	binDir := t.TempDir()
	build := sync.OnceValues(func() (string, error) { return buildAppserver(binDir) })
	go func() { _, _ = build() }()
	t.Cleanup(func() { _, _ = build() })
	fake := startFake(t, `{"steps":[{"text":"one two three four","chunks":4},{"text":"five six","chunks":2}]}`)
	args := append([]string{"--database-url", pgtest.URL(t), "--migrate", "--data-dir", t.TempDir()}, fakeArgs(fake, "responses")...)
	bin, err := build()
	require.NoError(t, err)
	a := startAppserverProc(t, bin, args...)
	b := startAppserverProc(t, bin, args...)
	c := startAppserverProc(t, bin, args...)

	ra := newSeqRPC(t, &testDaemon{addr: a.addr})
	thread := startThread(t, ra, nil)
	rb := newSeqRPC(t, &testDaemon{addr: b.addr})
	rb.call("thread/resume", map[string]any{"threadId": thread})
	// A third daemon's HTTP API streams the thread's events (SSE).
	sc := hubEvents(t, &testDaemon{addr: c.addr}, thread)
	ra.seen, rb.seen = nil, nil

	runTurn(t, ra, thread, "count")
	onA := numbered(ra.seen)
	rb.until("turn/completed")
	onB := numbered(rb.seen)
	require.Greater(t, len(onA), 5)
	require.Equal(t, methodsSeqs(onA), methodsSeqs(onB), "B sees A's turn in A's order")
	for i := 1; i < len(onB); i++ {
		require.Equal(t, onB[i-1].Seq+1, onB[i].Seq, "consecutive numbers")
	}
	var onC []string
	for len(onC) == 0 || onC[len(onC)-1] != "turn/completed" {
		select {
		case ev, ok := <-sc.events:
			require.True(t, ok, "C's event stream ended before turn/completed")
			onC = append(onC, ev.Method)
		case <-time.After(15 * time.Second):
			t.Fatalf("C's event stream stopped after %v", onC)
		}
	}
	var methodsA []string
	for _, f := range onA {
		methodsA = append(methodsA, f.Method)
	}
	methodsA = append(methodsA, "turn/completed") // runTurn took A's
	require.Equal(t, methodsA, onC, "C's event stream has every event of A's turn, in A's order")

	// A client of A drops mid-turn and comes back on B with its last number.
	k := onA[len(onA)/2].Seq
	ra.seen = nil
	runTurn(t, ra, thread, "again")
	second := numbered(ra.seen)
	rc := newSeqRPC(t, &testDaemon{addr: b.addr})
	rc.call("thread/resume", map[string]any{"threadId": thread, "afterSeq": k})
	rc.until("turn/completed") // the first turn's, replayed
	rc.until("turn/completed") // the second's
	got := numbered(rc.seen)
	want := append(onA[len(onA)/2+1:], second...)
	require.Equal(t, methodsSeqs(want), methodsSeqs(got[:len(want)]))

	a.terminate(t)
	b.terminate(t)
	c.terminate(t)
}

// newSeqRPC is newRPC for a client that asks for each thread
// notification's number (capabilities.eventSeq).
func newSeqRPC(t *testing.T, d *testDaemon) *rpc {
	t.Helper()
	c, _, err := dialDaemon(t, d, nil)
	require.NoError(t, err)
	r := &rpc{t: t, ws: c.ws}
	r.call("initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "events-test", "version": "1"},
		"capabilities": map[string]any{"experimentalApi": true, "eventSeq": true},
	})
	return r
}

// numbered keeps the frames that carry an event log number.
func numbered(fs []frame) []frame {
	var out []frame
	for _, f := range fs {
		if f.Seq > 0 {
			out = append(out, f)
		}
	}
	return out
}

type methodSeq struct {
	Method string
	Seq    int64
}

func methodsSeqs(fs []frame) []methodSeq {
	out := make([]methodSeq, len(fs))
	for i, f := range fs {
		out[i] = methodSeq{f.Method, f.Seq}
	}
	return out
}
