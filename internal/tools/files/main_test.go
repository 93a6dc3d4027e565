package files

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/testenv"
)

func TestMain(m *testing.M) {
	// grep_files runs ripgrep in the sandbox, which re-executes the test
	// binary as its helper.
	sandbox.MaybeRunHelper()
	home := testenv.IsolateHome()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { home() }), goleak.IgnoreAnyFunction("github.com/appserver/appserver/internal/sandbox.(*launcher).loop"))
}
