package shell

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/testenv"
)

func TestMain(m *testing.M) {
	// Sandboxed commands re-execute the test binary as the helper.
	sandbox.MaybeRunHelper()
	home := testenv.IsolateHome()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { home() }), goleak.IgnoreAnyFunction("github.com/appserver/appserver/internal/sandbox.(*launcher).loop"))
}
