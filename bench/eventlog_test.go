package bench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/appserver/appserver/internal/model/fakemodel"
)

// BenchmarkEventLogCost measures what the durable event log adds to a
// plain turn's daemon CPU, with the two daemons side by side rather than
// in runs minutes apart: the shared 2-core machine changes speed by more
// than the log costs between two runs, not within a second. Two daemons
// of the same binary start on their own embedded stores, one with the
// event log (the default) and one with -c event_log=false; a round runs
// turnsPerRound turns on the first, then as many on the second, and the
// order of the two swaps every round. Each daemon's CPU (/proc/PID/stat)
// is read over the whole run, so that what it does in the background
// (the store's checkpoints, the log's flushes) counts wherever it falls,
// and also around its own part of each round, for the spread.
//
// Sub-benchmarks threads=1 (300 turns a round) and threads=32 (320, ten
// a thread, run at once): the workers on each daemon, each on its own
// connection and on a new thread every round. Reported:
//   - log-cpu-ms/turn, nolog-cpu-ms/turn: the daemons' CPU over the
//     whole run, a turn (new threads included);
//   - log-cost-%: the first over the second, minus one, in per cent;
//   - log-cost-median-%: the median of the ratios of each round's two
//     parts (a round the machine slowed down in halfway counts once).
func BenchmarkEventLogCost(b *testing.B) {
	raiseNoFileLimit(b, 4096)
	for _, tc := range []struct{ threads, perRound, rounds int }{
		{threads: 1, perRound: 300, rounds: 16},
		{threads: 32, perRound: 320, rounds: 16},
	} {
		b.Run(fmt.Sprintf("threads=%d", tc.threads), func(b *testing.B) {
			benchEventLogCost(b, tc.threads, tc.perRound, tc.rounds)
		})
	}
}

func benchEventLogCost(b *testing.B, threads, perRound, rounds int) {
	fake := startFake(b, fakemodel.Script{})
	type side struct {
		d       *daemon
		workers []*turnWorker
		cpu     time.Duration
		turns   int
		rounds  []time.Duration
	}
	sides := [2]*side{
		{d: startDaemon(b, fakeModelArgs(fake.URL())...)},
		{d: startDaemon(b, append(fakeModelArgs(fake.URL()), "-c", "event_log=false")...)},
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	for _, s := range sides {
		for i := range threads {
			w, err := newTurnWorker(ctx, s.d.ws, b.TempDir())
			if err != nil {
				b.Fatalf("worker %d: %v", i, err)
			}
			b.Cleanup(func() { _ = w.ws.CloseNow() })
			s.workers = append(s.workers, w)
		}
		// Warm-up: ten turns per thread, not measured.
		if err := runTurns(ctx, s.workers, 10*threads, nil); err != nil {
			b.Fatalf("warm-up: %v\ndaemon stderr:\n%s", err, s.d.stderr)
		}
	}
	run := func(s *side) {
		ctx, cancel := context.WithTimeout(context.Background(), turnsTimeout)
		defer cancel()
		// Each round starts fresh threads, as BenchmarkTurns runs its
		// turns on new ones: every request carries the thread's whole
		// history, so a thread's turns cost more as it grows.
		for _, w := range s.workers {
			if _, err := startThread(ctx, w, b.TempDir()); err != nil {
				b.Fatal(err)
			}
		}
		cpu0, err := procCPUTime(s.d.pid())
		if err != nil {
			b.Fatal(err)
		}
		if err := runTurns(ctx, s.workers, perRound, nil); err != nil {
			b.Fatalf("%v\ndaemon stderr:\n%s", err, s.d.stderr)
		}
		cpu1, err := procCPUTime(s.d.pid())
		if err != nil {
			b.Fatal(err)
		}
		s.turns += perRound
		s.rounds = append(s.rounds, cpu1-cpu0)
	}
	total := func() [2]time.Duration {
		var out [2]time.Duration
		for i, s := range sides {
			c, err := procCPUTime(s.d.pid())
			if err != nil {
				b.Fatal(err)
			}
			out[i] = c
		}
		return out
	}
	profs := [2]*profile{startProfileAs(b, sides[0].d, "log"), startProfileAs(b, sides[1].d, "nolog")}
	start := total()
	b.ResetTimer()
	for range b.N {
		for r := range rounds {
			first, second := sides[r%2], sides[1-r%2]
			run(first)
			run(second)
		}
	}
	b.StopTimer()
	end := total()
	for _, p := range profs {
		p.stop(b)
	}
	for i, s := range sides {
		s.cpu = end[i] - start[i]
	}
	ratios := make([]float64, len(sides[0].rounds))
	for i := range ratios {
		ratios[i] = float64(sides[0].rounds[i]) / float64(max(sides[1].rounds[i], time.Millisecond))
	}
	slices.Sort(ratios)
	perTurn := func(s *side) float64 { return ms(s.cpu) / float64(s.turns) }
	b.ReportMetric(perTurn(sides[0]), "log-cpu-ms/turn")
	b.ReportMetric(perTurn(sides[1]), "nolog-cpu-ms/turn")
	b.ReportMetric((perTurn(sides[0])/perTurn(sides[1])-1)*100, "log-cost-%")
	b.ReportMetric((ratios[len(ratios)/2]-1)*100, "log-cost-median-%")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d rounds of %d turns on each daemon (%d threads each); per-round ratios %.3f", rounds*b.N, perRound, threads, ratios)
}
