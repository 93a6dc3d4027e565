package gctune

import (
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeHeap is a heap whose stats the test sets; a trim brings it down to
// afterTrim.
type fakeHeap struct {
	hs, afterTrim HeapStats
	trims         int
}

func (f *fakeHeap) stats() HeapStats { return f.hs }
func (f *fakeHeap) trim()            { f.trims++; f.hs = f.afterTrim }

// A spike is trimmed once it stops growing, at most once per MinGap;
// the heap growing to its goal between collections is not a spike.
func TestReturnerTrimsAfterASpike(t *testing.T) {
	h := &fakeHeap{hs: HeapStats{Held: 20 * mib, Goal: 40 * mib}, afterTrim: HeapStats{Held: 25 * mib, Goal: 40 * mib}}
	r := NewReturner(ReturnerConfig{Stats: h.stats, Trim: h.trim})
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	look := func(s int, held, goal uint64) bool {
		h.hs = HeapStats{Held: held * mib, Goal: goal * mib}
		return r.check(at(s))
	}

	assert.False(t, look(5, 40, 40), "up to its goal: not a spike")
	assert.False(t, look(10, 500, 600), "growing: the spike is not over")
	assert.False(t, look(15, 700, 1000), "still growing")
	assert.True(t, look(20, 701, 1000), "the spike is over (an idle daemon's own span or two is not growth): trimmed")
	assert.Equal(t, 1, h.trims)

	assert.False(t, look(25, 400, 800), "a second spike, growing")
	assert.False(t, look(30, 400, 800), "over, but within MinGap of the last trim")
	assert.True(t, look(50, 400, 800), "MinGap later")
	assert.Equal(t, 2, h.trims)

	// A heap that holds more now: trimmed once, then its goal is the base.
	h.afterTrim = HeapStats{Held: 200 * mib, Goal: 400 * mib}
	assert.False(t, look(100, 300, 400), "growing")
	assert.True(t, look(105, 300, 400), "trimmed once")
	for s := 135; s < 400; s += 5 {
		held := uint64(200 + (s % 20 * 10)) // between collections, below its goal
		assert.False(t, look(s, held, 400), "a busy heap below its goal is not trimmed again (t=%d)", s)
	}
	assert.Equal(t, 3, h.trims)

	// The scavenger returned memory: spikes count from the lower base.
	assert.False(t, look(400, 30, 40))
	assert.False(t, look(405, 110, 120))
	assert.True(t, look(410, 110, 120), "64 MiB above the lower base")
}

var spike []byte

// On the real runtime: after a 256 MiB spike of garbage the idle heap
// keeps it (nothing allocates, so nothing collects it) until the
// Returner trims it.
func TestReturnerGivesBackARealSpike(t *testing.T) {
	var trims atomic.Int64
	r := NewReturner(ReturnerConfig{Interval: 20 * time.Millisecond, MinGrowth: 64 * mib, Trim: func() {
		trims.Add(1)
		debug.FreeOSMemory()
	}})
	before := heapStats().Held
	spike = make([]byte, 256*mib)
	for i := 0; i < len(spike); i += 4096 {
		spike[i] = 1
	}
	spike = nil
	require.GreaterOrEqual(t, heapStats().Held, before+200*mib, "the spike is held")
	r.Start()
	defer r.Stop()
	require.Eventually(t, func() bool { return heapStats().Held < before+64*mib }, 10*time.Second, 10*time.Millisecond,
		"the spike was given back")
	assert.Positive(t, trims.Load())
	r.Stop()
	r.Stop() // idempotent
	var never *Returner
	never.Stop()
	NewReturner(ReturnerConfig{}).Stop() // never started
}
