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

// A thread's set is restored once and shared by its turns while kept; no
// other thread gets it, even one that stored the same tools. The least
// recently used set goes first past the count bound, sets go past the
// byte bound, a set larger than the byte bound is not kept, and neither
// is one that does not restore.
func TestRestoredToolsKeptAndBounded(t *testing.T) {
	restored := map[string]int{}
	c := newRestoredTools(func(data []byte) (*dynamic.Tools, error) {
		restored[string(data)]++
		if strings.Contains(string(data), "broken") {
			return nil, errors.New("broken")
		}
		return dynamic.Restore(data, dynamic.Options{})
	})
	// checkBytes checks the byte count against the sets kept.
	checkBytes := func() {
		t.Helper()
		sum := 0
		for e := c.lru.Front(); e != nil; e = e.Next() {
			sum += e.Value.(*restoredSet).size
		}
		require.Equal(t, sum, c.bytes)
		require.Equal(t, c.lru.Len(), len(c.byKey))
		require.LessOrEqual(t, c.bytes, maxRestoredBytes)
		require.LessOrEqual(t, c.lru.Len(), maxRestoredSets)
	}
	a, b := dynamicToolsJSON(t, "a", 2), dynamicToolsJSON(t, "b", 2)
	ta, err := c.get("t1", a)
	require.NoError(t, err)
	again, err := c.get("t1", a)
	require.NoError(t, err)
	require.Same(t, ta, again)
	other, err := c.get("t2", a)
	require.NoError(t, err)
	require.NotSame(t, ta, other, "another thread's set of the same tools is its own")
	require.Equal(t, 2, restored[string(a)])
	tb, err := c.get("t3", b)
	require.NoError(t, err)
	require.NotSame(t, ta, tb)
	checkBytes()

	// t1's set was used last but for t2's and t3's; fill up to the bound:
	// t2's goes first.
	_, err = c.get("t1", a)
	require.NoError(t, err)
	_, err = c.get("t3", b)
	require.NoError(t, err)
	for i := range maxRestoredSets - 2 {
		_, err := c.get(fmt.Sprintf("f%d", i), dynamicToolsJSON(t, fmt.Sprintf("f%d", i), 1))
		require.NoError(t, err)
	}
	checkBytes()
	require.Equal(t, maxRestoredSets, c.lru.Len())
	_, err = c.get("t1", a)
	require.NoError(t, err)
	require.Equal(t, 2, restored[string(a)], "t1's was kept")
	_, err = c.get("t2", a)
	require.NoError(t, err)
	require.Equal(t, 3, restored[string(a)], "t2's was dropped and restored again")
	checkBytes()

	broken := []byte(`["broken"]`)
	for range 2 {
		_, err = c.get("t4", broken)
		require.Error(t, err)
	}
	require.Equal(t, 2, restored[string(broken)])

	// Sets of just over a third of the byte bound each, three of which do
	// not fit together: the oldest go first.
	third := func(name string) []byte {
		return append(dynamicToolsJSON(t, name, 1), bytes.Repeat([]byte(" "), maxRestoredBytes/3)...)
	}
	for i := range 4 {
		_, err = c.get("big", third(fmt.Sprintf("big%d", i)))
		require.NoError(t, err)
		checkBytes()
	}
	_, err = c.get("big", third("big0"))
	require.NoError(t, err)
	require.Equal(t, 2, restored[string(third("big0"))], "the oldest large set went first")
	_, err = c.get("big", third("big3"))
	require.NoError(t, err)
	require.Equal(t, 1, restored[string(third("big3"))])

	// A set larger than the bound is not kept, and takes no other out.
	kept := c.lru.Len()
	big := append(slices.Clone(a), bytes.Repeat([]byte(" "), maxRestoredBytes)...)
	for range 2 {
		_, err = c.get("huge", big)
		require.NoError(t, err)
	}
	require.Equal(t, 2, restored[string(big)], "too large to keep")
	require.Equal(t, kept, c.lru.Len())
	checkBytes()
}

// Two turns of a thread with dynamic tools share its restored tools (the
// offered specs carry the same schemas); a thread that registered the
// same tools gets its own.
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
	first := schemaOf()
	require.Same(t, first, schemaOf())
	tu.tc.ThreadID = "thread-2"
	require.NotSame(t, first, schemaOf())
}
