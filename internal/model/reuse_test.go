package model_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/model"
)

// endedStreams are complete streams of each wire API, ending with the
// event after which the client stops reading.
var endedStreams = map[string]string{
	model.WireAPIResponses: "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\"}}\n\n",
	model.WireAPIChat: "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: [DONE]\n\n",
}

// streamServer serves endedStreams[wire] to every request, flushes it,
// then runs after before the handler returns (which ends the chunked
// body); it counts the connections it accepted.
func streamServer(t *testing.T, wire string, after func(r *http.Request)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, endedStreams[wire])
		_ = http.NewResponseController(w).Flush()
		after(r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// TestConnectionReusedAfterTheEndEvent: the end of the chunked body comes
// in a write of its own, after the end event; the client reads it after
// Stream returned, so the next request goes on the same connection. Before,
// the body was closed unread, net/http dropped the connection, and each
// request dialled a new one.
func TestConnectionReusedAfterTheEndEvent(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv, conns := streamServer(t, wire, func(*http.Request) { time.Sleep(30 * time.Millisecond) })
			c, _ := newClient(t, srv.URL, wire, nil)
			for i := range 3 {
				_, _, err := run(t, c, userRequest("hi"))
				require.NoError(t, err, "request %d", i)
				// The previous stream's end is read in the background.
				time.Sleep(60 * time.Millisecond)
			}
			assert.Equal(t, int32(1), conns.Load(), "connections the server accepted for three requests")
		})
	}
}

// TestStreamThatGoesOnAfterItsEnd: a server that keeps the stream open
// after its end event neither delays Stream nor keeps the request: the
// client gives up on it after a bounded time and closes the connection.
func TestStreamThatGoesOnAfterItsEnd(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			released := make(chan struct{})
			srv, _ := streamServer(t, wire, func(r *http.Request) {
				defer close(released)
				select {
				case <-r.Context().Done():
				case <-time.After(30 * time.Second):
				}
			})
			c, _ := newClient(t, srv.URL, wire, nil)
			start := time.Now()
			_, _, err := run(t, c, userRequest("hi"))
			require.NoError(t, err)
			assert.Less(t, time.Since(start), 5*time.Second, "Stream returned at the end event")
			select {
			case <-released:
			case <-time.After(10 * time.Second):
				t.Fatal("the client kept the stream open after its end event")
			}
			assert.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond, "the client waited for the stream's end")
		})
	}
}

// TestCancelledRequestAfterTheEndEvent: the request's context ending
// right after Stream returned does not disturb the background read.
func TestCancelledRequestAfterTheEndEvent(t *testing.T) {
	srv, conns := streamServer(t, model.WireAPIResponses, func(*http.Request) { time.Sleep(20 * time.Millisecond) })
	c, _ := newClient(t, srv.URL, model.WireAPIResponses, nil)
	for range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		_, err := c.Stream(ctx, userRequest("hi"), nil)
		cancel()
		require.NoError(t, err)
		time.Sleep(60 * time.Millisecond)
	}
	assert.Equal(t, int32(1), conns.Load())
}
