package execsession

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/appserver/appserver/internal/sandbox.(*launcher).loop"))
}
