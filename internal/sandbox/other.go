//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"syscall"

	"github.com/appserver/appserver/internal/policy"
)

// errUnsupported is returned for restricted policies on systems without a
// sandbox implementation.
var errUnsupported = errors.New("the OS sandbox is only implemented on Linux")

type netnsMode int

const netnsNone netnsMode = 0

type launchers struct{}

func (*launchers) probeNetns(string) netnsMode { return netnsNone }
func (*launchers) close()                      {}

func landlockABI() int { return 0 }

func runInit() int { return 2 }

func (s *Sandbox) restricted(context.Context, policy.SandboxPolicy, string, string, string, []string, []string) (*Cmd, error) {
	return nil, errUnsupported
}

func helperProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
