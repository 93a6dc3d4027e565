// Package gctune keeps the garbage collector from running every few
// megabytes of allocation while the live heap is small.
//
// Go sets the next heap goal in proportion to the live heap (GOGC, 100 by
// default: twice the live heap), but at least 4 MB × GOGC/100. A daemon
// whose live heap is a few megabytes therefore collects every few
// megabytes allocated: for appserver, every few dozen tool calls on an
// idle machine. Each cycle's mark phase (its background and idle workers,
// and the assists it asks of allocating goroutines) delays the requests in
// flight, which is most of the latency tail of a tool round trip.
//
// A floor raises the heap goal to at least floor bytes while the live heap
// is small, by raising GOGC just enough, re-evaluated after every
// collection; once the live heap is half the floor or more, GOGC is back at
// its configured value. The cost is at most floor bytes of extra heap. A
// memory limit (GOMEMLIMIT) still triggers collections as usual, and with
// GOGC=off nothing is changed.
//
// A Returner gives memory back to the OS after a spike (a burst of large
// frames): the runtime would keep it until a collection it has no reason
// to start on an idle daemon, then return it slowly; once the held heap is
// well above its base and the daemon has gone quiet, the Returner collects
// and returns every free page at once (debug.FreeOSMemory), at most once
// per 30 s.
//
// It must not import any package of the module: the composition root sets
// the floor once at start-up.
package gctune
