package files

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/registry/spectest"
)

var colorQuestion = map[string]any{"questions": []any{map[string]any{
	"id": "color", "header": "Color", "question": "Which?",
	"options": []any{map[string]any{"label": "Red", "description": "r"}, map[string]any{"label": "Blue", "description": "b"}},
}}}

func TestRequestUserInputAsksClient(t *testing.T) {
	var got api.ToolRequestUserInputParams
	asker := AskerFunc(func(_ context.Context, p api.ToolRequestUserInputParams) (api.ToolRequestUserInputResult, error) {
		got = p
		return api.ToolRequestUserInputResult{Answers: api.Map[api.ToolRequestUserInputAnswer]{"color": {Answers: api.List[string]{"Red"}}}}, nil
	})
	e := newEnv(t, &RequestUserInput{Asker: asker, Mode: func(registry.Invocation) string { return "Plan" }})
	// The client's answer becomes the output as JSON text (codex-cli 0.169
	// answered {"answers":{"color":{"answers":["x"]}}} for this call).
	wantOK(t, e.call(t, RequestUserInputName, colorQuestion), `{"answers":{"color":{"answers":["Red"]}}}`)
	raw, _ := json.Marshal(got)
	// The server request as codex-cli 0.169 sent it (threadId is the
	// integration's to fill).
	want := `{"threadId":"","turnId":"turn-1","itemId":"call-1","questions":[{"id":"color","header":"Color","question":"Which?","isOther":true,"isSecret":false,"options":[{"label":"Red","description":"r"},{"label":"Blue","description":"b"}]}],"isBlocking":true,"autoResolutionMs":null}`
	if string(raw) != want {
		t.Fatalf("params %s", raw)
	}
}

func TestRequestUserInputRefusals(t *testing.T) {
	failing := AskerFunc(func(context.Context, api.ToolRequestUserInputParams) (api.ToolRequestUserInputResult, error) {
		return api.ToolRequestUserInputResult{}, ErrCancelled
	})
	e := newEnv(t, &RequestUserInput{Asker: failing})
	wantErr(t, e.call(t, RequestUserInputName, colorQuestion), "request_user_input was cancelled before receiving a response")
	noOptions := map[string]any{"questions": []any{map[string]any{"id": "a", "header": "H", "question": "Q?", "options": []any{}}}}
	wantErr(t, e.call(t, RequestUserInputName, noOptions), "request_user_input requires non-empty options for every question")
	wantErr(t, e.call(t, RequestUserInputName, `{}`), "failed to parse function arguments: missing field `questions`")

	nobody := newEnv(t, &RequestUserInput{})
	wantErr(t, nobody.call(t, RequestUserInputName, colorQuestion), "request_user_input was cancelled before receiving a response")

	def := newEnv(t, &RequestUserInput{Asker: failing, Mode: func(registry.Invocation) string { return "Default" }})
	wantErr(t, def.call(t, RequestUserInputName, colorQuestion), "request_user_input is unavailable in Default mode")
}

func TestRequestUserInputInterrupted(t *testing.T) {
	blocking := AskerFunc(func(ctx context.Context, _ api.ToolRequestUserInputParams) (api.ToolRequestUserInputResult, error) {
		<-ctx.Done()
		return api.ToolRequestUserInputResult{}, ctx.Err()
	})
	e := newEnv(t, &RequestUserInput{Asker: blocking})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	out := e.callCtx(t, ctx, RequestUserInputName, colorQuestion)
	if out.Succeeded() || !strings.HasPrefix(out.Text, "aborted by user after") {
		t.Fatalf("interrupted: %+v", out)
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the turn was interrupted")
	}
}

// TestSpecs compares view_image and request_user_input with the tools array
// codex-cli 0.169 sent (captured from the binary), descriptions aside, and checks the parallel
// flags of every tool.
func TestSpecs(t *testing.T) {
	e := newEnv(t, &ReadFile{}, &ListDir{}, &GrepFiles{}, &ViewImage{}, &RequestUserInput{})
	parallel := map[string]bool{}
	specs := map[string]registry.ToolSpec{}
	for _, s := range e.specs {
		parallel[s.Spec.ToolName()] = s.SupportsParallelToolCalls
		specs[s.Spec.ToolName()] = s.Spec
	}
	wantParallel := map[string]bool{ReadFileName: true, ListDirName: true, GrepFilesName: true, ViewImageName: true, RequestUserInputName: false}
	if !reflect.DeepEqual(parallel, wantParallel) {
		t.Fatalf("parallel flags %v", parallel)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "specs_codex_0.169.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want []map[string]any
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		raw, _ := json.Marshal(specs[w["name"].(string)])
		g, err := spectest.WithoutDescriptions(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			wr, _ := json.Marshal(w)
			gs, _ := json.Marshal(g)
			t.Errorf("%s differs from codex 0.169 (descriptions aside):\n got %s\nwant %s", w["name"], gs, wr)
		}
	}
	raw, _ := json.Marshal(specs[ReadFileName])
	for _, field := range []string{`"file_path"`, `"indentation"`, `"anchor_line"`, `"include_siblings"`, `"required":["file_path"]`, `"strict":false`} {
		if !json.Valid(raw) || !strings.Contains(string(raw), field) {
			t.Errorf("read_file spec lacks %s: %s", field, raw)
		}
	}
}
