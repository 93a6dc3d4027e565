package execsession

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/registry/spectest"
	"github.com/appserver/appserver/internal/sandbox"
)

// toolEnv is a registry with the two tools of one thread and a dispatcher
// for one turn in a temp workspace.
type toolEnv struct {
	mgr    *Manager
	specs  []registry.ConfiguredToolSpec
	d      *registry.Dispatcher
	cwd    string
	events *events
}

// events records the registry events handlers emit.
type events struct {
	mu  sync.Mutex
	got []registry.Event
}

func (e *events) Emit(_ context.Context, ev registry.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ev)
}

func (e *events) list() []registry.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]registry.Event(nil), e.got...)
}

func newToolEnv(t *testing.T, cfg HandlerConfig) *toolEnv {
	t.Helper()
	mgr := newTestManager(t, ManagerConfig{})
	cfg.Manager = mgr
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := registry.NewBuilder(registry.Config{})
	if err := Register(b, h); err != nil {
		t.Fatal(err)
	}
	specs, reg := b.Build()
	cwd := t.TempDir()
	ev := &events{}
	d := reg.NewDispatcher(registry.DispatcherConfig{Turn: registry.TurnContext{TurnID: "turn-1", Cwd: cwd, Emitter: ev}})
	return &toolEnv{mgr: mgr, specs: specs, d: d, cwd: cwd, events: ev}
}

func (e *toolEnv) call(t *testing.T, name string, args any) registry.Output {
	t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	item, err := e.d.Dispatch(context.Background(), registry.Call{CallID: "call-" + name, Name: name, Payload: registry.FunctionPayload{Arguments: raw}})
	if err != nil {
		t.Fatalf("dispatch %s: %v", name, err)
	}
	if item.Type != registry.FunctionCallOutput || item.CallID != "call-"+name {
		t.Fatalf("item %+v", item)
	}
	return item.Output
}

var sessionLine = regexp.MustCompile(`Process running with session ID (\d+)`)

func sessionOf(t *testing.T, out registry.Output) int {
	t.Helper()
	m := sessionLine.FindStringSubmatch(out.Text)
	if m == nil {
		t.Fatalf("no session id in %q", out.Text)
	}
	id, _ := strconv.Atoi(m[1])
	return id
}

// TestSpecsMatchCodex compares the specs with the tools array codex-cli
// 0.169 sent to the model (captured from the binary), descriptions aside.
func TestSpecsMatchCodex(t *testing.T) {
	e := newToolEnv(t, HandlerConfig{})
	if len(e.specs) != 2 || !e.specs[0].SupportsParallelToolCalls || e.specs[1].SupportsParallelToolCalls {
		t.Fatalf("specs %+v: exec_command is parallel-capable, write_stdin is not", e.specs)
	}
	got, err := json.Marshal([]registry.ToolSpec{e.specs[0].Spec, e.specs[1].Spec})
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "specs_codex_0.169.json"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := spectest.WithoutDescriptions(got)
	if err != nil {
		t.Fatal(err)
	}
	var w any
	_ = json.Unmarshal(want, &w)
	if !reflect.DeepEqual(g, w) {
		gs, _ := json.Marshal(g)
		t.Fatalf("specs differ from codex 0.169 (descriptions aside):\n got %s\nwant %s", gs, want)
	}
	noLogin, _ := json.Marshal(ExecCommandSpec(false))
	if strings.Contains(string(noLogin), `"login"`) {
		t.Fatal("login must not be advertised when login shells are disabled")
	}
}

func TestExecCommandThroughRegistry(t *testing.T) {
	e := newToolEnv(t, HandlerConfig{})
	out := e.call(t, ExecCommandName, map[string]any{"cmd": "echo hi; echo err >&2; exit 3"})
	// A non-zero exit is still a successful call: the code is in the text.
	if !out.Succeeded() {
		t.Fatalf("success flag: %+v", out)
	}
	re := regexp.MustCompile(`^Chunk ID: [0-9a-f]{6}\nWall time: \d+\.\d{4} seconds\nProcess exited with code 3\nOriginal token count: 2\nOutput:\nhi\nerr\n$`)
	if !re.MatchString(out.Text) {
		t.Fatalf("text %q", out.Text)
	}
	if err := os.Mkdir(filepath.Join(e.cwd, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	out = e.call(t, ExecCommandName, map[string]any{"cmd": "pwd", "workdir": "sub"})
	if !strings.HasSuffix(out.Text, "Output:\n"+filepath.Join(e.cwd, "sub")+"\n") {
		t.Fatalf("relative workdir: %q", out.Text)
	}
	out = e.call(t, ExecCommandName, map[string]any{"cmd": "pwd", "workdir": ""})
	if !strings.HasSuffix(out.Text, "Output:\n"+e.cwd+"\n") {
		t.Fatalf("empty workdir means the turn cwd: %q", out.Text)
	}
}

// TestMaxOutputTokensMatchesCodex replays a call whose output codex-cli 0.169
// truncated (seq 1 30000 with max_output_tokens 50).
func TestMaxOutputTokensMatchesCodex(t *testing.T) {
	e := newToolEnv(t, HandlerConfig{})
	out := e.call(t, ExecCommandName, map[string]any{"cmd": "seq 1 30000", "max_output_tokens": 50})
	_, body, _ := strings.Cut(out.Text, "Process exited with code 0\n")
	want := "Original token count: 42224\nOutput:\n" + FormattedTruncate(seq(30000), 50)
	if body != want {
		t.Fatalf("got %q\nwant %q", body, want)
	}
	// max_output_tokens 0, as codex-cli 0.169 answered it.
	out = e.call(t, ExecCommandName, map[string]any{"cmd": "echo hello world this is long", "max_output_tokens": 0})
	if !strings.HasSuffix(out.Text, "Original token count: 7\nOutput:\nWarning: truncated output (original token count: 7)\nTotal output lines: 1\n\n…7 tokens truncated…") {
		t.Fatalf("zero budget: %q", out.Text)
	}
	e2 := newToolEnv(t, HandlerConfig{TruncationTokens: 10})
	out = e2.call(t, ExecCommandName, map[string]any{"cmd": "seq 1 100", "max_output_tokens": 5000})
	if !strings.Contains(out.Text, "Output:\nWarning: truncated output (original token count: 73)\n") {
		t.Fatalf("the model's truncation budget caps max_output_tokens: %q", out.Text)
	}
}

func TestWriteStdinThroughRegistry(t *testing.T) {
	e := newToolEnv(t, HandlerConfig{})
	out := e.call(t, ExecCommandName, map[string]any{"cmd": "cat", "tty": true, "yield_time_ms": 300})
	id := sessionOf(t, out)
	if !strings.HasSuffix(out.Text, "Original token count: 0\nOutput:\n") {
		t.Fatalf("idle cat: %q", out.Text)
	}
	out = e.call(t, WriteStdinName, map[string]any{"session_id": id, "chars": "ping\n"})
	if sessionOf(t, out) != id || !strings.Contains(out.Text, "ping\r\n") {
		t.Fatalf("write: %q", out.Text)
	}
	out = e.call(t, WriteStdinName, map[string]any{"session_id": id, "chars": "\u0003"})
	if !strings.Contains(out.Text, "Process exited with code 130") && !strings.Contains(out.Text, "Process exited with code 2") {
		// Ctrl-C through the terminal kills cat with SIGINT.
		out = e.call(t, WriteStdinName, map[string]any{"session_id": id, "yield_time_ms": 5000})
	}
	if !strings.Contains(out.Text, "Process exited with code 130") || strings.Contains(out.Text, "session ID") {
		t.Fatalf("Ctrl-C: %q", out.Text)
	}
	out = e.call(t, WriteStdinName, map[string]any{"session_id": id})
	if out.Succeeded() || out.Text != "write_stdin failed: Unknown process id "+strconv.Itoa(id) {
		t.Fatalf("finished session: %+v", out)
	}
	// Each successful write_stdin emitted a terminal interaction naming the
	// exec_command call's item, as codex-cli 0.169 does; the failed one none.
	evs := e.events.list()
	if len(evs) < 2 {
		t.Fatalf("events %+v", evs)
	}
	first, _ := json.Marshal(evs[0])
	if evs[0].Method() != TerminalInteractionMethod || string(first) != `{"itemId":"call-exec_command","processId":"`+strconv.Itoa(id)+`","stdin":"ping\n"}` {
		t.Fatalf("event %s %s", evs[0].Method(), first)
	}
	out = e.call(t, ExecCommandName, map[string]any{"cmd": "sleep 30", "yield_time_ms": 250})
	id = sessionOf(t, out)
	out = e.call(t, WriteStdinName, map[string]any{"session_id": id, "chars": "zz"})
	if out.Succeeded() || out.Text != "write_stdin failed: "+ErrStdinClosed.Error() {
		t.Fatalf("pipe session: %+v", out)
	}
}

func TestArgumentErrors(t *testing.T) {
	e := newToolEnv(t, HandlerConfig{})
	cases := []struct {
		name, args, want string
	}{
		{ExecCommandName, `{}`, "failed to parse function arguments: missing field `cmd`"},
		{ExecCommandName, `{"cmd":"x","yield_time_ms":"abc"}`, "failed to parse function arguments: "},
		{ExecCommandName, `not json`, "failed to parse function arguments: "},
		{WriteStdinName, `{"chars":"x"}`, "failed to parse function arguments: missing field `session_id`"},
		{WriteStdinName, `{"session_id":"12"}`, "failed to parse function arguments: "},
		{WriteStdinName, `{"session_id":1}`, "write_stdin failed: Unknown process id 1"},
	}
	for _, c := range cases {
		out := e.call(t, c.name, c.args)
		if out.Succeeded() || !strings.HasPrefix(out.Text, c.want) {
			t.Errorf("%s %s: %+v", c.name, c.args, out)
		}
	}
	out := e.call(t, ExecCommandName, map[string]any{"cmd": "pwd", "workdir": "/nonexistent/dir"})
	if out.Succeeded() || out.Text != "exec_command failed: Failed to create unified exec process: No such file or directory (os error 2)" {
		t.Errorf("bad workdir: %+v", out)
	}
}

func TestShellSelection(t *testing.T) {
	h, err := NewHandler(HandlerConfig{Manager: newTestManager(t, ManagerConfig{}), Shell: "/bin/bash"})
	if err != nil {
		t.Fatal(err)
	}
	str := func(s string) *string { return &s }
	f := false
	argv, _ := h.argv(ExecArgs{Cmd: str("ls")})
	if !reflect.DeepEqual(argv, []string{"/bin/bash", "-lc", "ls"}) {
		t.Errorf("default: %q", argv)
	}
	argv, _ = h.argv(ExecArgs{Cmd: str("ls"), Login: &f})
	if !reflect.DeepEqual(argv, []string{"/bin/bash", "-c", "ls"}) {
		t.Errorf("login=false: %q", argv)
	}
	argv, _ = h.argv(ExecArgs{Cmd: str("ls"), Shell: str("/nonexistent/sh")})
	if argv[0] != "/bin/bash" {
		t.Errorf("a missing shell falls back to the user's: %q", argv)
	}
	argv, _ = h.argv(ExecArgs{Cmd: str("ls"), Shell: str("sh")})
	if sh, _ := exec.LookPath("sh"); argv[0] != sh {
		t.Errorf("named shell: %q", argv)
	}
	if got := ShellArgv("/usr/bin/pwsh", "dir", false); !reflect.DeepEqual(got, []string{"/usr/bin/pwsh", "-NoProfile", "-Command", "dir"}) {
		t.Errorf("pwsh: %q", got)
	}
	noLogin, _ := NewHandler(HandlerConfig{Manager: h.cfg.Manager, Shell: "/bin/bash", DisableLoginShell: true})
	argv, _ = noLogin.argv(ExecArgs{Cmd: str("ls")})
	if argv[1] != "-c" {
		t.Errorf("login disabled defaults to -c: %q", argv)
	}
	tr := true
	if _, err := noLogin.argv(ExecArgs{Cmd: str("ls"), Login: &tr}); err == nil || err.Error() != "login shells are turned off by the configuration: leave out `login` or set it to false" {
		t.Errorf("login=true when disabled: %v", err)
	}
}

func TestIsMutating(t *testing.T) {
	h, _ := NewHandler(HandlerConfig{Manager: newTestManager(t, ManagerConfig{}), Shell: "/bin/bash"})
	inv := func(name, args string) registry.Invocation {
		return registry.Invocation{Call: registry.Call{Name: name, Payload: registry.FunctionPayload{Arguments: args}}}
	}
	ctx := context.Background()
	if h.IsMutating(ctx, inv(ExecCommandName, `{"cmd":"ls -la"}`)) {
		t.Error("ls is known safe")
	}
	if !h.IsMutating(ctx, inv(ExecCommandName, `{"cmd":"rm -rf build"}`)) {
		t.Error("rm is mutating")
	}
	if !h.IsMutating(ctx, inv(ExecCommandName, `{bad`)) {
		t.Error("unparsable arguments are mutating")
	}
	if !h.IsMutating(ctx, inv(WriteStdinName, `{"session_id":1}`)) {
		t.Error("write_stdin is mutating")
	}
}

func TestPrepareHook(t *testing.T) {
	var seen ExecArgs
	e := newToolEnv(t, HandlerConfig{Prepare: func(_ context.Context, inv registry.Invocation, args ExecArgs, req *ExecRequest) (*registry.Output, error) {
		seen = args
		if strings.Contains(*args.Cmd, "forbidden") {
			return nil, errors.New("exec command rejected by user")
		}
		if strings.HasPrefix(*args.Cmd, "apply_patch") {
			out := registry.TextOutput("intercepted", true)
			return &out, nil
		}
		// Wrap the command the way a sandbox helper would.
		req.Command = func(argv []string) (*sandbox.Cmd, error) {
			return sandbox.Plain(exec.Command("/usr/bin/env", append([]string{"SANDBOXED=" + inv.CallID}, argv...)...)), nil
		}
		return nil, nil
	}})
	out := e.call(t, ExecCommandName, map[string]any{"cmd": "echo forbidden"})
	if out.Succeeded() || out.Text != "exec command rejected by user" {
		t.Fatalf("rejection: %+v", out)
	}
	out = e.call(t, ExecCommandName, map[string]any{"cmd": "apply_patch <<'EOF'\n*** Begin Patch\n*** End Patch\nEOF"})
	if !out.Succeeded() || out.Text != "intercepted" || len(e.mgr.Sessions()) != 0 {
		t.Fatalf("short-circuit: %+v", out)
	}
	out = e.call(t, ExecCommandName, map[string]any{"cmd": "echo $SANDBOXED", "sandbox_permissions": "require_escalated", "justification": "why?", "prefix_rule": []string{"echo"}})
	if !strings.HasSuffix(out.Text, "Output:\ncall-exec_command\n") {
		t.Fatalf("wrapped: %q", out.Text)
	}
	if seen.SandboxPermissions != "require_escalated" || seen.Justification != "why?" || !reflect.DeepEqual(seen.PrefixRule, []string{"echo"}) {
		t.Fatalf("approval params not passed on: %+v", seen)
	}
}

func TestInterruptedCallKeepsSessionForLaterPoll(t *testing.T) {
	e := newToolEnv(t, HandlerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	item, err := e.d.Dispatch(ctx, registry.Call{CallID: "c", Name: ExecCommandName,
		Payload: registry.FunctionPayload{Arguments: `{"cmd":"echo early; sleep 0.5; echo later","yield_time_ms":20000}`}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(item.Output.Text, "Wall time: ") || !strings.HasSuffix(item.Output.Text, "aborted by user") {
		t.Fatalf("aborted call: %q", item.Output.Text)
	}
	sessions := e.mgr.Sessions()
	if len(sessions) != 1 {
		t.Fatalf("sessions %v", sessions)
	}
	// Nothing is lost: the next poll returns the early output too.
	out := e.call(t, WriteStdinName, map[string]any{"session_id": sessions[0].ID, "yield_time_ms": 5000})
	if !strings.HasSuffix(out.Text, "Output:\nearly\nlater\n") {
		t.Fatalf("poll: %q", out.Text)
	}
}
