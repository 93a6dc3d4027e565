package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const mib = 1 << 20

// goal is the runtime's heap goal for a live heap and GOGC, as percentFor
// models it.
func goal(live uint64, percent int) uint64 {
	return max(live+live*uint64(percent)/100, runtimeHeapMinimum*uint64(percent)/100)
}

func TestPercentFor(t *testing.T) {
	for _, tc := range []struct {
		floor, live uint64
		base, want  int
	}{
		{64 * mib, 0, 100, 1600},        // before the first collection: the runtime minimum does it
		{64 * mib, 1 * mib, 100, 1600},  // the minimum (64 MiB) is below 1 MiB × 64
		{64 * mib, 20 * mib, 100, 220},  // the proportional goal reaches the floor first
		{64 * mib, 40 * mib, 100, 100},  // above half the floor: the configured GOGC
		{64 * mib, 200 * mib, 100, 100}, // far above
		{64 * mib, 200 * mib, 50, 50},   // a lower configured GOGC is kept
		{64 * mib, 30 * mib, 200, 200},  // a configured GOGC above what the floor needs wins
		{2 * mib, 1 * mib, 100, 100},    // a floor below the runtime's own minimum changes nothing
		{1 << 40, 1, 100, maxPercent},   // bounded
	} {
		got := percentFor(tc.floor, tc.live, tc.base)
		assert.Equal(t, tc.want, got, "floor %d live %d base %d", tc.floor, tc.live, tc.base)
		if got > tc.base && got < maxPercent {
			assert.GreaterOrEqual(t, goal(tc.live, got), tc.floor, "the goal reaches the floor")
			assert.Less(t, goal(tc.live, got-1), tc.floor, "and GOGC is the smallest that does")
		}
	}
}

// cycles is the number of completed GC cycles.
func cycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

var sink []byte

// churn allocates n bytes of garbage in 64 KiB pieces and returns how many
// collections ran meanwhile.
func churn(n int) uint64 {
	before := cycles()
	for range n / (64 << 10) {
		sink = make([]byte, 64<<10)
	}
	sink = nil
	return cycles() - before
}

// heapGoal is the runtime's current heap goal.
func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestFloorRaisesHeapGoal shows the mechanism and its effect: with a small
// live heap the runtime's heap goal is a few MiB; under a 64 MiB floor it is
// at least 64 MiB, so 32 MiB of garbage costs at most one collection; Stop
// restores GOGC and the goal, and the collections after it leave GOGC alone.
func TestFloorRaisesHeapGoal(t *testing.T) {
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	runtime.GC()
	before := heapGoal()
	require.Less(t, before, uint64(32*mib), "the test needs a small live heap")

	f := Start(64 * mib)
	require.NotNil(t, f)
	runtime.GC() // the finalizer then sets GOGC for the live heap it found
	require.Eventually(t, func() bool { return Percent() > 100 }, 5*time.Second, time.Millisecond)
	goal := heapGoal()
	assert.GreaterOrEqual(t, goal, uint64(64*mib))
	with := churn(32 * mib)
	t.Logf("heap goal %d MiB at GOGC=100, %d MiB under a 64 MiB floor (GOGC %d); %d collections for 32 MiB of garbage",
		before/mib, goal/mib, Percent(), with)
	assert.LessOrEqual(t, with, uint64(1))

	f.Stop()
	assert.Equal(t, 100, Percent())
	// The sentinel armed before Stop still runs after the next collection:
	// it must leave GOGC alone (and end the chain).
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // finalizers run on their own goroutine
	}
	assert.Equal(t, 100, debug.SetGCPercent(100), "a stopped floor no longer adjusts GOGC")
	assert.Less(t, heapGoal(), uint64(32*mib))
	st.Lock()
	armed := st.armed
	st.Unlock()
	assert.False(t, armed, "the sentinel chain ended")
}

// TestFloorsCombine shows that the highest running floor applies and that
// GOGC comes back only when the last one stops.
func TestFloorsCombine(t *testing.T) {
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	runtime.GC()
	small, large := Start(8*mib), Start(64*mib)
	p := Percent()
	assert.Greater(t, p, percentFor(8*mib, 0, 100))
	small.Stop()
	small.Stop() // idempotent
	assert.Equal(t, p, Percent(), "the larger floor still runs")
	large.Stop()
	assert.Equal(t, 100, Percent())
}

func TestStartChangesNothingWhenOffOrZero(t *testing.T) {
	base := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(base)
	assert.Nil(t, Start(64*mib), "GOGC=off")
	debug.SetGCPercent(100)
	assert.Nil(t, Start(0))
	var f *Floor
	f.Stop() // a nil Floor is safe to stop
}
