package backend_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

func TestCanonicalID(t *testing.T) {
	const id = "0190a5b2-0000-7000-8000-00000000abcd"
	tests := []struct{ in, want string }{
		{id, id},
		{strings.ToUpper(id), id},
		{"{" + id + "}", id},
		{"urn:uuid:" + id, id},
		{strings.ReplaceAll(id, "-", ""), id},
		{"0190a5b2-0000-7000-8000-00000000abcg", "0190a5b2-0000-7000-8000-00000000abcg"},
		{"0190a5b2+0000-7000-8000-00000000abcd", "0190a5b2+0000-7000-8000-00000000abcd"},
		{"turn-1", "turn-1"},
		{"", ""},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, backend.CanonicalID(tc.in), "id %q", tc.in)
	}
	for range 100 {
		u := uuid.New()
		require.Equal(t, u.String(), backend.CanonicalID(u.String()))
		require.Equal(t, u.String(), backend.CanonicalID(strings.ToUpper(u.String())))
	}
}

// The ids to lock are the existing threads a batch touches, once each, in
// order; a thread the batch creates needs no lock.
func TestLockIDs(t *testing.T) {
	const a, b, c = "0190a5b2-0000-7000-8000-00000000000a", "0190a5b2-0000-7000-8000-00000000000b", "0190a5b2-0000-7000-8000-00000000000c"
	p, err := backend.NewPlan(&store.Batch{
		CreateThreads: []*store.Thread{{ID: strings.ToUpper(c)}},
		UpdateThreads: []store.ThreadPatch{{ID: b}},
		CreateTurns:   []*store.Turn{{ThreadID: c, ID: "t", Status: store.TurnInProgress}},
		UpdateTurns:   []store.TurnPatch{{ThreadID: strings.ToUpper(a), ID: "t"}},
		AppendItems:   []*store.Item{{ThreadID: b, TurnID: "t", ItemID: "i", Type: "x", Payload: []byte(`{}`)}},
	}, time.Now())
	require.NoError(t, err)
	require.Equal(t, []string{a, b}, p.LockIDs())
}
