package httpapi

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/store"
)

func TestEventsResumeWithoutGap(t *testing.T) {
	e := newEnv(t, envOpts{script: `{"steps":[{"text":"one two three four five six","chunks":6}]}`})
	th := e.createThread(nil, nil)
	_, turn := e.postTurn(th.ID, "?wait=true", textInput("count"), nil, nil)

	// The whole turn, from the position its POST returned.
	s, _ := e.openStream(th.ID, sprintf("?after=%d&until=turnCompleted", *turn.EventsAfter), nil, nil)
	all := s.until("turn/completed")
	_, more := s.next()
	require.False(t, more, "until=turnCompleted ends the stream")
	require.Equal(t, []string{"turn/started", "item/started", "item/completed",
		"item/started", "item/agentMessage/delta", "item/agentMessage/delta", "item/agentMessage/delta",
		"item/agentMessage/delta", "item/agentMessage/delta", "item/agentMessage/delta", "item/completed",
		"thread/tokenUsage/updated", "turn/completed"}, methodsOf(all))
	prev := *turn.EventsAfter
	for _, ev := range all {
		require.Greater(t, ev.id, prev, "growing positions")
		prev = ev.id
	}

	// A dropped connection resumes right after the last event it got,
	// with Last-Event-ID as EventSource sends it (it wins over ?after).
	for _, k := range []int{0, 4, len(all) - 2} {
		s, _ := e.openStream(th.ID, "?after=1&until=turnCompleted", http.Header{"Last-Event-Id": {strconv.FormatInt(all[k].id, 10)}}, nil)
		rest := s.until("turn/completed")
		require.Equal(t, all[k+1:], rest)
	}

	// after=0 is the first event this daemon recorded for the thread.
	s, _ = e.openStream(th.ID, "?after=0&until=turnCompleted", nil, nil)
	fromStart := s.until("turn/completed")
	require.Equal(t, all, fromStart[len(fromStart)-len(all):])
	require.GreaterOrEqual(t, fromStart[0].id, e.api.logs.lookup(th.ID).floor)
}

func TestEventsNoLongerBufferedAre410(t *testing.T) {
	e := newEnv(t, envOpts{
		script: `{"steps":[{"text":"a b c d e f g h","chunks":8}]}`,
		config: func(c *Config) { c.EventBuffer = 5 },
	})
	th := e.createThread(nil, nil)
	_, turn := e.postTurn(th.ID, "?wait=true", textInput("x"), nil, nil)
	l := e.api.logs.lookup(th.ID)
	last, start := l.lastSeq(), l.start()

	for _, after := range []int64{0, *turn.EventsAfter, start - 1, last + 1, 12345} {
		_, r := e.openStream(th.ID, sprintf("?after=%d", after), nil, nil)
		require.Equal(t, http.StatusGone, r.status, "after=%d", after)
		p := r.problem(t)
		require.Equal(t, api.ProblemEventsGone, p.Type)
		require.Contains(t, p.Detail, "re-read the items")
	}
	// What is still buffered can be resumed from.
	s, r := e.openStream(th.ID, sprintf("?after=%d", start), nil, nil)
	require.Equal(t, http.StatusOK, r.status)
	evs := s.until("turn/completed")
	require.Len(t, evs, 5)
	require.Equal(t, last, evs[4].id)
	// Without a position the stream starts at the oldest buffered event.
	s, _ = e.openStream(th.ID, "?until=turnCompleted", nil, nil)
	require.Len(t, s.until("turn/completed"), 5)
}

func TestEventsHeartbeatAndLiveDelivery(t *testing.T) {
	e := newEnv(t, envOpts{script: `{"steps":[{"text":"live","delay_ms":200}]}`})
	th := e.createThread(nil, nil)
	// A stream opened before the turn gets it live, keep-alives between.
	s, _ := e.openStream(th.ID, "?until=turnCompleted", nil, nil)
	_, turn := e.postTurn(th.ID, "", textInput("x"), nil, nil)
	evs := s.until("turn/completed")
	require.Equal(t, "turn/started", evs[0].method)
	require.Greater(t, evs[0].id, *turn.EventsAfter)
}

func TestEventLogRing(t *testing.T) {
	a := &API{cfg: Config{EventBuffer: 4, EventBufferBytes: 100}, now: time.Now}
	ls := newLogs(a)
	l := newEventLog(ls, "t", 1000)
	require.Equal(t, int64(999), l.lastSeq())
	require.True(t, l.resumable(999), "an empty log resumes from just before its floor")
	require.False(t, l.resumable(998))
	require.False(t, l.resumable(1000), "a position it never assigned")

	add := func(size int) {
		l.mu.Lock()
		l.appendLocked("m", make([]byte, size))
		l.mu.Unlock()
	}
	for range 6 {
		add(10)
	}
	// Six events, four kept (count bound): 1002..1005.
	require.Equal(t, int64(1005), l.lastSeq())
	require.False(t, l.resumable(1000))
	require.True(t, l.resumable(1001))
	require.True(t, l.resumable(1005))
	evs, _, gone := l.read(1001)
	require.False(t, gone)
	require.Equal(t, []int64{1002, 1003, 1004, 1005}, seqs(evs))
	_, _, gone = l.read(1000)
	require.True(t, gone)

	// The byte bound evicts too: a 75-byte event leaves room for two of 10.
	add(75)
	evs, _, _ = l.read(l.start())
	require.Equal(t, []int64{1004, 1005, 1006}, seqs(evs))
	// An event larger than the bound is still kept, alone.
	add(500)
	evs, _, _ = l.read(l.start())
	require.Equal(t, []int64{1007}, seqs(evs))

	// A reader is woken by an append.
	_, wake, _ := l.read(1007)
	add(1)
	select {
	case <-wake:
	default:
		t.Fatal("append did not wake the reader")
	}
}

func seqs(evs []event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.seq
	}
	return out
}

func TestIdleLogDetachesAndResumesSafely(t *testing.T) {
	e := newEnv(t, envOpts{
		script: `{"steps":[{"text":"first","usage":{"input_tokens":4,"output_tokens":1,"total_tokens":5}},{"text":"second"}]}`,
		config: func(c *Config) { c.IdleDetach = time.Nanosecond },
		manual: true,
	})
	th := e.createThread(nil, nil)
	_, first := e.postTurn(th.ID, "?wait=true", textInput("1"), nil, nil)
	l := e.api.logs.lookup(th.ID)
	require.NotNil(t, l)
	require.Contains(t, e.hub.Subscribers(th.ID), l.conn)
	seen := l.lastSeq()

	e.api.logs.detachIdle()
	require.Nil(t, e.api.logs.lookup(th.ID))
	require.Eventually(t, func() bool {
		for _, c := range e.hub.Subscribers(th.ID) {
			if c == l.conn {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "the detached log unsubscribes, so the thread can unload")

	// The thread works as before; a new log records it from after the
	// last position used.
	_, second := e.postTurn(th.ID, "?wait=true", textInput("2"), nil, nil)
	require.Equal(t, "second", *second.FinalMessage)
	require.GreaterOrEqual(t, *second.EventsAfter, seen)
	// Nothing numbered happened while no log recorded the thread, so the
	// old position resumes without a gap.
	s, r := e.openStream(th.ID, sprintf("?after=%d&until=turnCompleted", seen), nil, nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, methodsOf(s.until("turn/completed")), "turn/started")

	// The first turn, which no log here holds any more, is still read
	// whole: its usage is the transcript's, not a log's.
	var got api.HTTPTurn
	e.do(req{method: "GET", path: "/v1/threads/" + th.ID + "/turns/" + first.ID}).decode(t, &got)
	require.Equal(t, "first", *got.FinalMessage)
	require.Equal(t, &api.TokenUsageBreakdown{InputTokens: 4, OutputTokens: 1, TotalTokens: 5}, got.Usage)
}

func TestBusyLogsAreNotDetached(t *testing.T) {
	e := newEnv(t, envOpts{
		script: `{"steps":[{"text":"slow","chunks":4,"fail":{"kind":"stall","after_events":3}}]}`,
		config: func(c *Config) { c.IdleDetach = time.Nanosecond; c.MaxThreadLogs = 1 },
		manual: true,
	})
	th := e.createThread(nil, nil)
	_, turn := e.postTurn(th.ID, "", textInput("x"), nil, nil)
	e.api.logs.detachIdle()
	require.NotNil(t, e.api.logs.lookup(th.ID), "a running turn keeps its log")
	// A full table makes room only from idle logs: the soft bound lets a
	// second thread in while the first is busy.
	other := e.createThread(nil, nil)
	require.NotNil(t, e.api.logs.lookup(th.ID))
	require.NotNil(t, e.api.logs.lookup(other.ID))
	r := e.do(req{method: "POST", path: "/v1/threads/" + th.ID + "/turns/" + turn.ID + "/interrupt?wait=true"})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	e.api.logs.detachIdle()
	require.Nil(t, e.api.logs.lookup(th.ID))
}

func TestStreamThatFallsBehindEndsWithStreamError(t *testing.T) {
	e := newEnv(t, envOpts{config: func(c *Config) { c.EventBuffer = 3 }})
	th := e.createThread(nil, nil)
	l := e.api.logs.lookup(th.ID)
	s, _ := e.openStream(th.ID, sprintf("?after=%d", l.lastSeq()), nil, nil)
	// More events than the buffer holds arrive at once, before the stream
	// could send any of them.
	l.mu.Lock()
	for range 5 {
		l.appendLocked("item/agentMessage/delta", []byte(`{"method":"item/agentMessage/delta","params":{},"emittedAtMs":1}`))
	}
	l.mu.Unlock()
	ev, ok := s.next()
	require.True(t, ok)
	require.Equal(t, api.HTTPStreamErrorMethod, ev.method)
	require.Zero(t, ev.id, "the error has no id: Last-Event-ID stays at the last event sent")
	var p api.Problem
	require.NoError(t, json.Unmarshal(ev.params, &p))
	require.Equal(t, api.ProblemEventsGone, p.Type)
	_, more := s.next()
	require.False(t, more, "the stream ends")
}

// A stream resumes with Last-Event-ID after a daemon restart: the events
// come from the durable event log, not the lost buffer, so there is no 410
// while they are retained, and the numbers go on where they stopped.
func TestEventsResumeAcrossRestart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "a.db")
	script := `{"steps":[{"text":"one two three four","chunks":4},{"text":"again"}]}`
	e := newEnv(t, envOpts{script: script, durable: true, dbPath: db})
	th := e.createThread(nil, nil)
	_, turn := e.postTurn(th.ID, "?wait=true", textInput("count"), nil, nil)
	s, _ := e.openStream(th.ID, sprintf("?after=%d&until=turnCompleted", *turn.EventsAfter), nil, nil)
	all := s.until("turn/completed")
	require.Greater(t, len(all), 5)
	e.close()

	// The same database, a new process's worth of state. The durable log
	// has every numbered event but the deltas of the completed message
	// (its item/completed carries it whole), also after a position that
	// named one of those deltas.
	e2 := newEnv(t, envOpts{script: script, durable: true, dbPath: db})
	var rest []sseEvent
	for _, k := range []int{2, 5} {
		s2, r := e2.openStream(th.ID, "?until=turnCompleted", http.Header{"Last-Event-Id": {strconv.FormatInt(all[k].id, 10)}}, nil)
		require.Equal(t, http.StatusOK, r.status)
		rest = s2.until("turn/completed")
		var want []sseEvent
		for _, ev := range all[k+1:] {
			if ev.id&(1<<posShift-1) == 0 && ev.method != "item/agentMessage/delta" { // numbered and stored
				want = append(want, ev)
			}
		}
		require.Equal(t, want, rest, "after event %d (%s)", k, all[k].method)
	}

	// The next turn's events continue the thread's numbering.
	_, second := e2.postTurn(th.ID, "?wait=true", textInput("more"), nil, nil)
	require.GreaterOrEqual(t, *second.EventsAfter, rest[len(rest)-1].id)
}

// A websocket client that reconnects resumes with thread/resume's afterSeq:
// it gets the notifications it missed from the event log, then the live
// ones, each numbered notification once and in order.
func TestWebsocketResumeAfterSeq(t *testing.T) {
	script := `{"steps":[{"text":"one two three","chunks":3},{"text":"four five","chunks":2},{"text":"six"}]}`
	e := newEnv(t, envOpts{script: script, durable: true})
	th := e.createThread(nil, nil)
	ws := e.dialWS()
	ws.call("thread/resume", map[string]any{"threadId": th.ID})
	e.postTurn(th.ID, "?wait=true", textInput("1"), nil, nil)
	var seen []int64
	stored := map[int64]bool{} // the numbers the durable log keeps
	for {
		f := ws.read()
		if f.Seq > 0 {
			seen = append(seen, f.Seq)
			stored[f.Seq] = f.Method != "item/agentMessage/delta"
		}
		if f.Method == "turn/completed" {
			break
		}
	}
	require.Greater(t, len(seen), 4)
	// The client drops after the middle of the first turn.
	_ = ws.ws.CloseNow()
	k := seen[len(seen)/2]

	// A turn nobody watches on the websocket.
	e.postTurn(th.ID, "?wait=true", textInput("2"), nil, nil)

	ws2 := e.dialWS()
	ws2.call("thread/resume", map[string]any{"threadId": th.ID, "afterSeq": k})
	_, third := e.postTurn(th.ID, "", textInput("3"), nil, nil)
	var got []int64
	completed := 0
	for completed < 3 {
		f := ws2.read()
		if f.Seq > 0 {
			got = append(got, f.Seq)
		}
		if f.Method == "turn/completed" {
			completed++
		}
	}
	// The rest of the first turn, the second and the third: from k+1 on,
	// in order, none twice, every number but the deltas of the messages
	// that had completed (their item/completed carries them whole).
	require.Greater(t, got[0], k, "got %v", got)
	for i := 1; i < len(got); i++ {
		require.Greater(t, got[i], got[i-1], "got %v", got)
	}
	for _, seq := range seen {
		if seq > k && stored[seq] {
			require.Contains(t, got, seq, "the first turn's stored events")
		}
	}
	require.Equal(t, seen[len(seen)-1]+1, got[slices.Index(got, seen[len(seen)-1])+1], "the second turn starts right after the first")
	require.NotNil(t, third)
}

// A websocket client that drops in the middle of a streamed message and
// resumes with the last number it saw gets the text it missed and then
// the rest, nothing lost or doubled: the deltas of a running item come
// from memory, as they are not stored.
func TestWebsocketResumeMidItem(t *testing.T) {
	const text = "one two three four five six seven eight"
	script := `{"steps":[{"text":"` + text + `","chunks":8,"event_delay_ms":150}]}`
	e := newEnv(t, envOpts{script: script, durable: true})
	th := e.createThread(nil, nil)
	watcher, ws := e.dialWS(), e.dialWS()
	watcher.call("thread/resume", map[string]any{"threadId": th.ID})
	ws.call("thread/resume", map[string]any{"threadId": th.ID})
	e.postTurn(th.ID, "", textInput("count"), nil, nil)

	type delta struct {
		Delta string `json:"delta"`
	}
	// readDelta returns the text of an agent message delta frame and
	// whether f is one.
	readDelta := func(f wsFrame) (string, bool) {
		if f.Method != "item/agentMessage/delta" {
			return "", false
		}
		var d delta
		require.NoError(t, json.Unmarshal(f.Params, &d))
		return d.Delta, true
	}
	var before string
	var k int64
	for n := 0; n < 2; {
		f := ws.read()
		if d, ok := readDelta(f); ok {
			before += d
			n++
		}
		k = max(k, f.Seq)
	}
	_ = ws.ws.CloseNow()
	// More of the message streams while the client is away.
	for n := 0; n < 2; {
		if f := watcher.read(); f.Seq > k && f.Method == "item/agentMessage/delta" {
			n++
		}
	}

	ws2 := e.dialWS()
	ws2.call("thread/resume", map[string]any{"threadId": th.ID, "afterSeq": k})
	var after, final string
	var seqs []int64
	for {
		f := ws2.read()
		if f.Seq > 0 {
			seqs = append(seqs, f.Seq)
		}
		if d, ok := readDelta(f); ok {
			after += d
		}
		if f.Method == "item/completed" && strings.Contains(string(f.Params), `"agentMessage"`) {
			var p struct {
				Item struct {
					Text string `json:"text"`
				} `json:"item"`
			}
			require.NoError(t, json.Unmarshal(f.Params, &p))
			final = p.Item.Text
		}
		if f.Method == "turn/completed" {
			break
		}
	}
	require.Equal(t, text, final)
	require.Equal(t, text, before+after, "the text before the drop, then the rest: nothing lost or doubled")
	require.Equal(t, k+1, seqs[0], "the replay starts right after the client's last number")
	for i := 1; i < len(seqs); i++ {
		require.Greater(t, seqs[i], seqs[i-1], "in order, none twice: %v", seqs)
	}
}

// A streamed turn's deltas are delivered numbered but not stored: the
// durable log holds the items whole.
func TestStreamedTurnStoresNoDeltas(t *testing.T) {
	e := newEnv(t, envOpts{script: `{"steps":[{"text":"one two three four five six","chunks":6}]}`, durable: true})
	th := e.createThread(nil, nil)
	_, turn := e.postTurn(th.ID, "?wait=true", textInput("count"), nil, nil)
	s, _ := e.openStream(th.ID, sprintf("?after=%d&until=turnCompleted", *turn.EventsAfter), nil, nil)
	all := s.until("turn/completed")
	var numbered, deltas int
	for _, ev := range all {
		if ev.id&(1<<posShift-1) == 0 {
			numbered++
			if ev.method == "item/agentMessage/delta" {
				deltas++
			}
		}
	}
	require.Equal(t, 6, deltas, "the deltas are numbered")
	var stored []store.Event
	require.Eventually(t, func() bool {
		evs, err := e.st.ListEvents(t.Context(), th.ID, 0, store.MaxEventsLimit)
		require.NoError(t, err)
		stored = evs
		return len(evs) > 0 && evs[len(evs)-1].Method == "turn/completed"
	}, 10*time.Second, 10*time.Millisecond)
	for _, ev := range stored {
		require.NotEqual(t, "item/agentMessage/delta", ev.Method)
	}
	require.Len(t, stored, numbered-deltas, "every other numbered event is stored")
}
