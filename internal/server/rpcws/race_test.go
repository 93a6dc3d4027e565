//go:build race

package rpcws

// raceEnabled is set in race builds, whose sync.Pool drops items at
// random, so that allocation counts vary.
const raceEnabled = true
