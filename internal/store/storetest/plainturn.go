package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/appserver/appserver/internal/store"
)

// BenchPlainTurns runs b.N plain turns' writes (PlainTurnWriter) on s and
// reports the process's CPU a turn (cpu-us/op).
func BenchPlainTurns(b *testing.B, s store.Store, events int) {
	turn := PlainTurnWriter(b, s, events)
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		turn(i)
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(syscall.TimevalToNsec(ru1.Utime) - syscall.TimevalToNsec(ru0.Utime) + syscall.TimevalToNsec(ru1.Stime) - syscall.TimevalToNsec(ru0.Stime))
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
}

// PlainTurnWriter creates a thread in s and returns what writes plain turn
// i of it, as the daemon does: two commits, the turn with its user message,
// then the answer with the turn's end and the thread's usage, with events
// of the event log's (about 450 bytes of frame each) split over the two.
func PlainTurnWriter(b testing.TB, s store.Store, events int) func(i int) {
	ctx := context.Background()
	const threadID = "0190a5b2-0000-7000-8000-0000000000b2"
	if err := s.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{{ID: threadID, Cwd: "/work", ModelProvider: "openai", Source: "vscode"}}}); err != nil {
		b.Fatal(err)
	}
	threadMeta := json.RawMessage(`{"cliVersion":"0.1.0","tokenTotal":{"totalTokens":1234,"inputTokens":1000,"cachedInputTokens":500,"outputTokens":234,"reasoningOutputTokens":0},"lastTurnId":"turn-1"}`)
	user := json.RawMessage(`{"type":"userMessage","id":"u","content":[{"type":"text","text":"hello","text_elements":[]}]}`)
	answer := json.RawMessage(`{"type":"agentMessage","id":"m","text":"(fake model: script exhausted)","phase":null}`)
	frame := []byte(`{"method":"item/completed","params":{"item":{"type":"agentMessage","moderation":null,"id":"msg_1","text":"(fake model: script exhausted)","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":1796212713844,"completedAtMs":1796212713846},"threadId":"01a2369e-e950-7bd8-90e8-c78645c7b0e9","turnId":"01a2369e-e95a-7c9f-8374-d1fe747a8cf8"},"emittedAtMs":1796212713846}`)
	var seq int64
	evs := func(n int) []*store.Event {
		out := make([]*store.Event, n)
		for i := range out {
			seq++
			out[i] = &store.Event{ThreadID: threadID, Seq: seq, Method: "item/completed", Data: frame, CreatedAt: time.Now()}
		}
		return out
	}
	return func(i int) {
		turnID := fmt.Sprintf("turn-%d", i)
		err := s.Write(ctx, &store.Batch{
			CreateTurns:  []*store.Turn{{ThreadID: threadID, ID: turnID, Status: store.TurnInProgress}},
			AppendItems:  []*store.Item{{ThreadID: threadID, TurnID: turnID, ItemID: "u" + turnID, Type: "userMessage", Payload: user}},
			AppendEvents: evs(events * 3 / 7),
		})
		if err != nil {
			b.Fatal(err)
		}
		err = s.Write(ctx, &store.Batch{
			AppendItems:   []*store.Item{{ThreadID: threadID, TurnID: turnID, ItemID: "m" + turnID, Type: "agentMessage", Payload: answer}},
			UpdateTurns:   []store.TurnPatch{{ThreadID: threadID, ID: turnID, Status: store.TurnCompleted}},
			UpdateThreads: []store.ThreadPatch{{ID: threadID, Meta: threadMeta}},
			AppendEvents:  evs(events - events*3/7),
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
