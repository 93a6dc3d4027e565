package memory_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/memory"
	"github.com/appserver/appserver/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := memory.New(memory.Config{})
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestForgetDropsTheTranscript(t *testing.T) {
	ctx := t.Context()
	s := memory.New(memory.Config{})
	th := &store.Thread{ID: "0190a5b2-0000-7000-8000-000000000001", Cwd: "/", ModelProvider: "openai", Source: "cli"}
	tu := &store.Turn{ThreadID: th.ID, ID: "turn-1", Status: store.TurnInProgress}
	require.NoError(t, s.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{th}, CreateTurns: []*store.Turn{tu}}))
	require.Equal(t, 1, s.Len())

	s.Forget(th.ID)
	require.Zero(t, s.Len())
	_, err := s.GetThread(ctx, th.ID)
	require.Error(t, err)
	turns, err := s.ListInProgressTurns(ctx)
	require.NoError(t, err)
	require.Empty(t, turns)
	s.Forget(th.ID) // unknown ids are ignored
}

func TestReadsDoNotAlias(t *testing.T) {
	ctx := t.Context()
	s := memory.New(memory.Config{})
	th := &store.Thread{ID: "0190a5b2-0000-7000-8000-000000000002", Cwd: "/", ModelProvider: "openai", Source: "cli",
		Meta: []byte(`{"a":1}`)}
	require.NoError(t, s.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{th}}))
	th.Meta[5] = '2' // the caller reuses what it wrote
	got, err := s.GetThread(ctx, th.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"a":1}`, string(got.Meta))
	got.Meta[5] = '3' // and changes what it read
	again, err := s.GetThread(ctx, th.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"a":1}`, string(again.Meta))
}
