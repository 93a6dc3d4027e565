package rpcws

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// Lazy frames wait for the next Send and go out with it, in queue order
// and in one write; with no Send they go out on their own once LazyDelay
// has passed; closing flushes them.
func TestLazyFramesWaitForTheNextSend(t *testing.T) {
	const delay = 300 * time.Millisecond
	s, client := pair(t, Options{LazyDelay: delay})
	bc := s.opts.Batch.conn
	require.NotNil(t, bc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	frame := numberedFrame
	read := func(want int) time.Time { t.Helper(); return readNumbered(t, ctx, client, want) }

	// Three lazy frames, then one sent at once: all four in one write.
	before := bc.writes.Load()
	for i := range 3 {
		require.NoError(t, s.SendLazy(frame(i)))
	}
	queued, _, writing, _ := s.state()
	require.Equal(t, 3, queued, "a lazy frame started a writer")
	require.False(t, writing)
	start := time.Now()
	require.NoError(t, s.Send(frame(3)))
	for i := range 4 {
		read(i)
	}
	require.Less(t, time.Since(start), delay, "the lazy frames waited for their delay though a frame was sent")
	require.Equal(t, int64(1), bc.writes.Load()-before, "the four frames were not written together")

	// A lazy frame alone goes out after its delay, not before. (Once the
	// writer of the four has gone: a writer still running takes what is
	// queued, lazy or not.)
	require.Eventually(t, func() bool { _, _, writing, _ := s.state(); return !writing }, 5*time.Second, time.Millisecond)
	start = time.Now()
	require.NoError(t, s.SendLazy(frame(4)))
	got := read(4)
	require.GreaterOrEqual(t, got.Sub(start), delay-10*time.Millisecond)

	// Closing writes what waits.
	require.NoError(t, s.SendLazy(frame(5)))
	s.CloseWith(CloseNormal, "")
	read(5)
	<-s.Done()
}

// A frame queued with a delay of its own waits for that delay; a frame
// queued with a shorter one brings the frames before it forward, and one
// with a longer delay does not hold back those queued before it.
func TestLazyFramesWithDelaysOfTheirOwn(t *testing.T) {
	const long, short = 400 * time.Millisecond, 30 * time.Millisecond
	s, client := pair(t, Options{LazyDelay: short})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	frame := numberedFrame
	read := func(want int) time.Time { t.Helper(); return readNumbered(t, ctx, client, want) }

	start := time.Now()
	require.NoError(t, s.SendLazyWithin(frame(0), long))
	require.GreaterOrEqual(t, read(0).Sub(start), long-10*time.Millisecond, "a frame went out before its own delay")

	start = time.Now()
	require.NoError(t, s.SendLazyWithin(frame(1), time.Minute))
	require.NoError(t, s.SendLazyWithin(frame(2), short))
	read(1)
	require.Less(t, read(2).Sub(start), long, "a shorter delay did not bring the waiting frames forward")

	start = time.Now()
	require.NoError(t, s.SendLazyWithin(frame(3), short))
	require.NoError(t, s.SendLazyWithin(frame(4), time.Minute))
	read(3)
	require.Less(t, read(4).Sub(start), long, "a longer delay held back the frames queued before it")

	s.CloseWith(CloseNormal, "")
	<-s.Done()
}

// numberedFrame is the i-th notification frame of the lazy tests.
func numberedFrame(i int) []byte {
	return []byte(`{"method":"n","params":{"i":` + strconv.Itoa(i) + `}}`)
}

// readNumbered reads the client's next message, which must be
// numberedFrame(want), and returns when it came.
func readNumbered(t *testing.T, ctx context.Context, client *websocket.Conn, want int) time.Time {
	t.Helper()
	_, data, err := client.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, string(numberedFrame(want)), string(data))
	return time.Now()
}
