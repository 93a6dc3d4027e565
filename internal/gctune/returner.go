package gctune

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// After a spike (a burst of large frames, a big reply) the runtime keeps
// the spike's memory: its garbage is only collected when the heap reaches
// a goal the spike itself raised, which an idle daemon takes up to the
// forced collection every two minutes to do, and the freed pages are then
// returned to the OS a little at a time by the background scavenger. A
// Returner notices the spike is over and gives the memory back at once:
// a collection and a return of every free page (debug.FreeOSMemory).

// HeapStats is what a Returner reads of the heap.
type HeapStats struct {
	// Held is the heap's memory held from the OS: its spans in use
	// (objects, live or not yet collected, and the room between them) and
	// its free pages not returned. Allocating from the spans it has does
	// not change it; only the heap growing or returning pages does.
	Held uint64
	// Allocs is the bytes allocated since the process started.
	Allocs uint64
}

// ReturnerConfig configures a Returner. Every zero field means its
// default.
type ReturnerConfig struct {
	// Interval is how often the heap is looked at; default 5 s.
	Interval time.Duration
	// MinGrowth is how far above its base (its size after the last trim,
	// or its smallest since) the held heap must be to be trimmed; default
	// 64 MiB. The daemon counts as quiet while it allocates less than a
	// quarter of it per Interval.
	MinGrowth uint64
	// MinGap is the least time between two trims, each a full collection;
	// default 30 s.
	MinGap time.Duration
	// Stats reads the heap; default: the runtime's (runtime/metrics). For
	// tests.
	Stats func() HeapStats
	// Trim gives the memory back; default debug.FreeOSMemory. For tests.
	Trim func()
}

// Returner gives memory back to the OS after a spike: when the heap held
// is MinGrowth above its base and the daemon is quiet (the spike is over),
// it trims it, at most once per MinGap. Only a quiet daemon is trimmed:
// under load the heap is in use, and a trim in the middle of a spike would
// find the spike's frames still live and take them for the new base. A
// heap that grew because it holds more (loaded threads) is trimmed once
// and its new size becomes the base; one that grows to twice its live size
// between collections while the daemon is barely busy costs a collection
// per MinGap.
type Returner struct {
	cfg  ReturnerConfig
	stop chan struct{}
	done chan struct{}

	mu               sync.Mutex // guards started and stopped
	started, stopped bool

	// Owned by the loop (or by the test calling check).
	base       uint64    // see Returner
	prevAllocs uint64    // Allocs at the previous look
	lastTrim   time.Time // zero before the first trim
}

// NewReturner returns a Returner; Start runs it.
func NewReturner(cfg ReturnerConfig) *Returner {
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.MinGrowth == 0 {
		cfg.MinGrowth = 64 << 20
	}
	if cfg.MinGap <= 0 {
		cfg.MinGap = 30 * time.Second
	}
	if cfg.Stats == nil {
		cfg.Stats = heapStats
	}
	if cfg.Trim == nil {
		cfg.Trim = debug.FreeOSMemory
	}
	r := &Returner{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{})}
	r.rebase()
	return r
}

// Start runs the Returner's goroutine until Stop; later calls do nothing.
func (r *Returner) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.stopped {
		return
	}
	r.started = true
	go r.loop()
}

// Stop ends the goroutine and waits for it. It tolerates a Returner never
// started (nil included) and a second Stop.
func (r *Returner) Stop() {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.stopped = true
	started := r.started
	r.mu.Unlock()
	close(r.stop)
	if started {
		<-r.done
	}
}

func (r *Returner) loop() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			r.check(now)
		}
	}
}

// rebase takes the heap as it is now as the base.
func (r *Returner) rebase() {
	hs := r.cfg.Stats()
	r.base, r.prevAllocs = hs.Held, hs.Allocs
}

// check looks at the heap once, at now, and trims it after a spike.
func (r *Returner) check(now time.Time) (trimmed bool) {
	hs := r.cfg.Stats()
	quiet := hs.Allocs-r.prevAllocs < r.cfg.MinGrowth/4
	r.prevAllocs = hs.Allocs
	switch {
	case hs.Held < r.base:
		// The scavenger returned some: the next spike counts from here.
		r.base = hs.Held
	case hs.Held >= r.base+r.cfg.MinGrowth && quiet &&
		(r.lastTrim.IsZero() || now.Sub(r.lastTrim) >= r.cfg.MinGap):
		r.cfg.Trim()
		r.lastTrim = now
		r.rebase()
		return true
	}
	return false
}

// heapStats reads HeapStats from the runtime.
func heapStats() HeapStats {
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/heap/allocs:bytes"},
	}
	metrics.Read(s)
	var v [4]uint64
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = s[i].Value.Uint64()
		}
	}
	return HeapStats{Held: v[0] + v[1] + v[2], Allocs: v[3]}
}
