package bench

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/appserver/appserver/internal/model/fakemodel"
)

// BenchmarkSideBySide runs the same turns on this daemon and on the
// reference (APPSERVER_BENCH_REFERENCE, the native codex binary) in the
// same seconds: one turn on one, then one on the other, the order swapping
// every pair, each daemon on its own connection, thread and fake model
// (the same script; both fake models run in this test process), with a
// pause of sideBySideGap after every turn, so that each server is idle at
// least that long before each of its turns (before half of them, two
// pauses and one turn of the other server). BenchmarkTurns and BenchmarkShellTurns run the two servers
// minutes apart, and this 2-core machine changes speed by more than half
// between minutes, which moved the ratio of the two p50s by as much as
// the targets' margin; turn by turn, both servers see the same machine.
// Every turn starts on an idle server, as an editor's turns do after its
// user's pause (slower than back to back for this daemon: bench/README.md).
// Reported ratios are of p50s, over the whole run and by quarter.
//
// Sub-benchmarks, one thread each (the thread grows over the run, as in
// BenchmarkTurns): plain (300 turns each) and shell (200 turns each, the
// model calling exec_command `echo hi` once a turn, BenchmarkShellTurns'
// script), after ten warm-up turns each. Reported:
//   - p50-ms, ref-p50-ms, p99-ms, ref-p99-ms: each server's turn latency
//     (turn/start written to turn/completed read);
//   - ratio: p50 over ref-p50;
//   - ratio-max-quarter: the largest of the four ratios of the run's
//     quarters (pairs 1–25 %, …), each computed like ratio; the log line
//     gives all four.
func BenchmarkSideBySide(b *testing.B) {
	if referenceBinary() == "" {
		b.Skip("set APPSERVER_BENCH_REFERENCE to the reference's binary (bench/README.md)")
	}
	benchTurnByTurn(b, turnByTurnSides{
		start:  [2]func(testing.TB, ...string) *daemon{startDaemon, startReference},
		names:  [2]string{"this daemon", "the reference"},
		prefix: [2]string{"", "ref-"},
	})
}

// BenchmarkBuilds is BenchmarkSideBySide for two builds of this daemon,
// APPSERVER_BENCH_BIN_A and APPSERVER_BENCH_BIN_B (prebuilt binaries): the
// way to compare a change with main on this machine, whose speed moves by
// more than most changes between one minute and the next. Metrics are
// named a-… and b-…; ratio is a's p50 over b's.
func BenchmarkBuilds(b *testing.B) {
	binA, binB := os.Getenv("APPSERVER_BENCH_BIN_A"), os.Getenv("APPSERVER_BENCH_BIN_B")
	if binA == "" || binB == "" {
		b.Skip("set APPSERVER_BENCH_BIN_A and APPSERVER_BENCH_BIN_B to two daemon binaries (bench/README.md)")
	}
	build := func(bin string) func(testing.TB, ...string) *daemon {
		return func(tb testing.TB, extra ...string) *daemon { return startDaemonBinary(tb, bin, extra...) }
	}
	benchTurnByTurn(b, turnByTurnSides{
		start:  [2]func(testing.TB, ...string) *daemon{build(binA), build(binB)},
		names:  [2]string{"build a", "build b"},
		prefix: [2]string{"a-", "b-"},
	})
}

// turnByTurnSides are the two servers a turn-by-turn benchmark alternates:
// how to start each, its name in messages and its metrics' prefix.
type turnByTurnSides struct {
	start  [2]func(testing.TB, ...string) *daemon
	names  [2]string
	prefix [2]string
}

func benchTurnByTurn(b *testing.B, sides turnByTurnSides) {
	raiseNoFileLimit(b, 4096)
	b.Run("plain", func(b *testing.B) {
		benchSideBySide(b, sides, 300, func(int) fakemodel.Script { return fakemodel.Script{} })
	})
	b.Run("shell", func(b *testing.B) { benchSideBySide(b, sides, 200, shellScript) })
}

// sideBySideGap is the pause after every turn. The reference goes on
// working for a while after it sent turn/completed; back to back, that
// tail ran into this daemon's next turn (plain turn p50 6.2 ms against
// 3.6–4.4 with the reference idle, bench/README.md); with the pause each
// turn starts on a machine the other server has left.
const sideBySideGap = 50 * time.Millisecond

// sideBySideWarmUp is how many turns each server runs before the
// measured ones.
const sideBySideWarmUp = 10

func benchSideBySide(b *testing.B, sides turnByTurnSides, turns int, script func(turns int) fakemodel.Script) {
	total := sideBySideWarmUp + turns*b.N
	var daemons [2]*daemon
	for i, start := range sides.start {
		daemons[i] = start(b, fakeModelArgs(startFake(b, script(total)).URL())...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	var workers [2]*turnWorker
	for i, d := range daemons {
		w, err := newTurnWorker(ctx, d.ws, b.TempDir())
		if err != nil {
			b.Fatalf("worker on %s: %v", sides.names[i], err)
		}
		b.Cleanup(func() { _ = w.ws.CloseNow() })
		workers[i] = w
		for range sideBySideWarmUp {
			if _, _, err := w.turn(ctx); err != nil {
				b.Fatalf("warm-up on %s: %v\nstderr:\n%s", sides.names[i], err, d.stderr)
			}
		}
	}
	var durs [2][]time.Duration
	time.Sleep(sideBySideGap) // after the second side's last warm-up turn, as between measured ones
	b.ResetTimer()
	for n := range turns * b.N {
		for k := range 2 {
			// The first side first in even pairs, the second in odd
			// ones; turn bounds itself by turnTimeout.
			i := (n + k) % 2
			d, _, err := workers[i].turn(context.Background())
			if err != nil {
				b.Fatalf("turn %d on %s: %v\nstderr:\n%s", n, sides.names[i], err, daemons[i].stderr)
			}
			durs[i] = append(durs[i], d)
			time.Sleep(sideBySideGap)
		}
	}
	b.StopTimer()

	p50 := func(ds []time.Duration) time.Duration {
		return percentile(slices.Sorted(slices.Values(ds)), 0.50)
	}
	ratio := func(from, to int) float64 {
		return float64(p50(durs[0][from:to])) / float64(max(p50(durs[1][from:to]), time.Microsecond))
	}
	n := len(durs[0])
	quarters := make([]float64, 4)
	for q := range quarters {
		quarters[q] = ratio(q*n/4, (q+1)*n/4)
	}
	for i, name := range sides.prefix {
		sorted := slices.Sorted(slices.Values(durs[i]))
		b.ReportMetric(ms(percentile(sorted, 0.50)), name+"p50-ms")
		b.ReportMetric(ms(percentile(sorted, 0.99)), name+"p99-ms")
	}
	b.ReportMetric(ratio(0, n), "ratio")
	b.ReportMetric(slices.Max(quarters), "ratio-max-quarter")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d turns on each server, alternating; p50 ratio by quarter of the run %.3f", n, quarters)
}
