package mcp

import (
	"fmt"
	"slices"
	"testing"
)

// benchEntries are n tools of ten servers with descriptions of a dozen
// words, about what a user with several MCP servers has.
func benchEntries(n int) []searchEntry {
	entries := make([]searchEntry, n)
	for i := range entries {
		server := fmt.Sprintf("server%d", i%10)
		name := fmt.Sprintf("tool_%d_list_items", i)
		entries[i] = entry(server, name, fmt.Sprintf("mcp__%s__%s %s %s Lists the items of kind %d with paging cursor filters and sorting options query limit", server, name, name, server, i))
	}
	return entries
}

// BenchmarkToolSearchIndex is the cost of indexing 200 deferred tools,
// paid by each turn that defers them.
func BenchmarkToolSearchIndex(b *testing.B) {
	entries := benchEntries(200)
	b.ReportAllocs()
	for b.Loop() {
		newSearchIndex(entries)
	}
}

// BenchmarkToolSearchIndexCached is what a turn pays for the index of an
// unchanged tool set.
func BenchmarkToolSearchIndexCached(b *testing.B) {
	entries := benchEntries(200)
	var c searchCache
	c.index(entries)
	again := slices.Clone(entries) // each turn assembles its own slice
	b.ReportAllocs()
	for b.Loop() {
		c.index(again)
	}
}

// BenchmarkToolSearchQuery is the cost of one search over 200 tools.
func BenchmarkToolSearchQuery(b *testing.B) {
	ix := newSearchIndex(benchEntries(200))
	b.ReportAllocs()
	for b.Loop() {
		ix.search("list items with cursor", ToolSearchDefaultLimit)
	}
}
