package serve_test

import (
	"testing"

	"github.com/appserver/appserver/internal/apptest"
)

// The package's tests run under the e2e harness's TestMain.
func TestMain(m *testing.M) { apptest.Main(m) }
