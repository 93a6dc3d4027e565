package turns_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// writeLog records every batch written, as "items:<types> turn:<status>".
type writeLog struct {
	store.Store
	mu     sync.Mutex
	writes []string
}

func (l *writeLog) Write(ctx context.Context, b *store.Batch) error {
	var parts []string
	for _, it := range b.AppendItems {
		parts = append(parts, "item:"+it.Type)
	}
	for _, tp := range b.UpdateTurns {
		if tp.Status != "" {
			parts = append(parts, "end:"+tp.Status)
		}
	}
	l.mu.Lock()
	l.writes = append(l.writes, strings.Join(parts, " "))
	l.mu.Unlock()
	return l.Store.Write(ctx, b)
}

func (l *writeLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.writes)
}

// A plain turn commits twice: its user message before turn/start is
// answered, then its answer with its usage and its end. The answer's
// item/completed still comes first, once stored, then the usage, then
// turn/completed.
func TestPlainTurnCommitsTwice(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[{"text":"the answer","chunks":3}]}`)
	notes := &noteLog{ch: make(chan string, 1024)}
	log := &writeLog{Store: st}
	m, err := turns.New(turns.Config{
		Store: log, Sink: sinkFor(notes), Models: oneProvider{client},
		Tools: func(tc turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			return noArgTools(false, nil)
		},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	caller := turns.Caller{Conn: 1}
	th, after, err := m.StartThread(context.Background(), caller, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	before := len(log.snapshot())
	_, after, err = m.StartTurn(context.Background(), caller, api.TurnStartParams{ThreadID: th.Thread.ID,
		Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hello"}}})
	require.NoError(t, err)
	after()
	notes.wait(t, "turn/completed")
	require.Equal(t, []string{"item:userMessage", "item:agentMessage end:completed"}, log.snapshot()[before:])

	lines := notes.snapshot()
	done := slices.Index(lines, "item/completed")
	require.GreaterOrEqual(t, done, 0)
	answer := done + 1 + slices.Index(lines[done+1:], "item/completed") // the first is the user message
	usage := slices.Index(lines, "thread/tokenUsage/updated")
	end := slices.Index(lines, "turn/completed")
	require.True(t, answer > done && answer < usage && usage < end, "answer, usage, end in that order: %v", lines)
}
