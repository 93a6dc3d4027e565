package rpcws

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// feedOf is a feed of frames another goroutine puts there; the stream
// takes them under its lock.
type feedOf struct {
	mu     sync.Mutex
	frames [][]byte
}

func (f *feedOf) put(b []byte) {
	f.mu.Lock()
	f.frames = append(f.frames, b)
	f.mu.Unlock()
}

func (f *feedOf) take(add func([]byte) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.frames) > 0 {
		b := f.frames[0]
		f.frames = f.frames[1:]
		if !add(b) {
			return
		}
	}
}

// fedPair is pair with a feed, and a reader of the frames the client
// must get next.
func fedPair(t *testing.T) (*Stream, *websocket.Conn, *feedOf, func(...int)) {
	s, client := pair(t, Options{LazyDelay: time.Hour})
	f := &feedOf{}
	s.SetFeed(f.take)
	return s, client, f, func(want ...int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, i := range want {
			_, data, err := client.Read(ctx)
			require.NoError(t, err)
			require.JSONEq(t, string(frame(i)), string(data))
		}
	}
}

// The feed's frames go out before any frame the stream queues after them,
// whether that frame is sent at once or lazily; Pull writes them with
// nothing else to send; nothing is written from the feed before either.
func TestFeedFramesKeepTheirPlace(t *testing.T) {
	s, client, f, read := fedPair(t)
	f.put(frame(0))
	f.put(frame(1))
	require.NoError(t, s.Send(frame(2)))
	read(0, 1, 2)

	f.put(frame(3))
	require.NoError(t, s.SendLazy(frame(4)))
	f.put(frame(5))
	require.NoError(t, s.Send(frame(6)))
	read(3, 4, 5, 6)

	f.put(frame(7))
	short, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, _, err := client.Read(short)
	stop()
	require.Error(t, err, "a feed's frame went out with nothing pulling it")
	// The read's end closed the client; a new pair for the rest.
	s, _, g, read := fedPair(t)
	g.put(frame(7))
	s.Pull()
	read(7)

	s.SetFeed(nil)
	g.put(frame(8))
	require.NoError(t, s.Send(frame(9)))
	read(9)
}

// Frames a lazy frame took along go out when Pull says the feed is due,
// not at the lazy frame's later deadline.
func TestPullWritesWhatALazyFrameTookAlong(t *testing.T) {
	s, _, f, read := fedPair(t)
	f.put(frame(0))
	require.NoError(t, s.SendLazy(frame(1)))
	s.Pull()
	read(0, 1)
}

// A close that flushes the queue flushes the feed's frames too, first.
func TestCloseFlushesTheFeed(t *testing.T) {
	s, client := pair(t, Options{LazyDelay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f := &feedOf{}
	s.SetFeed(f.take)
	require.NoError(t, s.SendLazy(frame(0)))
	f.put(frame(1))
	f.put(frame(2))
	s.CloseWith(websocket.StatusGoingAway, "bye")
	got, err := readAll(ctx, client)
	require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(err))
	require.Len(t, got, 3)
	for i, g := range got {
		require.JSONEq(t, string(frame(i)), g)
	}
}

// A feed that fills the outbound queue closes the stream as a slow
// consumer, as Send would: the frame being queued is refused too, and
// the feed is read no further.
func TestFeedFillingTheQueueIsASlowConsumer(t *testing.T) {
	s, client := pair(t, Options{OutboundQueue: 4})
	holdWriter(t, s)
	f := &feedOf{}
	s.SetFeed(f.take)
	for i := range 6 {
		f.put(frame(i))
	}
	err := s.Send(frame(4))
	_, _, _, closing := s.state()
	releaseWriter(s) // before any check, so that a failure cannot hang the cleanup
	require.ErrorIs(t, err, ErrSlowConsumer)
	require.True(t, closing)
	require.Len(t, f.frames, 1, "the feed was read past the frame that overflowed")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := readAll(ctx, client)
	require.Empty(t, got)
	require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err))
	s.Pull()
	require.Len(t, f.frames, 1, "a closed stream takes nothing")
}

// A flushing close takes from the feed only what the queue has room for:
// the close keeps its own code, not a slow consumer's, and what was
// queued before goes out.
func TestFlushingCloseTakesWhatFits(t *testing.T) {
	var slow atomic.Int32
	s, client := pair(t, Options{OutboundQueue: 4, Hooks: Hooks{SlowConsumer: func() { slow.Add(1) }}})
	holdWriter(t, s)
	f := &feedOf{}
	s.SetFeed(f.take)
	err := s.Send(frame(0))
	err2 := s.Send(frame(1))
	for i := 2; i < 7; i++ {
		f.put(frame(i))
	}
	s.CloseWith(websocket.StatusGoingAway, "bye")
	releaseWriter(s) // before any check, so that a failure cannot hang the cleanup
	require.NoError(t, err)
	require.NoError(t, err2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, cerr := readAll(ctx, client)
	require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(cerr))
	require.Len(t, got, 4)
	for i, g := range got {
		require.JSONEq(t, string(frame(i)), g)
	}
	require.Zero(t, slow.Load())
}
