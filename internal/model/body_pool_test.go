package model

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRequestBodyReferences shows that a pooled body's buffer is released
// only when the caller is done and every reader handed out was written.
func TestRequestBodyReferences(t *testing.T) {
	b := newPooledBody()
	b.buf.WriteString(`{"x":1}`)
	r1, r2 := b.reader(), b.reader()
	b.done()
	require.NotNil(t, b.buf, "readers not yet written")
	require.NoError(t, r1.Close())
	b.wrote()
	require.NotNil(t, b.buf, "one reader not yet written")
	got, err := io.ReadAll(r2)
	require.NoError(t, err)
	assert.Equal(t, `{"x":1}`, string(got))
	b.wrote()
	assert.Nil(t, b.buf, "released once the last reference is dropped")

	// Unpooled bodies are never released to the pool.
	u := newBody([]byte("abc"))
	_ = u.reader()
	u.done()
	u.wrote()
	assert.Equal(t, "abc", string(u.bytes()))
}

// TestRequestBodyReplayedOnRedirect shows that a 307 redirect, which makes
// net/http send the body a second time through GetBody, gets the whole
// body both times, and that every reader net/http took was reported
// written (the buffer went back to the pool).
func TestRequestBodyReplayedOnRedirect(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, r.URL.Path+" "+string(b))
		mu.Unlock()
		if r.URL.Path == "/v1/responses" {
			http.Redirect(w, r, "/v2/responses", http.StatusTemporaryRedirect)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\"}}\n\n")
	}))
	defer srv.Close()

	c, err := New(ProviderConfig{ID: "p", BaseURL: srv.URL + "/v1"}, nil)
	require.NoError(t, err)
	tr := c.(*responsesClient).t
	body := newPooledBody()
	body.buf.WriteString(strings.Repeat("b", 100<<10)) // larger than the write buffer
	h := &responsesHandler{emit: emitter(nil)}
	_, err = tr.run(context.Background(), body, h, nil)
	require.NoError(t, err)
	assert.Equal(t, "r", h.res.ResponseID)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, bodies, 2)
	assert.Equal(t, "/v1/responses "+strings.Repeat("b", 100<<10), bodies[0])
	assert.Equal(t, "/v2/responses "+strings.Repeat("b", 100<<10), bodies[1])
	// net/http may report the last write on its own goroutine just after
	// the response was read.
	assert.Eventually(t, func() bool { return body.refs.Load() == 0 }, 5*time.Second, time.Millisecond,
		"every reader net/http took was reported written")
}

// TestRequestBodyEarlyResponse covers a server that answers before
// reading the request body: the call returns while net/http may still be
// writing the body (both socket buffers are tiny, so the write blocks), and
// net/http then abandons the connection. The abandoned write must still be
// reported, so the buffer goes back to the pool, and what the server did
// receive must be the body as sent, even though the next request's body
// is written into a pooled buffer meanwhile.
func TestRequestBodyEarlyResponse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	const size = 1 << 20
	want := bytes.Repeat([]byte("a"), size)
	readBody := make(chan struct{})
	got := make(chan []byte, 1)
	go func() {
		defer close(got)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.(*net.TCPConn).SetReadBuffer(4096)
		br := bufio.NewReader(conn)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		const sse = "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"early\"}}\n\n"
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(sse), sse)
		<-readBody
		b, _ := io.ReadAll(req.Body) // cut short when the client gives up
		got <- b
	}()

	c, err := New(ProviderConfig{ID: "p", BaseURL: "http://" + ln.Addr().String() + "/v1"}, nil)
	require.NoError(t, err)
	tr := c.(*responsesClient).t
	dialer := &net.Dialer{}
	tr.client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dialer.DialContext(ctx, network, addr)
		if err == nil {
			_ = conn.(*net.TCPConn).SetWriteBuffer(4096)
		}
		return conn, err
	}}}

	body := newPooledBody()
	body.buf.Write(want)
	h := &responsesHandler{emit: emitter(nil)}
	_, err = tr.run(context.Background(), body, h, nil)
	require.NoError(t, err)
	require.Equal(t, "early", h.res.ResponseID)
	// The next round's body, from the pool.
	next := newPooledBody()
	next.buf.Write(bytes.Repeat([]byte("z"), size))
	close(readBody)
	received := <-got
	assert.Less(t, len(received), size, "the write was cut short")
	assert.Equal(t, want[:len(received)], received, "the server received the body as sent")
	next.done()
	assert.Eventually(t, func() bool { return body.refs.Load() == 0 }, 5*time.Second, time.Millisecond,
		"net/http reported the abandoned write")
}

// TestRedirectThatDropsTheBodyIsNotFollowed covers a 302 (or 301, 303),
// which net/http would follow as a GET without the body: it is reported as
// an error instead. Followed, the GET's write report released the body
// while the call still held it, and the retry after the GET's 503 found no
// body (a nil-pointer panic).
func TestRedirectThatDropsTheBodyIsNotFollowed(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+string(b))
		mu.Unlock()
		if r.URL.Path == "/v1/responses" {
			http.Redirect(w, r, "/v2/responses?key=secret", http.StatusFound)
			return
		}
		http.Error(w, `{"error":{"message":"unavailable"}}`, http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	c, err := New(ProviderConfig{ID: "p", BaseURL: srv.URL + "/v1", MaxRetries: 2}, nil,
		WithSleep(func(context.Context, time.Duration) error { return nil }))
	require.NoError(t, err)
	body := newPooledBody()
	body.buf.WriteString(`{"model":"m"}`)
	_, err = c.(*responsesClient).t.run(context.Background(), body, &responsesHandler{emit: emitter(nil)}, nil)
	var me *Error
	require.ErrorAs(t, err, &me)
	assert.Equal(t, KindMalformed, me.Kind)
	assert.Equal(t, http.StatusFound, me.HTTPStatus)
	assert.Contains(t, me.Message, `redirect to "/v2/responses"`)
	assert.NotContains(t, me.Message, "secret")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{`POST /v1/responses {"model":"m"}`}, seen, "the redirect was not followed")
	assert.Eventually(t, func() bool { return body.refs.Load() == 0 }, 5*time.Second, time.Millisecond)
}
