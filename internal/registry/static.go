package registry

import "sync"

// staticJSON holds the JSON of every static spec (Static), keyed by the
// spec itself: a FunctionSpec or FreeformSpec value, which compares equal
// only to a copy of the same spec (the same strings and schema pointer).
var staticJSON sync.Map

// The specs are keys of staticJSON and SpecCache: a field that makes them
// incomparable (a slice, a map) must fail to compile, not panic there.
var (
	_ map[FunctionSpec]struct{}
	_ map[FreeformSpec]struct{}
)

// Static returns a function that builds a spec on its first call and
// returns that same spec ever after, its JSON encoded once with it, so
// that EncodeSpec answers it from memory. A tool whose spec does not
// depend on the turn offers it this way: every turn builds its tool set
// and its first model request encodes the specs, about 1.6 µs to build
// and 2.1 µs to encode each of the 9 a default turn offers
// (BenchmarkBuildTools in internal/tools/orchestrate). The spec is
// shared by every turn and by every caller of the tool's spec function:
// nothing may change it, nor its schema; specs are changed only by
// copying, as ClassicSpec does.
func Static[T FunctionSpec | FreeformSpec](build func() T) func() T {
	return sync.OnceValue(func() T {
		spec := build()
		key := any(spec).(ToolSpec)
		if raw, err := key.MarshalJSON(); err == nil {
			staticJSON.Store(key, raw)
		}
		return spec
	})
}

// EncodeSpec returns what spec.MarshalJSON returns, without encoding it
// again when it is a static spec (Static). The bytes may be shared: the
// caller must not change them.
func EncodeSpec(spec ToolSpec) ([]byte, error) {
	switch spec.(type) {
	case FunctionSpec, FreeformSpec:
		if raw, ok := staticJSON.Load(spec); ok {
			return raw.([]byte), nil
		}
	}
	return spec.MarshalJSON()
}
