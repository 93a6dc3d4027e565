package dynamic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Argument validation.
//
// Arguments are checked against the schema the client registered, not
// against the sanitized copy sent to the model: sanitizing is lossy in ways
// that would reject arguments the client accepts (a typeless node becomes
// "string", a boolean schema `true` becomes "string", an enum of numbers
// without a type gets type "string"). The schema is compiled once, when the
// thread's tools are registered or restored, by a full JSON Schema
// validator: every keyword of the schema's draft ($schema, else 2020-12, or
// draft-07 for a schema only valid there, such as array-form items) is
// checked, except that format stays an annotation (as the drafts say by
// default) and nothing is ever loaded: a $ref must point into the schema
// itself.
//
// Two things keep it from being stricter than the client or slower than a
// call should be: a pattern Go's regexp cannot compile (lookaround, for
// one) matches everything rather than failing the registration, and one
// validation evaluates a bounded number of schema objects (anyOf inside
// anyOf is exponential); past that the arguments are accepted.

// The budget of one validation in schema-object evaluations: a base plus a
// share per value in the arguments, so that honest schemas, whose cost is
// linear in the arguments, are always judged, while a schema that branches
// without end costs at most a few milliseconds (each evaluation that fails
// builds an error the library keeps).
const (
	baseValidateSteps     = 1 << 12
	validateStepsPerValue = 64
)

// argValidator validates call arguments against one compiled input schema.
type argValidator struct {
	schema *jsonschema.Schema

	// mu serializes validations, whose step count is kept here: the
	// validator library has no per-validation state of ours.
	mu       sync.Mutex
	steps    int // guarded by mu
	maxSteps int // guarded by mu
}

// argumentsSchemaURL names the registered schema inside the compiler; it
// is never fetched.
const argumentsSchemaURL = "urn:appserver:dynamic-tool-arguments"

// newArgValidator compiles a schema for validation.
func newArgValidator(schema []byte) (*argValidator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, err
	}
	v := &argValidator{}
	v.schema, err = v.compile(doc, jsonschema.Draft2020)
	if err == nil {
		return v, nil
	}
	if obj, ok := doc.(map[string]any); ok {
		if _, declared := obj["$schema"]; !declared {
			if sch, err7 := v.compile(doc, jsonschema.Draft7); err7 == nil {
				v.schema = sch
				return v, nil
			}
		}
	}
	return nil, schemaError(err)
}

func (v *argValidator) compile(doc any, draft *jsonschema.Draft) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(draft)
	c.UseLoader(refuseLoader{})
	c.UseRegexpEngine(lenientRegexp)
	c.RegisterVocabulary(&jsonschema.Vocabulary{
		URL: "urn:appserver:step-budget",
		Compile: func(*jsonschema.CompilerContext, map[string]any) (jsonschema.SchemaExt, error) {
			return stepCounter{v}, nil
		},
	})
	// Our vocabulary must apply to every schema object whatever its draft
	// and $vocabulary say.
	c.AssertVocabs()
	if err := c.AddResource(argumentsSchemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(argumentsSchemaURL)
}

// schemaError shortens a compiler error to its cause, without the
// compiler's internal schema URL.
func schemaError(err error) error {
	var se *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &se) && errors.As(se.Err, &ve) {
		path, reason := describe(ve, nil)
		if path == "" {
			return fmt.Errorf("not a valid JSON Schema: %s", reason)
		}
		return fmt.Errorf("not a valid JSON Schema: %s: %s", path, reason)
	}
	return errors.New(strings.ReplaceAll(err.Error(), argumentsSchemaURL, "schema"))
}

// refuseLoader loads nothing: a registered schema must not make the daemon
// read files or fetch URLs.
type refuseLoader struct{}

// Load refuses every URL.
func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref to %s: only references inside the schema are supported", url)
}

// lenientRegexp compiles patterns with Go's regexp; a pattern it cannot
// compile (ECMA-262 lookaround, backreferences) matches every string, so a
// client's schema is never rejected, nor its arguments, for a dialect gap.
func lenientRegexp(s string) (jsonschema.Regexp, error) {
	re, err := regexp.Compile(s)
	if err != nil {
		return anyString(s), nil
	}
	return re, nil
}

// anyString is a pattern that matches everything.
type anyString string

// MatchString reports true.
func (anyString) MatchString(string) bool { return true }

// String returns the pattern as written.
func (a anyString) String() string { return string(a) }

// stepCounter is the extension run for every schema object evaluated; it
// ends a validation that has spent its budget.
type stepCounter struct{ v *argValidator }

// errBudget is the panic value that unwinds an over-budget validation.
var errBudget = errors.New("validation budget exhausted")

// Validate counts one schema evaluation.
func (s stepCounter) Validate(*jsonschema.ValidatorContext, any) {
	s.v.steps++
	if s.v.steps > s.v.maxSteps {
		panic(errBudget)
	}
}

// ArgumentsError is an argument validation failure, answered to the model
// so that it can retry.
type ArgumentsError struct {
	// Tool is the tool's display name.
	Tool string
	// Path is the JSON pointer of the offending value, "" for the root.
	Path string
	// Reason says what is wrong.
	Reason string
}

// Error returns "invalid arguments for <tool>: <path>: <reason>", without
// the path for the root value.
func (e *ArgumentsError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("invalid arguments for %s: %s", e.Tool, e.Reason)
	}
	return fmt.Sprintf("invalid arguments for %s: %s: %s", e.Tool, e.Path, e.Reason)
}

func (v *argValidator) validate(args any) (err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.steps = 0
	v.maxSteps = baseValidateSteps + validateStepsPerValue*countValues(args)
	defer func() {
		if r := recover(); r != nil {
			if r != errBudget { //nolint:errorlint // the panic value itself
				panic(r)
			}
			err = nil // the schema is too costly to judge: accept
		}
	}()
	verr := v.schema.Validate(args)
	if verr == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(verr, &ve) {
		return &ArgumentsError{Reason: verr.Error()}
	}
	path, reason := describe(ve, args)
	return &ArgumentsError{Path: path, Reason: reason}
}

// describe returns the JSON pointer and the reason of the first failure in
// an error tree, in words a model can act on. instance is the validated
// value (nil when describing a schema error), used to name the type of an
// offending value.
func describe(e *jsonschema.ValidationError, instance any) (string, string) {
	path := pointer(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		if first := firstCause(e); first != nil {
			return describe(first, instance)
		}
	case *kind.AnyOf:
		return path, noBranch(e, instance)
	case *kind.OneOf:
		if len(k.Subschemas) == 2 {
			return path, fmt.Sprintf("matches more than one of the allowed schemas (%d and %d)", k.Subschemas[0]+1, k.Subschemas[1]+1)
		}
		return path, noBranch(e, instance)
	case *kind.Type:
		got := k.Got
		if instance != nil {
			got = kindOf(valueAt(instance, e.InstanceLocation))
		}
		return path, fmt.Sprintf("expected %s, got %s", strings.Join(k.Want, " or "), got)
	case *kind.Required:
		return path, fmt.Sprintf("missing required property %q", k.Missing[0])
	case *kind.AdditionalProperties:
		return path, fmt.Sprintf("unexpected property %q", k.Properties[0])
	case *kind.Enum:
		return path, "must be one of " + previewList(k.Want)
	case *kind.Const:
		return path, "must be " + preview(k.Want)
	case *kind.FalseSchema:
		return path, "no value is allowed here"
	case *kind.Not:
		return path, "must not match the excluded schema"
	case *kind.RefCycle:
		return path, "the tool's schema refers to itself without end and accepts no value"
	}
	return path, e.ErrorKind.LocalizedString(englishPrinter)
}

var englishPrinter = message.NewPrinter(language.English)

// noBranch describes a value that matches none of an anyOf / oneOf.
func noBranch(e *jsonschema.ValidationError, instance any) string {
	first := firstCause(e)
	if first == nil {
		return "does not match any of the allowed schemas"
	}
	p, r := describe(first, instance)
	if len(e.Causes) == 1 {
		if p == "" {
			return r
		}
		return p + ": " + r
	}
	if p != "" {
		r = p + ": " + r
	}
	return fmt.Sprintf("does not match any of the %d allowed schemas (first: %s)", len(e.Causes), r)
}

// firstCause picks the cause to report: for anyOf / oneOf the first branch,
// otherwise the one at the smallest instance location, so that the message
// does not depend on the order in which the library visits properties.
func firstCause(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return nil
	}
	switch e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
		return e.Causes[0]
	}
	return slices.MinFunc(e.Causes, func(a, b *jsonschema.ValidationError) int {
		return slices.Compare(a.InstanceLocation, b.InstanceLocation)
	})
}

// pointer renders an instance location as a JSON pointer.
func pointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(escapePointer(tok))
	}
	return b.String()
}

// valueAt returns the value at loc inside v.
func valueAt(v any, loc []string) any {
	for _, tok := range loc {
		switch c := v.(type) {
		case map[string]any:
			v = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

// countValues returns the number of JSON values in v, v included.
func countValues(v any) int {
	n := 1
	switch c := v.(type) {
	case map[string]any:
		for _, e := range c {
			n += countValues(e)
		}
	case []any:
		for _, e := range c {
			n += countValues(e)
		}
	}
	return n
}

// isInteger reports whether n has an integral value (3, 3.0, 1e2).
func isInteger(n json.Number) bool {
	if plainInteger(n) {
		return true // what big.Rat would say, without its allocations
	}
	r, ok := new(big.Rat).SetString(string(n))
	return ok && r.IsInt()
}

// plainInteger reports whether n is written as an integer: an optional
// minus sign and digits only.
func plainInteger(n json.Number) bool {
	s := strings.TrimPrefix(string(n), "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func kindOf(val any) string {
	switch v := val.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if isInteger(v) {
			return "integer"
		}
		return "number"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return fmt.Sprintf("%T", val)
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func preview(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

func previewList(vs []any) string {
	const limit = 10
	parts := make([]string, 0, min(len(vs), limit)+1)
	for i, v := range vs {
		if i == limit {
			parts = append(parts, fmt.Sprintf("… (%d more)", len(vs)-limit))
			break
		}
		parts = append(parts, preview(v))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
