package execclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// outputSchema is --output-schema: the schema sent with the turn (the
// model is asked to answer in that shape) and compiled to check the
// answer.
type outputSchema struct {
	raw    json.RawMessage
	schema *jsonschema.Schema
}

// loadOutputSchema reads and compiles a JSON Schema file. References
// resolve against the file's location, as for any schema on disk.
func loadOutputSchema(path string) (*outputSchema, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--output-schema: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("--output-schema %s: not JSON: %w", path, err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, fmt.Errorf("--output-schema %s: a schema must be a JSON object", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("--output-schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(abs, doc); err != nil {
		return nil, fmt.Errorf("--output-schema %s: %w", path, err)
	}
	s, err := c.Compile(abs)
	if err != nil {
		return nil, fmt.Errorf("--output-schema %s: not a valid JSON Schema: %w", path, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, fmt.Errorf("--output-schema %s: %w", path, err)
	}
	return &outputSchema{raw: compact.Bytes(), schema: s}, nil
}

// check validates a final message: it must be there, be JSON and match
// the schema.
func (s *outputSchema) check(final *string) error {
	if final == nil {
		return OutputInvalidError{Reason: "the turn has no final message"}
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(*final)))
	if err != nil {
		return OutputInvalidError{Reason: "it is not JSON: " + err.Error()}
	}
	if err := s.schema.Validate(v); err != nil {
		return OutputInvalidError{Reason: err.Error()}
	}
	return nil
}
