package spectest

import (
	"encoding/json"
	"testing"
)

func TestWithoutDescriptions(t *testing.T) {
	got, err := WithoutDescriptions([]byte(`[{"name":"a","description":"A.","parameters":{"properties":{"x":{"type":"string","description":"X."},"description":{"type":"string"}}}}]`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	// A property named "description" is an object, not a description: it stays.
	if want := `[{"name":"a","parameters":{"properties":{"description":{"type":"string"},"x":{"type":"string"}}}}]`; string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
	if _, err := WithoutDescriptions([]byte(`{"name":"b","description":""}`)); err == nil {
		t.Fatal("a tool with an empty description must be reported")
	}
	if _, err := WithoutDescriptions([]byte(`{`)); err == nil {
		t.Fatal("bad JSON must be reported")
	}
}
