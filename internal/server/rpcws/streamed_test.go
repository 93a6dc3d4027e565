package rpcws

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// pieces is a StreamedFrame that writes its pieces, then fails with err
// when it is set.
type pieces struct {
	parts []string
	err   error
	size  int64
}

func (p *pieces) Size() int64 { return p.size }

func (p *pieces) WriteFrame(w io.Writer) error {
	for _, s := range p.parts {
		if _, err := w.Write([]byte(s)); err != nil {
			return err
		}
	}
	return p.err
}

// A streamed frame is sent as one message, in its place among the others.
func TestStreamedFrameKeepsItsPlace(t *testing.T) {
	s, client := pair(t, Options{})
	require.NoError(t, s.Send([]byte(`{"a":1}`)))
	require.NoError(t, s.SendStreamed(&pieces{parts: []string{`{"b":`, strings.Repeat("2", 100<<10), `}`}, size: 10}))
	require.NoError(t, s.Send([]byte(`{"c":3}`)))
	s.CloseWith(websocket.StatusNormalClosure, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, _ := readAll(ctx, client)
	require.Equal(t, []string{`{"a":1}`, `{"b":` + strings.Repeat("2", 100<<10) + `}`, `{"c":3}`}, got)
}

// A streamed frame whose source fails part way closes the connection with
// 1011: the client never gets half a message as if it were whole.
func TestStreamedFrameFailingPartWayCloses(t *testing.T) {
	s, client := pair(t, Options{})
	require.NoError(t, s.SendStreamed(&pieces{parts: []string{`{"b":`, `[1,`}, err: errors.New("store gone")}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err := client.Read(ctx)
	require.Equal(t, websocket.StatusInternalError, websocket.CloseStatus(err), "%v", err)
	require.ErrorIs(t, s.Send([]byte(`{}`)), ErrClosed)
	<-s.Done()
}

// A streamed frame counts in the outbound bytes as its Size: a
// connection whose queue holds more than OutboundBytes is a slow consumer.
func TestStreamedFrameCountsItsSize(t *testing.T) {
	s, client := pair(t, Options{OutboundBytes: 1 << 20})
	holdWriter(t, s)
	require.NoError(t, s.SendStreamed(&pieces{size: 2 << 20}))
	require.ErrorIs(t, s.SendStreamed(&pieces{size: 1}), ErrSlowConsumer)
	releaseWriter(s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := readAll(ctx, client)
	require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err), "%v", err)
}
