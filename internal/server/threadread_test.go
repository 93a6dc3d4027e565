package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/server/rpcws"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/turns"
)

type noModels struct{}

func (noModels) Client(string) (model.Client, error) { return nil, fmt.Errorf("no model in this test") }

// heapSampler records the most heap memory (objects, live or not yet
// swept) seen while it runs.
type heapSampler struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak uint64
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			h.mu.Lock()
			h.peak = max(h.peak, s[0].Value.Uint64())
			h.mu.Unlock()
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) end() uint64 {
	close(h.stop)
	<-h.done
	return h.peak
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// thread/read with includeTurns of a big thread is written as it is read
// from the store: the heap never holds the reply whole (building it whole
// held the items decoded and encoded, over twice the thread), and the
// client gets exactly the bytes of the reply built whole.
func TestThreadReadOfABigThreadIsStreamed(t *testing.T) {
	if testing.Short() {
		t.Skip("stores a 10 MiB thread")
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db"), Migrate: true})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	h := hub.New(hub.Config{Encode: rpcws.EncodeNotification})
	m, err := turns.New(turns.Config{
		Store: st, Notifier: h, Subscribers: h, Requests: h, Models: noModels{},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)

	// 8 turns of 160 agent messages of 8 KiB: 10 MiB of text, read in
	// pages of 100 items (0.8 MiB). (Under -race the time goes into
	// encoding: keep the thread small.)
	const turnCount, perTurn, size = 8, 160, 8 << 10
	now := time.Now().Truncate(time.Second)
	th := &store.Thread{ID: "0194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a", Cwd: "/", ModelProvider: "fake", Source: "vscode", CreatedAt: now, UpdatedAt: now, RecencyAt: now}
	require.NoError(t, st.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{th}}))
	text := strings.Repeat("abcdefgh", size/8)
	for i := range turnCount {
		tr := &store.Turn{ThreadID: th.ID, ID: fmt.Sprintf("turn-%d", i), Status: store.TurnCompleted, StartedAt: &now, CompletedAt: &now}
		b := &store.Batch{CreateTurns: []*store.Turn{tr}}
		for j := range perTurn {
			id := fmt.Sprintf("item-%d-%d", i, j)
			payload, err := json.Marshal(map[string]any{"type": "agentMessage", "id": id, "text": text})
			require.NoError(t, err)
			b.AppendItems = append(b.AppendItems, &store.Item{ThreadID: th.ID, TurnID: tr.ID, ItemID: id, Type: "agentMessage", Payload: payload, CreatedAt: now})
		}
		require.NoError(t, st.Write(ctx, b))
	}

	ts := newTestServer(t, server.Config{Hub: h, Threads: m})
	c := dial(t, ts.url, nil)
	c.initialize(nil)
	c.ws.SetReadLimit(-1)

	// A low GC target keeps the heap close to what is live, so that the
	// peak measures what the reply holds rather than the GC's pacing.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	runtime.GC()
	base := heapObjects()
	sampler := sampleHeap()
	c.send(map[string]any{"id": 1, "method": "thread/read", "params": map[string]any{"threadId": th.ID, "includeTurns": true}})
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	typ, r, err := c.ws.Reader(rctx)
	require.NoError(t, err)
	require.Equal(t, websocket.MessageText, typ)
	sum := sha256.New()
	n, err := io.Copy(sum, r)
	require.NoError(t, err)
	peak := sampler.end()

	yes := true
	whole, err := m.ReadThread(ctx, api.ThreadReadParams{ThreadID: th.ID, IncludeTurns: &yes})
	require.NoError(t, err)
	result, err := json.Marshal(whole)
	require.NoError(t, err)
	want := sha256.Sum256([]byte(`{"id":1,"result":` + string(result) + `}`))
	require.Equal(t, int64(len(result)+len(`{"id":1,"result":}`)), n)
	require.Equal(t, want[:], sum.Sum(nil), "the streamed reply is the reply built whole")

	grew := int64(peak) - int64(base)
	t.Logf("reply %d MiB; heap grew by %d MiB at most", n>>20, grew>>20)
	require.Less(t, grew, int64(turnCount*perTurn*size/2), "the heap held at least half the thread while replying")
}
