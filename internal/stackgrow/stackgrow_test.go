package stackgrow

import (
	"runtime"
	"runtime/debug"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// stackInUse is the bytes of stack the runtime has handed out.
func stackInUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.StackInuse
}

// parked starts n goroutines that run f and then wait, and returns how
// many bytes of stack the runtime handed out for them.
func parked(n int, f func()) uint64 {
	runtime.GC() // a settled average for the runtime's starting size
	// No collection while they are parked: it would shrink their stacks.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var ready, stop sync.WaitGroup
	ready.Add(n)
	stop.Add(1)
	before := stackInUse()
	for range n {
		go func() {
			f()
			ready.Done()
			stop.Wait()
		}()
	}
	ready.Wait()
	after := stackInUse()
	stop.Done()
	return after - before
}

func TestGrowTakesTheStackToSizeAtOnce(t *testing.T) {
	const n = 500
	plain := parked(n, func() {})
	grown := parked(n, Grow)
	// Each grown goroutine holds Size bytes; a plain one the runtime's
	// starting size, a few KiB here. (The runtime counts stack in spans:
	// those of the small stacks the grown ones left are given back, and
	// its caches held some already, so the figures are not exact.)
	t.Logf("%d goroutines: %d bytes of stack plain, %d grown", n, plain, grown)
	assert.GreaterOrEqual(t, grown, uint64(n*Size/2), "stack of %d goroutines after Grow", n)
	assert.Less(t, plain, uint64(n*Size/3), "stack of %d goroutines without it", n)
}

// deepWork stands for what a request's goroutine does: calls 40 frames of
// 256 bytes deep (about 10 KiB), so that an ungrown stack grows three
// times, each time with more frames to walk.
//
//go:noinline
func deepWork(n int) byte {
	var buf [256]byte
	buf[n%len(buf)] = byte(n)
	if n == 0 {
		return buf[0]
	}
	return deepWork(n-1) ^ buf[n%len(buf)]
}

var sinkWork byte

func benchmarkGoroutine(b *testing.B, grow bool) {
	done := make(chan struct{})
	for b.Loop() {
		go func() {
			if grow {
				Grow()
			}
			sinkWork = deepWork(40)
			done <- struct{}{}
		}()
		<-done
	}
}

// BenchmarkGoroutine: a goroutine started, ~10 KiB deep, ended; with and
// without Grow first.
func BenchmarkGoroutine(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchmarkGoroutine(b, false) })
	b.Run("grow", func(b *testing.B) { benchmarkGoroutine(b, true) })
}
