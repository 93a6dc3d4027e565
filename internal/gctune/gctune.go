package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// runtimeHeapMinimum is the runtime's minimum heap goal at GOGC=100; it
// scales with GOGC.
const runtimeHeapMinimum = 4 << 20

// maxPercent bounds the GOGC the floor sets.
const maxPercent = 1 << 20

// Floor is one user's request for a floor. The collector is one per
// process, so requests combine: the highest floor of those running
// applies, and when the last one stops, GOGC is back at the value it had
// when the first started.
type Floor struct{ floor uint64 }

// st is the process's tuning state.
var st struct {
	sync.Mutex
	active  map[*Floor]struct{}
	base    int  // GOGC when the first running Floor started
	percent int  // the GOGC set now
	armed   bool // a sentinel is waiting for the next collection
	samples []metrics.Sample
}

// Start raises the heap goal to at least floor bytes (see the package doc)
// until Stop. It returns nil, changing nothing, when floor is 0 or the
// collector is off.
func Start(floor uint64) *Floor {
	if floor == 0 {
		return nil
	}
	st.Lock()
	defer st.Unlock()
	if len(st.active) == 0 {
		base := currentPercent()
		if base < 0 {
			return nil
		}
		st.base, st.percent = base, base
		st.active = map[*Floor]struct{}{}
		st.samples = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	}
	f := &Floor{floor: floor}
	st.active[f] = struct{}{}
	adjustLocked()
	if !st.armed {
		st.armed = true
		arm()
	}
	return f
}

// Stop ends f's request; with no request left, the GOGC of before is
// restored and later collections leave it alone.
func (f *Floor) Stop() {
	if f == nil {
		return
	}
	st.Lock()
	defer st.Unlock()
	if _, ok := st.active[f]; !ok {
		return
	}
	delete(st.active, f)
	if len(st.active) > 0 {
		adjustLocked()
		return
	}
	if st.percent != st.base {
		debug.SetGCPercent(st.base)
		st.percent = st.base
	}
}

// Percent is the GOGC currently set by the running floors (the configured
// one when none runs).
func Percent() int {
	st.Lock()
	defer st.Unlock()
	if len(st.active) == 0 {
		return currentPercent()
	}
	return st.percent
}

// sentinel is garbage whose finalizer runs after the collection that finds
// it unreachable; it holds a pointer so that it is never batched with
// other tiny objects (whose finalizers may never run).
type sentinel struct{ _ *int }

// arm allocates a sentinel for the next collection; its finalizer adjusts
// GOGC and arms the next one while any floor runs.
func arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		st.Lock()
		defer st.Unlock()
		if len(st.active) == 0 {
			st.armed = false
			return
		}
		adjustLocked()
		arm()
	})
}

// adjustLocked sets GOGC for the highest running floor and the live heap
// found by the last collection.
func adjustLocked() {
	var floor uint64
	for f := range st.active {
		floor = max(floor, f.floor)
	}
	metrics.Read(st.samples)
	var live uint64
	if v := st.samples[0].Value; v.Kind() == metrics.KindUint64 {
		live = v.Uint64()
	}
	if p := percentFor(floor, live, st.base); p != st.percent {
		debug.SetGCPercent(p)
		st.percent = p
	}
}

// percentFor is the smallest GOGC (not below base) whose heap goal for a
// live heap of live bytes is at least floor. The goal is the larger of
// live × (1 + GOGC/100) and runtimeHeapMinimum × GOGC/100.
func percentFor(floor, live uint64, base int) int {
	// GOGC that makes the runtime's minimum the floor.
	byMinimum := floor * 100 / runtimeHeapMinimum
	p := byMinimum
	if live > 0 && floor > live {
		// GOGC that makes the proportional goal the floor (rounded up).
		if byLive := ((floor-live)*100 + live - 1) / live; byLive < p {
			p = byLive
		}
	} else if live > 0 {
		p = 0
	}
	return int(min(max(p, uint64(base)), maxPercent))
}

// currentPercent reads GOGC as the runtime has it (-1 when off).
func currentPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 100
	}
	v := s[0].Value.Uint64()
	if v > maxPercent {
		return -1
	}
	return int(v)
}
