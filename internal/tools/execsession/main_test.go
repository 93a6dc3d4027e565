package execsession

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/testenv"
)

func TestMain(m *testing.M) {
	home := testenv.IsolateHome()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { home() }), goleak.IgnoreAnyFunction("github.com/appserver/appserver/internal/sandbox.(*launcher).loop"))
}
