package policy_test

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// argv splits a command line on spaces, for tables of simple commands.
func argv(s string) []string { return strings.Fields(s) }

// lc builds a bash -lc invocation of script.
func lc(script string) []string { return []string{"bash", "-lc", script} }
