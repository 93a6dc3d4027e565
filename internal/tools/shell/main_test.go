package shell

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/sandbox"
)

func TestMain(m *testing.M) {
	// Sandboxed commands re-execute the test binary as the helper.
	sandbox.MaybeRunHelper()
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/appserver/appserver/internal/sandbox.(*launcher).loop"))
}
