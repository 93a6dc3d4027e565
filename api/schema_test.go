package api

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/appserver/appserver/api/schema"
)

// targetSchema loads the committed schema of ProtocolVersion.
func targetSchema(t *testing.T) *schema.Protocol {
	t.Helper()
	p, err := schema.Target()
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != ProtocolVersion {
		t.Fatalf("schema %s, tables of %s: run go generate ./api", p.Version, ProtocolVersion)
	}
	return p
}

// TestGeneratedFilesAreFresh fails when protocol_gen.go,
// protocol_methods.json or docs/protocol-methods.md is not what go
// generate ./api writes now.
func TestGeneratedFilesAreFresh(t *testing.T) {
	p := targetSchema(t)
	src, err := schema.GoTables(p)
	if err != nil {
		t.Fatal(err)
	}
	table, err := schema.MethodsJSON(p, Unserved)
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string][]byte{
		"protocol_gen.go":       src,
		"protocol_methods.json": table,
		filepath.Join("..", "docs", "protocol-methods.md"): schema.MethodsDoc(p, Unserved),
	} {
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./api", file)
		}
	}
}

// checkWireTypes holds the rows of rows to the schema p and returns what
// the checker found, with the entries of wireExtensions and
// wireKnownDifferences no type needed.
func checkWireTypes(t *testing.T, p *schema.Protocol, rows map[string]wire) (problems, unused []string) {
	t.Helper()
	c := schema.NewChecker(p)
	c.Extensions, c.Known = wireExtensions, wireKnownDifferences
	var err error
	if c.Enums, err = schema.Enums("."); err != nil {
		t.Fatal(err)
	}
	for _, m := range p.Methods {
		w, ok := rows[m.Name]
		if !ok {
			continue
		}
		// What a client sends appserver reads, and the other way round.
		params, result := schema.Input, schema.Output
		if m.Kind == schema.ServerNotification || m.Kind == schema.ServerRequest {
			params, result = schema.Output, schema.Input
		}
		if _, skip := w.Params.(ignored); m.Params != "" && w.Params != nil && !skip {
			c.Check(m.Params, typeOf(w.Params), params)
		}
		if _, skip := w.Result.(ignored); m.Result != "" && w.Result != nil && !skip {
			c.Check(m.Result, typeOf(w.Result), result)
		}
	}
	return c.Problems(), c.Unused()
}

// TestWireTypesMatchSchema holds the Go types of every method appserver
// serves or sends to the schema: each such method has its row in
// wireTypes, and every property of the schema reachable from it is a
// field with the exact JSON name, the right JSON type, written when
// required and never null where the schema forbids it; differences we
// keep on purpose are listed in wireKnownDifferences and fields of our own
// in wireExtensions.
func TestWireTypesMatchSchema(t *testing.T) {
	p := targetSchema(t)
	for _, m := range p.Methods {
		_, unserved := Unserved[m.Name]
		w, ok := wireTypes[m.Name]
		switch {
		case unserved && ok:
			t.Errorf("%s is in api.Unserved and in wireTypes: drop one", m.Name)
		case !unserved && !ok && (m.Params != "" || m.Result != ""):
			t.Errorf("%s %s is served but has no row in wireTypes", m.Kind, m.Name)
		case ok && m.Params != "" && w.Params == nil && !m.NullParams:
			t.Errorf("%s: the schema has params %s, wireTypes none", m.Name, m.Params)
		case ok && m.Result != "" && w.Result == nil:
			t.Errorf("%s: the schema has a result %s, wireTypes none", m.Name, m.Result)
		}
	}
	for name := range wireTypes {
		if _, ok := ClientMethods[name]; !ok && !contains(ServerNotificationMethods, name) && !contains(ServerRequestMethods, name) {
			t.Errorf("wireTypes has %s, which the schema does not", name)
		}
	}
	problems, unused := checkWireTypes(t, p, wireTypes)
	for _, pr := range problems {
		t.Error(pr)
	}
	for _, u := range unused {
		t.Errorf("%s: no type needs it any more; drop it", u)
	}
}

// TestWireCheckNoticesAMissingField shows the check fails when the schema
// gains a property a served method's type lacks: a copy of the schema
// with a property added to ThreadStartParams.
func TestWireCheckNoticesAMissingField(t *testing.T) {
	stable, exp, err := schema.Bundles()
	if err != nil {
		t.Fatal(err)
	}
	var b map[string]any
	if err := json.Unmarshal(exp, &b); err != nil {
		t.Fatal(err)
	}
	def := b["definitions"].(map[string]any)["v2"].(map[string]any)["ThreadStartParams"].(map[string]any)
	def["properties"].(map[string]any)["frobnicate"] = map[string]any{"type": "boolean"}
	modified, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	p, err := schema.Load(ProtocolVersion, stable, modified)
	if err != nil {
		t.Fatal(err)
	}
	problems, _ := checkWireTypes(t, p, map[string]wire{"thread/start": wireTypes["thread/start"]})
	want := `ThreadStartParams: property "frobnicate" is missing from ThreadStartParams`
	if !contains(problems, want) {
		t.Errorf("problems %q lack %q", problems, want)
	}
	clean, _ := checkWireTypes(t, targetSchema(t), map[string]wire{"thread/start": wireTypes["thread/start"]})
	if len(clean) != 0 {
		t.Errorf("unmodified schema: %q", clean)
	}
}

func contains(l []string, s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}

// TestNeverNullObjects pins the fields the schema check found could be
// written as null where 0.171.0's schema allows only an object.
func TestNeverNullObjects(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{ConfigReadResult{}, `{"config":{},"origins":{}}`},
		{CollabAgentToolCallItem{}, `"agentsStates":{}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(tc.want)) {
			t.Errorf("%T: %s lacks %s", tc.v, b, tc.want)
		}
	}
}
