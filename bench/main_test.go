package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// cleanupM removes the daemon binary after the tests and benchmarks ran,
// before goleak checks for leaked goroutines.
type cleanupM struct{ m *testing.M }

func (c cleanupM) Run() int {
	defer removeBuild()
	return c.m.Run()
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(cleanupM{m}) }
