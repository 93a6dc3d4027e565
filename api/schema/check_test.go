package schema

import (
	"os"
	"reflect"
	"slices"
	"testing"
)

// tiny loads testdata/tiny.schemas.json as both bundles.
func tiny(t *testing.T) *Protocol {
	t.Helper()
	b, err := os.ReadFile("testdata/tiny.schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Load("tiny", b, b)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type color string

type thingOK struct {
	Name  string   `json:"name"`
	Note  *string  `json:"note"`
	Tags  []string `json:"tags,omitempty"`
	Size  *int64   `json:"size,omitempty"`
	Color color    `json:"color"`
}

func TestLoadNamesResults(t *testing.T) {
	p := tiny(t)
	m, ok := p.Method(ClientRequest, "thing/get")
	if !ok || m.Params != "ThingGetParams" || m.Result != "ThingGetResponse" || m.NullParams {
		t.Errorf("thing/get: %+v", m)
	}
	// A method whose result the naming rule cannot find fails the load.
	if _, err := resultOf(p.defs, Method{Name: "thing/reset", Kind: ClientRequest}); err == nil {
		t.Error("thing/reset: a result named without a rule")
	}
}

func TestCheckerRules(t *testing.T) {
	type thingMissing struct {
		Name  string  `json:"name"`
		Note  *string `json:"note"`
		Color color   `json:"color"`
		Extra int     `json:"extra"`
	}
	type thingShapes struct {
		Name  string   `json:"name,omitempty"`
		Note  *string  `json:"note"`
		Tags  []string `json:"tags"`
		Size  string   `json:"size"`
		Color color    `json:"color"`
	}
	cases := []struct {
		name string
		t    reflect.Type
		want []string
	}{
		{"ok", reflect.TypeFor[thingOK](), nil},
		{"missing and extra", reflect.TypeFor[thingMissing](), []string{
			`Thing (thingMissing): field Extra ("extra") is not in the schema`,
			`Thing: property "size" is missing from thingMissing`,
			`Thing: property "tags" is missing from thingMissing`,
		}},
		{"shapes", reflect.TypeFor[thingShapes](), []string{
			`Thing.name: required, but thingShapes.Name may be left out (omitempty/omitzero)`,
			`Thing.size: Go string for schema type [integer]`,
			`Thing.tags: never null in the schema, but thingShapes.Tags ([]string) is written as null when nil`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecker(tiny(t))
			c.Enums = map[string][]string{"color": {"red", "green"}}
			c.Check("Thing", tc.t, Output)
			if got := c.Problems(); !slices.Equal(got, tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestCheckerEnumsAndLists(t *testing.T) {
	c := NewChecker(tiny(t))
	c.Enums = map[string][]string{"color": {"red", "blue"}}
	c.Known = map[string]string{"Thing.size": "why", "Thing.gone": "stale"}
	c.Extensions = map[string]string{"thingOK.unused": "stale"}
	c.Check("Thing", reflect.TypeFor[thingOK](), Output)
	want := []string{`Thing.color: color value "blue" is not in the schema's enum [red green]`}
	if got := c.Problems(); !slices.Equal(got, want) {
		t.Errorf("output: got %q, want %q", got, want)
	}
	if got, want := c.Unused(), []string{"extension thingOK.unused", "known difference Thing.gone"}; !slices.Equal(got, want) {
		t.Errorf("unused: got %q, want %q", got, want)
	}
	in := NewChecker(tiny(t))
	in.Enums = c.Enums
	in.Check("Thing", reflect.TypeFor[thingOK](), Input)
	if got := in.Problems(); len(got) != 0 {
		t.Errorf("input reads any value: %q", got)
	}
}

func TestDrift(t *testing.T) {
	p := tiny(t)
	served := func(m Method) bool { return m.Name == "thing/get" || m.Name == "initialized" }
	got := Drift(p, served, map[string]string{"thing/get": "oops", "thing/gone": "x"})
	want := []string{
		`api.Unserved lists thing/gone, which the tiny schema does not have`,
		`client request thing/get is served, but api.Unserved lists it ("oops"): drop the entry`,
		`server notification thing/changed of the tiny schema is neither served nor listed in api.Unserved with a reason`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
