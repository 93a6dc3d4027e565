//go:build !race

package dynamic

// raceEnabled reports whether the race detector is on; latency targets are
// only asserted without it.
const raceEnabled = false
