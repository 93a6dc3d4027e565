package hub_test

import (
	"testing"

	"github.com/appserver/appserver/internal/apptest"
)

// The package's tests, its end-to-end ones (*_e2e_test.go) among them,
// run under the e2e harness's TestMain.
func TestMain(m *testing.M) { apptest.Main(m) }
