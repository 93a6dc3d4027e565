package orchestrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/registry"
)

// dynamicToolsJSON is the stored form of n dynamic tools named
// prefix_0..n-1.
func dynamicToolsJSON(t testing.TB, prefix string, n int) []byte {
	var specs []api.DynamicToolSpec
	for i := range n {
		specs = append(specs, api.DynamicToolSpec{
			Name: fmt.Sprintf("%s_%d", prefix, i), Description: "Does a thing in the editor and answers with what happened.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"a file"},"line":{"type":"integer","minimum":1},"text":{"type":"string"},"mode":{"type":"string","enum":["a","b","c"]}},"required":["path"],"additionalProperties":false}`),
		})
	}
	raw, err := json.Marshal(specs)
	require.NoError(t, err)
	return raw
}

// A set is restored once and shared while kept; the least recently used
// goes first past the count bound, a set past the byte bound is not
// kept, and neither is one that does not restore.
func TestRestoredToolsKeptAndBounded(t *testing.T) {
	restored := map[string]int{}
	c := newRestoredTools(func(data []byte) (*dynamic.Tools, error) {
		restored[string(data)]++
		if strings.Contains(string(data), "broken") {
			return nil, errors.New("broken")
		}
		return dynamic.Restore(data, dynamic.Options{})
	})
	a, b := dynamicToolsJSON(t, "a", 2), dynamicToolsJSON(t, "b", 2)
	ta, err := c.get(a)
	require.NoError(t, err)
	again, err := c.get(a)
	require.NoError(t, err)
	require.Same(t, ta, again)
	tb, err := c.get(b)
	require.NoError(t, err)
	require.NotSame(t, ta, tb)
	require.Equal(t, 1, restored[string(a)])

	// a was used last; fill up to the bound: b goes first.
	_, err = c.get(a)
	require.NoError(t, err)
	for i := range maxRestoredSets - 1 {
		_, err := c.get(dynamicToolsJSON(t, fmt.Sprintf("f%d", i), 1))
		require.NoError(t, err)
	}
	require.Equal(t, maxRestoredSets, c.lru.Len())
	_, err = c.get(a)
	require.NoError(t, err)
	require.Equal(t, 1, restored[string(a)], "a was kept")
	_, err = c.get(b)
	require.NoError(t, err)
	require.Equal(t, 2, restored[string(b)], "b was dropped and restored again")

	broken := []byte(`["broken"]`)
	for range 2 {
		_, err = c.get(broken)
		require.Error(t, err)
	}
	require.Equal(t, 2, restored[string(broken)])

	big := append(slices.Clone(a), bytes.Repeat([]byte(" "), maxRestoredBytes)...)
	for range 2 {
		_, err = c.get(big)
		require.NoError(t, err)
	}
	require.Equal(t, 2, restored[string(big)], "too large to keep")
	require.LessOrEqual(t, c.bytes, maxRestoredBytes)
}

// Two turns of a thread with dynamic tools share its restored tools: the
// offered specs carry the same schemas.
func TestTurnsShareRestoredDynamicTools(t *testing.T) {
	broker := dynamic.NewBroker(dynamic.BrokerConfig{})
	defer broker.Close()
	s, err := New(Config{Now: newTestClock().Now}, broker, nil)
	require.NoError(t, err)
	defer s.Close()
	ws := workspace(t)
	tu := newTurn(t, s, ws, turnOpts{})
	tu.tc.DynamicTools = dynamicToolsJSON(t, "edit", 3)
	schemaOf := func() *registry.Schema {
		specs, _, err := s.Build(tu.tc)
		require.NoError(t, err)
		for _, sp := range specs {
			if f, ok := sp.Spec.(registry.FunctionSpec); ok && f.Name == "edit_1" {
				return f.Parameters
			}
		}
		t.Fatal("edit_1 not offered")
		return nil
	}
	require.Same(t, schemaOf(), schemaOf())
}
