package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Direction says which side writes a type on the wire.
type Direction int

const (
	// Output types are written by appserver: results, notifications, the
	// params of server requests. Every value they can encode must be valid
	// for the schema: no required key left out, no null where none is
	// allowed, no enum value the schema does not know.
	Output Direction = iota
	// Input types are read by appserver: params, the results of server
	// requests. Decoding never rejects a missing key, so only the keys and
	// their types are compared.
	Input
)

func (d Direction) String() string { return [...]string{"output", "input"}[d] }

// Checker holds Go wire types to the definitions of a schema: every
// property of a definition is a field with the exact JSON name (or a known
// difference), every field is a property (or an extension of ours), the
// JSON types agree, an output field is left out or null only where the
// schema allows it, and the values of a Go string type's constants are
// values of the schema's enum.
//
// Types with their own MarshalJSON or UnmarshalJSON (the unions) are
// compared as far as their shape shows: a struct holding the union of its
// variants' fields is compared with the union of the variants' properties
// (presence rules do not apply, its marshaler chooses); a wrapper struct
// holding the variant in an interface field (ThreadItem) is asked, by
// decoding {"type": tag}, which Go type carries each variant of the schema
// and that type is compared with the variant. Other custom types are
// opaque: Opaque lists them, for their own tests to cover.
type Checker struct {
	p *Protocol
	// Extensions are JSON fields of ours the schema does not have, as
	// "GoType.jsonName" → why.
	Extensions map[string]string
	// Known are schema properties our types lack or shape otherwise on
	// purpose, as "Definition.property" → why.
	Known map[string]string
	// Enums are the values of each Go string type's constants, by type name
	// (see Enums).
	Enums map[string][]string

	seen     map[visit]bool
	problems map[string]bool
	used     map[string]bool
	opaque   map[string]bool
}

type visit struct {
	n   *Node
	t   reflect.Type
	dir Direction
}

// NewChecker returns a Checker of Go types against p.
func NewChecker(p *Protocol) *Checker {
	return &Checker{p: p, seen: map[visit]bool{}, problems: map[string]bool{}, used: map[string]bool{}, opaque: map[string]bool{}}
}

// Check compares t, in direction dir, with definition def and everything
// they reach.
func (c *Checker) Check(def string, t reflect.Type, dir Direction) {
	n := c.p.Def(def)
	if n == nil {
		c.fail("%s: no definition %s in the schema", t, def)
		return
	}
	c.check(def, n, t, dir)
}

// Problems lists what Check found, sorted.
func (c *Checker) Problems() []string {
	out := make([]string, 0, len(c.problems))
	for p := range c.problems {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Unused lists the entries of Extensions and Known no check needed: they
// are stale once the type or the schema changed.
func (c *Checker) Unused() []string {
	var out []string
	for k := range c.Extensions {
		if !c.used["ext:"+k] {
			out = append(out, "extension "+k)
		}
	}
	for k := range c.Known {
		if !c.used["known:"+k] {
			out = append(out, "known difference "+k)
		}
	}
	sort.Strings(out)
	return out
}

// Opaque lists the custom-marshalled types the checker could not look
// into, sorted.
func (c *Checker) Opaque() []string {
	out := make([]string, 0, len(c.opaque))
	for t := range c.opaque {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

func (c *Checker) fail(format string, args ...any) {
	c.problems[fmt.Sprintf(format, args...)] = true
}

func (c *Checker) known(def, prop string) bool {
	k := def + "." + prop
	if _, ok := c.Known[k]; ok {
		c.used["known:"+k] = true
		return true
	}
	return false
}

func (c *Checker) extension(t reflect.Type, field string) bool {
	k := t.Name() + "." + field
	if _, ok := c.Extensions[k]; ok {
		c.used["ext:"+k] = true
		return true
	}
	return false
}

var (
	marshaler   = reflect.TypeFor[json.Marshaler]()
	unmarshaler = reflect.TypeFor[json.Unmarshaler]()
	rawMessage  = reflect.TypeFor[json.RawMessage]()
)

// wrapper reports the element type of the api package's generic JSON
// helpers, List[T], Map[V] and Nullable[T], which encode like their
// element (a slice, a map, a value).
func wrapper(t reflect.Type) (elem reflect.Type, kind string) {
	name := t.Name()
	switch {
	case strings.HasPrefix(name, "List["):
		return t, "list"
	case strings.HasPrefix(name, "Map["):
		return t, "map"
	case strings.HasPrefix(name, "Nullable["):
		f, _ := t.FieldByName("Value")
		return f.Type.Elem(), "nullable"
	}
	return nil, ""
}

// custom reports whether t encodes (output) or decodes (input) itself.
func custom(t reflect.Type, dir Direction) bool {
	if dir == Output {
		return t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler)
	}
	return reflect.PointerTo(t).Implements(unmarshaler)
}

// nullable unwraps the shapes the reference writes for "X or null" and
// reports whether null is allowed.
func (c *Checker) nullable(n *Node) (*Node, bool) {
	n = c.p.Resolve(n)
	if n == nil || isAny(n) {
		return n, true
	}
	if n.Type.Has("null") {
		if len(n.Type) == 2 {
			m := *n
			m.Type = Types{n.Type[0]}
			if m.Type[0] == "null" {
				m.Type = Types{n.Type[1]}
			}
			return &m, true
		}
		return n, true
	}
	for _, alts := range [][]*Node{n.AnyOf, n.OneOf} {
		if len(alts) == 0 {
			continue
		}
		var rest []*Node
		null := false
		for _, a := range alts {
			if r := c.p.Resolve(a); r != nil && len(r.Type) == 1 && r.Type[0] == "null" {
				null = true
				continue
			}
			rest = append(rest, a)
		}
		if null {
			if len(rest) == 1 {
				inner, _ := c.nullable(rest[0])
				return inner, true
			}
			m := *n
			m.AnyOf, m.OneOf = nil, nil
			if len(n.AnyOf) > 0 {
				m.AnyOf = rest
			} else {
				m.OneOf = rest
			}
			return &m, true
		}
	}
	return n, false
}

// isAny reports whether n is the schema of any JSON value, null included.
func isAny(n *Node) bool {
	return len(n.Type) == 0 && n.Ref == "" && len(n.Properties) == 0 && n.Items == nil &&
		len(n.Enum) == 0 && n.Const == nil && len(n.AnyOf) == 0 && len(n.OneOf) == 0 && len(n.AllOf) == 0
}

// check compares type t with node n; at names the place for messages.
func (c *Checker) check(at string, n *Node, t reflect.Type, dir Direction) {
	n, _ = c.nullable(n)
	if n == nil {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	v := visit{n, t, dir}
	if c.seen[v] {
		return
	}
	c.seen[v] = true
	if elem, kind := wrapper(t); kind != "" {
		switch kind {
		case "list":
			c.check(at, n, reflect.SliceOf(t.Elem()), dir)
		case "map":
			c.check(at, n, reflect.MapOf(t.Key(), t.Elem()), dir)
		default:
			c.check(at, n, elem, dir)
		}
		return
	}
	if t == rawMessage || t.Kind() == reflect.Interface {
		return
	}
	n = c.merge(n)
	variants := c.variants(n)
	if custom(t, dir) {
		c.checkCustom(at, n, variants, t, dir)
		return
	}
	if len(variants) > 0 {
		if t.Kind() == reflect.Struct {
			c.checkFlatUnion(at, n, variants, t, dir)
			return
		}
		if t.Kind() == reflect.String {
			c.checkEnum(at, allEnum(c, variants), t, dir)
			return
		}
		c.fail("%s: Go %s for a union of %d variants", at, t, len(variants))
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if !n.Type.Has("object") && len(n.Properties) == 0 {
			c.fail("%s: Go struct %s for schema type %v", at, t, n.Type)
			return
		}
		c.checkStruct(at, n, t, dir)
	case reflect.Slice, reflect.Array:
		if !n.Type.Has("array") {
			c.fail("%s: Go %s for schema type %v", at, t, n.Type)
			return
		}
		if n.Items != nil {
			c.check(at+"[]", n.Items, t.Elem(), dir)
		}
	case reflect.Map:
		if !n.Type.Has("object") {
			c.fail("%s: Go %s for schema type %v", at, t, n.Type)
			return
		}
		if ap := c.additional(n); ap != nil {
			c.check(at+"{}", ap, t.Elem(), dir)
		}
	case reflect.String:
		if !n.Type.Has("string") && len(n.Enum) == 0 {
			c.fail("%s: Go %s for schema type %v", at, t, n.Type)
			return
		}
		if len(n.Enum) > 0 {
			c.checkEnum(at, strs(n.Enum), t, dir)
		}
	case reflect.Bool:
		if !n.Type.Has("boolean") {
			c.fail("%s: Go %s for schema type %v", at, t, n.Type)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if !n.Type.Has("integer") && !n.Type.Has("number") {
			c.fail("%s: Go %s for schema type %v", at, t, n.Type)
		}
	case reflect.Float32, reflect.Float64:
		if !n.Type.Has("number") && !(dir == Output && n.Type.Has("integer")) {
			c.fail("%s: Go %s for schema type %v", at, t, n.Type)
		}
	default:
		c.fail("%s: Go %s is not a JSON type", at, t)
	}
}

// merge folds an allOf of several objects into one object node.
func (c *Checker) merge(n *Node) *Node {
	if len(n.AllOf) < 2 {
		return n
	}
	m := *n
	m.AllOf = nil
	m.Properties = map[string]*Node{}
	for p, pn := range n.Properties {
		m.Properties[p] = pn
	}
	m.Required = append([]string(nil), n.Required...)
	for _, part := range n.AllOf {
		r := c.merge(c.p.Resolve(part))
		if r == nil {
			continue
		}
		for p, pn := range r.Properties {
			m.Properties[p] = pn
		}
		m.Required = append(m.Required, r.Required...)
		m.OneOf = append(m.OneOf, r.OneOf...)
		if len(r.Type) > 0 {
			m.Type = r.Type
		}
	}
	return &m
}

// additional is the schema of an object's values, nil when any value goes.
func (c *Checker) additional(n *Node) *Node {
	if len(n.AdditionalProperties) == 0 || n.AdditionalProperties[0] != '{' {
		return nil
	}
	var ap Node
	if json.Unmarshal(n.AdditionalProperties, &ap) != nil {
		return nil
	}
	return &ap
}

// variants returns the alternatives of a union node, nil for other nodes.
func (c *Checker) variants(n *Node) []*Node {
	alts := n.OneOf
	if len(alts) == 0 {
		alts = n.AnyOf
	}
	out := make([]*Node, 0, len(alts))
	for _, a := range alts {
		if r, _ := c.nullable(a); r != nil {
			out = append(out, r)
		}
	}
	return out
}

// allEnum gathers the string values of a union of enums.
func allEnum(c *Checker, variants []*Node) []string {
	var out []string
	for _, v := range variants {
		out = append(out, strs(v.Enum)...)
		if s, ok := v.Const.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func strs(l []any) []string {
	out := make([]string, 0, len(l))
	for _, v := range l {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// checkEnum compares the constants of Go string type t with the values of
// the schema: each one we could write must be one the schema knows.
func (c *Checker) checkEnum(at string, values []string, t reflect.Type, dir Direction) {
	if dir != Output || t.Kind() != reflect.String || t.Name() == "string" || len(values) == 0 {
		return
	}
	ours, ok := c.Enums[t.Name()]
	if !ok {
		return
	}
	allowed := map[string]bool{}
	for _, v := range values {
		allowed[v] = true
	}
	for _, v := range ours {
		if !allowed[v] {
			c.fail("%s: %s value %q is not in the schema's enum %v", at, t.Name(), v, values)
		}
	}
}

// jsonField is one key a struct encodes.
type jsonField struct {
	name      string
	typ       reflect.Type
	omit      bool // omitempty or omitzero
	omitEmpty bool
	omitZero  bool
	goName    string
	owner     reflect.Type
}

// fields lists the keys t encodes, as encoding/json does for the shapes
// the api package uses (tags, embedded structs flattened).
func fields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, fields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omitEmpty := strings.Contains(","+opts+",", ",omitempty,")
		omit := omitEmpty || strings.Contains(","+opts+",", ",omitzero,")
		omitZero := strings.Contains(","+opts+",", ",omitzero,")
		out = append(out, jsonField{name: name, typ: f.Type, omit: omit, omitEmpty: omitEmpty, omitZero: omitZero, goName: f.Name, owner: t})
	}
	return out
}

// defName names a node for messages: its title, else where it was met.
func defName(n *Node, at string) string {
	if n.Title != "" {
		return n.Title
	}
	return at
}

// checkStruct compares struct t with object node n.
func (c *Checker) checkStruct(at string, n *Node, t reflect.Type, dir Direction) {
	def := defName(n, at)
	fs := fields(t)
	have := map[string]jsonField{}
	for _, f := range fs {
		have[f.name] = f
	}
	for _, f := range fs {
		if _, ok := n.Properties[f.name]; !ok && !c.extension(f.owner, f.name) {
			c.fail("%s (%s): field %s (%q) is not in the schema", def, t.Name(), f.goName, f.name)
		}
	}
	props := make([]string, 0, len(n.Properties))
	for p := range n.Properties {
		props = append(props, p)
	}
	sort.Strings(props)
	for _, p := range props {
		f, ok := have[p]
		if !ok {
			if !c.known(def, p) {
				c.fail("%s: property %q is missing from %s", def, p, t.Name())
			}
			continue
		}
		if c.known(def, p) {
			continue
		}
		pn := n.Properties[p]
		if dir == Output {
			c.presence(def, p, contains(n.Required, p), pn, f)
		}
		c.check(def+"."+p, pn, f.typ, dir)
	}
}

// presence checks that an output field is written when the schema
// requires it and is null only where the schema allows null.
func (c *Checker) presence(def, prop string, required bool, pn *Node, f jsonField) {
	_, nullOK := c.nullable(pn)
	ft := f.typ
	// encoding/json never leaves out a struct for omitempty.
	if required && (f.omitZero || f.omitEmpty && ft.Kind() != reflect.Struct) {
		c.fail("%s.%s: required, but %s.%s may be left out (omitempty/omitzero)", def, prop, f.owner.Name(), f.goName)
	}
	if !nullOK && !f.omit && mayBeNull(ft) {
		c.fail("%s.%s: never null in the schema, but %s.%s (%s) is written as null when nil", def, prop, f.owner.Name(), f.goName, ft)
	}
}

// mayBeNull reports whether a value of t can encode as null.
func mayBeNull(t reflect.Type) bool {
	if _, kind := wrapper(t); kind == "list" || kind == "map" {
		return false
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return true
	}
	return false
}

// checkFlatUnion compares a struct holding the union of the variants'
// fields with the variants: each field is a property of n or of some
// variant and each of those properties a field. Only n's own properties
// (those every variant shares) get the presence rules: the marshaler picks
// the variant's.
func (c *Checker) checkFlatUnion(at string, n *Node, variants []*Node, t reflect.Type, dir Direction) {
	if !tagged(t) {
		c.opaque[t.String()] = true
		return
	}
	union := &Node{Properties: map[string]*Node{}, Title: n.Title, Required: n.Required, Type: Types{"object"}}
	if union.Title == "" {
		union.Title = at
	}
	for p, pn := range n.Properties {
		union.Properties[p] = pn
	}
	for _, v := range variants {
		if !v.Type.Has("object") && len(v.Properties) == 0 {
			continue // a string form of the union, written by its marshaler
		}
		for p, pn := range v.Properties {
			prev, dup := union.Properties[p]
			if !dup {
				union.Properties[p] = pn
				continue
			}
			// The tag, or another enum the variants split: any variant's
			// value is the union's.
			a, _ := c.nullable(prev)
			b, _ := c.nullable(pn)
			if a != nil && b != nil && len(a.Enum) > 0 && len(b.Enum) > 0 {
				m := *a
				m.Enum = append(append([]any(nil), a.Enum...), b.Enum...)
				union.Properties[p] = &m
			}
		}
	}
	if len(union.Properties) == 0 {
		c.opaque[t.String()] = true
		return
	}
	c.checkStruct(at, union, t, dir)
}

// tagged reports whether some field of struct t has a json tag: a custom
// marshaler of a struct without one chooses its keys itself.
func tagged(t reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		if _, ok := t.Field(i).Tag.Lookup("json"); ok {
			return true
		}
	}
	return false
}

// checkCustom compares a type that marshals itself with n.
func (c *Checker) checkCustom(at string, n *Node, variants []*Node, t reflect.Type, dir Direction) {
	if t.Kind() != reflect.Struct {
		if t.Kind() == reflect.String && len(variants) > 0 {
			c.checkEnum(at, allEnum(c, variants), t, dir)
		}
		c.opaque[t.String()] = true
		return
	}
	if body, ok := interfaceField(t); ok && len(variants) > 0 {
		c.checkWrapped(at, variants, t, body, dir)
		return
	}
	c.checkFlatUnion(at, n, variants, t, dir)
}

// interfaceField returns the index of t's one interface-typed field.
func interfaceField(t reflect.Type) (int, bool) {
	idx := -1
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Type.Kind() == reflect.Interface {
			if idx >= 0 {
				return 0, false
			}
			idx = i
		}
	}
	return idx, idx >= 0
}

// checkWrapped compares a wrapper whose interface field holds the variant
// (ThreadItem) with each tagged variant of the schema: it decodes
// {"type": tag} to learn the variant's Go type. A variant decoded into a
// Raw* type is passed through verbatim, not modelled, and not compared.
func (c *Checker) checkWrapped(at string, variants []*Node, t reflect.Type, body int, dir Direction) {
	own := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		if i != body {
			f := t.Field(i).Name
			own[strings.ToLower(f[:1])+f[1:]] = true
		}
	}
	for _, v := range variants {
		tn := v.Properties["type"]
		if tn == nil {
			c.fail("%s: a variant without a type tag", at)
			continue
		}
		tn, _ = c.nullable(tn)
		tags := strs(tn.Enum)
		if len(tags) != 1 {
			c.fail("%s: variant %s without a single tag", at, v.Title)
			continue
		}
		val := reflect.New(t)
		frame, _ := json.Marshal(map[string]string{"type": tags[0]})
		if err := json.Unmarshal(frame, val.Interface()); err != nil {
			c.fail("%s: %s does not decode variant %q: %v", at, t.Name(), tags[0], err)
			continue
		}
		bv := val.Elem().Field(body)
		if bv.IsNil() {
			c.fail("%s: %s decodes variant %q to no body", at, t.Name(), tags[0])
			continue
		}
		bt := bv.Elem().Type()
		for bt.Kind() == reflect.Pointer {
			bt = bt.Elem()
		}
		if strings.HasPrefix(bt.Name(), "Raw") {
			continue
		}
		rest := &Node{Properties: map[string]*Node{}, Required: v.Required, Title: v.Title, Type: Types{"object"}}
		for p, pn := range v.Properties {
			if p != "type" && !own[p] {
				rest.Properties[p] = pn
			}
		}
		c.checkStruct(at, rest, bt, dir)
	}
}
