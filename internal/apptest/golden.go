package apptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
)

// Golden wire transcripts: frames normalised so that what differs between
// runs (ids, times) does not count, a readable diff of two transcripts,
// the captures of the reference (codex-cli) that tests compare with, and
// the reference's JSON schemas of the messages tests validate.

// NormaliseFrames normalises one turn's frames (starting with the
// turn/start response, or notifications before it) with one normaliser,
// so that ids keep their identity across frames.
func NormaliseFrames(t testing.TB, raw []string) []string {
	t.Helper()
	n := NewNormaliser()
	frames := make([]any, len(raw))
	for i, data := range raw {
		require.NoError(t, json.Unmarshal([]byte(data), &frames[i]), "%s", data)
		// The thread and the turn get names rather than numbers, however
		// the frames order their first appearance.
		if m, ok := frames[i].(map[string]any); ok {
			if p, ok := m["params"].(map[string]any); ok {
				if id, ok := p["threadId"].(string); ok {
					n.Name(id, "<thread>")
				}
			}
			if res, ok := m["result"].(map[string]any); ok {
				if turn, ok := res["turn"].(map[string]any); ok {
					if id, ok := turn["id"].(string); ok {
						n.Name(id, "<turn>")
					}
				}
			}
		}
	}
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = n.Frame(f)
	}
	return out
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// timeKeys are the keys whose non-null numbers vary between runs.
var timeKeys = map[string]string{
	"emittedAtMs": "<ms>", "startedAtMs": "<ms>", "completedAtMs": "<ms>",
	"startedAt": "<s>", "completedAt": "<s>", "createdAt": "<s>", "updatedAt": "<s>", "recencyAt": "<s>",
	"durationMs": "<durationMs>",
}

// opaqueKeys are the keys whose strings are tokens each server makes its
// own way (a read state's revision), which clients only hand back.
var opaqueKeys = map[string]string{"revision": "<revision>"}

// Normaliser replaces what differs between runs and keeps the rest:
// the thread and turn ids become <thread> and <turn>, other UUIDs <uuid:N>
// by first appearance, non-null times and durations <ms>, <s> or
// <durationMs>, opaque tokens <revision>, and a response's id <requestId>. Keys are sorted, so key
// order is not compared; keys, null vs absent, value types and the
// scripted values (texts, token counts, upstream ids) are.
type Normaliser struct {
	// Names maps each id seen to its placeholder.
	Names map[string]string
	uuids int
}

// NewNormaliser is a Normaliser that has seen no id.
func NewNormaliser() *Normaliser { return &Normaliser{Names: map[string]string{}} }

// Name makes id appear as the placeholder as, unless it has one already.
func (n *Normaliser) Name(id, as string) {
	if _, ok := n.Names[id]; !ok {
		n.Names[id] = as
	}
}

// Frame renders one decoded frame normalised, as one line.
func (n *Normaliser) Frame(v any) string {
	if m, ok := v.(map[string]any); ok {
		if _, isResponse := m["id"]; isResponse && m["method"] == nil {
			m["id"] = "<requestId>"
		}
	}
	var b bytes.Buffer
	n.encode(&b, "", v)
	return b.String()
}

func (n *Normaliser) encode(b *bytes.Buffer, key string, v any) {
	if ph, ok := timeKeys[key]; ok {
		if _, isNum := v.(float64); isNum {
			v = ph
		}
	}
	if ph, ok := opaqueKeys[key]; ok {
		if _, isString := v.(string); isString {
			v = ph
		}
	}
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(b, k)
			b.WriteByte(':')
			n.encode(b, k, x[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			n.encode(b, "", e)
		}
		b.WriteByte(']')
	case string:
		if uuidRE.MatchString(x) {
			name, ok := n.Names[x]
			if !ok {
				n.uuids++
				name = fmt.Sprintf("<uuid:%d>", n.uuids)
				n.Names[x] = name
			}
			x = name
		}
		writeJSON(b, x)
	default:
		writeJSON(b, x)
	}
}

// JSONText is v as JSON without HTML escaping, so placeholders stay
// readable.
func JSONText(v any) string {
	var b bytes.Buffer
	writeJSON(&b, v)
	return b.String()
}

// writeJSON writes v without HTML escaping.
func writeJSON(b *bytes.Buffer, v any) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	b.Truncate(b.Len() - 1) // Encode's newline
}

// ReadLines reads the lines of a golden file.
func ReadLines(t testing.TB, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file")
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// DiffTranscripts returns "" when the transcripts are equal, else a
// readable diff: frames aligned by method (longest common subsequence),
// missing and extra frames marked - and +, and for aligned frames that
// differ, each differing field with both values.
func DiffTranscripts(want, got []string) string {
	type fr struct {
		label  string
		fields map[string]string
		raw    string
	}
	parse := func(s string) fr {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return fr{label: "<invalid JSON>", raw: s}
		}
		f := fr{fields: map[string]string{}, raw: s}
		flatten("", v, f.fields)
		m, _ := v.(map[string]any)
		switch {
		case m["method"] != nil:
			f.label = fmt.Sprint(m["method"])
		case m["result"] != nil:
			f.label = "(response)"
		case m["error"] != nil:
			f.label = "(error response)"
		default:
			f.label = "(unknown frame)"
		}
		return f
	}
	a := make([]fr, len(want))
	for i, s := range want {
		a[i] = parse(s)
	}
	b := make([]fr, len(got))
	for i, s := range got {
		b[i] = parse(s)
	}

	// LCS over labels.
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i].label == b[j].label {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	differs := false
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i].label == b[j].label:
			if a[i].raw == b[j].raw {
				fmt.Fprintf(&out, "  %2d %s\n", j, a[i].label)
			} else {
				differs = true
				fmt.Fprintf(&out, "~ %2d %s\n", j, a[i].label)
				for _, d := range fieldDiffs(a[i].fields, b[j].fields) {
					fmt.Fprintf(&out, "       %s\n", d)
				}
			}
			i++
			j++
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			differs = true
			fmt.Fprintf(&out, "+ %2d %s  %s\n", j, b[j].label, b[j].raw)
			j++
		default:
			differs = true
			fmt.Fprintf(&out, "-    %s  %s\n", a[i].label, a[i].raw)
			i++
		}
	}
	if !differs {
		return ""
	}
	return out.String()
}

// flatten maps every leaf (and empty container) of v to its JSON text,
// keyed by a dotted path.
func flatten(path string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			out[path] = "{}"
		}
		for k, e := range x {
			flatten(strings.TrimPrefix(path+"."+k, "."), e, out)
		}
	case []any:
		if len(x) == 0 {
			out[path] = "[]"
		}
		for i, e := range x {
			flatten(fmt.Sprintf("%s[%d]", path, i), e, out)
		}
	default:
		var b bytes.Buffer
		writeJSON(&b, x)
		out[path] = b.String()
	}
}

func fieldDiffs(want, got map[string]string) []string {
	var out []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: -%s +(absent)", k, w))
		case g != w:
			out = append(out, fmt.Sprintf("%s: -%s +%s", k, w, g))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("%s: -(absent) +%s", k, g))
		}
	}
	sort.Strings(out)
	return out
}

// ReferenceLine is one line of a capture of the reference: a frame the
// client sent or received.
type ReferenceLine struct {
	Dir   string          `json:"dir"` // "send" or "recv"
	Frame json.RawMessage `json:"frame"`
}

// ReferencePath is the path of a capture of the reference in the package
// under test: testdata/golden/reference/<name>, next to the capture
// script that made it.
func ReferencePath(name string) string {
	return filepath.Join("testdata", "golden", "reference", name)
}

// ReferenceFrames reads the capture of the reference name (ReferencePath):
// a JSON object per line, {"dir": "send"|"recv", "frame": …}.
func ReferenceFrames(t testing.TB, name string) []ReferenceLine {
	t.Helper()
	f, err := os.Open(ReferencePath(name))
	require.NoError(t, err)
	defer f.Close()
	var out []ReferenceLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		var l ReferenceLine
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		out = append(out, l)
	}
	require.NoError(t, sc.Err())
	return out
}

// ValidateSchema checks raw against the codex-cli 0.169.0 schema of the
// message name (testdata/schema/<name>.json of this package).
func ValidateSchema(t testing.TB, name string, raw []byte) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join(filepath.Dir(file), "testdata", "schema", name+".json"))
	require.NoError(t, err)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	require.NoError(t, err)
	require.NoError(t, sch.Validate(inst), "%s: %s", name, raw)
}

// NotificationSchemas names the schemas of the notifications tests
// validate, by method.
var NotificationSchemas = map[string]string{
	"item/started": "ItemStartedNotification", "item/completed": "ItemCompletedNotification",
	"turn/started": "TurnStartedNotification", "turn/completed": "TurnCompletedNotification",
}

// Outline renders frames as comparable lines: the method, an item's type
// and status, a status's type and flags. What the reference sends and we
// need not (warning, rate limits, read state, settings) and output deltas
// (their count depends on timing: "may miss early output",
// docs/protocol.md §8.1) are left out, and so are responses.
func Outline(t testing.TB, frames []Frame) []string {
	t.Helper()
	var out []string
	for _, f := range frames {
		switch f.Method {
		case "", "warning", "account/rateLimits/updated", "thread/readState/changed", "thread/settings/updated",
			"item/commandExecution/outputDelta", "remoteControl/status/changed", "thread/started":
			continue
		case "thread/status/changed":
			var p struct {
				Status struct {
					Type        string   `json:"type"`
					ActiveFlags []string `json:"activeFlags"`
				} `json:"status"`
			}
			require.NoError(t, json.Unmarshal(f.Params, &p))
			out = append(out, fmt.Sprintf("%s %s%v", f.Method, p.Status.Type, p.Status.ActiveFlags))
		case "item/started", "item/completed":
			var p struct {
				Item Item `json:"item"`
			}
			require.NoError(t, json.Unmarshal(f.Params, &p))
			out = append(out, strings.TrimSpace(f.Method+" "+p.Item.Type+" "+p.Item.Status))
		default:
			out = append(out, f.Method)
		}
	}
	return out
}
