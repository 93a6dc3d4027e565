package turns_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/store/pgtest"
)

// outageClient runs turns on one thread until stopped, and records what it
// was told.
type outageClient struct {
	rpc      *apptest.Client
	threadID string
	nextID   int

	// What the client saw: items completed, turns ended, errors.
	items    []string          // item ids
	ended    map[string]string // turn id -> status
	messages []string          // turn/start error and turn error messages
}

func (c *outageClient) send(ctx context.Context, method string, params any) (int, error) {
	c.nextID++
	return c.nextID, c.rpc.WriteContext(ctx, map[string]any{"id": c.nextID, "method": method, "params": params})
}

// turn sends turn/start and reads until its turn/completed (or its error).
func (c *outageClient) turn(ctx context.Context, text string) error {
	id, err := c.send(ctx, "turn/start", map[string]any{"threadId": c.threadID, "input": []any{map[string]any{"type": "text", "text": text}}})
	if err != nil {
		return err
	}
	for {
		f, err := c.rpc.ReadContext(ctx)
		if err != nil {
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
	fake := apptest.StartFake(t, `{"steps":[]}`)
	d := apptest.Start(t, append([]string{"--database-url", proxy.URL(), "--migrate", "--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)

	cs := make([]*outageClient, clients)
	for i := range cs {
		r := d.RPC(t)
		cs[i] = &outageClient{rpc: r, threadID: apptest.StartThread(t, r, nil), nextID: 100, ended: map[string]string{}}
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

	r := d.RPC(t)
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
		require.NoError(t, json.Unmarshal(r.Call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true}), &res))
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
	// No turn inProgress is not yet every end as told. A turn whose end's
	// commit failed was told failed, and that end waits for the daemon's
	// next attempt (turnEnds, whose backoff reaches seconds) while the
	// store may already hold another: the original end, when the outage
	// cut the connection after the commit was sent and the database
	// applied it, or interrupted, when a failover scan found the turn
	// inProgress between two turns of its thread (no live lease). The
	// daemon's next attempt writes the end the client was told over
	// either, so the ends are compared once they agree, or at the
	// deadline.
	stored := func(c *outageClient) (map[string]string, map[string]bool) {
		status, items := map[string]string{}, map[string]bool{}
		for _, tr := range read(c.threadID) {
			status[tr.ID] = tr.Status
			for _, raw := range tr.Items {
				var it struct {
					ID string `json:"id"`
				}
				require.NoError(t, json.Unmarshal(raw, &it))
				items[it.ID] = true
			}
		}
		return status, items
	}
	agree := func(c *outageClient, storedStatus map[string]string) bool {
		for turnID, status := range c.ended {
			if storedStatus[turnID] != status {
				return false
			}
		}
		return true
	}
	lost, seen := 0, 0
	for _, c := range cs {
		storedStatus, storedItems := stored(c)
		for !agree(c, storedStatus) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			storedStatus, storedItems = stored(c)
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

// A Postgres outage longer than the thread's lease while a turn streams:
// the daemon loses the lease, so the turn ends interrupted (the end a
// failover stores), its client is told so rather than a failure, and once
// the store is back the turn is stored interrupted, without a restart;
// the thread's next turn completes.
func TestPostgresOutageLongerThanTheLease(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a lease")
	}
	const ttl = time.Second
	proxy := pgtest.NewProxy(t, pgtest.URL(t))
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"Slow"},"event_delay_ms":150,"text":"An answer streamed over several seconds, past the lease.","chunks":40},
		{"match":{"user_text":"Next"},"text":"Next answer."}]}`)
	d := apptest.Start(t, append([]string{"--database-url", proxy.URL(), "--migrate", "--data-dir", t.TempDir(),
		"-c", `lease_ttl="` + ttl.String() + `"`}, apptest.FakeArgs(fake, "responses")...)...)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, nil)
	turnID := apptest.StartTurn(t, r, threadID, "Slow")
	r.Until("item/agentMessage/delta")
	proxy.Down()
	time.Sleep(3 * ttl)
	proxy.Up()

	var ended apptest.TurnResult
	require.NoError(t, json.Unmarshal(r.Until("turn/completed").Params, &ended))
	require.Equal(t, turnID, ended.Turn.ID)
	require.Equal(t, "interrupted", ended.Turn.Status, "the turn ends as a failover ends it: %+v", ended.Turn.Error)
	for _, f := range r.Seen {
		require.NotEqual(t, "error", f.Method, "no failure reported: %s", f.Params)
	}
	require.Eventually(t, func() bool {
		f := r.CallRaw("thread/read", map[string]any{"threadId": threadID, "includeTurns": true})
		if f.Error != nil {
			return false
		}
		var res struct {
			Thread apptest.ReadThread `json:"thread"`
		}
		require.NoError(t, json.Unmarshal(f.Result, &res))
		return len(res.Thread.Turns) == 1 && res.Thread.Turns[0].Status == "interrupted"
	}, 20*time.Second, 50*time.Millisecond, "the turn is stored interrupted once the store is back")
	// Past a failover scan of this daemon's own: the end is not announced
	// twice.
	time.Sleep(ttl)
	r.Call("thread/loaded/list", map[string]any{})
	for _, f := range r.Seen {
		require.NotEqual(t, "turn/completed", f.Method, "announced again: %s", f.Params)
	}
	require.Equal(t, "completed", apptest.RunTurn(t, r, threadID, "Next").Turn.Status)
}
