//go:build !linux

package bench

import (
	"errors"
	"time"
)

// wireTap needs Linux packet sockets; elsewhere the dynamic tool benchmark
// reports the harness clocks only.
type wireTap struct{}

var errNoWireTap = errors.New("the wire tap needs Linux packet sockets")

func startWireTap(daemonAddr, fakeAddr string) (*wireTap, error) { return nil, errNoWireTap }

func (t *wireTap) close() error { return nil }

func (t *wireTap) overheads(map[string][2]time.Time) (dynOverheads, error) {
	return dynOverheads{}, errNoWireTap
}
