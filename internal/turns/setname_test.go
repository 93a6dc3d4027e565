package turns_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns"
)

// Naming a thread changes its name, not its updatedAt: as with the
// reference, a rename does not move the thread up the TUI's /resume list,
// which is sorted by updatedAt.
func TestSetNameKeepsUpdatedAt(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[]}`)
	later := time.Unix(1_900_000_000, 0)
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(discard{}), Models: oneProvider{client}, Now: func() time.Time { return later },
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	ctx := context.Background()
	id := storeBigThread(t, st, 1, 1, 10)
	before, err := st.GetThread(ctx, id)
	require.NoError(t, err)
	require.NotEqual(t, later.Unix(), before.UpdatedAt.Unix())

	after, err := m.SetName(ctx, api.ThreadNameSetParams{ThreadID: id, Name: "renamed"})
	require.NoError(t, err)
	after()
	got, err := st.GetThread(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "renamed", *got.Name)
	require.Equal(t, before.UpdatedAt.Unix(), got.UpdatedAt.Unix())
}
