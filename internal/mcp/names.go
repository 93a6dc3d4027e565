package mcp

import (
	"crypto/sha1"
	"encoding/hex"
	"regexp"
	"strings"
)

// Qualified names of MCP tools (docs/tools.md §1.7).
const (
	// namePrefix and nameDelimiter build mcp__server__tool.
	namePrefix    = "mcp"
	nameDelimiter = "__"
	// maxToolNameLen is the Responses API's limit on function names.
	maxToolNameLen = 64
	// hashKeep is how much of an over-long name is kept before its hash.
	hashKeep = maxToolNameLen - 2*sha1.Size
)

// validServerName is the rule server names must follow; a server with
// another name is refused (it fails to start, the others are unaffected).
var validServerName = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// rawQualifiedName is the unsanitized mcp__server__tool.
func rawQualifiedName(server, tool string) string {
	return namePrefix + nameDelimiter + server + nameDelimiter + tool
}

// modelToolName is the name the model sees for a raw name (a qualified
// name, a tool's own name or a namespace): as codex 0.171.0 names them,
// characters outside [A-Za-z0-9_] ('-' included) become '_', and a name
// longer than 64 bytes keeps its first 24 characters followed by the hex
// SHA-1 of the raw name, so that it is stable across runs and still
// unique.
func modelToolName(raw string) string {
	var b strings.Builder
	b.Grow(len(raw))
	for _, r := range raw {
		if r < 0x80 && (r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if name == "" {
		name = "_"
	}
	if len(name) <= maxToolNameLen {
		return name
	}
	sum := sha1.Sum([]byte(raw))
	return name[:hashKeep] + hex.EncodeToString(sum[:])
}

// toolRef is one MCP tool offered to the model.
type toolRef struct {
	// Name is the name the model calls.
	Name string
	// Server and Tool are the server's name and the tool's own name.
	Server, Tool string
	info         *toolInfo
}

// assignNames gives each tool its model name, in the order given (sorted by
// server, then tool, by the caller, so that the winner of a collision is
// deterministic). A raw name seen twice, or a model name already taken, is
// skipped and reported through skip.
func assignNames(tools []toolRef, skip func(ref toolRef, reason string)) []toolRef {
	raws := make(map[string]bool, len(tools))
	names := make(map[string]bool, len(tools))
	out := make([]toolRef, 0, len(tools))
	for _, t := range tools {
		raw := rawQualifiedName(t.Server, t.Tool)
		if raws[raw] {
			skip(t, "duplicate tool name "+raw)
			continue
		}
		raws[raw] = true
		t.Name = modelToolName(raw)
		if names[t.Name] {
			skip(t, "its name "+t.Name+" collides with another MCP tool's")
			continue
		}
		names[t.Name] = true
		out = append(out, t)
	}
	return out
}
