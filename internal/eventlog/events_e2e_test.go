package eventlog_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/store/pgtest"
)

// Two daemons on one Postgres: a client of daemon B that resumed a thread
// sees every notification of a turn that daemon A runs, in A's order and
// with A's numbers, none twice; a client reconnecting to B with the last
// number it saw on A (thread/resume afterSeq) misses nothing.
func TestEventsAcrossDaemons(t *testing.T) {
	apptest.BuildBinary()
	fake := apptest.StartFake(t, `{"steps":[{"text":"one two three four","chunks":4},{"text":"five six","chunks":2}]}`)
	args := append([]string{"--database-url", pgtest.URL(t), "--migrate", "--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)
	a := apptest.StartProc(t, args...)
	b := apptest.StartProc(t, args...)
	c := apptest.StartProc(t, args...)

	seq := map[string]any{"eventSeq": true}
	ra := apptest.RPC(t, a.Addr, "", seq)
	thread := apptest.StartThread(t, ra, nil)
	rb := apptest.RPC(t, b.Addr, "", seq)
	rb.Call("thread/resume", map[string]any{"threadId": thread})
	// A third daemon's HTTP API streams the thread's events (SSE).
	sc := apptest.OpenEvents(t, c.URL("/v1/threads/"+thread+"/events"), "")
	ra.Seen, rb.Seen = nil, nil

	apptest.RunTurn(t, ra, thread, "count")
	onA := numbered(ra.Seen)
	rb.Until("turn/completed")
	onB := numbered(rb.Seen)
	require.Greater(t, len(onA), 5)
	require.Equal(t, methodsSeqs(onA), methodsSeqs(onB), "B sees A's turn in A's order")
	for i := 1; i < len(onB); i++ {
		require.Equal(t, onB[i-1].Seq+1, onB[i].Seq, "consecutive numbers")
	}
	var onC []string
	for len(onC) == 0 || onC[len(onC)-1] != "turn/completed" {
		ev, ok := sc.Next()
		require.True(t, ok, "C's event stream ended before turn/completed")
		onC = append(onC, ev.Method)
	}
	var methodsA []string
	for _, f := range onA {
		methodsA = append(methodsA, f.Method)
	}
	methodsA = append(methodsA, "turn/completed") // runTurn took A's
	require.Equal(t, methodsA, onC, "C's event stream has every event of A's turn, in A's order")

	// A client of A drops mid-turn and comes back on B with its last number.
	k := onA[len(onA)/2].Seq
	ra.Seen = nil
	apptest.RunTurn(t, ra, thread, "again")
	second := numbered(ra.Seen)
	rc := apptest.RPC(t, b.Addr, "", seq)
	rc.Call("thread/resume", map[string]any{"threadId": thread, "afterSeq": k})
	rc.Until("turn/completed") // the first turn's, replayed
	rc.Until("turn/completed") // the second's
	got := numbered(rc.Seen)
	want := append(onA[len(onA)/2+1:], second...)
	require.Equal(t, methodsSeqs(want), methodsSeqs(got[:len(want)]))

	a.Terminate(t)
	b.Terminate(t)
	c.Terminate(t)
}

// numbered keeps the frames that carry an event log number.
func numbered(fs []apptest.Frame) []apptest.Frame {
	var out []apptest.Frame
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

func methodsSeqs(fs []apptest.Frame) []methodSeq {
	out := make([]methodSeq, len(fs))
	for i, f := range fs {
		out[i] = methodSeq{f.Method, f.Seq}
	}
	return out
}
