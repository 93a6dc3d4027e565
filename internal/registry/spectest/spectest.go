package spectest

import (
	"encoding/json"
	"fmt"
)

// WithoutDescriptions decodes raw and removes its string-valued
// "description" keys at any depth. It fails when a tool (an object with a
// "name") has an empty description, so that stripping them cannot hide a
// tool we forgot to describe.
func WithoutDescriptions(raw []byte) (any, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, strip(v)
}

func strip(v any) error {
	switch x := v.(type) {
	case map[string]any:
		if d, ok := x["description"].(string); ok {
			delete(x, "description")
			if name, ok := x["name"].(string); ok && d == "" {
				return fmt.Errorf("tool %s has no description", name)
			}
		}
		for _, e := range x {
			if err := strip(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := strip(e); err != nil {
				return err
			}
		}
	}
	return nil
}
