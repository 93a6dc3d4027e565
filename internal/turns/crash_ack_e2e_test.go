package turns_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/store/pgtest"
)

// An acknowledged turn survives a kill -9 that lands right after turn/start
// answers: in a loop, several clients send turn/start at once and the
// daemon is killed as soon as the first answer arrives; after the last
// restart every turn some client got an answer for is stored, settled
// (interrupted, or completed if it had time), with its user message.
func TestKillNineRightAfterTurnStartAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts the daemon dozens of times")
	}
	apptest.BuildBinary()
	t.Run("embedded", func(t *testing.T) {
		fake := apptest.StartFake(t, `{"steps":[]}`)
		killRightAfterAcks(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...), 60)
	})
	t.Run("postgres", func(t *testing.T) {
		// A fixed node id: each restarted daemon settles the turns its
		// killed predecessor left at once, rather than when their leases
		// expire.
		args := []string{"--database-url", pgtest.URL(t), "--migrate", "--data-dir", t.TempDir(), "-c", `node_id="ack-test"`}
		fake := apptest.StartFake(t, `{"steps":[]}`)
		killRightAfterAcks(t, append(args, apptest.FakeArgs(fake, "responses")...), 30)
	})
}

// killRightAfterAcks runs the kill loop on one store: iterations kills (or
// as many as fit in two minutes), then checks every acknowledged turn.
func killRightAfterAcks(t *testing.T, args []string, iterations int) {
	const (
		clients = 4
		budget  = 2 * time.Minute
	)
	// The threads outlive every daemon; each iteration's turn/start loads
	// them again.
	d := apptest.StartProc(t, args...)
	r := d.RPC(t)
	threads := make([]string, clients)
	for i := range threads {
		threads[i] = apptest.StartThread(t, r, nil)
	}
	_ = r.WS.CloseNow()
	d.Terminate(t)

	type ackedTurn struct{ threadID, text string }
	acked := map[string]ackedTurn{} // by turn id
	var ackedMu sync.Mutex
	start := time.Now()
	n := 0
	for ; n < iterations && time.Since(start) < budget; n++ {
		d := apptest.StartProc(t, args...)
		conns := make([]*apptest.Client, clients)
		for i := range conns {
			conns[i] = d.RPC(t)
		}
		first := make(chan struct{})
		var once sync.Once
		var wg sync.WaitGroup
		for i, c := range conns {
			text := fmt.Sprintf("iteration %d client %d", n, i)
			wg.Go(func() {
				id, ok := ackTurnStart(c.WS, threads[i], text)
				if !ok {
					return
				}
				once.Do(func() { close(first) })
				ackedMu.Lock()
				acked[id] = ackedTurn{threads[i], text}
				ackedMu.Unlock()
			})
		}
		select {
		case <-first:
		case <-time.After(30 * time.Second):
			t.Fatalf("no turn/start answered\nstderr:\n%s", d.Stderr)
		}
		d.Kill9(t)
		wg.Wait()
		for _, c := range conns {
			_ = c.WS.CloseNow()
		}
	}

	d = apptest.StartProc(t, args...)
	r = d.RPC(t)
	lost := 0
	for _, threadID := range threads {
		var read struct {
			Thread apptest.ReadThread `json:"thread"`
		}
		require.NoError(t, json.Unmarshal(r.Call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true}), &read))
		stored := map[string]apptest.ReadTurn{}
		for _, tr := range read.Thread.Turns {
			stored[tr.ID] = tr
		}
		for id, a := range acked {
			if a.threadID != threadID {
				continue
			}
			text := a.text
			tr, ok := stored[id]
			if !ok {
				lost++
				t.Errorf("acknowledged turn %s (%q) is not stored", id, text)
				continue
			}
			require.Contains(t, []string{"interrupted", "completed"}, tr.Status, "turn %s", id)
			require.True(t, hasUserMessage(tr.Items, text), "turn %s is stored without its user message %q: %s", id, text, tr.Items)
		}
	}
	t.Logf("%d kills, %d acknowledged turns, %d lost", n, len(acked), lost)
	_ = r.WS.CloseNow()
	d.Terminate(t)
}

// ackTurnStart sends turn/start and returns the turn id once the answer
// arrives; ok is false when the daemon died first.
func ackTurnStart(ws *websocket.Conn, threadID, text string) (id string, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := json.Marshal(map[string]any{"id": 1, "method": "turn/start", "params": map[string]any{
		"threadId": threadID, "input": []any{map[string]any{"type": "text", "text": text}},
	}})
	if ws.Write(ctx, websocket.MessageText, req) != nil {
		return "", false
	}
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return "", false
		}
		var f apptest.Frame
		if json.Unmarshal(data, &f) != nil || string(f.ID) != "1" || f.Error != nil {
			continue
		}
		var res apptest.TurnResult
		if json.Unmarshal(f.Result, &res) != nil || res.Turn.ID == "" {
			return "", false
		}
		return res.Turn.ID, true
	}
}

// hasUserMessage reports whether items hold a userMessage with text.
func hasUserMessage(items []json.RawMessage, text string) bool {
	for _, raw := range items {
		var it struct {
			Type    string `json:"type"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(raw, &it) == nil && it.Type == "userMessage" && len(it.Content) == 1 && it.Content[0].Text == text {
			return true
		}
	}
	return false
}
