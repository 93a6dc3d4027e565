package applypatch

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/registry"
)

func TestFreeformSpecWire(t *testing.T) {
	b, err := json.Marshal(FreeformSpec())
	require.NoError(t, err)
	var spec struct {
		Type, Name, Description string
		Format                  struct{ Type, Syntax, Definition string }
	}
	require.NoError(t, json.Unmarshal(b, &spec))
	assert.Equal(t, "custom", spec.Type)
	assert.Equal(t, "apply_patch", spec.Name)
	assert.NotEmpty(t, spec.Description)
	assert.Equal(t, "grammar", spec.Format.Type)
	assert.Equal(t, "lark", spec.Format.Syntax)
	assert.Equal(t, LarkGrammar, spec.Format.Definition)
	// The grammar names every marker line the parser knows.
	for _, marker := range []string{`"*** Begin Patch"`, `"*** End Patch"`, `"*** Add File: "`, `"*** Delete File: "`,
		`"*** Update File: "`, `"*** Move to: "`, `"*** End of File"`, `"@@"`, `"@@ "`} {
		assert.Contains(t, spec.Format.Definition, marker)
	}
}

func TestFunctionSpecWire(t *testing.T) {
	b, err := json.Marshal(FunctionSpec())
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Equal(t, "function", got["type"])
	assert.Equal(t, "apply_patch", got["name"])
	assert.Equal(t, false, got["strict"])
	desc := got["description"].(string)
	assert.True(t, strings.HasPrefix(desc, "Edit files with a patch"), desc)
	// The example the description teaches is a patch the parser accepts.
	example := desc[strings.LastIndex(desc, "*** Begin Patch"):]
	patch, err := Parse(example)
	require.NoError(t, err, example)
	require.Len(t, patch.Hunks, 3)
	assert.JSONEq(t, `{"type":"object","properties":{"input":{"type":"string","description":"The whole patch, from \"*** Begin Patch\" to \"*** End Patch\"."}},"required":["input"],"additionalProperties":false}`,
		mustJSON(t, got["parameters"]))
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// fixedClock returns times 0 and d on alternate calls.
func fixedClock(d time.Duration) func() time.Time {
	base := time.Unix(1000, 0)
	n := 0
	return func() time.Time {
		n++
		if n%2 == 1 {
			return base
		}
		return base.Add(d)
	}
}

func dispatcher(t *testing.T, h *Handler, freeform bool, cwd string) *registry.Dispatcher {
	b := registry.NewBuilder(registry.Config{})
	require.NoError(t, Register(b, h, freeform))
	specs, reg := b.Build()
	require.Len(t, specs, 1)
	assert.False(t, specs[0].SupportsParallelToolCalls)
	return reg.NewDispatcher(registry.DispatcherConfig{Turn: registry.TurnContext{TurnID: "t1", Cwd: cwd}})
}

func TestHandlerThroughRegistry(t *testing.T) {
	patch := "*** Begin Patch\n*** Update File: a.txt\n@@\n-hello\n+HELLO\n*** Add File: sub/b.txt\n+new\n*** End Patch"
	argPatch, _ := json.Marshal(map[string]string{"input": patch})
	tests := []struct {
		name     string
		freeform bool
		payload  registry.Payload
		itemType registry.ResponseItemType
	}{
		{"freeform custom payload", true, registry.CustomPayload{Input: patch}, registry.CustomToolCallOutput},
		{"json function payload", false, registry.FunctionPayload{Arguments: string(argPatch)}, registry.FunctionCallOutput},
		{"function payload to the freeform tool", true, registry.FunctionPayload{Arguments: string(argPatch)}, registry.FunctionCallOutput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"a.txt": "hello\nworld\n"})
			d := dispatcher(t, &Handler{Now: fixedClock(0)}, tt.freeform, dir)
			item, err := d.Dispatch(context.Background(), registry.Call{CallID: "c1", Name: Name, Payload: tt.payload})
			require.NoError(t, err)
			assert.Equal(t, tt.itemType, item.Type)
			// Byte for byte what 0.169 returned for this patch.
			assert.Equal(t, "Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nA sub/b.txt\nM a.txt\n", item.Output.Text)
			assert.True(t, item.Output.Succeeded())
			assert.Equal(t, map[string]string{"a.txt": "HELLO\nworld\n", "sub/": "", "sub/b.txt": "new\n"}, readTree(t, dir))
		})
	}
}

func TestHandlerErrorsAreAnsweredToTheModel(t *testing.T) {
	tests := []struct {
		name    string
		payload registry.Payload
		want    string
	}{
		{"unmatched lines", registry.CustomPayload{Input: "*** Begin Patch\n*** Update File: a.txt\n@@\n-nothere\n+X\n*** End Patch"},
			"apply_patch verification failed: Failed to find expected lines in %s/a.txt:\nnothere"},
		{"not a patch", registry.CustomPayload{Input: "garbage"},
			"apply_patch verification failed: invalid patch: The first line of the patch must be '*** Begin Patch'"},
		{"empty patch", registry.CustomPayload{Input: "*** Begin Patch\n*** End Patch"}, "patch rejected: empty patch"},
		{"escape", registry.CustomPayload{Input: "*** Begin Patch\n*** Add File: ../x\n+x\n*** End Patch"},
			"apply_patch verification failed: %p/x is outside the workspace roots (%s); a patch may only change files under them"},
		{"bad arguments", registry.FunctionPayload{Arguments: "{"}, "failed to parse function arguments: unexpected EOF"},
		{"missing input", registry.FunctionPayload{Arguments: "{}"}, "failed to parse function arguments: missing field `input`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"a.txt": "hello\n"})
			d := dispatcher(t, &Handler{}, true, dir)
			item, err := d.Dispatch(context.Background(), registry.Call{CallID: "c1", Name: Name, Payload: tt.payload})
			require.NoError(t, err)
			want := strings.ReplaceAll(strings.ReplaceAll(tt.want, "%s", dir), "%p", filepath.Dir(dir))
			assert.Equal(t, want, item.Output.Text)
			assert.False(t, item.Output.Succeeded())
			assert.Equal(t, map[string]string{"a.txt": "hello\n"}, readTree(t, dir))
		})
	}
}

func TestHandlerHooks(t *testing.T) {
	dir := t.TempDir()
	var planned *Plan
	var finished []string
	h := &Handler{
		Planned: func(_ context.Context, inv registry.Invocation, p *Plan) error {
			planned = p
			assert.Equal(t, "c1", inv.CallID)
			// Nothing is written before approval.
			assert.Equal(t, map[string]string{}, readTree(t, dir))
			if strings.Contains(p.Patch().Text, "deny") {
				return errors.New("patch rejected by user")
			}
			return nil
		},
		Finished: func(_ context.Context, _ registry.Invocation, p *Plan, res Result, err error) {
			assert.Same(t, planned, p)
			finished = append(finished, res.Summary())
			assert.NoError(t, err)
		},
	}
	d := dispatcher(t, h, true, dir)
	item, err := d.Dispatch(context.Background(), registry.Call{CallID: "c1", Name: Name,
		Payload: registry.CustomPayload{Input: "*** Begin Patch\n*** Add File: deny.txt\n+x\n*** End Patch"}})
	require.NoError(t, err)
	assert.Equal(t, "patch rejected by user", item.Output.Text)
	assert.Empty(t, finished)
	assert.Equal(t, map[string]string{}, readTree(t, dir))

	item, err = d.Dispatch(context.Background(), registry.Call{CallID: "c1", Name: Name,
		Payload: registry.CustomPayload{Input: "*** Begin Patch\n*** Add File: ok.txt\n+x\n*** End Patch"}})
	require.NoError(t, err)
	assert.True(t, item.Output.Succeeded())
	assert.Equal(t, []string{"Success. Updated the following files:\nA ok.txt\n"}, finished)
	require.Len(t, planned.Changes(), 1)
	assert.Equal(t, filepath.Join(dir, "ok.txt"), planned.Changes()[0].Path)
}

func TestHandlerRoots(t *testing.T) {
	cwd, other := t.TempDir(), t.TempDir()
	h := &Handler{Access: func(inv registry.Invocation) fsguard.Access { return fsguard.Dirs(inv.Turn.Cwd, other) }}
	d := dispatcher(t, h, true, cwd)
	item, err := d.Dispatch(context.Background(), registry.Call{CallID: "c1", Name: Name,
		Payload: registry.CustomPayload{Input: "*** Begin Patch\n*** Add File: " + filepath.Join(other, "o.txt") + "\n+o\n*** End Patch"}})
	require.NoError(t, err)
	assert.True(t, item.Output.Succeeded(), item.Output.Text)
}

func TestHandlerWriteFailureIsAFailedRun(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	h := &Handler{Now: fixedClock(1234 * time.Millisecond), Planned: func(_ context.Context, _ registry.Invocation, p *Plan) error {
		p.inject = func(string) error { return errors.New("disk full") }
		return nil
	}}
	d := dispatcher(t, h, true, dir)
	item, err := d.Dispatch(context.Background(), registry.Call{CallID: "c1", Name: Name,
		Payload: registry.CustomPayload{Input: "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** End Patch"}})
	require.NoError(t, err)
	assert.False(t, item.Output.Succeeded())
	assert.Equal(t, "Exit code: 1\nWall time: 1.2 seconds\nOutput:\nFailed to write file "+filepath.Join(dir, "a.txt")+
		": disk full\nThe patch was not applied: the changes it had already made were undone.\n", item.Output.Text)
	assert.Equal(t, map[string]string{"a.txt": "a\n"}, readTree(t, dir))
}

func TestHandlerStructuredOutput(t *testing.T) {
	dir := t.TempDir()
	d := dispatcher(t, &Handler{Format: OutputStructured, Now: fixedClock(0)}, true, dir)
	item, err := d.Dispatch(context.Background(), registry.Call{CallID: "c1", Name: Name,
		Payload: registry.CustomPayload{Input: "*** Begin Patch\n*** Add File: x\n+x\n*** End Patch"}})
	require.NoError(t, err)
	assert.Equal(t, `{"output":"Success. Updated the following files:\nA x\n","metadata":{"exit_code":0,"duration_seconds":0.0}}`, item.Output.Text)
}

func TestHandlerContract(t *testing.T) {
	h := &Handler{}
	assert.Equal(t, registry.PayloadFunction, h.Kind())
	assert.True(t, h.MatchesKind(registry.FunctionPayload{}))
	assert.True(t, h.MatchesKind(registry.CustomPayload{}))
	assert.False(t, h.MatchesKind(registry.LocalShellPayload{}))
	assert.False(t, h.MatchesKind(registry.MCPPayload{}))
	assert.False(t, h.MatchesKind(nil))
	assert.True(t, h.IsMutating(context.Background(), registry.Invocation{}))

	// The dispatcher refuses a payload the handler does not accept.
	d := dispatcher(t, h, true, t.TempDir())
	_, err := d.Dispatch(context.Background(), registry.Call{CallID: "c1", Name: Name, Payload: registry.LocalShellPayload{}})
	require.ErrorIs(t, err, registry.ErrFatal)
}

func TestFormatExecOutput(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0", 40 * time.Millisecond: "0", 60 * time.Millisecond: "0.1",
		1200 * time.Millisecond: "1.2", 3 * time.Second: "3", 12345 * time.Millisecond: "12.3"} {
		assert.Equal(t, "Exit code: 0\nWall time: "+want+" seconds\nOutput:\nx\n", FormatExecOutput(0, d, "x\n"), d)
	}
}
