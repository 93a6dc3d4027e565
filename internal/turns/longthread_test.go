package turns_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// turnEnds is a Notifier that signals every turn/completed.
type turnEnds chan struct{}

func (e turnEnds) Broadcast(string, any) {}
func (e turnEnds) Send(_ []turns.ConnID, method string, _ any) {
	if method == "turn/completed" {
		e <- struct{}{}
	}
}

// BenchmarkTurnOnLongThread runs plain turns on a thread of 10,000 stored
// items (5,000 exchanges of 200-byte messages, no compaction) in process,
// so that a CPU profile shows what a turn of a long thread costs apart
// from the model request's bytes: go test -run '^$' -bench
// TurnOnLongThread -cpuprofile cpu.out ./internal/turns/.
func BenchmarkTurnOnLongThread(b *testing.B) {
	ctx := context.Background()
	st, fake, client := storeAndModel(b, `{"steps":[]}`)
	ends := make(turnEnds, 16)
	defaults := turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: b.TempDir()}
	m, err := turns.New(turns.Config{Store: st, Sink: sinkFor(ends), Models: oneProvider{client}, Defaults: defaults})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Stop()
	id := startThread(b, m)
	text := strings.Repeat("lorem ipsum dolor sit amet, ", 8)[:200]
	meta, _ := json.Marshal(map[string]any{"history": []model.InputItem{model.UserMessage(text), model.AssistantMessage(text)}})
	now := time.Now()
	for done := 0; done < 5000; done += 500 {
		batch := &store.Batch{}
		for range 500 {
			turnID := uuid.Must(uuid.NewV7()).String()
			batch.CreateTurns = append(batch.CreateTurns, &store.Turn{ThreadID: id, ID: turnID, Status: store.TurnCompleted, StartedAt: &now, CompletedAt: &now, Meta: meta})
			for _, it := range []api.ThreadItem{
				{Body: &api.UserMessageItem{ID: uuid.Must(uuid.NewV7()).String(), Content: api.List[api.UserInput]{{Type: api.UserInputText, Text: text}}}},
				{Body: &api.AgentMessageItem{ID: "msg_" + uuid.Must(uuid.NewV7()).String(), Text: text}},
			} {
				payload, _ := json.Marshal(it)
				batch.AppendItems = append(batch.AppendItems, &store.Item{ThreadID: id, TurnID: turnID, ItemID: it.Body.ItemID(), Type: string(it.Body.ItemType()), Payload: payload, CreatedAt: now})
			}
		}
		if err := st.Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	turn := func() {
		_, after, err := m.StartTurn(ctx, turns.Caller{Conn: 1}, api.TurnStartParams{
			ThreadID: id, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hi"}},
		})
		if err != nil {
			b.Fatal(err)
		}
		after()
		<-ends
		fake.Reset()
	}
	turn() // reads the history
	b.ResetTimer()
	for range b.N {
		turn()
	}
}
