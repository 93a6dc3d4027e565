package apptest

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/mcp/mcptest"
	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/store/pgtest"
	"github.com/appserver/appserver/internal/testenv"
)

// Main is the TestMain of a package with end-to-end tests. Sandboxed
// commands re-execute the test binary as the sandbox helper, as they do
// the daemon's binary, so Main first lets it become one. The tests then
// run with a HOME of their own (internal/testenv); afterwards the
// throwaway Postgres is stopped, the binaries built for the tests are
// removed, and goleak checks that no goroutine outlived them (opts add
// to what it ignores).
func Main(m *testing.M, opts ...goleak.Option) {
	sandbox.MaybeRunHelper()
	home := testenv.IsolateHome()
	opts = append([]goleak.Option{
		// What must happen after the tests happens here; the cleanup
		// exits with the code VerifyTestMain settled on (1 on a leak).
		goleak.Cleanup(func(code int) {
			pgtest.Stop()
			home()
			removeBuilds()
			mcptest.Cleanup()
			os.Exit(code)
		}),
		goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("github.com/appserver/appserver/internal/sandbox.(*launcher).loop"),
	}, opts...)
	goleak.VerifyTestMain(m, opts...)
}
