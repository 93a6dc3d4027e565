package api

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// List is a JSON array that is never null: a nil List is written as [].
// It decodes like a plain slice and converts freely to and from []T.
type List[T any] []T

// MarshalJSON writes nil as [].
func (l List[T]) MarshalJSON() ([]byte, error) {
	if l == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]T(l))
}

// Map is a JSON object that is never null: a nil Map is written as {}.
// It decodes like a plain map and converts freely to and from map[string]V.
type Map[V any] map[string]V

// MarshalJSON writes nil as {}.
func (m Map[V]) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(map[string]V(m))
}

// Nullable is an optional param that distinguishes an absent key (Set is
// false), an explicit null (Set is true, Value is nil) and a value. Use it
// with the omitzero tag option so an unset value is left out.
type Nullable[T any] struct {
	// Set reports whether the key was present.
	Set bool
	// Value is the value, or nil for an explicit null.
	Value *T
}

// NullableValue returns a Nullable holding v.
func NullableValue[T any](v T) Nullable[T] { return Nullable[T]{Set: true, Value: &v} }

// IsZero reports whether the key is absent, for omitzero.
func (n Nullable[T]) IsZero() bool { return !n.Set }

// MarshalJSON writes the value, or null.
func (n Nullable[T]) MarshalJSON() ([]byte, error) {
	if n.Value == nil {
		return []byte("null"), nil
	}
	return json.Marshal(*n.Value)
}

// UnmarshalJSON records that the key was present and decodes the value.
func (n *Nullable[T]) UnmarshalJSON(b []byte) error {
	n.Set = true
	n.Value = nil
	if isNull(b) {
		return nil
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	n.Value = &v
	return nil
}

// isNull reports whether b is the JSON literal null.
func isNull(b []byte) bool { return string(bytes.TrimSpace(b)) == "null" }

// isObject reports whether b is a JSON object.
func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// peekType reads the "type" discriminator of a tagged JSON object.
func peekType(b []byte) (string, error) {
	var t struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return "", err
	}
	if t.Type == nil {
		return "", fmt.Errorf("missing field `type`")
	}
	return *t.Type, nil
}

// singleKey decodes an object with exactly one key, as used by the
// externally tagged unions (CodexErrorInfo, AskForApproval, decisions).
func singleKey(b []byte) (string, json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return "", nil, err
	}
	if len(m) != 1 {
		return "", nil, fmt.Errorf("expected an object with exactly one key, got %d", len(m))
	}
	for k, v := range m {
		return k, v, nil
	}
	panic("unreachable")
}
