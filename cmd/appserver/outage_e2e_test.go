package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/store/pgtest"
)

// outageClient runs turns on one thread until stopped, and records what it
// was told.
type outageClient struct {
	ws       *websocket.Conn
	threadID string
	nextID   int

	// What the client saw: items completed, turns ended, errors.
	items    []string          // item ids
	ended    map[string]string // turn id -> status
	messages []string          // turn/start error and turn error messages
}

func (c *outageClient) send(ctx context.Context, method string, params any) (int, error) {
	c.nextID++
	b, _ := json.Marshal(map[string]any{"id": c.nextID, "method": method, "params": params})
	return c.nextID, c.ws.Write(ctx, websocket.MessageText, b)
}

// turn sends turn/start and reads until its turn/completed (or its error).
func (c *outageClient) turn(ctx context.Context, text string) error {
	id, err := c.send(ctx, "turn/start", map[string]any{"threadId": c.threadID, "input": []any{map[string]any{"type": "text", "text": text}}})
	if err != nil {
		return err
	}
	for {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			return err
		}
		var f frame
		if err := json.Unmarshal(data, &f); err != nil {
			return err
		}
		switch {
		case string(f.ID) == fmt.Sprint(id) && f.Error != nil:
			c.messages = append(c.messages, f.Error.Message)
			return nil
		case f.Method == "item/completed":
			var p struct {
				Item struct {
					ID string `json:"id"`
				} `json:"item"`
			}
			if err := json.Unmarshal(f.Params, &p); err != nil {
				return err
			}
			c.items = append(c.items, p.Item.ID)
		case f.Method == "turn/completed":
			var p struct {
				Turn struct {
					ID     string `json:"id"`
					Status string `json:"status"`
					Error  *struct {
						Message string `json:"message"`
					} `json:"error"`
				} `json:"turn"`
			}
			if err := json.Unmarshal(f.Params, &p); err != nil {
				return err
			}
			c.ended[p.Turn.ID] = p.Turn.Status
			if p.Turn.Error != nil {
				c.messages = append(c.messages, p.Turn.Error.Message)
			}
			return nil
		}
	}
}

// A Postgres outage under load: clients keep starting turns while the
// database goes away for a second and comes back. Afterwards, without a
// restart, every item a client saw completed is stored, every turn a
// client saw end is stored with that status (none stays inProgress), and
// what clients were told about the outage is "storage unavailable".
func TestPostgresOutageUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs turns through a database outage")
	}
	const clients = 4
	proxy := pgtest.NewProxy(t, pgtest.URL(t))
	fake := startFake(t, `{"steps":[]}`)
	d := startDaemon(t, append([]string{"--database-url", proxy.URL(), "--migrate", "--data-dir", t.TempDir()}, fakeArgs(fake, "responses")...)...)

	cs := make([]*outageClient, clients)
	for i := range cs {
		r := newRPC(t, d)
		cs[i] = &outageClient{ws: r.ws, threadID: startThread(t, r, nil), nextID: 100, ended: map[string]string{}}
	}
	var stop atomic.Bool
	var turns atomic.Int64
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for n := 0; !stop.Load(); n++ {
				if err := c.turn(ctx, fmt.Sprintf("client %d turn %d", i, n)); err != nil {
					errs <- err
					return
				}
				turns.Add(1)
			}
		})
	}
	waitTurns := func(n int64) {
		deadline := time.Now().Add(30 * time.Second)
		for turns.Load() < n {
			require.True(t, time.Now().Before(deadline), "only %d turns ran", turns.Load())
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitTurns(20)
	proxy.Down()
	time.Sleep(time.Second)
	proxy.Up()
	waitTurns(turns.Load() + 20) // the store is back: turns complete again
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	r := newRPC(t, d)
	type storedTurn struct {
		ID     string            `json:"id"`
		Status string            `json:"status"`
		Items  []json.RawMessage `json:"items"`
	}
	read := func(threadID string) []storedTurn {
		var res struct {
			Thread struct {
				Turns []storedTurn `json:"turns"`
			} `json:"thread"`
		}
		require.NoError(t, json.Unmarshal(r.call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true}), &res))
		return res.Thread.Turns
	}
	// The ends the store missed are written again once it is back.
	deadline := time.Now().Add(20 * time.Second)
	for _, c := range cs {
		for {
			inProgress := 0
			for _, tr := range read(c.threadID) {
				if tr.Status == "inProgress" {
					inProgress++
				}
			}
			if inProgress == 0 {
				break
			}
			if !time.Now().Before(deadline) {
				t.Errorf("thread %s keeps %d turns inProgress after the outage", c.threadID, inProgress)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	lost, seen := 0, 0
	for _, c := range cs {
		storedItems := map[string]bool{}
		storedStatus := map[string]string{}
		for _, tr := range read(c.threadID) {
			storedStatus[tr.ID] = tr.Status
			for _, raw := range tr.Items {
				var it struct {
					ID string `json:"id"`
				}
				require.NoError(t, json.Unmarshal(raw, &it))
				storedItems[it.ID] = true
			}
		}
		for turnID, status := range c.ended {
			if storedStatus[turnID] != status {
				t.Errorf("turn %s ended %s for the client, stored %s", turnID, status, storedStatus[turnID])
			}
		}
		for _, id := range c.items {
			seen++
			if !storedItems[id] {
				lost++
				t.Errorf("item %s was announced completed but is not stored", id)
			}
		}
	}
	told := 0
	for _, c := range cs {
		told += len(c.messages)
	}
	t.Logf("%d turns, %d items seen completed, %d lost, %d outage messages", turns.Load(), seen, lost, told)
	require.Positive(t, told, "no client noticed the outage")
	for _, c := range cs {
		for _, m := range c.messages {
			require.Equal(t, "storage unavailable", m, "what a client is told during a store outage")
		}
	}
}
