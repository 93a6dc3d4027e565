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
	hs        HeapStats
	afterTrim uint64
	trims     int
}

func (f *fakeHeap) stats() HeapStats { return f.hs }
func (f *fakeHeap) trim()            { f.trims++; f.hs.Held = f.afterTrim }

// A spike is trimmed once the daemon is quiet again, at most once per
// MinGap; a busy heap is left alone.
func TestReturnerTrimsAfterASpike(t *testing.T) {
	h := &fakeHeap{hs: HeapStats{Held: 20 * mib}, afterTrim: 25 * mib}
	r := NewReturner(ReturnerConfig{Stats: h.stats, Trim: h.trim})
	t0 := time.Unix(1000, 0)
	// look sets the heap held and what was allocated since the last look,
	// in MiB, and looks at second s.
	look := func(s int, held, allocated uint64) bool {
		h.hs = HeapStats{Held: held * mib, Allocs: h.hs.Allocs + allocated*mib}
		return r.check(t0.Add(time.Duration(s) * time.Second))
	}

	assert.False(t, look(5, 40, 10), "less than MinGrowth above the base")
	assert.False(t, look(10, 500, 400), "busy: the spike is not over")
	assert.False(t, look(15, 700, 300), "still busy")
	assert.True(t, look(20, 700, 1), "quiet again: trimmed")
	assert.Equal(t, 1, h.trims)

	assert.False(t, look(25, 400, 375), "a second spike")
	assert.False(t, look(30, 400, 2), "over, but within MinGap of the last trim")
	assert.True(t, look(50, 400, 2), "MinGap later")
	assert.Equal(t, 2, h.trims)

	// A heap that holds more now: trimmed once, then its size is the base,
	// and while busy it is left alone.
	h.afterTrim = 200 * mib
	assert.False(t, look(100, 300, 100), "busy")
	assert.True(t, look(105, 300, 1), "trimmed once")
	for s := 135; s < 400; s += 5 {
		held := uint64(200 + (s % 20 * 10))
		assert.False(t, look(s, held, 100), "a busy heap is not trimmed (t=%d)", s)
	}
	assert.Equal(t, 3, h.trims)

	// The scavenger returned memory: spikes count from the lower base.
	assert.False(t, look(400, 30, 1))
	assert.False(t, look(405, 90, 1), "60 MiB above the lower base")
	assert.True(t, look(410, 110, 1), "80 MiB above it")
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
