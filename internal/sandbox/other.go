//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"log/slog"
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
func (*launchers) retireOwner(string)          {}

// pool is empty here: there is no bubblewrap backend to pool.
type pool struct{}

func newPool(PoolOptions, *slog.Logger) *pool { return &pool{} }
func (*pool) close()                          {}
func (*pool) retireOwner(string)              {}

// pooledRun is never set here.
type pooledRun struct{}

func (*pooledRun) start(*Cmd) error                       { return errUnsupported }
func (*pooledRun) wait(*Cmd) error                        { return errUnsupported }
func (*pooledRun) waitStatus() (syscall.WaitStatus, bool) { return 0, false }

func landlockABI() int { return 0 }

func runInit() int { return 2 }

func runBox() int { return 2 }

func (s *Sandbox) restricted(context.Context, policy.SandboxPolicy, string, string, string, []string, []string, string, int) (*Cmd, error) {
	return nil, errUnsupported
}

func helperProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// WaitExited blocks until the started command has exited. Without
// waitid's WNOWAIT it reaps the command, and Wait then returns what this
// wait saw.
func (c *Cmd) WaitExited() {
	if c.waited == nil && c.Process != nil {
		err := c.Cmd.Wait()
		c.waited = &err
	}
}

// fileIdentity is only needed by the pooled sandboxes of Linux.
func fileIdentity(string, bool) string { return "" }
