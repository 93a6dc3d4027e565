package reqlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/reqlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestValid(t *testing.T) {
	for _, id := range []string{"a", "0f8fad5b-d9cb-469f-a165-70867728950e", "gh:run/123+4=@x_y.z", strings.Repeat("x", reqlog.MaxLen)} {
		require.True(t, reqlog.Valid(id), id)
	}
	for _, id := range []string{"", strings.Repeat("x", reqlog.MaxLen+1), "a b", "a\nb", "a\rb", `a"b`, "a\\b", "a\x00b", "é", "a;b", "a,b", "<x>", "a\tb"} {
		require.False(t, reqlog.Valid(id), "%q", id)
	}
}

func TestStart(t *testing.T) {
	ctx, r := reqlog.Start(context.Background(), "ci-42")
	require.Equal(t, "ci-42", r.ID)
	require.Equal(t, "ci-42", reqlog.ID(ctx))
	require.Same(t, r, reqlog.From(ctx))

	for _, given := range []string{"", "bad id\n"} {
		ctx, r = reqlog.Start(context.Background(), given)
		u, err := uuid.Parse(r.ID)
		require.NoError(t, err, "a made id is a UUID")
		require.Equal(t, uuid.Version(7), u.Version())
		require.Equal(t, r.ID, reqlog.ID(ctx))
	}
	_, other := reqlog.Start(context.Background(), "")
	require.NotEqual(t, r.ID, other.ID)

	require.Equal(t, "", reqlog.ID(context.Background()))
	require.Nil(t, reqlog.From(context.Background()))
}

func TestPrincipal(t *testing.T) {
	ctx, r := reqlog.Start(context.Background(), "")
	require.Equal(t, "", r.Principal())
	reqlog.SetPrincipal(ctx, "alice")
	require.Equal(t, "alice", r.Principal())
	reqlog.SetPrincipal(context.Background(), "nobody") // no request: nothing to name
}

type key struct{}

// Detach keeps the id, and nothing else of the request's context.
func TestDetach(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	ctx, _ := reqlog.Start(parent, "r1")
	reqlog.SetPrincipal(ctx, "alice")
	d := reqlog.Detach(ctx)
	cancel()
	require.NoError(t, d.Err())
	require.Nil(t, d.Value(key{}))
	require.Equal(t, "r1", reqlog.ID(d))
	require.Equal(t, "", reqlog.From(d).Principal())
	require.Equal(t, context.Background(), reqlog.Detach(context.Background()))
}

func TestHandler(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(reqlog.NewHandler(slog.NewJSONHandler(&b, &slog.HandlerOptions{Level: slog.LevelInfo})))
	ctx, _ := reqlog.Start(context.Background(), "r1")

	log.InfoContext(ctx, "with", "a", 1, "b", 2, "c", 3, "d", 4, "e", 5, "f", 6)
	log.Info("without")
	log.With("x", 1).InfoContext(ctx, "derived")
	log.With(reqlog.Key, "own").InfoContext(ctx, "the logger's own")
	log.InfoContext(ctx, "the record's own", reqlog.Key, "rec")
	log.WithGroup("g").InfoContext(ctx, "grouped", "y", 2)
	log.DebugContext(ctx, "below the level")

	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		require.LessOrEqual(t, strings.Count(line, `"`+reqlog.Key+`":`), 1, "one request id in %s", line)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		got = append(got, m)
	}
	require.Len(t, got, 6)
	require.Equal(t, "r1", got[0][reqlog.Key])
	require.Equal(t, 6.0, got[0]["f"], "the record's attributes stay")
	require.NotContains(t, got[1], reqlog.Key)
	require.Equal(t, "r1", got[2][reqlog.Key])
	require.Equal(t, 1.0, got[2]["x"])
	require.Equal(t, "own", got[3][reqlog.Key])
	require.Equal(t, "rec", got[4][reqlog.Key])
	require.Equal(t, map[string]any{"y": 2.0, reqlog.Key: "r1"}, got[5]["g"])
}
