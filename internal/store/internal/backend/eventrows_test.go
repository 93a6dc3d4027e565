package backend

import (
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
