package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden/*.jsonl from the live daemon")

// goldenCase is one scripted turn whose wire transcript is pinned.
type goldenCase struct {
	name     string
	script   string // fake model script
	input    map[string]any
	clientID string // clientUserMessageId, "" for none
	known    knownDifferences
}

// knownDifferences are the accepted differences between appserver's
// transcript and the reference's.
type knownDifferences struct {
	// referenceOnly are notification methods only the reference sends.
	referenceOnly []string
	// oursOnly are notification methods only appserver sends.
	oursOnly []string
	// nullInOurs are "method params.path" fields where the reference has a
	// value and appserver sends null.
	nullInOurs []string
}

// referenceNoise is what 0.169.0 sends around a turn that appserver does
// not (docs/protocol.md §8: clients tolerate it, we need not send it).
var referenceNoise = []string{"warning", "account/rateLimits/updated", "thread/readState/changed"}

const goldenUsage = `"usage":{"input_tokens":120,"cached_input_tokens":20,"output_tokens":30,"reasoning_output_tokens":10,"total_tokens":150}`

var goldenCases = []goldenCase{
	{
		// The reference's fake model (a scripted fake model on loopback): one
		// reasoning summary part, a message in two deltas, one usage report.
		name:     "plain_turn",
		input:    map[string]any{"type": "text", "text": "Say hello", "text_elements": []any{}},
		clientID: "cmsg-1",
		script: `{"steps":[{"name":"hello","reasoning":{"summary":["Thinking briefly."]},
			"text":"Hello there!","chunks":2,` + goldenUsage + `}]}`,
		known: knownDifferences{
			referenceOnly: referenceNoise,
		},
	},
	{
		// One tool round with the built-in update_plan, then the answer.
		name:  "tool_turn",
		input: map[string]any{"type": "text", "text": "Make a PLAN", "text_elements": []any{}},
		script: `{"steps":[
			{"name":"plan","tool_calls":[{"id":"fc_1","call_id":"call_plan","name":"update_plan",
				"arguments":{"explanation":"Two steps.","plan":[{"step":"Look","status":"in_progress"},{"step":"Answer","status":"pending"}]}}],
			 ` + goldenUsage + `},
			{"name":"answer","match":{"call_output":"call_plan"},"text":"Tool done.",` + goldenUsage + `}]}`,
		known: knownDifferences{
			referenceOnly: referenceNoise,
			oursOnly:      []string{"turn/plan/updated"},
		},
	},
}

// TestGoldenTranscripts pins, in testdata/golden/<name>.jsonl, every frame
// the client receives from the turn/start response through turn/completed,
// normalised (goldenNormaliser), one JSON object per line. -update rewrites
// the files from the live daemon.
//
// testdata/golden/reference/<name>.jsonl holds the raw frames codex-cli
// 0.169.0 sent for the same model output (same texts, ids and usage from
// its fake model), and the golden file is also checked against it, modulo
// the differences listed in known. The known differences are:
//
// plain_turn (reference: a capture of codex-cli 0.169.0, the "Say
// hello" turn):
//   - the reference sends `warning` ("Model metadata for `fake-model` not
//     found…") before the turn/start response, `account/rateLimits/updated`
//     after each `thread/tokenUsage/updated` and `thread/readState/changed`
//     before the final `thread/status/changed`; appserver sends none of
//     them (docs/protocol.md §8: optional noise).
//
// Everything else matches: method order, every key, null vs absent
// (`contentTokenCount: null`, `completedAtMs: null` in item/started,
// `startedAt: null` in the response, `error: null`), value types, the
// upstream ids (rs_1, msg_1) reused as item ids, and itemsView
// notLoaded → summary. Key order is not compared here (keys are sorted);
// a comparison of the raw frames found it identical as well.
//
// tool_turn (reference: captured from codex-cli 0.169.0 with the
// start-server.sh setup but model gpt-5.5, and a fake model answering
// update_plan (call_plan) then "Tool done."):
//   - update_plan emits no ThreadItem in either;
//   - 0.169.0 does not offer update_plan in that configuration and answers
//     the call with the output "unsupported call: update_plan", so it
//     sends no `turn/plan/updated`; appserver runs the tool and sends one;
//   - the rateLimits/readState noise is as for plain_turn (no warning: gpt-5.5 has model metadata);
//     thread/started, which the reference broadcast late (after turn/start
//     had been sent), was removed from the stored reference.
//
// As in 0.169.0 (threads.jsonl dynamic-tool and shell turns; docs/protocol.md
// §8.1), a response's thread/tokenUsage/updated follows its tool calls, so
// turn/plan/updated comes before it.
func TestGoldenTranscripts(t *testing.T) {
	for _, gc := range goldenCases {
		t.Run(gc.name, func(t *testing.T) {
			live := liveGoldenTranscript(t, gc)
			path := filepath.Join("testdata", "golden", gc.name+".jsonl")
			if *updateGolden {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, []byte(strings.Join(live, "\n")+"\n"), 0o644))
				t.Logf("wrote %s", path)
			}
			want := readGoldenLines(t, path)
			if d := diffGoldenTranscripts(want, live); d != "" {
				t.Errorf("live transcript differs from %s (- golden, + live; accept with -update):\n%s", path, d)
			}

			// The golden file, whoever wrote it, keeps the reference's shape.
			refRaw := readGoldenLines(t, filepath.Join("testdata", "golden", "reference", gc.name+".jsonl"))
			ref := normaliseRawFrames(t, refRaw)
			if d := diffGoldenTranscripts(gc.known.apply(t, ref, true), gc.known.apply(t, want, false)); d != "" {
				t.Errorf("%s differs from the codex 0.169.0 reference beyond the known differences (- reference, + golden):\n%s", path, d)
			}
		})
	}
}

// liveGoldenTranscript runs the case's turn on a fresh daemon and returns
// the normalised frames.
func liveGoldenTranscript(t *testing.T, gc goldenCase) []string {
	fake := startFake(t, gc.script)
	d := startDaemon(t, append([]string{"--data-dir", t.TempDir()}, fakeArgs(fake, "responses")...)...)
	r := newRPC(t, d)
	threadID := startThread(t, r, nil)
	r.seen = nil

	params := map[string]any{"threadId": threadID, "input": []any{gc.input}}
	if gc.clientID != "" {
		params["clientUserMessageId"] = gc.clientID
	}
	req, err := json.Marshal(map[string]any{"id": 100, "method": "turn/start", "params": params})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	require.NoError(t, r.ws.Write(ctx, websocket.MessageText, req))
	var raw []string
	for {
		_, data, err := r.ws.Read(ctx)
		require.NoError(t, err, "waiting for turn/completed")
		raw = append(raw, string(data))
		var f frame
		require.NoError(t, json.Unmarshal(data, &f))
		if f.Method == "turn/completed" {
			return normaliseRawFrames(t, raw)
		}
	}
}

// normaliseRawFrames normalises one turn's frames (starting with the
// turn/start response, or notifications before it) with one normaliser,
// so that ids keep their identity across frames.
func normaliseRawFrames(t *testing.T, raw []string) []string {
	t.Helper()
	n := &goldenNormaliser{names: map[string]string{}}
	frames := make([]any, len(raw))
	for i, data := range raw {
		require.NoError(t, json.Unmarshal([]byte(data), &frames[i]), "%s", data)
		// The thread and the turn get names rather than numbers, however
		// the frames order their first appearance.
		if m, ok := frames[i].(map[string]any); ok {
			if p, ok := m["params"].(map[string]any); ok {
				if id, ok := p["threadId"].(string); ok {
					n.name(id, "<thread>")
				}
			}
			if res, ok := m["result"].(map[string]any); ok {
				if turn, ok := res["turn"].(map[string]any); ok {
					if id, ok := turn["id"].(string); ok {
						n.name(id, "<turn>")
					}
				}
			}
		}
	}
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = n.frame(f)
	}
	return out
}

var goldenUUIDRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// goldenTimeKeys are the keys whose non-null numbers vary between runs.
var goldenTimeKeys = map[string]string{
	"emittedAtMs": "<ms>", "startedAtMs": "<ms>", "completedAtMs": "<ms>",
	"startedAt": "<s>", "completedAt": "<s>", "createdAt": "<s>", "updatedAt": "<s>", "recencyAt": "<s>",
	"durationMs": "<durationMs>",
}

// goldenNormaliser replaces what differs between runs and keeps the rest:
// the thread and turn ids become <thread> and <turn>, other UUIDs <uuid:N>
// by first appearance, non-null times and durations <ms>, <s> or
// <durationMs>, and a response's id <requestId>. Keys are sorted, so key
// order is not compared; keys, null vs absent, value types and the
// scripted values (texts, token counts, upstream ids) are.
type goldenNormaliser struct {
	names map[string]string
	uuids int
}

func (n *goldenNormaliser) name(id, as string) {
	if _, ok := n.names[id]; !ok {
		n.names[id] = as
	}
}

func (n *goldenNormaliser) frame(v any) string {
	if m, ok := v.(map[string]any); ok {
		if _, isResponse := m["id"]; isResponse && m["method"] == nil {
			m["id"] = "<requestId>"
		}
	}
	var b bytes.Buffer
	n.encode(&b, "", v)
	return b.String()
}

func (n *goldenNormaliser) encode(b *bytes.Buffer, key string, v any) {
	if ph, ok := goldenTimeKeys[key]; ok {
		if _, isNum := v.(float64); isNum {
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
			goldenWriteJSON(b, k)
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
		if goldenUUIDRE.MatchString(x) {
			name, ok := n.names[x]
			if !ok {
				n.uuids++
				name = fmt.Sprintf("<uuid:%d>", n.uuids)
				n.names[x] = name
			}
			x = name
		}
		goldenWriteJSON(b, x)
	default:
		goldenWriteJSON(b, x)
	}
}

// goldenWriteJSON writes v without HTML escaping, so placeholders stay readable.
func goldenWriteJSON(b *bytes.Buffer, v any) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	b.Truncate(b.Len() - 1) // Encode's newline
}

func readGoldenLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file: run go test -run TestGoldenTranscripts -update")
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// apply removes the known differences from a normalised transcript: the
// other side's extra notifications, and the fields appserver sends as null.
func (k knownDifferences) apply(t *testing.T, frames []string, reference bool) []string {
	t.Helper()
	drop := k.oursOnly
	if reference {
		drop = k.referenceOnly
	}
	var out []string
	for _, line := range frames {
		var f map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &f), "%s", line)
		method, _ := f["method"].(string)
		if method != "" && slices.Contains(drop, method) {
			continue
		}
		for _, field := range k.nullInOurs {
			m, path, _ := strings.Cut(field, " ")
			if m == method {
				goldenSetPath(f, strings.Split(path, "."), nil)
			}
		}
		var b bytes.Buffer
		goldenWriteJSON(&b, f)
		out = append(out, b.String())
	}
	return out
}

func goldenSetPath(m map[string]any, path []string, v any) {
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return
		}
		m = next
	}
	if _, ok := m[path[len(path)-1]]; ok {
		m[path[len(path)-1]] = v
	}
}

// diffGoldenTranscripts returns "" when the transcripts are equal, else a
// readable diff: frames aligned by method (longest common subsequence),
// missing and extra frames marked - and +, and for aligned frames that
// differ, each differing field with both values.
func diffGoldenTranscripts(want, got []string) string {
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
		goldenFlatten("", v, f.fields)
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
				for _, d := range goldenFieldDiffs(a[i].fields, b[j].fields) {
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

// goldenFlatten maps every leaf (and empty container) of v to its JSON text,
// keyed by a dotted path.
func goldenFlatten(path string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			out[path] = "{}"
		}
		for k, e := range x {
			goldenFlatten(strings.TrimPrefix(path+"."+k, "."), e, out)
		}
	case []any:
		if len(x) == 0 {
			out[path] = "[]"
		}
		for i, e := range x {
			goldenFlatten(fmt.Sprintf("%s[%d]", path, i), e, out)
		}
	default:
		var b bytes.Buffer
		goldenWriteJSON(&b, x)
		out[path] = b.String()
	}
}

func goldenFieldDiffs(want, got map[string]string) []string {
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
