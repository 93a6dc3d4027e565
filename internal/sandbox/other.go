//go:build !linux

package sandbox

import (
	"errors"
	"os"
	"syscall"
)

// errUnsupported is returned for restricted policies on systems without a
// sandbox implementation.
var errUnsupported = errors.New("the OS sandbox is only implemented on Linux")

type netnsMode int

const netnsNone netnsMode = 0

func (netnsMode) apply(*syscall.SysProcAttr) {}

const netnsShared netnsMode = 1

func probeNetns(string) (netnsMode, *os.File) { return netnsNone, nil }

func joinNetns(int) error { return errUnsupported }

func helperProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func applyPolicy(helperConfig, []string) error { return errUnsupported }
