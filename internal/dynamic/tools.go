package dynamic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/registry"
)

// Limits bounds what a client may register on one thread. A zero field takes
// its value from DefaultLimits.
type Limits struct {
	// MaxTools is the number of functions a thread may register, counting
	// the functions inside namespaces.
	MaxTools int
	// MaxNameLen is the length limit of tool and namespace names, in
	// characters (names are ASCII).
	MaxNameLen int
	// MaxDescriptionBytes bounds each tool or namespace description.
	MaxDescriptionBytes int
	// MaxSchemaBytes bounds each input schema, both as sent by the client
	// and as sanitized for the model (after $ref expansion).
	MaxSchemaBytes int
	// MaxTotalBytes bounds the sum of every description and input schema of
	// the thread, which is what is persisted with it.
	MaxTotalBytes int
}

// DefaultLimits are the registration limits appserver applies:
//
//   - 128 functions per thread (a larger tool list hurts the model anyway);
//   - names of at most 64 characters from [a-zA-Z0-9_-] (what both the
//     Responses and the Chat Completions APIs accept);
//   - descriptions of at most 4 KiB;
//   - input schemas of at most 64 KiB, before and after sanitizing;
//   - 1 MiB for all descriptions and schemas of a thread together.
var DefaultLimits = Limits{
	MaxTools:            128,
	MaxNameLen:          64,
	MaxDescriptionBytes: 4 << 10,
	MaxSchemaBytes:      64 << 10,
	MaxTotalBytes:       1 << 20,
}

func (l Limits) withDefaults() Limits {
	if l.MaxTools <= 0 {
		l.MaxTools = DefaultLimits.MaxTools
	}
	if l.MaxNameLen <= 0 {
		l.MaxNameLen = DefaultLimits.MaxNameLen
	}
	if l.MaxDescriptionBytes <= 0 {
		l.MaxDescriptionBytes = DefaultLimits.MaxDescriptionBytes
	}
	if l.MaxSchemaBytes <= 0 {
		l.MaxSchemaBytes = DefaultLimits.MaxSchemaBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultLimits.MaxTotalBytes
	}
	return l
}

// Options configure Validate.
type Options struct {
	// Limits bound the registration; zero fields use DefaultLimits.
	Limits Limits
	// Builtins are the top-level names already taken by the daemon's own
	// tools (shell, apply_patch, update_plan, ...). A dynamic function or
	// namespace may not use one of them.
	Builtins []string
}

// reservedNamespaces are namespace names the Responses API uses itself
// (current Codex rejects them for dynamic tools).
var reservedNamespaces = map[string]bool{
	"api_tool": true, "browser": true, "computer": true, "container": true,
	"file_search": true, "functions": true, "image_gen": true, "multi_tool_use": true,
	"python": true, "python_user_visible": true, "submodel_delegator": true,
	"terminal": true, "tool_search": true, "web": true,
}

// Tool is one registered dynamic function.
type Tool struct {
	// Namespace is the namespace the tool belongs to, "" for a top-level
	// function.
	Namespace string
	// Name is the function name.
	Name string
	// Description tells the model what the tool does.
	Description string
	// DeferLoading keeps the tool callable but out of the model's tool list.
	DeferLoading bool
	// InputSchema is the schema as the client registered it (compacted).
	// Arguments are validated against it.
	InputSchema json.RawMessage
	// Schema is InputSchema sanitized into the subset sent to the model.
	Schema *registry.Schema

	validator *argValidator
}

// DisplayName returns "ns.name" for namespaced tools, otherwise the name.
func (t *Tool) DisplayName() string { return displayName(t.Namespace, t.Name) }

// ValidateArguments checks decoded arguments (as produced by encoding/json
// with UseNumber) against the tool's input schema. The error text is meant
// for the model.
func (t *Tool) ValidateArguments(args any) error {
	if t.validator == nil {
		return nil
	}
	err := t.validator.validate(args)
	if ae, ok := err.(*ArgumentsError); ok {
		ae.Tool = t.DisplayName()
	}
	return err
}

func (t *Tool) functionSpec() registry.FunctionSpec {
	return registry.FunctionSpec{Name: t.Name, Description: t.Description, DeferLoading: t.DeferLoading, Parameters: t.Schema}
}

func displayName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "." + name
}

type toolKey struct{ namespace, name string }

// group is one top-level entry of the model's tool list: a function
// (namespace "") or a namespace with its functions.
type group struct {
	namespace   string
	description string
	tools       []*Tool
}

// Tools are the dynamic tools of one thread, validated. A nil *Tools has no
// tools. It is immutable and safe for concurrent use.
//
// Tools encodes to JSON as the normalized list of specs the client sent (a
// missing "type" written as "function"), which is what is persisted with the
// thread; decoding re-validates it with DefaultLimits and no built-in names
// (see Restore).
type Tools struct {
	specs  []api.DynamicToolSpec
	tools  []*Tool
	byKey  map[toolKey]*Tool
	groups []group
}

// Validate checks a thread's dynamicTools and returns the registered tools.
// A missing "type" is treated as "function", as 0.169.0 does. Namespace
// entries with the same name are merged. Every failure is an apperr.Invalid
// error whose message names the offending tool:
//
//   - empty names, names with surrounding whitespace or outside
//     [a-zA-Z0-9_-], names longer than Limits.MaxNameLen;
//   - reserved names ("mcp", "mcp__*", Responses API namespaces);
//   - a top-level function or namespace named like a built-in tool;
//   - duplicate names (in the same namespace, or a function and a namespace
//     sharing a top-level name);
//   - an unknown type, a namespace without functions or with a nested
//     namespace;
//   - a missing or unsupported input schema (registry.Sanitize);
//   - too many tools, or a description or schema over the limits.
func Validate(specs []api.DynamicToolSpec, opts Options) (*Tools, error) {
	return validate(specs, opts, false)
}

// validate is Validate; restoring says the specs were accepted before and
// are read back from storage.
func validate(specs []api.DynamicToolSpec, opts Options, restoring bool) (*Tools, error) {
	lim := opts.Limits.withDefaults()
	v := &validation{
		restoring: restoring,
		lim:       lim,
		builtins:  make(map[string]bool, len(opts.Builtins)),
		t:         &Tools{byKey: map[toolKey]*Tool{}},
		nsIndex:   map[string]int{},
		topLevel:  map[string]string{},
	}
	for _, b := range opts.Builtins {
		v.builtins[b] = true
	}
	if len(specs) > lim.MaxTools {
		return nil, invalid("too many dynamic tools: %d (limit %d)", len(specs), lim.MaxTools)
	}
	for i, spec := range specs {
		if err := v.spec(i, spec); err != nil {
			return nil, err
		}
	}
	return v.t, nil
}

type validation struct {
	// restoring keeps a stored tool whose schema the argument validator
	// cannot compile (one registered before validation was full), without
	// argument validation, rather than fail to resume its thread.
	restoring bool
	lim       Limits
	builtins  map[string]bool
	t         *Tools
	total     int
	nsIndex   map[string]int    // namespace → index in t.groups
	topLevel  map[string]string // top-level name → "function" or "namespace"
}

func invalid(format string, args ...any) error {
	return apperr.New(apperr.Invalid, format, args...)
}

func (v *validation) spec(i int, spec api.DynamicToolSpec) error {
	switch spec.Type {
	case "", api.DynamicToolFunction:
		tool, norm, err := v.function("", spec)
		if err != nil {
			return err
		}
		if kind, dup := v.topLevel[tool.Name]; dup {
			if kind == "namespace" {
				return invalid("dynamic tool name conflicts with dynamic tool namespace: %s", tool.Name)
			}
			return invalid("duplicate dynamic tool name: %s", tool.Name)
		}
		v.topLevel[tool.Name] = "function"
		v.add(tool)
		v.t.groups = append(v.t.groups, group{tools: []*Tool{tool}})
		v.t.specs = append(v.t.specs, norm)
		return nil
	case api.DynamicToolNamespace:
		return v.namespace(spec)
	default:
		name := spec.Name
		if name == "" {
			name = fmt.Sprintf("dynamicTools[%d]", i)
		}
		return invalid("unknown dynamic tool type %q for %s", string(spec.Type), escape(name))
	}
}

func (v *validation) namespace(spec api.DynamicToolSpec) error {
	ns := spec.Name
	if err := v.identifier(ns, "dynamic tool namespace", ""); err != nil {
		return err
	}
	if ns == "mcp" || strings.HasPrefix(ns, "mcp__") {
		return invalid("dynamic tool namespace is reserved: %s", ns)
	}
	if reservedNamespaces[ns] {
		return invalid("dynamic tool namespace collides with a reserved Responses API namespace: %s", ns)
	}
	if v.builtins[ns] {
		return invalid("dynamic tool namespace conflicts with a built-in tool: %s", ns)
	}
	if kind := v.topLevel[ns]; kind == "function" {
		return invalid("dynamic tool namespace conflicts with dynamic tool name: %s", ns)
	}
	if err := v.description(spec.Description, "namespace "+ns); err != nil {
		return err
	}
	v.total += len(spec.Description)
	if len(spec.Tools) == 0 {
		return invalid("dynamic tool namespace %s must contain at least one tool", ns)
	}
	if len(v.t.tools)+len(spec.Tools) > v.lim.MaxTools {
		return invalid("too many dynamic tools: more than %d", v.lim.MaxTools)
	}
	idx, seen := v.nsIndex[ns]
	if !seen {
		v.topLevel[ns] = "namespace"
		idx = len(v.t.groups)
		v.nsIndex[ns] = idx
		v.t.groups = append(v.t.groups, group{namespace: ns, description: spec.Description})
	} else if v.t.groups[idx].description == "" {
		v.t.groups[idx].description = spec.Description
	}
	norm := api.DynamicToolSpec{Type: api.DynamicToolNamespace, Name: ns, Description: spec.Description}
	for _, fs := range spec.Tools {
		if fs.Type != "" && fs.Type != api.DynamicToolFunction {
			return invalid("dynamic tool namespace %s: tool %s must be of type function, not %q", ns, escape(fs.Name), string(fs.Type))
		}
		tool, fnorm, err := v.function(ns, fs)
		if err != nil {
			return err
		}
		if _, dup := v.t.byKey[toolKey{ns, tool.Name}]; dup {
			return invalid("duplicate dynamic tool name in namespace %s: %s", ns, tool.Name)
		}
		v.add(tool)
		v.t.groups[idx].tools = append(v.t.groups[idx].tools, tool)
		norm.Tools = append(norm.Tools, fnorm)
	}
	v.t.specs = append(v.t.specs, norm)
	return nil
}

// function validates one function spec and returns the tool and its
// normalized spec.
func (v *validation) function(ns string, spec api.DynamicToolSpec) (*Tool, api.DynamicToolSpec, error) {
	name := spec.Name
	if err := v.identifier(name, "dynamic tool name", ns); err != nil {
		return nil, api.DynamicToolSpec{}, err
	}
	display := displayName(ns, name)
	if ns == "" {
		if name == "mcp" || strings.HasPrefix(name, "mcp__") {
			return nil, api.DynamicToolSpec{}, invalid("dynamic tool name is reserved: %s", name)
		}
		if v.builtins[name] {
			return nil, api.DynamicToolSpec{}, invalid("dynamic tool name conflicts with a built-in tool: %s", name)
		}
	}
	if len(v.t.tools) >= v.lim.MaxTools {
		return nil, api.DynamicToolSpec{}, invalid("too many dynamic tools: more than %d", v.lim.MaxTools)
	}
	if err := v.description(spec.Description, display); err != nil {
		return nil, api.DynamicToolSpec{}, err
	}
	raw := bytes.TrimSpace(spec.InputSchema)
	if len(raw) == 0 {
		return nil, api.DynamicToolSpec{}, invalid("dynamic tool input schema is missing for %s", display)
	}
	if len(raw) > v.lim.MaxSchemaBytes {
		return nil, api.DynamicToolSpec{}, invalid("dynamic tool input schema is too large for %s: %d bytes (limit %d)", display, len(raw), v.lim.MaxSchemaBytes)
	}
	schema, err := registry.Sanitize(raw)
	if err != nil {
		return nil, api.DynamicToolSpec{}, invalid("dynamic tool input schema is not supported for %s: %v", display, err)
	}
	sanitized, err := json.Marshal(schema)
	if err != nil {
		return nil, api.DynamicToolSpec{}, invalid("dynamic tool input schema is not supported for %s: %v", display, err)
	}
	if len(sanitized) > v.lim.MaxSchemaBytes {
		return nil, api.DynamicToolSpec{}, invalid("dynamic tool input schema is too large for %s after $ref expansion: %d bytes (limit %d)", display, len(sanitized), v.lim.MaxSchemaBytes)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, api.DynamicToolSpec{}, invalid("dynamic tool input schema is not supported for %s: %v", display, err)
	}
	val, err := newArgValidator(compact.Bytes())
	if err != nil && !v.restoring {
		return nil, api.DynamicToolSpec{}, invalid("dynamic tool input schema is not supported for %s: %v", display, err)
	}
	v.total += len(spec.Description) + compact.Len()
	if v.total > v.lim.MaxTotalBytes {
		return nil, api.DynamicToolSpec{}, invalid("dynamic tools are too large: more than %d bytes of descriptions and schemas (at %s)", v.lim.MaxTotalBytes, display)
	}
	deferLoading := spec.DeferLoading != nil && *spec.DeferLoading
	tool := &Tool{
		Namespace:    ns,
		Name:         name,
		Description:  spec.Description,
		DeferLoading: deferLoading,
		InputSchema:  json.RawMessage(slices.Clone(compact.Bytes())),
		Schema:       schema,
		validator:    val,
	}
	norm := api.DynamicToolSpec{
		Type:        api.DynamicToolFunction,
		Name:        name,
		Description: spec.Description,
		InputSchema: tool.InputSchema,
	}
	if spec.DeferLoading != nil {
		norm.DeferLoading = new(*spec.DeferLoading)
	}
	return tool, norm, nil
}

func (v *validation) add(t *Tool) {
	v.t.tools = append(v.t.tools, t)
	v.t.byKey[toolKey{t.Namespace, t.Name}] = t
}

// identifier checks a tool or namespace name; ns, when set, is named in the
// error of a function inside a namespace.
func (v *validation) identifier(value, label, ns string) error {
	where := ""
	if ns != "" {
		where = " in namespace " + ns
	}
	trimmed := strings.TrimSpace(value)
	if trimmed == "" {
		return invalid("%s must not be empty%s", label, where)
	}
	if trimmed != value {
		return invalid("%s has leading/trailing whitespace%s: %s", label, where, escape(value))
	}
	for i := 0; i < len(value); i++ {
		c := value[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return invalid("%s must match ^[a-zA-Z0-9_-]+$%s: %s", label, where, escape(value))
		}
	}
	if len(value) > v.lim.MaxNameLen {
		return invalid("%s must be at most %d characters%s: %s", label, v.lim.MaxNameLen, where, value)
	}
	return nil
}

func (v *validation) description(desc, display string) error {
	if len(desc) > v.lim.MaxDescriptionBytes {
		return invalid("dynamic tool description is too large for %s: %d bytes (limit %d)", display, len(desc), v.lim.MaxDescriptionBytes)
	}
	if !utf8.ValidString(desc) {
		return invalid("dynamic tool description is not valid UTF-8 for %s", display)
	}
	return nil
}

// escape quotes a client-supplied name for an error message, bounding its
// length.
func escape(s string) string {
	const limit = 80
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	q := fmt.Sprintf("%q", s)
	return q[1 : len(q)-1]
}

// Restore decodes Tools persisted with a thread (the JSON written by
// Tools.MarshalJSON) and validates them again with opts. JSON null or empty
// input gives no tools.
func Restore(data []byte, opts Options) (*Tools, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return &Tools{byKey: map[toolKey]*Tool{}}, nil
	}
	var specs []api.DynamicToolSpec
	if err := json.Unmarshal(data, &specs); err != nil {
		return nil, apperr.Wrap(apperr.Invalid, err, "stored dynamic tools do not decode")
	}
	return validate(specs, opts, true)
}

// MarshalJSON encodes the normalized specs, [] when there are none.
func (t *Tools) MarshalJSON() ([]byte, error) {
	if t == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(api.List[api.DynamicToolSpec](t.specs))
}

// UnmarshalJSON is Restore with DefaultLimits and no built-in names.
func (t *Tools) UnmarshalJSON(data []byte) error {
	out, err := Restore(data, Options{})
	if err != nil {
		return err
	}
	*t = *out
	return nil
}

// Len returns the number of registered functions.
func (t *Tools) Len() int {
	if t == nil {
		return 0
	}
	return len(t.tools)
}

// Specs returns the normalized specs as registered (a copy of the list).
func (t *Tools) Specs() []api.DynamicToolSpec {
	if t == nil {
		return nil
	}
	return slices.Clone(t.specs)
}

// All returns every registered function in registration order.
func (t *Tools) All() []*Tool {
	if t == nil {
		return nil
	}
	return slices.Clone(t.tools)
}

// Lookup returns the tool registered under namespace ("" for top level) and
// name.
func (t *Tools) Lookup(namespace, name string) (*Tool, bool) {
	if t == nil {
		return nil, false
	}
	tool, ok := t.byKey[toolKey{namespace, name}]
	return tool, ok
}

// AddTo registers every dynamic tool on b, deferred ones included, with h as
// their handler. Top-level functions become FunctionSpecs, namespaces
// NamespaceSpecs; none is parallel-capable (docs/tools.md §5). Deferred functions
// carry DeferLoading; pass the builder's spec list through OfferedSpecs
// before sending it to the model. A clash with a name registered earlier on
// b is returned as the builder's error.
func (t *Tools) AddTo(b *registry.Builder, h registry.Handler) error {
	if t == nil {
		return nil
	}
	for _, g := range t.groups {
		var spec registry.ToolSpec
		if g.namespace == "" {
			spec = g.tools[0].functionSpec()
		} else {
			fns := make([]registry.FunctionSpec, len(g.tools))
			for i, tool := range g.tools {
				fns[i] = tool.functionSpec()
			}
			spec = registry.NamespaceSpec{Name: g.namespace, Description: g.description, Tools: fns}
		}
		if err := b.Register(spec, h, false); err != nil {
			return err
		}
	}
	return nil
}

// ModelSpecs returns the specs of the dynamic tools offered to the model:
// deferred functions left out, namespaces with no offered function dropped.
func (t *Tools) ModelSpecs() []registry.ConfiguredToolSpec {
	if t == nil {
		return nil
	}
	var out []registry.ConfiguredToolSpec
	for _, g := range t.groups {
		if g.namespace == "" {
			if !g.tools[0].DeferLoading {
				out = append(out, registry.ConfiguredToolSpec{Spec: g.tools[0].functionSpec()})
			}
			continue
		}
		var fns []registry.FunctionSpec
		for _, tool := range g.tools {
			if !tool.DeferLoading {
				fns = append(fns, tool.functionSpec())
			}
		}
		if len(fns) > 0 {
			out = append(out, registry.ConfiguredToolSpec{Spec: registry.NamespaceSpec{Name: g.namespace, Description: g.description, Tools: fns}})
		}
	}
	return out
}

// OfferedSpecs filters a spec list built with AddTo (plus any other tools)
// for the model: deferred dynamic functions are removed, and a dynamic
// namespace left without functions is dropped. Other specs pass unchanged.
func (t *Tools) OfferedSpecs(specs []registry.ConfiguredToolSpec) []registry.ConfiguredToolSpec {
	if t == nil || len(t.tools) == 0 {
		return specs
	}
	out := make([]registry.ConfiguredToolSpec, 0, len(specs))
	for _, cs := range specs {
		switch s := cs.Spec.(type) {
		case registry.FunctionSpec:
			if tool, ok := t.byKey[toolKey{"", s.Name}]; ok && tool.DeferLoading {
				continue
			}
		case registry.NamespaceSpec:
			if _, ours := t.nsGroup(s.Name); ours {
				fns := make([]registry.FunctionSpec, 0, len(s.Tools))
				for _, f := range s.Tools {
					if tool, ok := t.byKey[toolKey{s.Name, f.Name}]; ok && tool.DeferLoading {
						continue
					}
					fns = append(fns, f)
				}
				if len(fns) == 0 {
					continue
				}
				s.Tools = fns
				cs.Spec = s
			}
		}
		out = append(out, cs)
	}
	return out
}

func (t *Tools) nsGroup(ns string) (group, bool) {
	for _, g := range t.groups {
		if g.namespace == ns && ns != "" {
			return g, true
		}
	}
	return group{}, false
}
