package bench

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/store/pgtest"
)

// cleanupM removes the daemon binary and stops the throwaway Postgres
// cluster (if a benchmark started one) after the tests and benchmarks ran,
// before goleak checks for leaked goroutines.
type cleanupM struct{ m *testing.M }

func (c cleanupM) Run() int {
	defer removeBuild()
	defer pgtest.Stop()
	return c.m.Run()
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(cleanupM{m}) }
