package sandbox

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// childDialEnv makes the test binary, started as a sandboxed command, dial
// the TCP address it names (or the Unix socket of "unix:PATH") and exit 0
// on success, 1 on failure. It lets the network tests use a real client
// without relying on bash's /dev/tcp.
const childDialEnv = "SANDBOX_TEST_DIAL"

func TestMain(m *testing.M) {
	// The test binary is the helper executable: Command re-executes it with
	// HelperCommand exactly as it re-executes the daemon.
	MaybeRunHelper()
	if addr := os.Getenv(childDialEnv); addr != "" {
		os.Exit(dialChild(addr))
	}
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/appserver/appserver/internal/sandbox.(*launcher).loop"))
}

func dialChild(addr string) int {
	network := "tcp"
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, addr = "unix", path
	}
	c, err := net.Dial(network, addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = c.Close()
	fmt.Println("connected")
	return 0
}
