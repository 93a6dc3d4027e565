package api

import (
	"os"
	"os/exec"
	"testing"
)

// TestOpenAPILint lints openapi.yaml with Redocly CLI under the strict rules
// of redocly.yaml (scripts/openapi-lint.sh), so that generated clients get
// the types the daemon writes (a nullable field typed as nullable, …). It
// needs node and npm; under CI=true their absence fails the test, since
// scripts/test-deps.sh installs them there.
func TestOpenAPILint(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not found with CI=true: scripts/test-deps.sh installs node and npm", tool)
			}
			t.Skipf("%s not found: install node and npm to lint openapi.yaml", tool)
		}
	}
	out, err := exec.Command("../scripts/openapi-lint.sh").CombinedOutput()
	if err != nil {
		t.Fatalf("api/openapi.yaml is not lint-clean (%v):\n%s", err, out)
	}
}
