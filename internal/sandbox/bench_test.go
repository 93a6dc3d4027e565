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
	// The same sandboxes with a pool key: bubblewrap's commands run in a
	// pooled sandbox (the first in one of their own while it starts).
	for bname, sb := range sbs {
		for pname, p := range policies {
			for _, pooled := range []bool{false, true} {
				name := string(bname) + "/" + pname
				if pooled {
					name = string(bname) + "-pooled/" + pname
				}
				b.Run(name, func(b *testing.B) {
					ctx := context.Background()
					r := Request{Policy: p, Cwd: cwd, Argv: []string{"true"}, Env: env}
					if pooled {
						r.Pool = "bench"
						warmPool(b, sb, r)
					}
					durs := make([]time.Duration, 0, b.N)
					for b.Loop() {
						start := time.Now()
						cmd, err := sb.CommandFor(ctx, r)
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
	}
	for _, sb := range sbs {
		sb.Close()
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

// warmPool runs r until a pooled sandbox has started for it (at most a
// minute), so that a benchmark measures the pooled path only.
func warmPool(b *testing.B, sb *Sandbox, r Request) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		cmd, err := sb.CommandFor(context.Background(), r)
		if err != nil {
			b.Fatal(err)
		}
		pooled := cmd.pooled != nil
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		if pooled || !Sandboxed(r.Policy) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b, _ := sb.Backend(); b == BackendBwrap {
		panic("no pooled sandbox started within a minute")
	}
}
