package testenv

import (
	"fmt"
	"os"
)

// IsolateHome points HOME at a fresh empty directory and returns a func
// that removes it. Commands run in the user's login shell, which reads
// ~/.profile: a developer's or CI machine's profile (pyenv, nvm, …) can
// take a second to start, or a minute when a login shell killed by an
// earlier test left one of its locks behind. Tests must not depend on it.
func IsolateHome() func() {
	home, err := os.MkdirTemp("", "appserver-test-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	if err := os.Setenv("HOME", home); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	return func() { _ = os.RemoveAll(home) }
}
