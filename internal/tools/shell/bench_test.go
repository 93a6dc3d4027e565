package shell

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/sandbox"
)

// BenchmarkShellTrue measures the daemon's own overhead for one tool call:
// registry dispatch, argument parsing, env building, the sandbox helper (or
// bwrap) start, restrictions, exec of `true`, capture and output shaping.
// `true` itself costs about what the danger-full-access case shows.
func BenchmarkShellTrue(b *testing.B) {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + b.TempDir()}
	policies := map[string]policy.SandboxPolicy{
		"workspace-write":    wsPolicy(),
		"read-only":          {Kind: policy.ReadOnly},
		"danger-full-access": {Kind: policy.DangerFullAccess},
	}
	sbs := map[string]sandbox.Options{
		"landlock":          {Backend: sandbox.BackendLandlock},
		"landlock-no-netns": {Backend: sandbox.BackendLandlock, NoNetNamespace: true},
		"bwrap":             {Backend: sandbox.BackendBwrap},
	}
	for sname, opts := range sbs {
		sb, err := sandbox.New(opts)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sb.Backend(); err != nil {
			continue // bwrap not installed here
		}
		for pname, p := range policies {
			b.Run(sname+"/"+pname, func(b *testing.B) {
				bld := registry.NewBuilder(registry.Config{})
				if err := Register(bld, ToolShell, Config{Runner: SandboxRunner{Policy: p, Sandbox: sb}, BaseEnv: func() []string { return env }}, SpecOptions{}); err != nil {
					b.Fatal(err)
				}
				_, reg := bld.Build()
				d := reg.NewDispatcher(registry.DispatcherConfig{Turn: registry.TurnContext{TurnID: "t", Cwd: b.TempDir()}})
				call := registry.Call{CallID: "c", Name: ShellName, Payload: registry.FunctionPayload{Arguments: `{"command":["true"]}`}}
				ctx := context.Background()
				durs := make([]time.Duration, 0, b.N)
				for b.Loop() {
					start := time.Now()
					item, err := d.Dispatch(ctx, call)
					if err != nil || !item.Output.Succeeded() {
						b.Fatal(err, item.Output.Text)
					}
					durs = append(durs, time.Since(start))
				}
				slices.Sort(durs)
				q := func(f float64) float64 { return float64(durs[int(f*float64(len(durs)-1))]) / 1e6 }
				b.ReportMetric(q(0.5), "p50-ms")
				b.ReportMetric(q(0.9), "p90-ms")
			})
		}
	}
}
