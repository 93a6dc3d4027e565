package turns_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/turns"
)

// noteLog records every notification with its status flags.
type noteLog struct {
	mu    sync.Mutex
	lines []string
	ended []api.Turn // the turns of turn/completed, in order
	ch    chan string
}

func (n *noteLog) add(method string, params any) {
	line := method
	if method == "thread/status/changed" {
		st := params.(api.ThreadStatusChangedNotification).Status
		line = fmt.Sprintf("%s %s%v", method, st.Type, st.ActiveFlags)
	}
	n.mu.Lock()
	n.lines = append(n.lines, line)
	if c, ok := params.(api.TurnCompletedNotification); ok {
		n.ended = append(n.ended, c.Turn)
	}
	n.mu.Unlock()
	n.ch <- method
}

func (n *noteLog) Broadcast(method string, params any)              { n.add(method, params) }
func (n *noteLog) Send(_ []turns.ConnID, method string, params any) { n.add(method, params) }

func (n *noteLog) wait(t *testing.T, method string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-n.ch:
			if m == method {
				return
			}
		case <-timeout:
			t.Fatalf("no %s notification", method)
		}
	}
}

// lastEnded returns the turn of the last turn/completed.
func (n *noteLog) lastEnded(t *testing.T) api.Turn {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	require.NotEmpty(t, n.ended, "no turn/completed yet")
	return n.ended[len(n.ended)-1]
}

func (n *noteLog) snapshot() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.lines...)
}

// blockingRequester holds every request until its context ends.
type blockingRequester struct{ got chan string }

func (b blockingRequester) Request(ctx context.Context, req turns.ServerRequest) (json.RawMessage, api.RequestID, bool, error) {
	b.got <- req.Method
	<-ctx.Done()
	return nil, api.IntRequestID(7), true, ctx.Err()
}

// askTool asks the client through ToolContext.Client.
type askTool struct{ tc turns.ToolContext }

func (askTool) Kind() registry.PayloadKind                           { return registry.PayloadFunction }
func (askTool) IsMutating(context.Context, registry.Invocation) bool { return false }
func (a askTool) Handle(ctx context.Context, _ registry.Invocation) (registry.Output, error) {
	_, release, err := a.tc.Client.Request(ctx, turns.ClientRequest{
		Method: "item/commandExecution/requestApproval", Params: map[string]any{}, Flag: api.FlagWaitingOnApproval,
	})
	release()
	return registry.TextOutput("asked", err == nil), err
}

// An approval pending when the turn is interrupted: the flag is shown while
// it waits, and serverRequest/resolved follows turn/completed
// (docs/protocol.md §8.2).
func TestPendingRequestInterrupted(t *testing.T) {
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db"), Migrate: true})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	s, err := fakemodel.ParseScript([]byte(`{"steps":[{"tool_calls":[{"call_id":"c1","name":"ask","arguments":{}}]}]}`))
	require.NoError(t, err)
	fake, err := fakemodel.Start(s)
	require.NoError(t, err)
	t.Cleanup(fake.Close)
	client, err := model.New(model.ProviderConfig{BaseURL: fake.URL(), MaxRetries: -1}, nil)
	require.NoError(t, err)
	notes := &noteLog{ch: make(chan string, 1024)}
	req := blockingRequester{got: make(chan string, 1)}
	unloaded := make(chan string, 1)
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(notes).asking(req), Models: oneProvider{client},
		UnloadAfter:    20 * time.Millisecond,
		ThreadUnloaded: func(id string) { unloaded <- id },
		Tools: func(tc turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			require.NotNil(t, tc.Approvals)
			require.NotNil(t, tc.Interrupt)
			return noArgTools(false, map[string]registry.Handler{"ask": askTool{tc}})
		},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)

	caller := turns.Caller{Conn: 1}
	th, after, err := m.StartThread(context.Background(), caller, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	res, after, err := m.StartTurn(context.Background(), caller, api.TurnStartParams{ThreadID: th.Thread.ID, Input: api.List[api.UserInput]{}})
	require.NoError(t, err)
	after()
	require.Equal(t, "item/commandExecution/requestApproval", <-req.got)
	stop, err := m.InterruptTurn(context.Background(), api.TurnInterruptParams{ThreadID: th.Thread.ID, TurnID: res.Turn.ID})
	require.NoError(t, err)
	stop()
	notes.wait(t, "serverRequest/resolved")
	lines := notes.snapshot()
	require.Contains(t, lines, "thread/status/changed active[waitingOnApproval]")
	require.Equal(t, []string{"thread/status/changed idle[]", "turn/completed", "serverRequest/resolved"}, lines[len(lines)-3:])

	// Unloading the thread tells the tools (exec sessions are reaped there).
	_, err = m.Unsubscribe(caller, api.ThreadUnsubscribeParams{ThreadID: th.Thread.ID})
	require.NoError(t, err)
	select {
	case id := <-unloaded:
		require.Equal(t, th.Thread.ID, id)
	case <-time.After(10 * time.Second):
		t.Fatal("ThreadUnloaded was not called")
	}
}
