package backend

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

func TestFrameMethod(t *testing.T) {
	for frame, want := range map[string]string{
		`{"method":"turn/started","params":{}}`:  "turn/started",
		`{"method":"m"}`:                         "m",
		`{"method":"a\"b","params":{}}`:          "", // an escape
		`{"method":"","params":{}}`:              "", // empty
		`{"params":{},"method":"turn/started"}`:  "", // another key first
		`{ "method":"turn/started","params":{}}`: "", // white space
		`{"method":"unterminated`:                "", // no end
		`{"method":1}`:                           "", // not a string
		``:                                       "", // nothing
	} {
		got, ok := FrameMethod([]byte(frame))
		require.Equal(t, want, got, "%s", frame)
		require.Equal(t, want != "", ok, "%s", frame)
	}
	require.True(t, JoinableEvent(&store.Event{Method: "m", Data: []byte(`{"method":"m","params":{}}`)}))
	require.False(t, JoinableEvent(&store.Event{Method: "x", Data: []byte(`{"method":"m","params":{}}`)}), "another method")
	require.False(t, JoinableEvent(&store.Event{Method: "m", Data: []byte("{\"method\":\"m\",\n\"params\":{}}")}), "a newline")
}

func TestSplitEventRow(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	data := []byte(`{"method":"a","n":1}` + "\n" + `{"method":"b","n":2}` + "\n" + `{"method":"c","n":3}`)
	evs, err := splitEventRow(nil, "t", 4, 6, "a", data, at, 0)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	for i, m := range []string{"a", "b", "c"} {
		require.Equal(t, store.Event{ThreadID: "t", Seq: int64(4 + i), Method: m, Data: evs[i].Data, CreatedAt: at}, evs[i])
	}
	require.Equal(t, `{"method":"b","n":2}`, string(evs[1].Data))
	require.Equal(t, len(evs[0].Data), cap(evs[0].Data), "one event's data cannot grow into the next one's")

	evs, err = splitEventRow(evs[:0], "t", 4, 6, "a", data, at, 5)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.EqualValues(t, 6, evs[0].Seq)

	// A row of one event is its columns as they are.
	evs, err = splitEventRow(nil, "t", 0, 9, "x", []byte("anything\nat all"), at, 0)
	require.NoError(t, err)
	require.Equal(t, []store.Event{{ThreadID: "t", Seq: 9, Method: "x", Data: []byte("anything\nat all"), CreatedAt: at}}, evs)

	// Rows whose frames do not match their numbers are refused.
	for _, bad := range []struct {
		first, last int64
		data        string
	}{
		{4, 7, string(data)},               // fewer frames
		{4, 5, string(data)},               // more frames
		{6, 4, string(data)},               // reversed
		{1, 2, `{"method":"a"}` + "\nxyz"}, // a frame without a method
	} {
		_, err := splitEventRow(nil, "t", bad.first, bad.last, "a", []byte(bad.data), at, 0)
		require.Equal(t, apperr.Internal, apperr.CodeOf(err), "%+v: %v", bad, err)
	}
}

// A run whose numbers skip some is written with their counts among its
// frames and read back with its own numbers, whatever position a read
// starts after; a count that does not fit the row is refused.
func TestEventRunSkipsNumbers(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ev := func(seq int64, method string) store.Event {
		return store.Event{ThreadID: "t", Seq: seq, Method: method, Data: []byte(`{"method":"` + method + `","n":` + strconv.FormatInt(seq, 10) + `}`), CreatedAt: at}
	}
	for _, seqs := range [][]int64{{3, 4, 5}, {3, 5}, {3, 4, 6, 7, 20}, {1, 3, 100}} {
		run := make([]store.Event, len(seqs))
		for i, seq := range seqs {
			run[i] = ev(seq, fmt.Sprintf("m%d", i))
		}
		data := AppendEventRun(nil, run)
		size, frames := len(run[0].Data), len(run[0].Data)
		for i := 1; i < len(run); i++ {
			size += EventJoinSize(&run[i-1], &run[i])
			frames += len(run[i].Data)
		}
		first, last := seqs[0], seqs[len(seqs)-1]
		require.Len(t, data, size, "%s", data)
		require.EqualValues(t, frames+int(last-first), len(data), "the frames' bytes and one a number past the first")
		for after := first - 1; after <= last; after++ {
			got, err := splitEventRow(nil, "t", first, last, run[0].Method, data, at, after)
			require.NoError(t, err, "%v after %d: %s", seqs, after, data)
			var want []store.Event
			for _, e := range run {
				if e.Seq > after {
					want = append(want, e)
				}
			}
			require.Equal(t, want, got, "%v after %d", seqs, after)
		}
	}
	a, b := `{"method":"a"}`, `{"method":"b"}`
	for _, bad := range []struct {
		first, last int64
		data        string
	}{
		{1, 5, a + "\n0\n" + b},     // the line falls short of the last number
		{1, 3, a + "\n00\n" + b},    // it goes past it
		{1, 3, a + "\n"},            // a line last
		{1, 4, a + "\n0x\n" + b},    // not only the skip byte
		{1, 3, "\n" + a + "\n" + b}, // a line first: the first frame's method is the row's
	} {
		_, err := splitEventRow(nil, "t", bad.first, bad.last, "a", []byte(bad.data), at, 0)
		require.Equal(t, apperr.Internal, apperr.CodeOf(err), "%+v: %v", bad, err)
	}
}
