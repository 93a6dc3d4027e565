package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
)

func TestParseOverride(t *testing.T) {
	tests := []struct {
		raw       string
		wantPath  []string
		wantValue any
	}{
		// Bare words that are not TOML are literal strings, as in Codex.
		{"model=o3", []string{"model"}, "o3"},
		{"model=gpt-5.1-codex", []string{"model"}, "gpt-5.1-codex"},
		{"listen=ws://127.0.0.1:1", []string{"listen"}, "ws://127.0.0.1:1"},
		{"model=", []string{"model"}, ""},
		{"url=a=b", []string{"url"}, "a=b"},
		{"model=hello world", []string{"model"}, "hello world"},
		// TOML values keep their type.
		{`model="o3"`, []string{"model"}, "o3"},
		{`model='o3'`, []string{"model"}, "o3"},
		{` model = "o3" `, []string{"model"}, "o3"},
		{"migrate=false", []string{"migrate"}, false},
		{"ws_max_clock_skew_seconds=10", []string{"ws_max_clock_skew_seconds"}, int64(10)},
		{"x=1.5", []string{"x"}, 1.5},
		{`allowed_origins=["https://a"]`, []string{"allowed_origins"}, []any{"https://a"}},
		{`allowed_origins=[]`, []string{"allowed_origins"}, []any{}},
		{`mcp_servers.x={command="npx", args=["-y"]}`, []string{"mcp_servers", "x"},
			map[string]any{"command": "npx", "args": []any{"-y"}}},
		// Something that is not one TOML value is a literal string.
		{"x=1\ny=2", []string{"x"}, "1\ny=2"},
		// Dotted and quoted keys.
		{"model_providers.local.base_url=http://h:1/v1", []string{"model_providers", "local", "base_url"}, "http://h:1/v1"},
		{`a."b.c".d=1`, []string{"a", "b.c", "d"}, int64(1)},
		{`a.'b.c'.d=1`, []string{"a", "b.c", "d"}, int64(1)},
		{`a . b = 1`, []string{"a", "b"}, int64(1)},
		{`"a\u0041"=1`, []string{"aA"}, int64(1)},
		{`a."x=y"=1`, []string{"a", "x=y"}, int64(1)},
		{`a.""=1`, []string{"a", ""}, int64(1)},
		{"mcp_servers.my@server.url=u", []string{"mcp_servers", "my@server", "url"}, "u"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			path, value, err := parseOverride(tt.raw)
			require.NoError(t, err)
			require.Equal(t, tt.wantPath, path)
			require.Equal(t, tt.wantValue, value)
		})
	}
}

func TestParseOverrideErrors(t *testing.T) {
	tests := []struct {
		raw  string
		want string
	}{
		{"model", "-c model: expected key=value"},
		{"", "-c : expected key=value"},
		{"a.b", "-c a.b: expected key=value"},
		{"=o3", "-c =o3: empty key"},
		{" = o3", "-c  = o3: empty key"},
		{"a..b=1", "-c a..b=1: empty key segment"},
		{".a=1", "-c .a=1: empty key segment"},
		{"a.=1", "-c a.=1: empty key segment"},
		{`a."b=1`, `-c a."b=1: unterminated quoted key segment`},
		{`a.'b=1`, `-c a.'b=1: unterminated quoted key segment`},
		{`a."\q"=1`, `-c a."\q"=1: invalid quoted key segment "\q"`},
		{"my key=1", `-c my key=1: unexpected character 'k' in key`},
		{`a"b"=1`, `-c a"b"=1: unexpected character '"' in key`},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			require.Equal(t, tt.want, loadError(t, Sources{Overrides: []string{tt.raw}}))
		})
	}
}

func TestFormatKey(t *testing.T) {
	require.Equal(t, "model_providers.local.base_url", formatKey([]string{"model_providers", "local", "base_url"}))
	require.Equal(t, `mcp_servers."my.server".http_headers.X-Api-Key`, formatKey([]string{"mcp_servers", "my.server", "http_headers", "X-Api-Key"}))
	require.Equal(t, `a."".b`, formatKey([]string{"a", "", "b"}))

	// What formatKey writes, the -c parser reads back.
	for _, path := range [][]string{{"a"}, {"a", "b.c", "d"}, {"x y", `q"uote`}, {"é"}} {
		got, _, err := parseOverride(formatKey(path) + "=1")
		require.NoError(t, err)
		require.Equal(t, path, got)
	}
}

// FuzzOverride checks that no -c argument makes Load panic or fail with
// anything but an Invalid error.
func FuzzOverride(f *testing.F) {
	for _, seed := range []string{
		"model=o3", `a."b.c".d=1`, `allowed_origins=["x"]`, "listen.x=1", `model_providers.x={a=1}`,
		"=", `"`, "a.'b", "migrate=false", "mcp_servers.m={command=1}", `models.""={}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		_, _, err := Load(Sources{Env: testEnv(), Overrides: []string{raw}})
		if err != nil && !apperr.Is(err, apperr.Invalid) {
			t.Fatalf("-c %q: got a non-Invalid error: %v", raw, err)
		}
	})
}
