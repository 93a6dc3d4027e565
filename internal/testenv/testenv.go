package testenv

import (
	"fmt"
	"os"
	"path/filepath"
)

// IsolateHome points HOME at a fresh empty directory and returns a func
// that removes it. Commands run in the user's login shell, which reads
// ~/.profile: a developer's or CI machine's profile (pyenv, nvm, …) can
// take a second to start, or a minute when a login shell killed by an
// earlier test left one of its locks behind. Tests must not depend on it.
// The go command's caches and settings stay where they were, so a test that
// builds a helper program does not download and compile everything again.
func IsolateHome() func() {
	pinGoDirs()
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

// pinGoDirs sets GOCACHE, GOPATH and GOENV to the paths the go command
// derives from the current HOME, unless they are set already.
func pinGoDirs() {
	pin := func(name string, dir func() (string, error), elem ...string) {
		if os.Getenv(name) != "" {
			return
		}
		if d, err := dir(); err == nil && d != "" {
			_ = os.Setenv(name, filepath.Join(append([]string{d}, elem...)...))
		}
	}
	pin("GOCACHE", os.UserCacheDir, "go-build")
	pin("GOPATH", os.UserHomeDir, "go")
	pin("GOENV", os.UserConfigDir, "go", "env")
}
