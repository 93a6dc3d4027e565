package mcp

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/registry"
)

// entry is a search entry of server's tool name with text.
func entry(server, name, text string) searchEntry {
	return searchEntry{server: server, namespace: namespaces(server)[0], fn: registry.FunctionSpec{Name: name, DeferLoading: true}, text: text}
}

// The score is Okapi BM25 (k1 1.2, b 0.75, idf ln(1+(N-n+0.5)/(n+0.5))):
// one term in a two-term entry of a two-entry index whose mean length is
// 1.5.
func TestSearchIndexScoresBM25(t *testing.T) {
	ix := newSearchIndex([]searchEntry{entry("a", "x", "alpha beta"), entry("a", "y", "gamma")})
	require.Equal(t, []int{0}, ix.search("alpha", 8), "only entries holding a query term match")
	idf := math.Log(1 + (2-1+0.5)/(1+0.5))
	require.InDelta(t, idf*1*2.2/(1+1.2*(1-0.75+0.75*2/1.5)), ix.score(0, tokenize("alpha")), 1e-12)
	// A term twice in a one-term entry: tf 2, length 1.
	ix = newSearchIndex([]searchEntry{entry("a", "x", "alpha alphas"), entry("a", "y", "beta")})
	require.InDelta(t, idf*2*2.2/(2+1.2*(1-0.75+0.75*2/1.5)), ix.score(0, tokenize("alpha")), 1e-12, "plurals fold into one term")
}

// Rarer and repeated terms rank higher, ties keep index order, the limit
// cuts the list, and snake_case names and plurals are matched by words.
func TestSearchIndexRanking(t *testing.T) {
	ix := newSearchIndex([]searchEntry{
		entry("cal", "list_events", "mcp__cal__list_events list_events cal List calendar events"),
		entry("cal", "create_event", "mcp__cal__create_event create_event cal Create a calendar event title start"),
		entry("docs", "search", "mcp__docs__search search docs Search the documents query"),
		entry("docs", "fetch", "mcp__docs__fetch fetch docs Fetch a document by id"),
	})
	require.Equal(t, []int{1, 0}, ix.search("create event", 8))
	require.Equal(t, []int{1}, ix.search("create event", 1))
	require.Equal(t, []int{0, 1}, ix.search("calendar", 8), "a tie keeps index order")
	require.Equal(t, []int{2, 3}, ix.search("search documents", 8))
	require.Empty(t, ix.search("the a of", 8), "stopwords match nothing")
	require.Empty(t, ix.search("weather", 8))
}

// A search answers with the best tools grouped into their servers'
// namespaces, in the order of each namespace's best tool; bad arguments
// are answered to the model.
func TestSearchHandlerCoalescesNamespaces(t *testing.T) {
	h := &searchHandler{ix: newSearchIndex([]searchEntry{
		entry("cal", "list_events", "calendar events list"),
		entry("docs", "search", "search calendar notes"),
		entry("cal", "create_event", "calendar event create"),
	})}
	search := func(args string) (registry.Output, error) {
		return h.Handle(context.Background(), registry.Invocation{Call: registry.Call{Name: registry.ToolSearchName, Payload: registry.ToolSearchPayload{Arguments: args}}})
	}
	out, err := search(`{"query":"calendar event"}`)
	require.NoError(t, err)
	b, err := json.Marshal(out.Tools)
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"type":"namespace","name":"mcp__cal__","description":"Tools in the mcp__cal__ namespace.","tools":[
			{"type":"function","name":"list_events","description":"","strict":false,"defer_loading":true,"parameters":{"type":"object","properties":{}}},
			{"type":"function","name":"create_event","description":"","strict":false,"defer_loading":true,"parameters":{"type":"object","properties":{}}}]},
		{"type":"namespace","name":"mcp__docs__","description":"Tools in the mcp__docs__ namespace.","tools":[
			{"type":"function","name":"search","description":"","strict":false,"defer_loading":true,"parameters":{"type":"object","properties":{}}}]}]`, string(b))

	out, err = search(`{"query":"calendar","limit":1}`)
	require.NoError(t, err)
	require.Len(t, out.Tools, 1)
	require.Len(t, out.Tools[0].(registry.NamespaceSpec).Tools, 1)

	for args, msg := range map[string]string{
		`{"query":"  "}`:           "query must not be empty",
		`{"query":"x","limit":0}`:  "limit must be greater than zero",
		`{"query":"x","limit":-2}`: "limit must be greater than zero",
		`{not json`:                "failed to parse tool_search arguments",
	} {
		_, err := search(args)
		require.ErrorContains(t, err, msg, args)
	}
}

// A turn that defers its MCP tools sends tool_search in their place (the
// resource tools stay); the search finds a server's tool, answered as a
// tool_search_output; the tool then runs under its namespaced name. A
// turn that does not defer gets the tools in full and no tool_search.
func TestDeferredToolsFoundBySearch(t *testing.T) {
	h := newHarness(t, map[string]config.MCPServer{"t": stdioServer(t)})
	h.waitState("t", StateReady)

	plain, _ := h.build((&recorder{}).turn())
	names := specNames(plain)
	require.Contains(t, names, "mcp__t__echo")
	require.NotContains(t, names, registry.ToolSearchName)

	rec := &recorder{}
	turn := rec.turn()
	turn.DeferTools = true
	specs, reg := h.build(turn)
	names = specNames(specs)
	require.Contains(t, names, registry.ToolSearchName)
	require.Contains(t, names, ListResourcesName)
	for _, n := range names {
		require.NotContains(t, n, "mcp__t__", "a deferred tool is not sent: %v", names)
	}
	b, err := json.Marshal(specs[len(specs)-4].Spec) // tool_search, then the three resource tools
	require.NoError(t, err)
	var spec struct {
		Type, Execution, Description string
		Parameters                   json.RawMessage
	}
	require.NoError(t, json.Unmarshal(b, &spec))
	require.Equal(t, "tool_search", spec.Type)
	require.Equal(t, "client", spec.Execution)
	require.Equal(t, toolSearchDescription, spec.Description)
	require.Contains(t, spec.Description, "use `tool_search`, not `list_mcp_resources`", "MCP tools are found by searching, not by listing resources")
	require.JSONEq(t, `{"type":"object","properties":{"query":{"type":"string","description":"A few words describing the tool you need."},"limit":{"type":"number","description":"Most tools to answer with. Defaults to 8."}},"required":["query"],"additionalProperties":false}`, string(spec.Parameters))

	d := reg.NewDispatcher(registry.DispatcherConfig{})
	out, err := d.Dispatch(context.Background(), registry.Call{CallID: "call_s", Name: registry.ToolSearchName,
		Payload: registry.ToolSearchPayload{Arguments: `{"query":"add integers","limit":1}`}})
	require.NoError(t, err)
	raw, err := json.Marshal(out)
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"tool_search_output","call_id":"call_s","status":"completed","execution":"client","tools":[
		{"type":"namespace","name":"mcp__t","description":"Tools in the mcp__t namespace.","tools":[
			{"type":"function","name":"add","description":"Add two integers.","strict":false,"defer_loading":true,"parameters":`+paramsOf(t, plain, "mcp__t__add")+`}]}]}`, string(raw))

	out, err = d.Dispatch(context.Background(), registry.Call{CallID: "call_e", Namespace: "mcp__t__", Name: "echo",
		Payload: registry.FunctionPayload{Arguments: `{"text":"deferred"}`}})
	require.NoError(t, err)
	require.Equal(t, "echo: deferred", body(t, out.Output))
	require.Equal(t, "echo", rec.lastDone(t).Tool)

	out, err = d.Dispatch(context.Background(), registry.Call{CallID: "call_bad", Name: registry.ToolSearchName,
		Payload: registry.ToolSearchPayload{Arguments: `{"query":""}`}})
	require.NoError(t, err)
	raw, err = json.Marshal(out)
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"tool_search_output","call_id":"call_bad","status":"completed","execution":"client","tools":[]}`, string(raw),
		"a failed search answers with no tools: a tool_search_call takes no other output")
}

// paramsOf is the JSON of the parameters of the function spec name.
func paramsOf(t *testing.T, specs []registry.ConfiguredToolSpec, name string) string {
	t.Helper()
	for _, s := range specs {
		ns, ok := s.Spec.(registry.NamespaceSpec)
		if !ok {
			continue
		}
		for _, f := range ns.Tools {
			if ns.Name+nameDelimiter+f.Name == name {
				b, err := json.Marshal(f.Parameters)
				require.NoError(t, err)
				return string(b)
			}
		}
	}
	t.Fatalf("no spec of %s", name)
	return ""
}

// An unchanged tool set reuses its index; a changed description or a
// server's new schema builds a new one.
func TestSearchCacheReusesIndexOfSameTools(t *testing.T) {
	var c searchCache
	entries := []searchEntry{entry("a", "x", "alpha"), entry("a", "y", "beta")}
	first := c.index(entries)
	require.Same(t, first, c.index(slices.Clone(entries)))

	changed := slices.Clone(entries)
	changed[1].text = "beta gamma"
	second := c.index(changed)
	require.NotSame(t, first, second)
	require.Equal(t, []int{1}, second.search("gamma", 8))

	relisted := slices.Clone(changed)
	relisted[0].fn.Parameters = registry.Object(nil, nil, nil)
	require.NotSame(t, second, c.index(relisted))
}
