package registry

import (
	"encoding/json"
	"strconv"
)

// ToolSpec is one entry of the request's tools array (docs/tools.md §1.3). It is
// one of FunctionSpec, FreeformSpec, LocalShellSpec, WebSearchSpec,
// NamespaceSpec or ToolSearchSpec; each encodes to its exact wire JSON,
// tagged by "type".
type ToolSpec interface {
	json.Marshaler
	// ToolName is the name the spec is registered under.
	ToolName() string
	isToolSpec()
}

// FunctionSpec is a JSON function tool.
type FunctionSpec struct {
	// Name is the tool name.
	Name string
	// Description tells the model what the tool does.
	Description string
	// Strict asks for Structured Outputs; the builder refuses it unless
	// Parameters passes ValidateStrict.
	Strict bool
	// DeferLoading hides the tool until tool search finds it (current Codex).
	DeferLoading bool
	// Parameters is the arguments schema; nil is sent as an empty object
	// schema.
	Parameters *Schema
}

// ToolName returns Name.
func (f FunctionSpec) ToolName() string { return f.Name }
func (FunctionSpec) isToolSpec()        {}

// MarshalJSON encodes {"type":"function","name","description","strict",
// ["defer_loading":true,] "parameters"}.
func (f FunctionSpec) MarshalJSON() ([]byte, error) {
	w := f.wire(true)
	return w.appendJSON(make([]byte, 0, w.sizeHint()))
}

// functionWire is a function spec as it is sent, the object
// functionWire.appendJSON writes.
type functionWire struct {
	// Type is "function", or empty to leave the key out (inside a Chat
	// Completions tool, which has its own).
	Type         string
	Name         string
	Description  string
	Strict       bool
	DeferLoading bool
	Parameters   *Schema
}

func (f FunctionSpec) wire(tagged bool) functionWire {
	w := functionWire{Name: f.Name, Description: f.Description, Strict: f.Strict, DeferLoading: f.DeferLoading, Parameters: f.Parameters}
	if tagged {
		w.Type = "function"
	}
	if w.Parameters == nil {
		w.Parameters = Object(nil, nil, nil)
	}
	return w
}

// appendJSON appends {["type",] "name","description","strict",
// ["defer_loading":true,] "parameters"} to b, the bytes encoding/json wrote
// for the struct with tags type,omitempty, name, description, strict,
// defer_loading,omitzero and parameters (the encoding is hand-written for
// speed: see Schema.appendJSON).
func (w functionWire) appendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	if w.Type != "" {
		b = append(b, `"type":`...)
		b = appendJSONString(b, w.Type)
		b = append(b, ',')
	}
	b = append(b, `"name":`...)
	b = appendJSONString(b, w.Name)
	b = append(b, `,"description":`...)
	b = appendJSONString(b, w.Description)
	b = append(b, `,"strict":`...)
	b = strconv.AppendBool(b, w.Strict)
	if w.DeferLoading {
		b = append(b, `,"defer_loading":true`...)
	}
	b = append(b, `,"parameters":`...)
	b, err := w.Parameters.appendJSON(b)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// sizeHint is a buffer capacity that seldom needs to grow to hold the
// encoding of w (see Schema.sizeHint).
func (w functionWire) sizeHint() int {
	return 80 + len(w.Name) + len(w.Description)*11/10 + w.Parameters.sizeHint(0)
}

// FreeformFormat is the grammar a freeform tool's input must match.
type FreeformFormat struct {
	// Type is "grammar" (the default when empty).
	Type string `json:"type"`
	// Syntax is "lark" (the default when empty).
	Syntax string `json:"syntax"`
	// Definition is the grammar text.
	Definition string `json:"definition"`
}

// FreeformSpec is a custom (freeform) tool: the model emits raw text
// matching a Lark grammar, with no JSON wrapping. Used by apply_patch.
type FreeformSpec struct {
	// Name is the tool name.
	Name string
	// Description tells the model what the tool does.
	Description string
	// Format is the grammar of the input.
	Format FreeformFormat
}

// ToolName returns Name.
func (f FreeformSpec) ToolName() string { return f.Name }
func (FreeformSpec) isToolSpec()        {}

// MarshalJSON encodes {"type":"custom","name","description","format":{
// "type":"grammar","syntax":"lark","definition"}}.
func (f FreeformSpec) MarshalJSON() ([]byte, error) {
	format := f.Format
	if format.Type == "" {
		format.Type = "grammar"
	}
	if format.Syntax == "" {
		format.Syntax = "lark"
	}
	return json.Marshal(struct {
		Type        string         `json:"type"`
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Format      FreeformFormat `json:"format"`
	}{"custom", f.Name, f.Description, format})
}

// LocalShellName is the name the local_shell spec and payloads use.
const LocalShellName = "local_shell"

// LocalShellSpec is the Responses-native shell tool; the model emits
// local_shell_call items for it.
type LocalShellSpec struct{}

// ToolName returns "local_shell".
func (LocalShellSpec) ToolName() string { return LocalShellName }
func (LocalShellSpec) isToolSpec()      {}

// MarshalJSON encodes {"type":"local_shell"}.
func (LocalShellSpec) MarshalJSON() ([]byte, error) { return []byte(`{"type":"local_shell"}`), nil }

// WebSearchName is the name the hosted web_search spec is registered under.
const WebSearchName = "web_search"

// WebSearchFilters restricts hosted web search.
type WebSearchFilters struct {
	// AllowedDomains limits results to these domains.
	AllowedDomains []string `json:"allowed_domains,omitzero"`
}

// WebSearchUserLocation is the approximate user location for web search.
type WebSearchUserLocation struct {
	// Type is the location kind, e.g. "approximate".
	Type string `json:"type,omitzero"`
	// Country is an ISO country code.
	Country string `json:"country,omitzero"`
	// Region is a region name.
	Region string `json:"region,omitzero"`
	// City is a city name.
	City string `json:"city,omitzero"`
	// Timezone is an IANA time zone.
	Timezone string `json:"timezone,omitzero"`
}

// WebSearchSpec is the hosted web search tool. The provider runs it; no
// handler is registered and no function output is produced.
type WebSearchSpec struct {
	// ExternalWebAccess is false for the cached index, true for live
	// access; nil omits it.
	ExternalWebAccess *bool `json:"external_web_access,omitzero"`
	// Filters restricts results (current Codex).
	Filters *WebSearchFilters `json:"filters,omitzero"`
	// UserLocation localizes results (current Codex).
	UserLocation *WebSearchUserLocation `json:"user_location,omitzero"`
	// SearchContextSize is low, medium or high (current Codex).
	SearchContextSize string `json:"search_context_size,omitzero"`
	// SearchContentTypes lists content types to search (current Codex).
	SearchContentTypes []string `json:"search_content_types,omitzero"`
}

// ToolName returns "web_search".
func (WebSearchSpec) ToolName() string { return WebSearchName }
func (WebSearchSpec) isToolSpec()      {}

// MarshalJSON encodes {"type":"web_search", ...optional fields}.
func (w WebSearchSpec) MarshalJSON() ([]byte, error) {
	type plain WebSearchSpec
	return json.Marshal(struct {
		Type string `json:"type"`
		plain
	}{"web_search", plain(w)})
}

// NamespaceSpec groups function tools (current Codex); the model addresses
// them by namespace and name.
type NamespaceSpec struct {
	// Name is the namespace.
	Name string
	// Description defaults to "Tools in the <ns> namespace." when empty.
	Description string
	// Tools are the functions in the namespace.
	Tools []FunctionSpec
	// Cache, when set, holds the JSON of functions encoded beforehand
	// (NewSpecCache): a tool equal to one of them is not encoded again.
	Cache *SpecCache
}

// ToolName returns the namespace name.
func (n NamespaceSpec) ToolName() string { return n.Name }
func (NamespaceSpec) isToolSpec()        {}

// description is the Description sent: the default when it is empty.
func (n NamespaceSpec) description() string {
	if n.Description == "" {
		return "Tools in the " + n.Name + " namespace."
	}
	return n.Description
}

// MarshalJSON encodes {"type":"namespace","name","description","tools":[...]},
// each tool as its MarshalJSON writes it: the bytes json.Marshal wrote for
// the struct with those four fields.
func (n NamespaceSpec) MarshalJSON() ([]byte, error) {
	desc := n.description()
	// The tools' JSON from the cache, nil where it has none.
	var cached [][]byte
	// The fixed keys take 58 bytes; escapes may lengthen the strings.
	size := 128 + (len(n.Name)+len(desc))*11/10
	for i, t := range n.Tools {
		if raw, ok := n.Cache.lookup(t); ok {
			if cached == nil {
				cached = make([][]byte, len(n.Tools))
			}
			cached[i] = raw
			size += len(raw) + 1
			continue
		}
		size += t.wire(true).sizeHint()
	}
	b := make([]byte, 0, size)
	b = append(b, `{"type":"namespace","name":`...)
	b = appendJSONString(b, n.Name)
	b = append(b, `,"description":`...)
	b = appendJSONString(b, desc)
	b = append(b, `,"tools":[`...)
	for i, t := range n.Tools {
		if i > 0 {
			b = append(b, ',')
		}
		if cached != nil && cached[i] != nil {
			b = append(b, cached[i]...)
			continue
		}
		var err error
		if b, err = t.wire(true).appendJSON(b); err != nil {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}

// SpecCache holds the JSON of function specs encoded once, for the
// namespaces of tools that many turns offer alike (an MCP server's, from
// one listing of its tools). It is keyed by the specs' values, so a spec
// changed by copying (another name, DeferLoading, ClassicSpec's schema)
// is not found and is encoded afresh; the schemas themselves must not
// change. The namespace of 40 such tools (38 KB) took 0.31–0.35 ms a
// turn to encode through json.Marshal; written by hand it takes 60–63 µs,
// and 13–15 µs with its tools from the cache (BenchmarkNamespaceSpec).
type SpecCache struct {
	m map[FunctionSpec][]byte
}

// NewSpecCache encodes specs once; specs that do not encode are left out.
func NewSpecCache(specs []FunctionSpec) *SpecCache {
	c := &SpecCache{m: make(map[FunctionSpec][]byte, len(specs))}
	for _, f := range specs {
		if raw, err := f.MarshalJSON(); err == nil {
			c.m[f] = raw
		}
	}
	return c
}

// Has reports whether c holds f's JSON (never on a nil c).
func (c *SpecCache) Has(f FunctionSpec) bool {
	_, ok := c.lookup(f)
	return ok
}

// lookup returns f's JSON when c holds it (never on a nil c).
func (c *SpecCache) lookup(f FunctionSpec) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	raw, ok := c.m[f]
	return raw, ok
}

// ToolSearchName is the name the tool_search spec and its calls use.
const ToolSearchName = "tool_search"

// ToolSearchSpec is the client-executed tool_search tool (current Codex):
// the model searches the tools left out of the request (deferred) and gets
// the matches in a tool_search_output, then calls them by namespace and
// name.
type ToolSearchSpec struct {
	// Description tells the model what it can find.
	Description string
	// Parameters is the arguments schema ({"query","limit"}).
	Parameters *Schema
}

// ToolName returns "tool_search".
func (ToolSearchSpec) ToolName() string { return ToolSearchName }
func (ToolSearchSpec) isToolSpec()      {}

// MarshalJSON encodes {"type":"tool_search","execution":"client",
// "description","parameters"}.
func (t ToolSearchSpec) MarshalJSON() ([]byte, error) {
	params := t.Parameters
	if params == nil {
		params = Object(nil, nil, nil)
	}
	return json.Marshal(struct {
		Type        string  `json:"type"`
		Execution   string  `json:"execution"`
		Description string  `json:"description"`
		Parameters  *Schema `json:"parameters"`
	}{"tool_search", "client", t.Description, params})
}

// ConfiguredToolSpec is a spec plus whether calls to it may run in parallel
// with other parallel-capable calls.
type ConfiguredToolSpec struct {
	// Spec is what is sent to the model.
	Spec ToolSpec
	// SupportsParallelToolCalls lets calls take the shared side of the
	// turn's parallel lock.
	SupportsParallelToolCalls bool
}

// ChatCompletionsTool encodes spec for Chat Completions providers:
// {"type":"function","function":{name, description, strict, parameters}}.
// ok is false for variants Chat Completions does not offer (freeform, hosted
// and namespace tools).
func ChatCompletionsTool(spec ToolSpec) (raw json.RawMessage, ok bool, err error) {
	f, isFunc := spec.(FunctionSpec)
	if !isFunc {
		if p, isPtr := spec.(*FunctionSpec); isPtr && p != nil {
			f, isFunc = *p, true
		}
	}
	if !isFunc {
		return nil, false, nil
	}
	w := f.wire(false)
	w.DeferLoading = false
	b := make([]byte, 0, w.sizeHint()+32)
	b, err = w.appendJSON(append(b, `{"type":"function","function":`...))
	if err != nil {
		return nil, false, err
	}
	return append(b, '}'), true, nil
}

// ClassicSpec returns spec with its schemas converted by Schema.Classic, for
// models that do not accept the current schema model.
func ClassicSpec(spec ToolSpec) ToolSpec {
	switch s := spec.(type) {
	case FunctionSpec:
		s.Parameters = s.Parameters.Classic()
		return s
	case *FunctionSpec:
		c := *s
		c.Parameters = c.Parameters.Classic()
		return c
	case NamespaceSpec:
		tools := make([]FunctionSpec, len(s.Tools))
		for i, t := range s.Tools {
			t.Parameters = t.Parameters.Classic()
			tools[i] = t
		}
		s.Tools = tools
		return s
	default:
		return spec
	}
}
