package turns_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/turns"
	"github.com/appserver/appserver/internal/turns/subagents"
)

// A child whose turn was running when the daemon died reads as
// interrupted after Recover, not as the end of its turn before.
func TestChildRunningAtACrashReadsInterrupted(t *testing.T) {
	m, st, _ := setup(t, `{"steps":[]}`, 0)
	ctx := context.Background()
	res, after, err := m.StartThread(ctx, turns.Caller{Conn: 1}, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	parent := res.Thread.ID

	now := time.Now()
	child := "0194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a"
	meta := `{"approvalPolicy":"never","sandbox":{"type":"readOnly"},"cliVersion":"","subAgent":{"parentThreadId":"` + parent +
		`","depth":1,"lastStatus":"completed","lastAnswer":"old answer","endedTurnId":"t1"}}`
	th := &store.Thread{ID: child, Cwd: "/", ModelProvider: "fake", Source: "subAgent", CreatedAt: now, UpdatedAt: now, RecencyAt: now, Meta: []byte(meta)}
	done := now.Add(time.Second)
	t1 := &store.Turn{ThreadID: child, ID: "t1", Status: store.TurnCompleted, StartedAt: &now, CompletedAt: &done}
	t2 := &store.Turn{ThreadID: child, ID: "t2", Status: store.TurnInProgress, StartedAt: &done}
	require.NoError(t, st.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{th}, CreateTurns: []*store.Turn{t1, t2}}))
	require.NoError(t, m.Recover(ctx))

	kids := turns.ChildrenOf(m, parent)
	state, err := kids.State(ctx, child)
	require.NoError(t, err)
	require.Equal(t, subagents.State{Status: api.TurnInterrupted}, state)

	read, err := m.ReadThread(ctx, api.ThreadReadParams{ThreadID: child})
	require.NoError(t, err)
	require.Equal(t, parent, *read.Thread.ParentThreadID)

	_, err = turns.ChildrenOf(m, child).State(ctx, parent)
	require.ErrorContains(t, err, "not found", "a thread reaches only its own children")
}

// BenchmarkSpawnWait measures spawning a child whose model answers at once
// and waiting for its answer: thread creation and storage, the child's
// turn (one loopback model request) and the wait. It reports p50 and p99.
func BenchmarkSpawnWait(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(b.TempDir(), "a.db"), Migrate: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	fake, err := fakemodel.Start(fakemodel.Script{})
	if err != nil {
		b.Fatal(err)
	}
	defer fake.Close()
	client, err := model.New(model.ProviderConfig{BaseURL: fake.URL(), MaxRetries: -1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(discard{}), Models: oneProvider{client},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: b.TempDir()},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Stop()
	res, after, err := m.StartThread(ctx, turns.Caller{Conn: 1}, api.ThreadStartParams{})
	if err != nil {
		b.Fatal(err)
	}
	after()
	kids := turns.ChildrenOf(m, res.Thread.ID)
	input := []api.UserInput{{Type: api.UserInputText, Text: "answer at once"}}
	durations := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		child, err := kids.Spawn(ctx, subagents.SpawnParams{Input: input})
		if err != nil {
			b.Fatal(err)
		}
		child.Start()
		st, err := kids.Wait(ctx, child.ID)
		if err != nil || st.Status != api.TurnCompleted {
			b.Fatalf("child ended %+v, %v", st, err)
		}
		durations = append(durations, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds()), "p99-µs")
}

// discard is a Notifier that drops every notification.
type discard struct{}

func (discard) Broadcast(string, any)            {}
func (discard) Send([]turns.ConnID, string, any) {}
