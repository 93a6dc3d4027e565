package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// listAudit pages through the whole log matching q, limit entries a page.
func listAudit(t *testing.T, s store.Store, q store.AuditQuery) []store.AuditEntry {
	t.Helper()
	var all []store.AuditEntry
	for {
		page, err := s.ListAudit(t.Context(), q)
		require.NoError(t, err)
		all = append(all, page...)
		if len(page) < max(q.Limit, 1) || q.Limit <= 0 {
			return all
		}
		q.AfterSeq = page[len(page)-1].Seq
	}
}

func auditKinds(es []store.AuditEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Kind
	}
	return out
}

// testAudit: entries are appended with a batch, read back with every
// field, in Seq order, filtered by kind, thread, principal and time, and
// paged by Seq.
func testAudit(t *testing.T, s store.Store) {
	ctx := t.Context()
	th, tu := createThread(t, s)
	first := &store.AuditEntry{
		At: base, Kind: "approval", Principal: "alice", Client: "codex-tui", Node: "node-a",
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ThreadID: th.ID, TurnID: tu.ID,
		Detail: json.RawMessage(`{"decision":"accept","nul":"a\u0000b"}`),
	}
	write(t, s, &store.Batch{AppendItems: []*store.Item{newItem(th.ID, tu.ID)}, AppendAudit: []*store.AuditEntry{first}})
	require.Positive(t, first.Seq, "the store fills the seq back")
	batch := []*store.AuditEntry{
		{At: base.Add(time.Minute), Kind: "tool_call", Principal: "alice", ThreadID: th.ID, Detail: json.RawMessage(`{}`)},
		{At: base.Add(2 * time.Minute), Kind: "config_write", Principal: "bob", Detail: json.RawMessage(`{"key":"model"}`)},
		{At: base.Add(3 * time.Minute), Kind: "thread_delete", Detail: json.RawMessage(`{}`)},
		{Kind: "admin", Detail: json.RawMessage(`{}`)}, // At defaults to now
	}
	write(t, s, &store.Batch{AppendAudit: batch})
	require.Greater(t, batch[0].Seq, first.Seq)
	require.Greater(t, batch[3].Seq, batch[2].Seq)
	require.False(t, batch[3].At.IsZero())

	all := listAudit(t, s, store.AuditQuery{})
	require.Equal(t, []string{"approval", "tool_call", "config_write", "thread_delete", "admin"}, auditKinds(all))
	got := all[0]
	require.Equal(t, first.Seq, got.Seq)
	require.True(t, base.Truncate(time.Microsecond).Equal(got.At), "at %v", got.At)
	require.Equal(t, "alice", got.Principal)
	require.Equal(t, "codex-tui", got.Client)
	require.Equal(t, "node-a", got.Node)
	require.Equal(t, first.TraceID, got.TraceID)
	require.Equal(t, th.ID, got.ThreadID)
	require.Equal(t, tu.ID, got.TurnID)
	requireJSONEq(t, first.Detail, got.Detail)

	alice, operator := "alice", ""
	for _, c := range []struct {
		q    store.AuditQuery
		want []string
	}{
		{store.AuditQuery{Kind: "tool_call"}, []string{"tool_call"}},
		{store.AuditQuery{ThreadID: th.ID}, []string{"approval", "tool_call"}},
		{store.AuditQuery{Principal: &alice}, []string{"approval", "tool_call"}},
		{store.AuditQuery{Principal: &operator}, []string{"thread_delete", "admin"}},
		{store.AuditQuery{Since: base.Add(time.Minute), Until: base.Add(3 * time.Minute)}, []string{"tool_call", "config_write"}},
		{store.AuditQuery{Kind: "approval", Principal: &alice, Since: base.Add(time.Second)}, []string{}},
		{store.AuditQuery{AfterSeq: batch[2].Seq}, []string{"admin"}},
	} {
		require.Equal(t, c.want, auditKinds(listAudit(t, s, c.q)), "%+v", c.q)
	}

	// Pages of two, each continuing after the last seq of the one before.
	page, err := s.ListAudit(ctx, store.AuditQuery{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"approval", "tool_call"}, auditKinds(page))
	page, err = s.ListAudit(ctx, store.AuditQuery{Limit: 2, AfterSeq: page[1].Seq})
	require.NoError(t, err)
	require.Equal(t, []string{"config_write", "thread_delete"}, auditKinds(page))
	require.Equal(t, []string{"approval", "tool_call", "config_write", "thread_delete", "admin"}, auditKinds(listAudit(t, s, store.AuditQuery{Limit: 2})))

	// Entries outlive their thread.
	require.NoError(t, s.DeleteThread(ctx, th.ID))
	require.Len(t, listAudit(t, s, store.AuditQuery{ThreadID: th.ID}), 2)

	// Bad entries and filters are refused, and nothing is written.
	for _, bad := range []*store.AuditEntry{
		{Detail: json.RawMessage(`{}`)},
		{Kind: "x", Detail: json.RawMessage(`[1]`)},
		{Kind: "x"},
		{Kind: "x", Principal: "a\x00b", Detail: json.RawMessage(`{}`)},
	} {
		requireCode(t, s.Write(ctx, &store.Batch{AppendAudit: []*store.AuditEntry{bad}}), apperr.Invalid)
	}
	_, err = s.ListAudit(ctx, store.AuditQuery{Kind: "a\x00"})
	requireCode(t, err, apperr.Invalid)
	require.Len(t, listAudit(t, s, store.AuditQuery{}), 5)
}

// testAuditPrune: pruning deletes the entries older than its bound, at
// most limit of them, oldest first.
func testAuditPrune(t *testing.T, s store.Store) {
	ctx := t.Context()
	var es []*store.AuditEntry
	for i := range 5 {
		es = append(es, &store.AuditEntry{At: base.Add(time.Duration(i) * time.Hour), Kind: "k", Detail: json.RawMessage(`{}`)})
	}
	write(t, s, &store.Batch{AppendAudit: es})
	n, err := s.PruneAudit(ctx, base.Add(3*time.Hour), 2)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	n, err = s.PruneAudit(ctx, base.Add(3*time.Hour), 100)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	left := listAudit(t, s, store.AuditQuery{})
	require.Len(t, left, 2)
	require.Equal(t, es[3].Seq, left[0].Seq)
}

// testGroupCommitterCarriesAudit: queued audit entries ride the next
// commit round, and a failed round still stores them.
func testGroupCommitterCarriesAudit(t *testing.T, s store.Store) {
	ctx := t.Context()
	q := store.NewAuditQueue(100)
	g := store.NewGroupCommitter(nopCloser{s}, store.GroupCommitConfig{Audit: q})
	defer g.Close()
	th, tu := createThread(t, s)
	requireCode(t, q.Push(&store.AuditEntry{Detail: json.RawMessage(`{}`)}), apperr.Invalid)
	require.NoError(t, q.Push(&store.AuditEntry{Kind: "tool_call", Detail: json.RawMessage(`{}`)}))
	require.NoError(t, g.Write(ctx, &store.Batch{AppendItems: []*store.Item{newItem(th.ID, tu.ID)}}))
	require.Equal(t, []string{"tool_call"}, auditKinds(listAudit(t, s, store.AuditQuery{})), "the entry rode the item's commit")

	require.NoError(t, q.Push(&store.AuditEntry{Kind: "approval", Detail: json.RawMessage(`{}`)}))
	requireCode(t, g.Write(ctx, &store.Batch{AppendItems: []*store.Item{newItem(th.ID, "no-such-turn")}}), apperr.NotFound)
	require.Equal(t, []string{"tool_call", "approval"}, auditKinds(listAudit(t, s, store.AuditQuery{})))

	require.NoError(t, q.Push(&store.AuditEntry{Kind: "admin", Detail: json.RawMessage(`{}`)}))
	require.NoError(t, q.Flush(ctx, g))
	require.Equal(t, []string{"tool_call", "approval", "admin"}, auditKinds(listAudit(t, s, store.AuditQuery{})))
}
