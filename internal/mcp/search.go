package mcp

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/registry"
)

// The words of the tool_search spec.
const (
	toolSearchDescription = "# Finding more tools\n\n" +
		"Not every tool is listed to you from the start. Call `" + registry.ToolSearchName + "` with a few words about the tool you need: " +
		"it ranks the unlisted tools by their names, descriptions and parameters (BM25), and the best matches can be called from your next step on.\n\n" +
		"To find the tools of MCP servers, use `" + registry.ToolSearchName + "`, not `list_mcp_resources` or `list_mcp_resource_templates`."
	toolSearchQueryDescription = "A few words describing the tool you need."
	toolSearchLimitDescription = "Most tools to answer with. Defaults to 8."
)

// ToolSearchDefaultLimit is how many tools a tool_search call returns when
// it names no limit, as in the reference.
const ToolSearchDefaultLimit = 8

// BM25 parameters: the usual Okapi values, which the reference's search
// engine uses too.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// searchEntry is one deferred MCP tool as the search sees it: the text
// it is found by and the namespace and function it is loaded as.
type searchEntry struct {
	server    string
	namespace string
	fn        registry.FunctionSpec
	text      string
}

// searchIndex ranks deferred MCP tools against a query with BM25. It is
// built once per tool set and read-only afterwards, so turns share it.
type searchIndex struct {
	entries []searchEntry
	// terms[i] counts the terms of entries[i]; lens[i] is its length.
	terms []map[string]int
	lens  []int
	// df is how many entries hold each term.
	df     map[string]int
	avgLen float64
}

// newSearchIndex indexes entries in the order given (ties rank by it).
func newSearchIndex(entries []searchEntry) *searchIndex {
	ix := &searchIndex{entries: entries, terms: make([]map[string]int, len(entries)), lens: make([]int, len(entries)), df: map[string]int{}}
	total := 0
	for i, e := range entries {
		toks := tokenize(e.text)
		tf := make(map[string]int, len(toks))
		for _, t := range toks {
			tf[t]++
		}
		for t := range tf {
			ix.df[t]++
		}
		ix.terms[i], ix.lens[i] = tf, len(toks)
		total += len(toks)
	}
	if len(entries) > 0 {
		ix.avgLen = float64(total) / float64(len(entries))
	}
	return ix
}

// searchCache holds the index of the last tool set indexed.
type searchCache struct {
	mu sync.Mutex
	ix *searchIndex
}

// index returns an index of entries: the cached one when it was built
// from the same entries, else a new one, which is cached.
func (c *searchCache) index(entries []searchEntry) *searchIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ix != nil && slices.EqualFunc(c.ix.entries, entries, sameEntry) {
		return c.ix
	}
	c.ix = newSearchIndex(entries)
	return c.ix
}

// sameEntry reports whether two entries index and load alike. Schemas
// are compared by identity: a server's tools share theirs until the
// server lists its tools anew.
func sameEntry(a, b searchEntry) bool {
	return a.server == b.server && a.namespace == b.namespace && a.text == b.text &&
		a.fn.Name == b.fn.Name && a.fn.Description == b.fn.Description && a.fn.Strict == b.fn.Strict &&
		a.fn.DeferLoading == b.fn.DeferLoading && a.fn.Parameters == b.fn.Parameters
}

// search returns the indexes of the entries matching query, best first,
// at most limit of them; an entry matches when it holds a query term.
func (ix *searchIndex) search(query string, limit int) []int {
	qterms := tokenize(query)
	if len(qterms) == 0 || len(ix.entries) == 0 || limit <= 0 {
		return nil
	}
	type hit struct {
		idx   int
		score float64
	}
	var hits []hit
	for i := range ix.entries {
		if score := ix.score(i, qterms); score > 0 {
			hits = append(hits, hit{i, score})
		}
	}
	sort.SliceStable(hits, func(a, b int) bool { return hits[a].score > hits[b].score })
	out := make([]int, 0, min(limit, len(hits)))
	for _, h := range hits[:min(limit, len(hits))] {
		out = append(out, h.idx)
	}
	return out
}

// score is the BM25 score of entry i for the query terms: 0 when it holds
// none of them.
func (ix *searchIndex) score(i int, qterms []string) float64 {
	n := float64(len(ix.entries))
	norm := 1 - bm25B + bm25B*float64(ix.lens[i])/ix.avgLen
	score := 0.0
	for _, q := range qterms {
		f := float64(ix.terms[i][q])
		if f == 0 {
			continue
		}
		df := float64(ix.df[q])
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		score += idf * f * (bm25K1 + 1) / (f + bm25K1*norm)
	}
	return score
}

// stopwords are English words that say nothing about a tool; dropping
// them keeps "how do I list the events" from matching every description.
var stopwords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true,
	"do": true, "for": true, "from": true, "how": true, "i": true, "in": true, "is": true, "it": true,
	"me": true, "my": true, "of": true, "on": true, "or": true, "that": true, "the": true, "this": true,
	"to": true, "was": true, "what": true, "with": true, "you": true, "your": true,
}

// tokenize lower-cases text, splits it at everything but letters and
// digits (snake_case names fall apart into their words), drops stopwords
// and folds plurals, so that "list_events" is found by "event list".
func tokenize(text string) []string {
	fields := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	out := fields[:0]
	for _, f := range fields {
		if stopwords[f] {
			continue
		}
		out = append(out, foldPlural(f))
	}
	return out
}

// foldPlural strips a plural "s" ("events" → "event"), leaving words whose
// "s" is not a plural ending ("class", "status", "analysis") alone.
func foldPlural(w string) string {
	if len(w) <= 3 || !strings.HasSuffix(w, "s") {
		return w
	}
	for _, keep := range [...]string{"ss", "us", "is"} {
		if strings.HasSuffix(w, keep) {
			return w
		}
	}
	return w[:len(w)-1]
}

// searchText is what a deferred MCP tool is found by, as the reference
// builds it: its model name, its name, the server, its title and
// description, and the names of its arguments (sorted).
func searchText(r toolRef) string {
	parts := []string{r.Name, modelToolName(r.Tool), r.Tool, r.Server}
	t := r.info.tool
	if s := strings.TrimSpace(t.Title); s != "" {
		parts = append(parts, s)
	}
	if s := strings.TrimSpace(t.Description); s != "" {
		parts = append(parts, s)
	}
	if r.info.params != nil {
		props := make([]string, 0, len(r.info.params.Properties))
		for k := range r.info.params.Properties {
			props = append(props, k)
		}
		slices.Sort(props)
		parts = append(parts, props...)
	}
	return strings.Join(parts, " ")
}

// toolSearchSpec is the tool_search tool offered in place of the deferred
// tools (for MCP servers, so it names no other source of tools).
func toolSearchSpec() registry.ToolSearchSpec {
	params := registry.Object(map[string]*registry.Schema{
		"query": registry.String(toolSearchQueryDescription),
		"limit": registry.Number(toolSearchLimitDescription),
	}, []string{"query"}, registry.AllowAdditional(false))
	return registry.ToolSearchSpec{Description: toolSearchDescription, Parameters: params}
}

// searchHandler answers tool_search calls from the index of one tool set.
type searchHandler struct{ ix *searchIndex }

// Kind is tool_search.
func (*searchHandler) Kind() registry.PayloadKind { return registry.PayloadToolSearch }

// IsMutating is false: a search changes nothing.
func (*searchHandler) IsMutating(context.Context, registry.Invocation) bool { return false }

// Handle ranks the deferred tools against the query and answers with the
// best ones, grouped into their servers' namespaces in rank order of each
// namespace's best tool.
func (h *searchHandler) Handle(_ context.Context, inv registry.Invocation) (registry.Output, error) {
	p, ok := inv.Payload.(registry.ToolSearchPayload)
	if !ok {
		return registry.Output{}, apperr.New(apperr.Invalid, "tool_search handler received unsupported payload")
	}
	var args struct {
		Query string   `json:"query"`
		Limit *float64 `json:"limit"`
	}
	if err := json.Unmarshal([]byte(p.Arguments), &args); err != nil {
		return registry.Output{}, apperr.New(apperr.Invalid, "failed to parse tool_search arguments: %v", err)
	}
	query := strings.TrimSpace(args.Query)
	if query == "" {
		return registry.Output{}, apperr.New(apperr.Invalid, "query must not be empty")
	}
	limit := ToolSearchDefaultLimit
	if args.Limit != nil {
		limit = int(*args.Limit)
	}
	if limit <= 0 {
		return registry.Output{}, apperr.New(apperr.Invalid, "limit must be greater than zero")
	}
	var tools []registry.ToolSpec
	pos := map[string]int{}
	for _, i := range h.ix.search(query, limit) {
		e := h.ix.entries[i]
		j, seen := pos[e.namespace]
		if !seen {
			j = len(tools)
			pos[e.namespace] = j
			tools = append(tools, registry.NamespaceSpec{Name: e.namespace})
		}
		ns := tools[j].(registry.NamespaceSpec)
		ns.Tools = append(ns.Tools, e.fn)
		tools[j] = ns
	}
	success := true
	return registry.Output{Tools: tools, Success: &success}, nil
}
