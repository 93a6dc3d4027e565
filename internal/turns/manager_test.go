package turns_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/turns"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a Notifier that hands every notification to the test.
type recorder struct {
	mu  sync.Mutex
	out chan string
}

func newRecorder() *recorder { return &recorder{out: make(chan string, 1024)} }

func (r *recorder) Broadcast(method string, _ any)              { r.out <- method }
func (r *recorder) Send(_ []turns.ConnID, method string, _ any) { r.out <- method }

// wait returns once method has been delivered.
func (r *recorder) wait(t *testing.T, method string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-r.out:
			if m == method {
				return
			}
		case <-timeout:
			t.Fatalf("no %s notification", method)
		}
	}
}

type oneProvider struct{ c model.Client }

func (p oneProvider) Client(string) (model.Client, error) { return p.c, nil }

// storeAndModel opens a fresh embedded store and starts a fake model
// serving script, both closed at cleanup.
func storeAndModel(t testing.TB, script string) (*sqlite.Store, *fakemodel.Server, model.Client) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db"), Migrate: true})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	s, err := fakemodel.ParseScript([]byte(script))
	require.NoError(t, err)
	fake, err := fakemodel.Start(s)
	require.NoError(t, err)
	t.Cleanup(fake.Close)
	client, err := model.New(model.ProviderConfig{BaseURL: fake.URL(), MaxRetries: -1}, nil)
	require.NoError(t, err)
	return st, fake, client
}

// noArgTools builds a registry with each handler as a function tool
// without parameters, named by its key, run in parallel with other calls
// of a round when parallel is set.
func noArgTools(parallel bool, handlers map[string]registry.Handler) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
	b := registry.NewBuilder(registry.Config{})
	for name, h := range handlers {
		spec := registry.FunctionSpec{Name: name, Description: name, Parameters: registry.Object(map[string]*registry.Schema{}, nil, nil)}
		if err := b.Register(spec, h, parallel); err != nil {
			return nil, nil, err
		}
	}
	specs, reg := b.Build()
	return specs, reg, nil
}

func setup(t *testing.T, script string, unloadAfter time.Duration) (*turns.Manager, store.Store, *recorder) {
	t.Helper()
	st, _, client := storeAndModel(t, script)
	rec := newRecorder()
	m, err := turns.New(turns.Config{
		Store: st, Notifier: rec, Models: oneProvider{client}, UnloadAfter: unloadAfter,
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	return m, st, rec
}

func TestRecoverSettlesTurnsOfADeadDaemon(t *testing.T) {
	m, st, _ := setup(t, `{"steps":[]}`, 0)
	now := time.Now()
	th := &store.Thread{ID: "0194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a", Cwd: "/", ModelProvider: "fake", Source: "vscode", CreatedAt: now, UpdatedAt: now, RecencyAt: now}
	tr := &store.Turn{ThreadID: th.ID, ID: "t1", Status: store.TurnInProgress, StartedAt: &now}
	require.NoError(t, st.Write(context.Background(), &store.Batch{CreateThreads: []*store.Thread{th}, CreateTurns: []*store.Turn{tr}}))
	require.NoError(t, m.Recover(context.Background()))
	got, err := st.GetTurn(context.Background(), th.ID, "t1")
	require.NoError(t, err)
	require.Equal(t, store.TurnInterrupted, got.Status)
	require.NotNil(t, got.CompletedAt)
	left, err := st.ListInProgressTurns(context.Background())
	require.NoError(t, err)
	require.Empty(t, left)
}

func TestIdleUnsubscribedThreadUnloads(t *testing.T) {
	m, _, rec := setup(t, `{"steps":[]}`, 20*time.Millisecond)
	res, after, err := m.StartThread(context.Background(), turns.Caller{Conn: 1}, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	rec.wait(t, "thread/started")
	require.Equal(t, []string{res.Thread.ID}, m.Loaded())

	un, err := m.Unsubscribe(turns.Caller{Conn: 1}, api.ThreadUnsubscribeParams{ThreadID: res.Thread.ID})
	require.NoError(t, err)
	require.Equal(t, api.Unsubscribed, un.Status)
	rec.wait(t, "thread/closed")
	require.Empty(t, m.Loaded())

	// It loads again from the store on demand.
	_, after, err = m.ResumeThread(context.Background(), turns.Caller{Conn: 2}, api.ThreadResumeParams{ThreadID: res.Thread.ID})
	require.NoError(t, err)
	after()
	require.Equal(t, []string{res.Thread.ID}, m.Loaded())
}

func TestStopInterruptsRunningTurns(t *testing.T) {
	m, st, rec := setup(t, `{"steps":[{"text":"never finishes","fail":{"kind":"stall","after_events":2}}]}`, 0)
	res, after, err := m.StartThread(context.Background(), turns.Caller{Conn: 1}, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	turn, after, err := m.StartTurn(context.Background(), turns.Caller{Conn: 1}, api.TurnStartParams{
		ThreadID: res.Thread.ID, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hi"}},
	})
	require.NoError(t, err)
	after()
	rec.wait(t, "turn/started")
	m.Stop()
	rec.wait(t, "turn/completed")
	got, err := st.GetTurn(context.Background(), res.Thread.ID, turn.Turn.ID)
	require.NoError(t, err)
	require.Equal(t, store.TurnInterrupted, got.Status)
	var meta struct {
		History []json.RawMessage `json:"history"`
	}
	require.NoError(t, json.Unmarshal(got.Meta, &meta))
	require.NotEmpty(t, meta.History, "the user message is in the persisted history")

	_, _, err = m.StartThread(context.Background(), turns.Caller{Conn: 1}, api.ThreadStartParams{})
	require.Error(t, err, "a stopped manager takes no new threads")
}
