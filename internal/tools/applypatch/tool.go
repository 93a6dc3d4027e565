package applypatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/registry"
)

// Name is the tool name.
const Name = "apply_patch"

// FreeformDescription is the description of the freeform spec.
const FreeformDescription = "Edit files with a patch. Send the patch text itself, as the grammar describes it; do not put it inside JSON."

// LarkGrammar is the grammar of the freeform spec: the patch format of
// parser.go (the language the reference's grammar accepts, so that a
// model trained on that format writes what we parse), in our own rules.
const LarkGrammar = `start: "*** Begin Patch" LF operation+ "*** End Patch" LF?

operation: add_file | delete_file | update_file
add_file: "*** Add File: " path LF added_line+
delete_file: "*** Delete File: " path LF
update_file: "*** Update File: " path LF move_to? edits?
move_to: "*** Move to: " path LF
edits: (section | edit_line)+ end_of_file?

path: /(.+)/
added_line: "+" /(.*)/ LF
section: ("@@" | "@@ " /(.+)/) LF
edit_line: ("+" | "-" | " ") /(.*)/ LF
end_of_file: "*** End of File" LF

%import common.LF
`

// FunctionDescription is the description of the JSON function spec, for
// models without custom tools: the patch format, in our words.
const FunctionDescription = `Edit files with a patch, given whole in ` + "`input`" + `.

A patch starts with the line "*** Begin Patch" and ends with the line "*** End Patch". In between come one or more file operations, each opened by a header line:

*** Add File: <path>
  creates the file; each line after the header is one line of the new file, written with a leading "+".
*** Delete File: <path>
  removes the file; nothing follows the header.
*** Update File: <path>
  changes the file where it is. A line "*** Move to: <new path>" right after the header also renames it.
  Then come the changes, in order of position in the file, each starting with a line "@@", or "@@ " followed by a line of the file (say a function's or a class's first line) that comes before the change and helps find it.
  In a change, every line starts with one character: " " for a line kept as it is, "-" for a line removed, "+" for a line added.
  A change that reaches the end of the file ends with the line "*** End of File".

How the changes are found: the kept and removed lines of a change must match the file. Around each edit, give about three unchanged lines before and three after, so that the place is unique. When that is not enough, add "@@ " lines naming the enclosing blocks, outermost first. When two edits are close, do not repeat the lines they share.

Paths are relative to the working directory. Every line of a new file, even an empty one, carries its "+".

Example:

*** Begin Patch
*** Add File: docs/notes.md
+# Notes
+
+First entry.
*** Update File: cmd/tool/main.go
*** Move to: cmd/tool/run.go
@@ func run() error {
 	cfg := load()
-	return start(cfg)
+	return start(cfg, os.Stdout)
 }
*** Delete File: old/unused.go
*** End Patch
`

// buildFreeformSpec builds FreeformSpec's value.
func buildFreeformSpec() registry.FreeformSpec {
	return registry.FreeformSpec{
		Name:        Name,
		Description: FreeformDescription,
		Format:      registry.FreeformFormat{Type: "grammar", Syntax: "lark", Definition: LarkGrammar},
	}
}

var freeformSpecStatic = registry.Static(buildFreeformSpec)

// FreeformSpec returns the custom (freeform) tool spec with the Lark
// grammar, the form offered to GPT-5-class models.
// It is built once and shared (registry.Static).
func FreeformSpec() registry.FreeformSpec { return freeformSpecStatic() }

// buildFunctionSpec builds FunctionSpec's value.
func buildFunctionSpec() registry.FunctionSpec {
	params := registry.Object(map[string]*registry.Schema{
		"input": registry.String("The whole patch, from \"*** Begin Patch\" to \"*** End Patch\"."),
	}, []string{"input"}, registry.AllowAdditional(false))
	return registry.FunctionSpec{Name: Name, Description: FunctionDescription, Parameters: params}
}

var functionSpecStatic = registry.Static(buildFunctionSpec)

// FunctionSpec returns the JSON function spec: one required string
// parameter, input, holding the whole patch.
// It is built once and shared (registry.Static).
func FunctionSpec() registry.FunctionSpec { return functionSpecStatic() }

// Register adds apply_patch to b in the freeform form, or the JSON form
// when freeform is false. It is registered non-parallel, as in Codex.
func Register(b *registry.Builder, h *Handler, freeform bool) error {
	if h == nil {
		h = &Handler{}
	}
	var spec registry.ToolSpec = FunctionSpec()
	if freeform {
		spec = FreeformSpec()
	}
	return b.Register(spec, h, false)
}

// OutputFormat selects how a run is reported to the model.
type OutputFormat uint8

const (
	// OutputFreeform is the text form of current Codex (0.169):
	// "Exit code: 0\nWall time: 0 seconds\nOutput:\n<summary>".
	OutputFreeform OutputFormat = iota
	// OutputStructured is the classic JSON form:
	// {"output":"<summary>","metadata":{"exit_code":0,"duration_seconds":0.0}}.
	OutputStructured
)

// Handler runs apply_patch calls (function and custom payloads). The zero
// value verifies and applies patches confined to the turn's cwd. Approvals
// and sandboxing are not its business: a policy layer takes part through
// Planned, or calls NewPlan and Plan.Apply itself.
type Handler struct {
	// Guard holds the daemon's paths no patch may touch; nil masks
	// nothing.
	Guard *fsguard.Guard
	// Access returns what a call may change; nil, or an Access without
	// write roots, confines the patch to the turn's cwd.
	Access func(inv registry.Invocation) fsguard.Access
	// Planned, when set, runs after the patch was verified and before
	// anything is written (for example to emit the fileChange item and ask
	// for approval). A non-nil error stops the call and is answered to the
	// model as is, e.g. "patch rejected by user".
	Planned func(ctx context.Context, inv registry.Invocation, plan *Plan) error
	// Finished, when set, runs after Apply with its result or error (for
	// example to complete the item and feed a DiffTracker).
	Finished func(ctx context.Context, inv registry.Invocation, plan *Plan, res Result, err error)
	// Format selects the output form; the default is OutputFreeform.
	Format OutputFormat
	// Now is the clock for the reported wall time; nil uses time.Now.
	Now func() time.Time
}

// Kind returns registry.PayloadFunction.
func (*Handler) Kind() registry.PayloadKind { return registry.PayloadFunction }

// MatchesKind accepts function (JSON form) and custom (freeform) payloads.
func (*Handler) MatchesKind(p registry.Payload) bool {
	if p == nil {
		return false
	}
	k := p.Kind()
	return k == registry.PayloadFunction || k == registry.PayloadCustom
}

// IsMutating returns true: a patch changes files.
func (*Handler) IsMutating(context.Context, registry.Invocation) bool { return true }

// PatchText extracts the patch from a call: the raw input of a custom
// payload, or the "input" argument of a function payload.
func PatchText(p registry.Payload) (string, error) {
	switch p := p.(type) {
	case registry.CustomPayload:
		return p.Input, nil
	case registry.FunctionPayload:
		var args struct {
			Input *string `json:"input"`
		}
		if err := registry.DecodeArguments(p.Arguments, &args); err != nil {
			return "", err
		}
		if args.Input == nil {
			return "", registry.ArgumentsError(errors.New("missing field `input`"))
		}
		return *args.Input, nil
	}
	return "", errors.New("apply_patch handler received unsupported payload")
}

// Handle verifies the patch, lets Planned veto it, applies it, and reports
// the run as an exec result. Verification failures are answered to the
// model as errors ("apply_patch verification failed: ..."); a write failure
// is a failed run (exit code 1) whose output is the error.
func (h *Handler) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	text, err := PatchText(inv.Payload)
	if err != nil {
		return registry.Output{}, err
	}
	scope := Scope{Guard: h.Guard}
	if h.Access != nil {
		scope.Access = h.Access(inv)
	}
	plan, err := NewPlan(inv.Turn.Cwd, scope, text)
	if err != nil {
		return registry.Output{}, err
	}
	if h.Planned != nil {
		if err := h.Planned(ctx, inv, plan); err != nil {
			return registry.Output{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return registry.Output{}, err
	}
	now := h.Now
	if now == nil {
		now = time.Now
	}
	started := now()
	res, err := plan.Apply()
	elapsed := now().Sub(started)
	if h.Finished != nil {
		h.Finished(ctx, inv, plan, res, err)
	}
	if err != nil {
		if KindOf(err) != ErrIO {
			return registry.Output{}, err
		}
		return registry.TextOutput(h.format(1, elapsed, err.Error()+"\n"), false), nil
	}
	return registry.TextOutput(h.format(0, elapsed, res.Summary()), true), nil
}

func (h *Handler) format(exitCode int, elapsed time.Duration, output string) string {
	secs := math.Round(elapsed.Seconds()*10) / 10
	if h.Format == OutputStructured {
		b, _ := json.Marshal(output)
		dur := strconv.FormatFloat(secs, 'f', -1, 64)
		if !strings.Contains(dur, ".") {
			dur += ".0"
		}
		return fmt.Sprintf(`{"output":%s,"metadata":{"exit_code":%d,"duration_seconds":%s}}`, b, exitCode, dur)
	}
	return FormatExecOutput(exitCode, elapsed, output)
}

// FormatExecOutput renders a run in the freeform exec form the reference
// uses for apply_patch: the wall time is rounded to a tenth of a second and
// printed like Rust prints a float ("0", "1.2", "3").
func FormatExecOutput(exitCode int, elapsed time.Duration, output string) string {
	secs := math.Round(elapsed.Seconds()*10) / 10
	return fmt.Sprintf("Exit code: %d\nWall time: %s seconds\nOutput:\n%s", exitCode, strconv.FormatFloat(secs, 'f', -1, 64), output)
}
