package turns_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/turns"
)

// The tools of a turn learn the thread's originator (the principal of a
// thread made through the HTTP API), whoever starts the turn: tools keep
// per-principal state by it.
func TestToolContextCarriesTheOriginator(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[{"text":"one"},{"text":"two"}]}`)
	notes := &noteLog{ch: make(chan string, 1024)}
	var mu sync.Mutex
	var seen []string
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(notes), Models: oneProvider{client},
		Tools: func(tc turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			mu.Lock()
			seen = append(seen, tc.Originator)
			mu.Unlock()
			return noArgTools(false, map[string]registry.Handler{"noop": noopTool{}})
		},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	th, after, err := m.StartThread(context.Background(), turns.Caller{Conn: 1, ClientName: "appserver-http/p1"}, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	for _, c := range []turns.Caller{{Conn: 1, ClientName: "appserver-http/p1"}, {Conn: 2, ClientName: "codex-tui"}} {
		_, after, err := m.StartTurn(context.Background(), c, api.TurnStartParams{
			ThreadID: th.Thread.ID, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hi"}},
		})
		require.NoError(t, err)
		after()
		notes.wait(t, "turn/completed")
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"appserver-http/p1", "appserver-http/p1"}, seen)
}
