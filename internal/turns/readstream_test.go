package turns_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// storeBigThread stores a thread of turns turns with perTurn agent
// messages each, of size bytes of text, and returns its id.
func storeBigThread(t *testing.T, st store.Store, turns, perTurn, size int) string {
	t.Helper()
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	th := &store.Thread{ID: "0194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a", Cwd: "/", ModelProvider: "fake", Source: "vscode", CreatedAt: now, UpdatedAt: now, RecencyAt: now}
	require.NoError(t, st.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{th}}))
	for i := range turns {
		tr := &store.Turn{ThreadID: th.ID, ID: fmt.Sprintf("turn-%d", i), Status: store.TurnCompleted, StartedAt: &now, CompletedAt: &now}
		if i%3 == 2 {
			tr.Status = store.TurnFailed
			tr.Error = json.RawMessage(`{"message":"boom <&> \u2028","codexErrorInfo":null,"additionalDetails":null,"misalignment":null}`)
		}
		b := &store.Batch{CreateTurns: []*store.Turn{tr}}
		for j := range perTurn {
			id := fmt.Sprintf("item-%d-%d", i, j)
			text := strings.Repeat("x<>&é", size/6+1)[:size]
			payload, err := json.Marshal(map[string]any{"type": "agentMessage", "id": id, "text": text, "startedAtMs": 1, "completedAtMs": 2})
			require.NoError(t, err)
			b.AppendItems = append(b.AppendItems, &store.Item{ThreadID: th.ID, TurnID: tr.ID, ItemID: id, Type: "agentMessage", Payload: payload, CreatedAt: now})
		}
		require.NoError(t, st.Write(ctx, b))
	}
	return th.ID
}

// A streamed thread/read writes exactly the bytes of the result built
// whole, for a thread whose turns span several pages of items, also when
// an item of an earlier turn was stored after later turns' items, and
// leaves out items stored after it was made.
func TestStreamThreadMatchesReadThread(t *testing.T) {
	m, st, _ := setup(t, `{"steps":[]}`, 0)
	ctx := context.Background()
	id := storeBigThread(t, st, 7, 230, 300)
	yes := true
	p := api.ThreadReadParams{ThreadID: id, IncludeTurns: &yes}
	whole, err := m.ReadThread(ctx, p)
	require.NoError(t, err)
	want, err := json.Marshal(whole)
	require.NoError(t, err)

	s, err := m.StreamThread(ctx, p)
	require.NoError(t, err)
	// An item stored after the read is not part of it.
	late, _ := json.Marshal(map[string]any{"type": "agentMessage", "id": "late", "text": "late"})
	require.NoError(t, st.Write(ctx, &store.Batch{AppendItems: []*store.Item{{ThreadID: id, TurnID: "turn-6", ItemID: "late", Type: "agentMessage", Payload: late, CreatedAt: time.Now()}}}))

	var got bytes.Buffer
	w := &countingWriter{w: &got}
	require.NoError(t, s.WriteJSON(w))
	require.Equal(t, string(want), got.String())
	require.Greater(t, w.writes, 10, "written in pieces, not whole")
	require.LessOrEqual(t, w.largest, 3*64<<10, "no piece holds much more than a chunk")

	// An item stored for an earlier turn after later turns' items: the
	// turns are no longer one walk through the items.
	out, _ := json.Marshal(map[string]any{"type": "agentMessage", "id": "out-of-order", "text": "<late & early>"})
	require.NoError(t, st.Write(ctx, &store.Batch{AppendItems: []*store.Item{{ThreadID: id, TurnID: "turn-2", ItemID: "out-of-order", Type: "agentMessage", Payload: out, CreatedAt: time.Now()}}}))
	whole, err = m.ReadThread(ctx, p)
	require.NoError(t, err)
	want, err = json.Marshal(whole)
	require.NoError(t, err)
	require.Contains(t, string(want), "out-of-order")
	s, err = m.StreamThread(ctx, p)
	require.NoError(t, err)
	got.Reset()
	require.NoError(t, s.WriteJSON(&got))
	require.Equal(t, string(want), got.String())

	// A thread without turns.
	now := time.Now()
	empty := &store.Thread{ID: "0194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6b", Cwd: "/", ModelProvider: "fake", Source: "vscode", CreatedAt: now, UpdatedAt: now, RecencyAt: now}
	require.NoError(t, st.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{empty}}))
	p.ThreadID = empty.ID
	whole, err = m.ReadThread(ctx, p)
	require.NoError(t, err)
	want, _ = json.Marshal(whole)
	s, err = m.StreamThread(ctx, p)
	require.NoError(t, err)
	got.Reset()
	require.NoError(t, s.WriteJSON(&got))
	require.Equal(t, string(want), got.String())
}

type countingWriter struct {
	w       *bytes.Buffer
	writes  int
	largest int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	c.largest = max(c.largest, len(p))
	return c.w.Write(p)
}

// A streamed thread/resume or thread/fork writes exactly the bytes of the
// result built whole (ResumeThread, ForkThread), for a thread whose turns
// span several pages of items, some failed with HTML characters in their
// error and text, and whose last turn is still running; with excludeTurns
// too.
func TestStreamResumeAndForkMatchTheWholeResults(t *testing.T) {
	st, fake, _ := storeAndModel(t, `{"steps":[{"delay_ms":600000,"text":"late"}]}`)
	// The turn must still be running when the test ends, however slow the
	// machine: no request or idle timeout of the client may end it first.
	client, err := model.New(model.ProviderConfig{BaseURL: fake.URL(), MaxRetries: -1, RequestTimeout: time.Hour, StreamIdleTimeout: time.Hour}, nil)
	require.NoError(t, err)
	// One instant for every record, so that two forks differ only by id.
	at := time.Unix(1_790_000_000, 0)
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(discard{}), Models: oneProvider{client}, Now: func() time.Time { return at },
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	ctx := context.Background()
	id := storeBigThread(t, st, 7, 230, 300)
	caller := turns.Caller{Conn: 1}

	started, after, err := m.StartTurn(ctx, caller, api.TurnStartParams{ThreadID: id, Model: ptr("fake"), Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "<b>still</b> running & \u2028"}}})
	require.NoError(t, err)
	after()
	waitRequests(t, fake, 1) // the turn waits for the model, its input stored
	defer func() {
		after, err := m.InterruptTurn(ctx, api.TurnInterruptParams{ThreadID: id, TurnID: started.Turn.ID})
		require.NoError(t, err)
		after()
	}()

	streamed := func(s *transcript.ThreadStream) string {
		t.Helper()
		var got bytes.Buffer
		w := &countingWriter{w: &got}
		require.NoError(t, s.WriteJSON(w))
		require.LessOrEqual(t, w.largest, 3*64<<10, "no piece holds much more than a chunk")
		return got.String()
	}
	for _, exclude := range []*bool{nil, ptr(false), ptr(true)} {
		p := api.ThreadResumeParams{ThreadID: id, ExcludeTurns: exclude}
		whole, _, err := m.ResumeThread(ctx, caller, p)
		require.NoError(t, err)
		want, err := json.Marshal(whole)
		require.NoError(t, err)
		s, _, err := m.StreamResume(ctx, caller, p)
		require.NoError(t, err)
		got := streamed(s)
		require.Equal(t, string(want), got)
		if exclude == nil || !*exclude {
			require.Len(t, whole.Thread.Turns, 8)
			require.Equal(t, api.TurnInProgress, whole.Thread.Turns[7].Status)
			require.Contains(t, got, `"status":"failed"`)
			require.Contains(t, got, `\u003cb\u003estill`)
		}

		fp := api.ThreadForkParams{ThreadID: id, ExcludeTurns: exclude}
		wholeFork, _, err := m.ForkThread(ctx, caller, fp)
		require.NoError(t, err)
		want, err = json.Marshal(wholeFork)
		require.NoError(t, err)
		sf, _, err := m.StreamFork(ctx, caller, fp)
		require.NoError(t, err)
		got = streamed(sf)
		var fork struct {
			Thread struct{ ID string } `json:"thread"`
		}
		require.NoError(t, json.Unmarshal([]byte(got), &fork))
		require.NotEqual(t, wholeFork.Thread.ID, fork.Thread.ID)
		require.Equal(t, string(want), strings.ReplaceAll(got, fork.Thread.ID, wholeFork.Thread.ID))
		if exclude == nil {
			require.Len(t, wholeFork.Thread.Turns, 8)
		}
	}
}
