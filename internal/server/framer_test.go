package server_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/server/rpcws"
)

// pipeSession is a session served over newline-delimited JSON on
// in-memory pipes, as stdio serves it: the session does not know which
// transport it runs on.
type pipeSession struct {
	*apptest.Client
	in   *io.PipeWriter
	done <-chan struct{}
}

func servePipes(t *testing.T, srv *server.Server) *pipeSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := srv.ServeConn(rpcws.Lines(inR, outW, 0), "pipe", principal.Operator())
	t.Cleanup(func() {
		_ = inW.Close()
		_ = outR.Close()
		<-done
	})
	return &pipeSession{Client: apptest.NewLinesClient(t, inW, outR), in: inW, done: done}
}

// The session's rules hold over a framer that is not a websocket: not
// initialized first, ids echoed exactly, unknown methods -32601, the
// draining answer; the session ends when its input does.
func TestSessionOverLines(t *testing.T) {
	metrics := server.NewMetrics(prometheus.NewRegistry())
	var draining atomic.Bool
	srv, err := server.New(server.Config{Metrics: metrics, Draining: draining.Load})
	require.NoError(t, err)
	p := servePipes(t, srv)

	p.SendRaw(`{"id":"x","method":"account/read","params":{}}`)
	require.JSONEq(t, `{"id":"x","error":{"code":-32600,"message":"Not initialized"}}`, string(p.Next().Raw))
	p.SendRaw(`{"id":9007199254740993,"method":"initialize","params":{"clientInfo":{"name":"editor","version":"1"}}}`)
	m := p.Next()
	require.Equal(t, "9007199254740993", string(m.ID))
	require.Nil(t, m.Error)
	p.SendRaw(`{"method":"initialized"}`)
	p.SendRaw(`{"id":"n:1","method":"no/such/method","params":{}}`)
	m = p.Next()
	require.Equal(t, `"n:1"`, string(m.ID))
	require.Equal(t, -32601, m.Error.Code)
	require.Len(t, srv.Sessions(), 1)
	require.Equal(t, float64(1), testutil.ToFloat64(metrics.OpenConnections))

	draining.Store(true)
	p.SendRaw(`{"id":2,"method":"account/read","params":{}}`)
	require.Contains(t, string(p.Next().Raw), `"reason":"serverShuttingDown"`)

	require.NoError(t, p.in.Close())
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the end of the input did not end the session")
	}
	require.Empty(t, srv.Sessions())
	require.Equal(t, float64(0), testutil.ToFloat64(metrics.OpenConnections))
}

// CloseConnections closes a session on any framer: on newline-delimited
// JSON its output ends (there is no close frame), and a session started
// afterwards is closed at once.
func TestCloseConnectionsClosesEveryTransport(t *testing.T) {
	srv, err := server.New(server.Config{})
	require.NoError(t, err)
	p := servePipes(t, srv)
	p.SendRaw(`{"id":1,"method":"initialize","params":{"clientInfo":{"name":"editor","version":"1"}}}`)
	require.Nil(t, p.Next().Error)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, srv.CloseConnections(ctx))
	require.ErrorIs(t, p.Closed(), io.EOF)
	<-p.done

	late := servePipes(t, srv)
	select {
	case <-late.done:
	case <-time.After(5 * time.Second):
		t.Fatal("a session started after CloseConnections was served")
	}
	require.ErrorIs(t, late.Closed(), io.EOF)
}
