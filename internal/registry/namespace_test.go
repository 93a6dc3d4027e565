package registry

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// oldNamespaceJSON is how NamespaceSpec.MarshalJSON encoded before it was
// written by hand: json.Marshal of the four fields, each tool through its
// own MarshalJSON; BenchmarkNamespaceSpec's baseline.
func oldNamespaceJSON(n NamespaceSpec) ([]byte, error) {
	tools := n.Tools
	if tools == nil {
		tools = []FunctionSpec{}
	}
	return json.Marshal(struct {
		Type        string         `json:"type"`
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Tools       []FunctionSpec `json:"tools"`
	}{"namespace", n.Name, n.description(), tools})
}

// benchNamespace is a namespace of n tools as an MCP server might list
// them: a paragraph of description and half a dozen parameters each.
func benchNamespace(n int) NamespaceSpec {
	ns := NamespaceSpec{Name: "mcp__bench", Description: "Tools of the bench server <with> \"quotes\" & more."}
	for i := range n {
		props := map[string]*Schema{
			"owner": String("The account that owns the repository."),
			"repo":  String("The repository's name."),
			"path":  String("A path inside the repository, relative to its root."),
			"ref":   String("A branch, tag or commit; the default branch when omitted."),
			"page":  Number("The page of results, from 1."),
			"state": String("open, closed or all"),
		}
		props["state"].Enum = []any{"open", "closed", "all"}
		ns.Tools = append(ns.Tools, FunctionSpec{
			Name:        fmt.Sprintf("tool_%02d", i),
			Description: strings.Repeat("Does one thing to a repository and answers with what it found. ", 5),
			Parameters:  Object(props, []string{"owner", "repo"}, nil),
		})
	}
	return ns
}

// The hand-written encoding writes the bytes encoding/json writes
// (reflectiveSpecJSON, as the other specs are held to) and the old
// encoding wrote, and a cache of the tools' JSON changes nothing in them.
func TestNamespaceSpecEncoding(t *testing.T) {
	tricky := FunctionSpec{Name: "a<b>&c", Description: "line\u2028sep \x01 \xff é \"q\" \\", Strict: true,
		Parameters: Object(map[string]*Schema{"x": String("<x>")}, []string{"x"}, AllowAdditional(false))}
	for _, n := range []NamespaceSpec{
		{Name: "empty"},
		{Name: "mcp__s", Tools: []FunctionSpec{}},
		{Name: "mcp__s", Description: "d & <e>", Tools: []FunctionSpec{tricky, {Name: "bare"}, {Name: "later", DeferLoading: true}}},
		benchNamespace(3),
	} {
		want, err := reflectiveSpecJSON(n)
		require.NoError(t, err)
		old, err := oldNamespaceJSON(n)
		require.NoError(t, err)
		require.Equal(t, string(want), string(old))
		got, err := n.MarshalJSON()
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
		n.Cache = NewSpecCache(n.Tools)
		got, err = EncodeSpec(n)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "from the cache")
	}
}

// The cache answers a tool equal in value to one it encoded and nothing
// else: a copy with another field set, or with ClassicSpec's schema, is
// encoded afresh.
func TestSpecCacheKeyedByValue(t *testing.T) {
	ns := benchNamespace(2)
	ns.Cache = NewSpecCache(ns.Tools)
	// Mark the cached entry of the first tool, to see where it is used.
	ns.Cache.m[ns.Tools[0]] = []byte(`{"cached":true}`)
	got, err := ns.MarshalJSON()
	require.NoError(t, err)
	require.Contains(t, string(got), `{"cached":true}`)

	deferred := ns
	deferred.Tools = append([]FunctionSpec(nil), ns.Tools...)
	deferred.Tools[0].DeferLoading = true
	got, err = deferred.MarshalJSON()
	require.NoError(t, err)
	require.NotContains(t, string(got), `"cached"`)
	require.Contains(t, string(got), `"defer_loading":true`)

	classic := ClassicSpec(ns).(NamespaceSpec)
	got, err = classic.MarshalJSON()
	require.NoError(t, err)
	require.NotContains(t, string(got), `"cached"`)
}

// BenchmarkNamespaceSpec encodes the namespace of 40 tools a turn offers
// from an MCP server: as json.Marshal did (old), by hand, and by hand with
// the tools' JSON from the server's SpecCache (what a turn pays now).
//
//	go test -run '^$' -bench NamespaceSpec -benchmem ./internal/registry/
func BenchmarkNamespaceSpec(b *testing.B) {
	ns := benchNamespace(40)
	cached := ns
	cached.Cache = NewSpecCache(ns.Tools)
	for _, c := range []struct {
		name string
		enc  func() ([]byte, error)
	}{
		{"json.Marshal", func() ([]byte, error) { return oldNamespaceJSON(ns) }},
		{"handwritten", ns.MarshalJSON},
		{"cached", func() ([]byte, error) { return EncodeSpec(cached) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				raw, err := c.enc()
				if err != nil {
					b.Fatal(err)
				}
				n = len(raw)
			}
			b.ReportMetric(float64(n), "bytes")
		})
	}
}
