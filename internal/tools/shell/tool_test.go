package shell

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
)

// wsPolicy is workspace-write with only the workspace writable (test dirs
// live under /tmp, which is a root by default).
func wsPolicy() policy.SandboxPolicy {
	return policy.SandboxPolicy{Kind: policy.WorkspaceWrite, ExcludeSlashTmp: true, ExcludeTmpdirEnvVar: true}
}

type harness struct {
	t   *testing.T
	ws  string
	reg *registry.Registry

	mu     sync.Mutex
	deltas map[string][]OutputDelta
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, ws: t.TempDir(), deltas: map[string][]OutputDelta{}}
	if cfg.Runner == nil {
		cfg.Runner = SandboxRunner{Policy: wsPolicy()}
	}
	if cfg.BaseEnv == nil {
		// An empty HOME keeps the host's login profile out of the output.
		home := t.TempDir()
		cfg.BaseEnv = func() []string { return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home} }
	}
	if cfg.Shell.Path == "" {
		cfg.Shell = UserShell{Path: "/bin/bash"}
	}
	cfg.OnOutputDelta = func(_ context.Context, inv registry.Invocation, d OutputDelta) {
		h.mu.Lock()
		defer h.mu.Unlock()
		d.Data = append([]byte(nil), d.Data...)
		h.deltas[inv.CallID] = append(h.deltas[inv.CallID], d)
	}
	b := registry.NewBuilder(registry.Config{})
	require.NoError(t, Register(b, ToolShell, cfg, SpecOptions{}))
	_, h.reg = b.Build()
	return h
}

var callSeq int

// call dispatches one function call and returns the output.
func (h *harness) call(name string, args any) registry.Output {
	h.t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(h.t, err)
	callSeq++
	id := fmt.Sprintf("call_%d", callSeq)
	d := h.reg.NewDispatcher(registry.DispatcherConfig{Turn: registry.TurnContext{TurnID: "turn_1", Cwd: h.ws}})
	item, err := d.Dispatch(context.Background(), registry.Call{CallID: id, Name: name, Payload: registry.FunctionPayload{Arguments: string(raw)}})
	require.NoError(h.t, err)
	require.Equal(h.t, registry.FunctionCallOutput, item.Type)
	require.Equal(h.t, id, item.CallID)
	return item.Output
}

type structuredOut struct {
	Output   string `json:"output"`
	Metadata struct {
		ExitCode        int     `json:"exit_code"`
		DurationSeconds float64 `json:"duration_seconds"`
	} `json:"metadata"`
}

func decodeStructured(t *testing.T, o registry.Output) structuredOut {
	t.Helper()
	var s structuredOut
	require.NoError(t, json.Unmarshal([]byte(o.Text), &s), o.Text)
	return s
}

var durationRE = regexp.MustCompile(`"duration_seconds":\d+\.\d`)

func TestShellEcho(t *testing.T) {
	h := newHarness(t, Config{})
	out := h.call(ShellName, map[string]any{"command": []string{"echo", "hi"}})
	require.True(t, out.Succeeded())
	require.Equal(t, `{"output":"hi\n","metadata":{"exit_code":0,"duration_seconds":0.0}}`, durationRE.ReplaceAllString(out.Text, `"duration_seconds":0.0`))
	require.Regexp(t, durationRE, out.Text)
}

func TestShellCommandEcho(t *testing.T) {
	h := newHarness(t, Config{})
	out := h.call(ShellCommandName, map[string]any{"command": "echo hi && echo there"})
	require.True(t, out.Succeeded())
	require.Regexp(t, `^Exit code: 0\nWall time: \d+(\.\d)? seconds\nOutput:\nhi\nthere\n$`, out.Text)
}

func TestExitCodes(t *testing.T) {
	h := newHarness(t, Config{})
	out := h.call(ShellName, map[string]any{"command": []string{"bash", "-lc", "echo out; exit 3"}})
	require.False(t, out.Succeeded())
	s := decodeStructured(t, out)
	require.Equal(t, 3, s.Metadata.ExitCode)
	require.Equal(t, "out\n", s.Output)

	out = h.call(ShellCommandName, map[string]any{"command": "kill -TERM $$"})
	require.False(t, out.Succeeded())
	require.Regexp(t, `^Exit code: 143\n`, out.Text)

	out = h.call(ShellCommandName, map[string]any{"command": "false", "login": false})
	require.False(t, out.Succeeded())
	require.Regexp(t, `^Exit code: 1\n`, out.Text)
}

func TestTimeout(t *testing.T) {
	h := newHarness(t, Config{})
	start := time.Now()
	out := h.call(ShellCommandName, map[string]any{"command": "echo before; sleep 20; echo after", "timeout_ms": 300})
	require.Less(t, time.Since(start), 10*time.Second)
	require.False(t, out.Succeeded())
	require.Regexp(t, `^Exit code: 124\nWall time: 0\.\d seconds\nOutput:\ncommand timed out after \d+ milliseconds\nbefore\n$`, out.Text)
	ms := regexp.MustCompile(`after (\d+) milliseconds`).FindStringSubmatch(out.Text)[1]
	require.GreaterOrEqual(t, len(ms), 3)

	out = h.call(ShellName, map[string]any{"command": []string{"sleep", "20"}, "timeout_ms": 200})
	s := decodeStructured(t, out)
	require.Equal(t, 124, s.Metadata.ExitCode)
	require.Regexp(t, `^command timed out after \d+ milliseconds\n$`, s.Output)
}

func TestDefaultTimeout(t *testing.T) {
	h := newHarness(t, Config{DefaultTimeout: 200 * time.Millisecond})
	out := h.call(ShellName, map[string]any{"command": []string{"sleep", "20"}})
	require.Equal(t, 124, decodeStructured(t, out).Metadata.ExitCode)
	require.Equal(t, 10*time.Second, DefaultTimeout)
}

func TestWorkdir(t *testing.T) {
	h := newHarness(t, Config{})
	require.NoError(t, os.Mkdir(filepath.Join(h.ws, "sub"), 0o755))
	out := h.call(ShellName, map[string]any{"command": []string{"pwd"}, "workdir": "sub"})
	require.Equal(t, filepath.Join(h.ws, "sub")+"\n", decodeStructured(t, out).Output)

	abs := t.TempDir()
	out = h.call(ShellCommandName, map[string]any{"command": "pwd", "workdir": abs})
	require.Contains(t, out.Text, "Output:\n"+abs+"\n")

	out = h.call(ShellName, map[string]any{"command": []string{"pwd"}})
	require.Equal(t, h.ws+"\n", decodeStructured(t, out).Output)

	// Writes follow the turn's writable roots, not the workdir.
	out = h.call(ShellCommandName, map[string]any{"command": "echo x > f.txt", "workdir": abs})
	require.False(t, out.Succeeded())
	require.NoFileExists(t, filepath.Join(abs, "f.txt"))
	out = h.call(ShellCommandName, map[string]any{"command": "echo x > f.txt", "workdir": "sub"})
	require.True(t, out.Succeeded(), out.Text)
	require.FileExists(t, filepath.Join(h.ws, "sub", "f.txt"))

	out = h.call(ShellName, map[string]any{"command": []string{"pwd"}, "workdir": "missing"})
	require.False(t, out.Succeeded())
	require.Contains(t, out.Text, "execution error: ")
}

func seqOutput(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

func TestTruncationMarker(t *testing.T) {
	h := newHarness(t, Config{})
	full := seqOutput(30000) // 168 894 bytes, over the 40 000-byte budget
	removed := (len(full) - 40000 + 3) / 4

	out := h.call(ShellName, map[string]any{"command": []string{"seq", "30000"}})
	require.True(t, out.Succeeded())
	s := decodeStructured(t, out)
	head := fmt.Sprintf("Warning: truncated output (original token count: %d)\nTotal output lines: 30000\n\n", (len(full)+3)/4)
	require.Equal(t, head+full[:20000]+fmt.Sprintf("…%d tokens truncated…", removed)+full[len(full)-20000:], s.Output)

	out = h.call(ShellCommandName, map[string]any{"command": "seq 30000"})
	require.True(t, out.Succeeded())
	body := full[:20000] + fmt.Sprintf("…%d tokens truncated…", removed) + full[len(full)-20000:]
	require.Regexp(t, `^Exit code: 0\nWall time: \d+(\.\d)? seconds\nTotal output lines: 30000\nOutput:\n`, out.Text)
	require.True(t, strings.HasSuffix(out.Text, "\nOutput:\n"+body), "freeform body mismatch")

	// The client still gets every byte as deltas.
	h.mu.Lock()
	defer h.mu.Unlock()
	var got strings.Builder
	for _, d := range h.deltas[fmt.Sprintf("call_%d", callSeq)] {
		got.Write(d.Data)
	}
	require.Equal(t, full, got.String())
}

func TestBytesTruncationPolicy(t *testing.T) {
	h := newHarness(t, Config{Truncation: TruncationPolicy{Mode: TruncateBytes, Limit: 100}})
	out := h.call(ShellCommandName, map[string]any{"command": "seq 100"})
	full := seqOutput(100)
	require.True(t, strings.HasSuffix(out.Text, "Output:\n"+full[:50]+fmt.Sprintf("…%d chars truncated…", len(full)-100)+full[len(full)-50:]), out.Text)
}

func TestStderrMerge(t *testing.T) {
	h := newHarness(t, Config{})
	out := h.call(ShellCommandName, map[string]any{"command": "echo a; echo b >&2; echo c; echo d >&2"})
	require.True(t, strings.HasSuffix(out.Text, "Output:\na\nb\nc\nd\n"), out.Text)
	out = h.call(ShellName, map[string]any{"command": []string{"ls", "/nonexistent-appserver"}})
	require.False(t, out.Succeeded())
	require.Contains(t, decodeStructured(t, out).Output, "No such file or directory")
}

func TestEnvLeakPrevention(t *testing.T) {
	base := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"APPSERVER_DATABASE_URL=postgres://secret", "APPSERVER_CONFIG=/etc/appserver.toml",
		"OPENAI_API_KEY=sk-daemon", "MY_PROVIDER_KEY=sk-custom", "KEEP_ME=yes",
	}
	h := newHarness(t, Config{BaseEnv: func() []string { return base }, Env: EnvPolicy{SecretVars: []string{"MY_PROVIDER_KEY"}}})
	out := h.call(ShellCommandName, map[string]any{"command": "env | sort", "login": false})
	require.True(t, out.Succeeded(), out.Text)
	require.Contains(t, out.Text, "KEEP_ME=yes\n")
	require.Contains(t, out.Text, policy.EnvSandboxNetworkDisabled+"=1\n")
	for _, secret := range []string{"APPSERVER_", "sk-daemon", "sk-custom", "postgres://"} {
		require.NotContains(t, out.Text, secret)
	}
}

func TestEnvPolicyBuild(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/h", "API_KEY=1", "GH_TOKEN=2", "MY_SECRET_X=3", "FOO=4", "APPSERVER_X=5", "OPENAI_API_KEY=6", "malformed"}
	require.Equal(t, []string{"PATH=/bin", "HOME=/h", "API_KEY=1", "GH_TOKEN=2", "MY_SECRET_X=3", "FOO=4"}, EnvPolicy{}.Build(base))
	require.Equal(t, []string{"PATH=/bin", "HOME=/h", "FOO=4"}, EnvPolicy{ApplyDefaultExcludes: true}.Build(base))
	require.Equal(t, []string{"PATH=/bin", "HOME=/h"}, EnvPolicy{Inherit: InheritCore}.Build(base))
	require.Equal(t, []string{"A=1"}, EnvPolicy{Inherit: InheritNone, Set: map[string]string{"A": "1"}}.Build(base))
	require.Equal(t, []string{"PATH=/bin", "API_KEY=1", "MY_SECRET_X=3", "FOO=4", "APPSERVER_X=set"},
		EnvPolicy{Exclude: []string{"home", "gh_*"}, Set: map[string]string{"APPSERVER_X": "set"}}.Build(base))
	require.Equal(t, []string{"PATH=/bin"}, EnvPolicy{IncludeOnly: []string{"*path"}}.Build(base))
}

func TestOutputDeltas(t *testing.T) {
	h := newHarness(t, Config{})
	out := h.call(ShellCommandName, map[string]any{"command": "printf 'h\\303'; sleep 0.2; printf '\\251llo\\n'"})
	require.True(t, out.Succeeded())
	require.True(t, strings.HasSuffix(out.Text, "Output:\nhéllo\n"), out.Text)
	h.mu.Lock()
	defer h.mu.Unlock()
	ds := h.deltas[fmt.Sprintf("call_%d", callSeq)]
	require.Len(t, ds, 2)
	require.Equal(t, "h", string(ds[0].Data), "the incomplete é is held back")
	require.Equal(t, "éllo\n", string(ds[1].Data))
}

func TestDeltaLimit(t *testing.T) {
	var n int
	res, err := Exec(context.Background(), ExecRequest{
		Argv: []string{"/bin/sh", "-c", "for i in $(seq 50); do echo $i; sleep 0.002; done"}, Cwd: t.TempDir(),
		Env: []string{"PATH=" + os.Getenv("PATH")}, Policy: policy.SandboxPolicy{Kind: policy.DangerFullAccess},
		MaxDeltas: 5, OnOutput: func(OutputDelta) { n++ },
	})
	require.NoError(t, err)
	require.Equal(t, 5, n)
	require.Equal(t, seqOutput(50), string(res.Aggregated))
}

func TestArgumentErrors(t *testing.T) {
	h := newHarness(t, Config{})
	out := h.call(ShellName, map[string]any{"workdir": "x"})
	require.False(t, out.Succeeded())
	require.Equal(t, "failed to parse function arguments: missing field `command`", out.Text)
	out = h.call(ShellCommandName, map[string]any{"command": []string{"ls"}})
	require.False(t, out.Succeeded())
	require.Contains(t, out.Text, "failed to parse function arguments: ")
	out = h.call(ShellName, map[string]any{"command": []string{"appserver-no-such-cmd"}})
	require.False(t, out.Succeeded())
	require.Equal(t, `execution error: exec: "appserver-no-such-cmd": executable file not found in $PATH`, out.Text)
	out = h.call(ShellName, map[string]any{"command": []string{"true"}, "timeout_ms": -5})
	require.Equal(t, "failed to parse function arguments: invalid value: integer `-5`, expected u64", out.Text)
	out = h.call(ShellName, map[string]any{"command": []string{"true"}, "sandbox_permissions": "require_escalated", "justification": "?"})
	require.False(t, out.Succeeded())
	require.Equal(t, policy.EscalationRejection(policy.ApprovalPolicy{Mode: policy.Never}), out.Text)
}

func TestIsMutating(t *testing.T) {
	h := NewHandler(Config{})
	c := NewCommandHandler(Config{Shell: UserShell{Path: "/bin/bash"}})
	inv := func(args string) registry.Invocation {
		return registry.Invocation{Call: registry.Call{Name: ShellName, Payload: registry.FunctionPayload{Arguments: args}}}
	}
	ctx := context.Background()
	require.False(t, h.IsMutating(ctx, inv(`{"command":["ls","-la"]}`)))
	require.True(t, h.IsMutating(ctx, inv(`{"command":["rm","-rf","x"]}`)))
	require.True(t, h.IsMutating(ctx, inv(`{"command":`)))
	require.False(t, c.IsMutating(ctx, inv(`{"command":"git status && ls"}`)))
	require.True(t, c.IsMutating(ctx, inv(`{"command":"echo x > f"}`)))
	require.True(t, c.IsMutating(ctx, inv(`{}`)))
}

func TestLocalShellPayload(t *testing.T) {
	h := newHarness(t, Config{})
	tmo := int64(5000)
	d := h.reg.NewDispatcher(registry.DispatcherConfig{Turn: registry.TurnContext{TurnID: "t", Cwd: h.ws}})
	item, err := d.Dispatch(context.Background(), registry.Call{CallID: "ls1", Name: LocalShellName, Payload: registry.LocalShellPayload{Action: registry.LocalShellAction{
		Command: []string{"sh", "-c", "echo $GREETING"}, TimeoutMS: &tmo, Env: map[string]string{"GREETING": "hello"},
	}}})
	require.NoError(t, err)
	require.Equal(t, "hello\n", decodeStructured(t, item.Output).Output)
}

func TestRegisterAliases(t *testing.T) {
	for _, tc := range []struct {
		t     ToolType
		specs []string
	}{
		{ToolShell, []string{ShellName}},
		{ToolShellCommand, []string{ShellCommandName}},
		{ToolLocalShell, []string{LocalShellName}},
		{ToolUnifiedExec, nil},
	} {
		b := registry.NewBuilder(registry.Config{})
		require.NoError(t, Register(b, tc.t, Config{}, SpecOptions{}))
		specs, reg := b.Build()
		var names []string
		for _, s := range specs {
			names = append(names, s.Spec.ToolName())
			require.True(t, s.SupportsParallelToolCalls)
		}
		require.Equal(t, tc.specs, names)
		for _, n := range []string{ShellName, ShellCommandName, ContainerExecName, LocalShellName} {
			_, ok := reg.Handler("", n)
			require.True(t, ok, "%v: %s", tc.t, n)
		}
	}
	b := registry.NewBuilder(registry.Config{})
	require.NoError(t, Register(b, ToolDisabled, Config{}, SpecOptions{}))
	specs, reg := b.Build()
	require.Empty(t, specs)
	_, ok := reg.Handler("", ShellName)
	require.False(t, ok)
}

func TestSpecs(t *testing.T) {
	got, err := json.Marshal(ShellSpec())
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"function","name":"shell","strict":false,
	 "description":`+jsonString(t, ShellDescription)+`,
	 "parameters":{"type":"object","required":["command"],"additionalProperties":false,"properties":{
	  "command":{"type":"array","items":{"type":"string"},"description":"The program to run followed by its arguments"},
	  "workdir":{"type":"string","description":"Directory to run the command in"},
	  "timeout_ms":{"type":"number","description":"Time limit for the command, in milliseconds"},
	  "sandbox_permissions":{"type":"string","enum":["use_default","require_escalated"],"description":`+jsonString(t, policy.SandboxPermissionsDescription)+`},
	  "justification":{"type":"string","description":`+jsonString(t, policy.JustificationDescription)+`},
	  "prefix_rule":{"type":"array","items":{"type":"string"},"description":`+jsonString(t, policy.PrefixRuleDescription)+`}}}}`, string(got))
	require.Contains(t, ShellDescription, "execvp()", "the argv form is explained")

	got, err = json.Marshal(ShellCommandSpec(SpecOptions{}))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(got, &m))
	require.Equal(t, ShellCommandDescription, m["description"])
	props := m["parameters"].(map[string]any)["properties"].(map[string]any)
	require.Equal(t, "The script the user's shell runs", props["command"].(map[string]any)["description"])
	require.Equal(t, "Start the shell as a login shell, which reads the user's profile. Defaults to true.", props["login"].(map[string]any)["description"])
	got, _ = json.Marshal(ShellCommandSpec(SpecOptions{NoLoginParam: true}))
	require.NotContains(t, string(got), `"login"`)
}

// jsonString is s as a JSON string literal.
func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}

func TestUserShellArgv(t *testing.T) {
	require.Equal(t, []string{"/bin/bash", "-lc", "ls"}, UserShell{Path: "/bin/bash"}.Argv("ls", true))
	require.Equal(t, []string{"/usr/bin/zsh", "-c", "ls"}, UserShell{Path: "/usr/bin/zsh"}.Argv("ls", false))
	require.Equal(t, []string{"/usr/bin/fish", "-c", "ls"}, UserShell{Path: "/usr/bin/fish"}.Argv("ls", true))
	require.True(t, filepath.IsAbs(DetectUserShell().Path))
}

func TestNoLoginShellConfig(t *testing.T) {
	h := newHarness(t, Config{NoLoginShell: true})
	// A login bash sources profile files; a plain -c does not set login_shell.
	out := h.call(ShellCommandName, map[string]any{"command": "shopt -q login_shell && echo login || echo plain"})
	require.Contains(t, out.Text, "Output:\nplain\n")
	h = newHarness(t, Config{})
	out = h.call(ShellCommandName, map[string]any{"command": "shopt -q login_shell && echo login || echo plain"})
	require.Contains(t, out.Text, "Output:\nlogin\n")
}
