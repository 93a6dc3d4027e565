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
	"github.com/appserver/appserver/internal/apptest"
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

// bigThreadServer is a server on a store holding a 10 MiB thread (8 turns
// of 160 agent messages of 8 KiB, read in pages of 100 items: 0.8 MiB) and
// an initialized client of it that reads messages of any size. (Under
// -race the time goes into encoding: the thread is kept small.)
type bigThreadServer struct {
	m        *turns.Manager
	h        *hub.Hub
	c        *apptest.Client
	threadID string
}

// bigThreadSize is the text the thread of newBigThreadServer holds.
const bigThreadSize = 8 * 160 * 8 << 10

func newBigThreadServer(t *testing.T) bigThreadServer {
	t.Helper()
	if testing.Short() {
		t.Skip("stores a 10 MiB thread")
	}
	return newThreadServer(t, 8, 160, 8<<10, nil)
}

// newThreadServer is a server on a store holding a thread of turnCount
// turns of perTurn agent messages of size bytes, with the given meta, and
// an initialized client of it that reads messages of any size.
func newThreadServer(t *testing.T, turnCount, perTurn, size int, meta json.RawMessage) bigThreadServer {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db"), Migrate: true})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	h := hub.New(hub.Config{Encode: rpcws.EncodeNotification})
	m, err := turns.New(turns.Config{
		Store: st, Sink: h, Models: noModels{},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)

	now := time.Now().Truncate(time.Second)
	th := &store.Thread{ID: "0194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a", Cwd: "/", ModelProvider: "fake", Source: "vscode", CreatedAt: now, UpdatedAt: now, RecencyAt: now, Meta: meta}
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
	c := apptest.MustDial(t, ts.url, nil)
	c.Initialize(nil)
	c.WS.SetReadLimit(-1)
	return bigThreadServer{m: m, h: h, c: c, threadID: th.ID}
}

// call sends the request (id 1) and reads its reply without keeping it:
// it returns the reply's length and SHA-256, and how much the heap grew
// at most, above what was live before, while the reply was made and read.
func (b bigThreadServer) call(t *testing.T, method string, params map[string]any) (n int64, sum []byte, grew int64) {
	t.Helper()
	// A low GC target keeps the heap close to what is live, so that the
	// peak measures what the reply holds rather than the GC's pacing.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	runtime.GC()
	base := heapObjects()
	sampler := sampleHeap()
	b.c.Send(map[string]any{"id": 1, "method": method, "params": params})
	rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	typ, r, err := b.c.WS.Reader(rctx)
	require.NoError(t, err)
	require.Equal(t, websocket.MessageText, typ)
	h := sha256.New()
	n, err = io.Copy(h, r)
	require.NoError(t, err)
	peak := sampler.end()
	return n, h.Sum(nil), int64(peak) - int64(base)
}

// requireReply checks that a reply of n bytes and SHA-256 sum is
// {"id":1,"result":…} around result.
func requireReply(t *testing.T, n int64, sum []byte, result any) {
	t.Helper()
	b, err := json.Marshal(result)
	require.NoError(t, err)
	want := sha256.Sum256([]byte(`{"id":1,"result":` + string(b) + `}`))
	require.Equal(t, int64(len(b)+len(`{"id":1,"result":}`)), n)
	require.Equal(t, want[:], sum, "the streamed reply is the reply built whole")
}

// thread/read with includeTurns of a big thread is written as it is read
// from the store: the heap never holds the reply whole (building it whole
// held the items decoded and encoded, over twice the thread), and the
// client gets exactly the bytes of the reply built whole.
func TestThreadReadOfABigThreadIsStreamed(t *testing.T) {
	b := newBigThreadServer(t)
	n, sum, grew := b.call(t, "thread/read", map[string]any{"threadId": b.threadID, "includeTurns": true})

	yes := true
	whole, err := b.m.ReadThread(context.Background(), api.ThreadReadParams{ThreadID: b.threadID, IncludeTurns: &yes})
	require.NoError(t, err)
	requireReply(t, n, sum, whole)
	t.Logf("reply %d MiB; heap grew by %d MiB at most", n>>20, grew>>20)
	require.Less(t, grew, int64(bigThreadSize/2), "the heap held at least half the thread while replying")
}

// thread/resume of a big thread, which answers with its turns unless
// excludeTurns, is written as they are read from the store, as
// thread/read's: the heap never holds the reply whole, and the client gets
// exactly the bytes of the reply built whole.
func TestThreadResumeOfABigThreadIsStreamed(t *testing.T) {
	b := newBigThreadServer(t)
	n, sum, grew := b.call(t, "thread/resume", map[string]any{"threadId": b.threadID})

	whole, _, err := b.m.ResumeThread(context.Background(), turns.Caller{Conn: 1 << 40}, api.ThreadResumeParams{ThreadID: b.threadID})
	require.NoError(t, err)
	require.Len(t, whole.Thread.Turns, 8)
	requireReply(t, n, sum, whole)
	t.Logf("reply %d MiB; heap grew by %d MiB at most", n>>20, grew>>20)
	require.Less(t, grew, int64(bigThreadSize/2), "the heap held at least half the thread while replying")
}

// The notifications thread/resume and thread/fork cause (the replayed
// token usage, thread/started) follow their streamed reply on the wire,
// as they followed the reply built whole.
func TestStreamedResumeAndForkRepliesPrecedeTheirNotifications(t *testing.T) {
	usage := `{"totalTokens":30,"inputTokens":20,"cachedInputTokens":0,"cacheWriteInputTokens":0,"outputTokens":10,"reasoningOutputTokens":0}`
	meta := json.RawMessage(`{"tokenTotal":` + usage + `,"lastTurnId":"turn-1","lastUsage":` + usage + `}`)
	// Several fragments of reply, so that a notification queued meanwhile
	// could come between them or before.
	b := newThreadServer(t, 2, 100, 4<<10, meta)
	for i, method := range []string{"thread/resume", "thread/fork"} {
		b.c.Send(map[string]any{"id": i + 1, "method": method, "params": map[string]any{"threadId": b.threadID}})
		reply := b.c.Next()
		require.JSONEq(t, fmt.Sprint(i+1), string(reply.ID), "the reply comes first, not %s", reply.Method)
		var res struct {
			Thread api.Thread `json:"thread"`
		}
		require.NoError(t, json.Unmarshal(reply.Result, &res))
		require.Len(t, res.Thread.Turns, 2)
		require.Len(t, res.Thread.Turns[1].Items, 100)
		var got []string
		want := []string{"thread/tokenUsage/updated"}
		if method == "thread/fork" {
			want = append(want, "thread/started")
		}
		for range want {
			got = append(got, b.c.Next().Method)
		}
		require.Equal(t, want, got)
	}
}
