package mcp

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestModelToolName(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"mcp__github__create_issue", "mcp__github__create_issue"},
		// '-' is not kept (codex 0.171.0).
		{"mcp__my-srv__do.thing/now", "mcp__my_srv__do_thing_now"},
		{"get-tiny-image", "get_tiny_image"},
		{"mcp__s__été", "mcp__s___t_"},
		{"mcp__s__" + strings.Repeat("a", 56), "mcp__s__" + strings.Repeat("a", 56)},
		// 65 bytes: first 24 characters plus the SHA-1 of the raw name.
		{"mcp__s__" + strings.Repeat("a", 57), "mcp__s__aaaaaaaaaaaaaaaa" + "5b5eb1c0ab0d9e2b0bc70e7f5df6ff3757d0dbbe"},
	}
	for _, tc := range tests {
		got := modelToolName(tc.raw)
		require.LessOrEqual(t, len(got), maxToolNameLen)
		if strings.HasSuffix(tc.want, "dbbe") {
			require.Len(t, got, 64)
			require.Equal(t, tc.want[:24], got[:24])
			require.Equal(t, got, modelToolName(tc.raw), "stable")
			continue
		}
		require.Equal(t, tc.want, got, tc.raw)
	}
}

func TestAssignNamesResolvesCollisions(t *testing.T) {
	var skipped []string
	refs := assignNames([]toolRef{
		{Server: "a", Tool: "x.y"},
		{Server: "a", Tool: "x_y"}, // sanitizes to the same name: skipped
		{Server: "a", Tool: "x.y"}, // duplicate raw name: skipped
		{Server: "b", Tool: "x.y"},
	}, func(r toolRef, reason string) { skipped = append(skipped, r.Server+"/"+r.Tool+": "+reason) })
	var names []string
	for _, r := range refs {
		names = append(names, r.Name)
	}
	require.Equal(t, []string{"mcp__a__x_y", "mcp__b__x_y"}, names)
	require.Len(t, skipped, 2)
}

func TestStderrLogBounded(t *testing.T) {
	var buf bytes.Buffer
	w := &stderrLog{log: slog.New(slog.NewTextHandler(&buf, nil)), server: "s", budget: 10}
	_, _ = w.Write([]byte("first line\nsecond"))
	_, _ = w.Write([]byte(" part\nthird\n" + strings.Repeat("z", 3*stderrLineMax) + "\n"))
	out := buf.String()
	require.Contains(t, out, `line="first line"`)
	require.NotContains(t, out, "second part", "past the budget lines are dropped")
	require.Equal(t, 1, strings.Count(out, "log budget spent"))
}
