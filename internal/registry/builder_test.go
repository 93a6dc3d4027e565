package registry

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
)

func okHandler(text string) Handler {
	return HandlerFunc(func(context.Context, Invocation) (Output, error) {
		return TextOutput(text, true), nil
	})
}

func fn(name string) FunctionSpec {
	return FunctionSpec{Name: name, Description: name + " tool", Parameters: Object(nil, nil, nil)}
}

func TestBuilderOrderAndFlags(t *testing.T) {
	b := NewBuilder(Config{})
	require.NoError(t, b.Register(fn("shell"), okHandler("s"), true))
	require.NoError(t, b.Register(fn("update_plan"), okHandler("p"), false))
	require.NoError(t, b.AddSpec(WebSearchSpec{}, false))
	require.NoError(t, b.Register(&FunctionSpec{Name: "read_file", Parameters: Object(nil, nil, nil)}, okHandler("r"), true))
	require.NoError(t, b.Register(NamespaceSpec{Name: "skills", Tools: []FunctionSpec{fn("list"), fn("read")}}, okHandler("k"), true))
	require.NoError(t, b.AddHandler("container.exec", okHandler("alias")))

	specs, reg := b.Build()
	var names []string
	var flags []bool
	for _, s := range specs {
		names = append(names, s.Spec.ToolName())
		flags = append(flags, s.SupportsParallelToolCalls)
	}
	assert.Equal(t, []string{"shell", "update_plan", "web_search", "read_file", "skills"}, names)
	assert.Equal(t, []bool{true, false, false, true, true}, flags)
	assert.IsType(t, FunctionSpec{}, specs[3].Spec, "pointer specs are stored as values")

	assert.True(t, reg.SupportsParallel("", "shell"))
	assert.False(t, reg.SupportsParallel("", "update_plan"))
	assert.True(t, reg.SupportsParallel("skills", "read"))
	assert.False(t, reg.SupportsParallel("", "container.exec"), "handler-only names are never parallel")
	_, ok := reg.Handler("skills", "list")
	assert.True(t, ok)
	_, ok = reg.Handler("", "list")
	assert.False(t, ok, "namespaced tools are not reachable without their namespace")
	_, ok = reg.Handler("", "web_search")
	assert.False(t, ok, "hosted specs have no handler")

	// Registering after Build does not change the built registry.
	require.NoError(t, b.Register(fn("late"), okHandler("l"), false))
	_, ok = reg.Handler("", "late")
	assert.False(t, ok)
	assert.Len(t, reg.Specs(), 5)
}

func TestBuilderRejects(t *testing.T) {
	strictBad := FunctionSpec{Name: "strict_bad", Strict: true, Parameters: Object(map[string]*Schema{"a": String("")}, nil, AllowAdditional(false))}
	strictGood := FunctionSpec{Name: "strict_good", Strict: true, Parameters: Object(map[string]*Schema{"a": String("")}, []string{"a"}, AllowAdditional(false))}

	cases := []struct {
		name string
		do   func(b *Builder) error
		code apperr.Code
		msg  string
	}{
		{"duplicate spec", func(b *Builder) error {
			_ = b.Register(fn("x"), okHandler(""), false)
			return b.Register(fn("x"), okHandler(""), true)
		}, apperr.Conflict, `tool "x" is already registered`},
		{"duplicate hosted spec", func(b *Builder) error {
			_ = b.AddSpec(WebSearchSpec{}, false)
			return b.AddSpec(WebSearchSpec{}, false)
		}, apperr.Conflict, `tool "web_search" is already registered`},
		{"alias then spec", func(b *Builder) error {
			_ = b.AddHandler("x", okHandler(""))
			return b.Register(fn("x"), okHandler(""), false)
		}, apperr.Conflict, `tool "x" is already registered`},
		{"spec then alias", func(b *Builder) error {
			_ = b.Register(fn("x"), okHandler(""), false)
			return b.AddHandler("x", okHandler(""))
		}, apperr.Conflict, `tool "x" is already registered`},
		{"duplicate inside namespace", func(b *Builder) error {
			return b.Register(NamespaceSpec{Name: "ns", Tools: []FunctionSpec{fn("a"), fn("a")}}, okHandler(""), false)
		}, apperr.Conflict, `tool "ns.a" is already registered`},
		{"nil handler", func(b *Builder) error { return b.Register(fn("x"), nil, false) }, apperr.Invalid, `tool "x": handler is nil`},
		{"nil spec", func(b *Builder) error { return b.Register(nil, okHandler(""), false) }, apperr.Invalid, "tool spec is nil"},
		{"nil pointer spec", func(b *Builder) error { return b.Register((*FunctionSpec)(nil), okHandler(""), false) }, apperr.Invalid, "tool spec is nil"},
		{"empty name", func(b *Builder) error { return b.Register(fn(""), okHandler(""), false) }, apperr.Invalid, "tool name is empty"},
		{"empty alias", func(b *Builder) error { return b.AddHandler("", okHandler("")) }, apperr.Invalid, "tool name is empty"},
		{"strict schema failing validation", func(b *Builder) error { return b.Register(strictBad, okHandler(""), false) },
			apperr.Invalid, `tool "strict_bad" cannot be sent with strict:true`},
		{"strict schema in namespace", func(b *Builder) error {
			return b.Register(NamespaceSpec{Name: "ns", Tools: []FunctionSpec{strictBad}}, okHandler(""), false)
		}, apperr.Invalid, `tool "ns.strict_bad" cannot be sent with strict:true`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do(NewBuilder(Config{}))
			require.Error(t, err)
			assert.Equal(t, tc.code, apperr.CodeOf(err))
			assert.Equal(t, tc.msg, apperr.MessageOf(err))
		})
	}

	b := NewBuilder(Config{})
	require.NoError(t, b.Register(strictGood, okHandler(""), false))
	specs, _ := b.Build()
	require.Len(t, specs, 1)
}
