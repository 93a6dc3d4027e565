package server_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/server/rpcws"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/turns"
)

// heldStore is a real store whose thread listings (the search's first
// step) wait for release or for their context, and say when they start
// and how they ended.
type heldStore struct {
	store.Store
	started chan struct{}
	release chan struct{}
	ended   chan error
}

func (s *heldStore) ListThreads(ctx context.Context, q store.ListThreadsQuery) (store.ThreadPage, error) {
	if q.SearchTerm == "" {
		return s.Store.ListThreads(ctx, q)
	}
	s.started <- struct{}{}
	select {
	case <-ctx.Done():
		s.ended <- ctx.Err()
		return store.ThreadPage{}, ctx.Err()
	case <-s.release:
	}
	s.ended <- nil
	return s.Store.ListThreads(ctx, q)
}

func heldSearchServer(t *testing.T) (*testServer, *heldStore) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db"), Migrate: true})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	held := &heldStore{Store: st, started: make(chan struct{}, 4), release: make(chan struct{}), ended: make(chan error, 4)}
	h := hub.New(hub.Config{Encode: rpcws.EncodeNotification})
	m, err := turns.New(turns.Config{
		Store: held, Sink: h, Models: noModels{},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	return newTestServer(t, server.Config{Hub: h, Threads: m}), held
}

func waitHeld(t *testing.T, ch chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the search did not reach the store")
	}
}

func endOfHeld(t *testing.T, held *heldStore) error {
	t.Helper()
	select {
	case err := <-held.ended:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the search's store call did not end")
		return nil
	}
}

// A running thread/search/stream stops at thread/search/stream/cancel
// from its own connection and answers "thread search cancelled"; a cancel
// naming the request from another connection, or through the other
// method, does not touch it; a disconnect stops it.
func TestThreadSearchStreamCancel(t *testing.T) {
	ts, held := heldSearchServer(t)
	a := apptest.MustDial(t, ts.url, nil)
	a.Initialize(map[string]any{"experimentalApi": true})
	b := apptest.MustDial(t, ts.url, nil)
	b.Initialize(map[string]any{"experimentalApi": true})

	a.Send(map[string]any{"id": 7, "method": "thread/search/stream", "params": map[string]any{"searchTerm": "plums"}})
	waitHeld(t, held.started)
	b.Send(map[string]any{"id": 1, "method": "thread/search/stream/cancel", "params": map[string]any{"requestId": 7}})
	require.JSONEq(t, `{}`, string(b.Response().Result))
	a.Send(map[string]any{"id": 8, "method": "thread/search/cancel", "params": map[string]any{"requestId": 7}})
	require.JSONEq(t, `{}`, string(a.Response().Result))
	select {
	case err := <-held.ended:
		t.Fatalf("a cancel of another connection or method ended the search: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	a.Send(map[string]any{"id": 9, "method": "thread/search/stream/cancel", "params": map[string]any{"requestId": 7}})
	cancelled, stopped := a.ResponseTo("9"), a.ResponseTo("7")
	require.ErrorIs(t, endOfHeld(t, held), context.Canceled)
	require.JSONEq(t, `{}`, string(cancelled.Result))
	require.NotNil(t, stopped.Error, "expected an error, got %s", stopped.Raw)
	require.JSONEq(t, `{"code":-32600,"message":"thread search cancelled"}`, string(apptest.JSON(t, stopped.Error)))

	// Released, a search answers; closing the connection stops another.
	a.Send(map[string]any{"id": 10, "method": "thread/search", "params": map[string]any{"searchTerm": "plums"}})
	waitHeld(t, held.started)
	held.release <- struct{}{}
	require.NoError(t, endOfHeld(t, held))
	require.JSONEq(t, `{"data":[],"nextCursor":null,"backwardsCursor":null}`, string(a.Response().Result))
	a.Send(map[string]any{"id": 11, "method": "thread/search/stream", "params": map[string]any{"searchTerm": "plums"}})
	waitHeld(t, held.started)
	require.NoError(t, a.WS.CloseNow())
	require.ErrorIs(t, endOfHeld(t, held), context.Canceled)
}
