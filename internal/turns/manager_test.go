package turns_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/memory"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/turns"
)

// The package runs end-to-end tests of the thread methods too
// (*_e2e_test.go), with the harness's TestMain.
func TestMain(m *testing.M) { apptest.Main(m) }

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
		Store: st, Sink: sinkFor(rec), Ephemeral: memory.New(memory.Config{}), Models: oneProvider{client}, UnloadAfter: unloadAfter,
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	return m, st, rec
}

// published is a notifier that keeps the turn/completed notifications.
type published struct {
	mu   sync.Mutex
	ends []api.TurnCompletedNotification
}

func (p *published) Broadcast(string, any) {}
func (p *published) Send(_ []turns.ConnID, method string, params any) {
	if n, ok := params.(api.TurnCompletedNotification); ok && method == "turn/completed" {
		p.mu.Lock()
		p.ends = append(p.ends, n)
		p.mu.Unlock()
	}
}

// The turns a dead daemon left inProgress are stored interrupted, and
// their turn/completed goes to the threads' logs (published whoever
// listens), so that a client resuming after the last event it got learns
// how the turn ended.
func TestRecoverSettlesTurnsOfADeadDaemon(t *testing.T) {
	st, _, _ := storeAndModel(t, `{"steps":[]}`)
	var pub published
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(&pub), Ephemeral: memory.New(memory.Config{}), Models: oneProvider{nil},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
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
	pub.mu.Lock()
	defer pub.mu.Unlock()
	require.Len(t, pub.ends, 1)
	end := pub.ends[0]
	require.Equal(t, th.ID, end.ThreadID)
	require.Equal(t, "t1", end.Turn.ID)
	require.Equal(t, api.TurnInterrupted, end.Turn.Status)
	require.NotNil(t, end.Turn.CompletedAt)
	require.EqualValues(t, now.Unix(), *end.Turn.StartedAt)
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

// A turn's tool set is built without the thread's lock: a slow
// ToolsFactory (MCP tools, skills) holds up no read of the thread, which
// already reads as running.
func TestToolSetIsBuiltOutsideTheThreadLock(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[{"text":"one"}]}`)
	building, release := make(chan struct{}), make(chan struct{})
	var builds sync.WaitGroup
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(newRecorder()), Models: oneProvider{client},
		Tools: func(turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			builds.Add(1)
			defer builds.Done()
			close(building)
			<-release
			return noArgTools(false, nil)
		},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	ctx := context.Background()
	th, after, err := m.StartThread(ctx, turns.Caller{Conn: 1}, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	started := make(chan error, 1)
	go func() {
		_, after, err := m.StartTurn(ctx, turns.Caller{Conn: 1}, api.TurnStartParams{ThreadID: th.Thread.ID, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hi"}}})
		if after != nil {
			after()
		}
		started <- err
	}()
	<-building
	read := make(chan api.ThreadStatus, 1)
	go func() {
		res, err := m.ReadThread(ctx, api.ThreadReadParams{ThreadID: th.Thread.ID})
		if err == nil {
			read <- res.Thread.Status
		}
	}()
	select {
	case st := <-read:
		require.Equal(t, api.ThreadActive, st.Type, "the turn is reserved while its tools are built")
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("thread/read waited for the tool set to be built")
	}
	close(release)
	require.NoError(t, <-started)
	builds.Wait()
}

// The sink owns who hears a thread, and the thread asks it: a thread
// somebody hears stays loaded however long it is idle, and one whose last
// client went away without unsubscribing (the hub dropped it) unloads.
func TestThreadUnloadsWhenTheSinkHasNobodyLeft(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[]}`)
	rec := newRecorder()
	sink := sinkFor(rec)
	m, err := turns.New(turns.Config{
		Store: st, Sink: sink, Models: oneProvider{client}, UnloadAfter: 10 * time.Millisecond,
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	res, after, err := m.StartThread(context.Background(), turns.Caller{Conn: 1}, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	time.Sleep(200 * time.Millisecond) // twenty periods
	require.Equal(t, []string{res.Thread.ID}, m.Loaded(), "heard: stays loaded")

	require.True(t, sink.Unsubscribe(res.Thread.ID, 1)) // the client's connection closed
	rec.wait(t, "thread/closed")
	require.Empty(t, m.Loaded())
}

// A principal's own defaults apply to the threads it starts, over the
// daemon-wide ones for the fields they set; other principals and the
// operator keep the daemon-wide ones, which a later update still reaches.
func TestPrincipalDefaults(t *testing.T) {
	m, _, _ := setup(t, `{"steps":[]}`, 0)
	m.UpdateDefaults("", turns.LiveDefaults{Model: "daemon", ModelProvider: "fake", SandboxMode: "workspace-write"})
	m.UpdateDefaults("alice", turns.LiveDefaults{Model: "alices", SandboxMode: "read-only"})
	rules, err := principal.New(principal.Config{Roots: map[string][]string{"alice": nil, "bob": nil}, WorkspacesDir: t.TempDir()})
	require.NoError(t, err)
	start := func(name string) api.ThreadStartResult {
		t.Helper()
		who, _ := rules.Get(name)
		res, after, err := m.StartThread(context.Background(), turns.Caller{Conn: 1, Principal: who}, api.ThreadStartParams{})
		require.NoError(t, err)
		after()
		return res
	}
	a := start("alice")
	require.Equal(t, "alices", a.Model)
	require.Equal(t, api.SandboxPolicyReadOnly, a.Sandbox.Type)
	require.Equal(t, "fake", a.ModelProvider, "what alice did not set follows the daemon")
	for _, p := range []string{"bob", ""} {
		r := start(p)
		require.Equal(t, "daemon", r.Model, p)
		require.Equal(t, api.SandboxPolicyWorkspaceWrite, r.Sandbox.Type, p)
	}
	m.UpdateDefaults("", turns.LiveDefaults{Model: "daemon2", ModelProvider: "fake", ApprovalPolicy: "never"})
	a = start("alice")
	require.Equal(t, "alices", a.Model)
	require.Equal(t, api.ApprovalPolicy("never"), a.ApprovalPolicy.Policy)
	require.Equal(t, turns.LiveDefaults{Model: "alices", SandboxMode: "read-only"}, m.PrincipalDefaults("alice"))
	require.Equal(t, "daemon2", start("bob").Model)
}
