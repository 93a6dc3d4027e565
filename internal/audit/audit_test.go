package audit_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// nopCloser keeps the group committer from closing the store the test
// reads after it.
type nopCloser struct{ store.Store }

func (nopCloser) Close() error { return nil }

func newLog(t *testing.T, cfg audit.Config) (*audit.Log, store.Store) {
	t.Helper()
	mem := memory.New(memory.Config{})
	q := store.NewAuditQueue(100)
	g := store.NewGroupCommitter(nopCloser{mem}, store.GroupCommitConfig{Audit: q})
	t.Cleanup(func() { _ = g.Close() })
	cfg.Store, cfg.Queue = g, q
	l, err := audit.New(cfg)
	require.NoError(t, err)
	t.Cleanup(l.Stop)
	return l, mem
}

func entries(t *testing.T, s store.Store) []store.AuditEntry {
	t.Helper()
	es, err := s.ListAudit(t.Context(), store.AuditQuery{Limit: store.MaxAuditLimit})
	require.NoError(t, err)
	return es
}

// An entry gets the time, the node, the trace and the actor of its
// context (or its own), and reaches the store without any transcript
// write to carry it; Stop writes what is still queued.
func TestRecord(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l, mem := newLog(t, audit.Config{
		Node: "node-1", Now: func() time.Time { return now },
		TraceID: func(ctx context.Context) string { v, _ := ctx.Value(traceKey{}).(string); return v },
	})
	require.NoError(t, l.Start(t.Context()))
	ctx := audit.WithActor(context.WithValue(t.Context(), traceKey{}, "abc123"), audit.Actor{Principal: "alice", Client: "tui#7"})
	l.Record(ctx, audit.Entry{Kind: audit.KindConfigWrite, Detail: map[string]any{"keys": []string{"model"}}})
	require.Eventually(t, func() bool { return len(entries(t, mem)) == 1 }, 10*time.Second, 5*time.Millisecond,
		"the flusher writes what no commit round carried")
	got := entries(t, mem)[0]
	require.Equal(t, audit.KindConfigWrite, got.Kind)
	require.Equal(t, "alice", got.Principal)
	require.Equal(t, "tui#7", got.Client)
	require.Equal(t, "node-1", got.Node)
	require.Equal(t, "abc123", got.TraceID)
	require.True(t, now.Equal(got.At))
	require.JSONEq(t, `{"keys":["model"]}`, string(got.Detail))

	// The entry's own actor wins over the context's; a detail that is no
	// object is recorded as {}.
	l.Record(ctx, audit.Entry{Kind: audit.KindApproval, Actor: &audit.Actor{Principal: "bob"}, ThreadID: "t", TurnID: "u", Detail: []int{1}})
	l.Stop()
	es := entries(t, mem)
	require.Len(t, es, 2)
	require.Equal(t, "bob", es[1].Principal)
	require.Empty(t, es[1].Client)
	require.Equal(t, "t", es[1].ThreadID)
	require.Equal(t, "u", es[1].TurnID)
	require.Equal(t, json.RawMessage(`{}`), es[1].Detail)

	var nilLog *audit.Log
	nilLog.Record(ctx, audit.Entry{Kind: audit.KindAdmin}) // records nothing, and does not panic
	nilLog.Stop()
}

type traceKey struct{}

// Entries older than the retention are pruned when the log starts and
// every PruneEvery after.
func TestRetentionPrunes(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	l, mem := newLog(t, audit.Config{Retention: 90 * 24 * time.Hour, Now: func() time.Time { return now }})
	old := func(age time.Duration, kind string) *store.AuditEntry {
		return &store.AuditEntry{At: now.Add(-age), Kind: kind, Detail: json.RawMessage(`{}`)}
	}
	require.NoError(t, mem.Write(t.Context(), &store.Batch{AppendAudit: []*store.AuditEntry{
		old(100*24*time.Hour, "gone"), old(91*24*time.Hour, "gone"), old(89*24*time.Hour, "kept"), old(time.Hour, "kept"),
	}}))
	require.NoError(t, l.Start(t.Context()))
	require.Eventually(t, func() bool { return len(entries(t, mem)) == 2 }, 10*time.Second, 5*time.Millisecond)
	for _, e := range entries(t, mem) {
		require.Equal(t, "kept", e.Kind)
	}
	require.Zero(t, l.Prune(t.Context()), "nothing more is past the retention")
}
