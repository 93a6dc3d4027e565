//go:build linux

package sandbox

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/appserver/appserver/internal/policy"
)

// BenchmarkTrue measures building and running `true` under each backend:
// helper (or bwrap) start, restrictions, exec and wait. p50-ms and p90-ms
// are per-run percentiles.
func BenchmarkTrue(b *testing.B) {
	env := []string{"PATH=" + os.Getenv("PATH")}
	cwd := b.TempDir()
	policies := map[string]policy.SandboxPolicy{
		"workspace-write":     workspacePolicy(false),
		"workspace-write-net": workspacePolicy(true),
		"read-only":           {Kind: policy.ReadOnly},
		"danger-full-access":  {Kind: policy.DangerFullAccess},
	}
	sbs := backends(b)
	noNS, _ := New(Options{Backend: BackendLandlock, NoNetNamespace: true})
	sbs["landlock-no-netns"] = noNS
	for bname, sb := range sbs {
		for pname, p := range policies {
			b.Run(string(bname)+"/"+pname, func(b *testing.B) {
				ctx := context.Background()
				durs := make([]time.Duration, 0, b.N)
				for b.Loop() {
					start := time.Now()
					cmd, err := sb.Command(ctx, p, cwd, []string{"true"}, env)
					if err != nil {
						b.Fatal(err)
					}
					if err := cmd.Run(); err != nil {
						b.Fatal(err)
					}
					durs = append(durs, time.Since(start))
				}
				reportPercentiles(b, durs)
			})
		}
	}
	// bubblewrap alone, with the least it can be asked to do: the floor
	// under the bwrap backend's figures.
	if bw, err := exec.LookPath("bwrap"); err == nil {
		b.Run("bwrap-bare", func(b *testing.B) {
			durs := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if err := exec.Command(bw, "--ro-bind", "/", "/", "--", "true").Run(); err != nil {
					b.Skipf("bwrap cannot run here: %v", err)
				}
				durs = append(durs, time.Since(start))
			}
			reportPercentiles(b, durs)
		})
	}
}

func reportPercentiles(b *testing.B, durs []time.Duration) {
	if len(durs) == 0 {
		return
	}
	slices.Sort(durs)
	ms := func(q float64) float64 { return float64(durs[int(q*float64(len(durs)-1))]) / 1e6 }
	b.ReportMetric(ms(0.5), "p50-ms")
	b.ReportMetric(ms(0.9), "p90-ms")
}
