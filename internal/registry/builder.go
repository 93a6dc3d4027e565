package registry

import (
	"io"
	"log/slog"
	"time"

	"github.com/appserver/appserver/internal/apperr"
)

// DefaultHookTimeout bounds each after-tool-use hook when Config leaves
// HookTimeout at zero.
const DefaultHookTimeout = 30 * time.Second

// Config holds the dependencies and options of a registry.
type Config struct {
	// Logger receives warnings (unknown tools, handler panics, hook
	// failures). Nil discards.
	Logger *slog.Logger
	// Now is the clock used for call durations. Nil uses time.Now.
	Now func() time.Time
	// Hooks run, in order, after every executed call.
	Hooks []AfterToolUseHook
	// HookTimeout bounds each hook run; zero means DefaultHookTimeout.
	HookTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.HookTimeout <= 0 {
		c.HookTimeout = DefaultHookTimeout
	}
	return c
}

// toolKey identifies a handler: namespace ("" for top level) and name.
type toolKey struct {
	namespace string
	name      string
}

// Builder collects tool registrations in order and builds the spec list and
// the Registry. It is not safe for concurrent use.
type Builder struct {
	cfg       Config
	specs     []ConfiguredToolSpec
	specNames map[string]bool
	handlers  map[toolKey]Handler
	parallel  map[toolKey]bool
}

// NewBuilder returns an empty builder.
func NewBuilder(cfg Config) *Builder {
	return &Builder{
		cfg:       cfg.withDefaults(),
		specNames: map[string]bool{},
		handlers:  map[toolKey]Handler{},
		parallel:  map[toolKey]bool{},
	}
}

// Register adds a spec and the handler that runs its calls. For a
// NamespaceSpec the handler serves every function in it. parallel marks the
// calls as parallel-capable. Duplicate names, a nil handler and strict specs
// whose schema fails ValidateStrict are rejected.
func (b *Builder) Register(spec ToolSpec, h Handler, parallel bool) error {
	if h == nil {
		return apperr.New(apperr.Invalid, "tool %q: handler is nil", specName(spec))
	}
	spec, keys, err := b.checkSpec(spec)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, dup := b.handlers[k]; dup {
			return apperr.New(apperr.Conflict, "tool %q is already registered", displayName(k.namespace, k.name))
		}
	}
	b.addSpec(spec, keys, parallel)
	for _, k := range keys {
		b.handlers[k] = h
	}
	return nil
}

// AddSpec adds a spec without a handler, for hosted tools such as
// web_search that the provider runs.
func (b *Builder) AddSpec(spec ToolSpec, parallel bool) error {
	spec, keys, err := b.checkSpec(spec)
	if err != nil {
		return err
	}
	b.addSpec(spec, keys, parallel)
	return nil
}

// AddHandler adds a handler for a top-level name that has no spec of its
// own, e.g. an alias several names share. Such calls are never
// parallel-capable.
func (b *Builder) AddHandler(name string, h Handler) error {
	if name == "" {
		return apperr.New(apperr.Invalid, "tool name is empty")
	}
	if h == nil {
		return apperr.New(apperr.Invalid, "tool %q: handler is nil", name)
	}
	k := toolKey{name: name}
	if _, dup := b.handlers[k]; dup {
		return apperr.New(apperr.Conflict, "tool %q is already registered", name)
	}
	b.handlers[k] = h
	return nil
}

// AddNamespacedHandler adds a handler for name inside namespace without a
// spec of its own: a second address of a tool offered under another name,
// such as the mcp__<server>__ namespace form of an MCP tool a model may
// call. Such calls are never parallel-capable.
func (b *Builder) AddNamespacedHandler(namespace, name string, h Handler) error {
	if namespace == "" {
		return b.AddHandler(name, h)
	}
	if name == "" {
		return apperr.New(apperr.Invalid, "namespace %q: tool name is empty", namespace)
	}
	if h == nil {
		return apperr.New(apperr.Invalid, "tool %q: handler is nil", displayName(namespace, name))
	}
	k := toolKey{namespace: namespace, name: name}
	if _, dup := b.handlers[k]; dup {
		return apperr.New(apperr.Conflict, "tool %q is already registered", displayName(namespace, name))
	}
	b.handlers[k] = h
	return nil
}

// Build returns the specs in registration order and the registry. Later
// registrations on the builder do not affect the returned registry.
func (b *Builder) Build() ([]ConfiguredToolSpec, *Registry) {
	r := &Registry{
		cfg:      b.cfg,
		specs:    append([]ConfiguredToolSpec(nil), b.specs...),
		handlers: make(map[toolKey]Handler, len(b.handlers)),
		parallel: make(map[toolKey]bool, len(b.parallel)),
	}
	for k, h := range b.handlers {
		r.handlers[k] = h
	}
	for k, p := range b.parallel {
		r.parallel[k] = p
	}
	return r.Specs(), r
}

func (b *Builder) addSpec(spec ToolSpec, keys []toolKey, parallel bool) {
	b.specs = append(b.specs, ConfiguredToolSpec{Spec: spec, SupportsParallelToolCalls: parallel})
	b.specNames[spec.ToolName()] = true
	for _, k := range keys {
		b.parallel[k] = parallel
	}
}

// checkSpec normalizes pointer specs, validates names and strict schemas,
// and returns the handler keys the spec defines.
func (b *Builder) checkSpec(spec ToolSpec) (ToolSpec, []toolKey, error) {
	switch s := spec.(type) {
	case nil:
		return nil, nil, apperr.New(apperr.Invalid, "tool spec is nil")
	case *FunctionSpec:
		if s == nil {
			return nil, nil, apperr.New(apperr.Invalid, "tool spec is nil")
		}
		spec = *s
	case *FreeformSpec:
		if s == nil {
			return nil, nil, apperr.New(apperr.Invalid, "tool spec is nil")
		}
		spec = *s
	case *WebSearchSpec:
		if s == nil {
			return nil, nil, apperr.New(apperr.Invalid, "tool spec is nil")
		}
		spec = *s
	case *NamespaceSpec:
		if s == nil {
			return nil, nil, apperr.New(apperr.Invalid, "tool spec is nil")
		}
		spec = *s
	case *LocalShellSpec:
		spec = LocalShellSpec{}
	}
	name := spec.ToolName()
	if name == "" {
		return nil, nil, apperr.New(apperr.Invalid, "tool name is empty")
	}
	if b.specNames[name] {
		return nil, nil, apperr.New(apperr.Conflict, "tool %q is already registered", name)
	}
	switch s := spec.(type) {
	case FunctionSpec:
		if err := checkStrict(s, name); err != nil {
			return nil, nil, err
		}
	case NamespaceSpec:
		keys := make([]toolKey, 0, len(s.Tools))
		seen := map[string]bool{}
		for _, t := range s.Tools {
			if t.Name == "" {
				return nil, nil, apperr.New(apperr.Invalid, "namespace %q: tool name is empty", name)
			}
			if seen[t.Name] {
				return nil, nil, apperr.New(apperr.Conflict, "tool %q is already registered", displayName(name, t.Name))
			}
			seen[t.Name] = true
			if err := checkStrict(t, displayName(name, t.Name)); err != nil {
				return nil, nil, err
			}
			keys = append(keys, toolKey{namespace: name, name: t.Name})
		}
		return spec, keys, nil
	}
	return spec, []toolKey{{name: name}}, nil
}

func checkStrict(f FunctionSpec, display string) error {
	if !f.Strict {
		return nil
	}
	if err := ValidateStrict(f.Parameters); err != nil {
		return apperr.Wrap(apperr.Invalid, err, "tool %q cannot be sent with strict:true", display)
	}
	return nil
}

func specName(spec ToolSpec) string {
	if spec == nil {
		return ""
	}
	defer func() { _ = recover() }() // a typed nil pointer spec has no name
	return spec.ToolName()
}

// Registry maps tool names to handlers and records which calls are
// parallel-capable. It is immutable and safe for concurrent use.
type Registry struct {
	cfg      Config
	specs    []ConfiguredToolSpec
	handlers map[toolKey]Handler
	parallel map[toolKey]bool
}

// Specs returns the configured specs in registration order.
func (r *Registry) Specs() []ConfiguredToolSpec {
	return append([]ConfiguredToolSpec(nil), r.specs...)
}

// Handler returns the handler registered for a namespace ("" for top level)
// and tool name.
func (r *Registry) Handler(namespace, name string) (Handler, bool) {
	h, ok := r.handlers[toolKey{namespace: namespace, name: name}]
	return h, ok
}

// SupportsParallel reports whether calls to the tool may take the shared
// side of the parallel lock.
func (r *Registry) SupportsParallel(namespace, name string) bool {
	return r.parallel[toolKey{namespace: namespace, name: name}]
}
