package sandbox

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
)

// Cmd is a command built by a Sandbox: an exec.Cmd (all of whose fields
// and methods apply) that must be started through Cmd's own Start, Run,
// Output or CombinedOutput. A restricted command starts on a launcher
// thread that carries its restrictions; starting its exec.Cmd directly
// fails with ErrStartDirectly instead of running it unconfined.
type Cmd struct {
	*exec.Cmd

	// launch runs start on the right thread; nil starts directly.
	launch func(start func() (pid int, err error)) error
	// closeAfterStart are the parent's copies of descriptors handed to
	// the child (the seccomp program's pipe).
	closeAfterStart []*os.File
}

// ErrStartDirectly is what a restricted command's embedded exec.Cmd
// returns when started directly rather than through Cmd.Start.
var ErrStartDirectly = errors.New("sandbox: start this command with sandbox.Cmd.Start, not exec.Cmd.Start")

// Plain wraps a command that needs no sandbox, for callers that take a
// *Cmd.
func Plain(cmd *exec.Cmd) *Cmd { return &Cmd{Cmd: cmd} }

func newCmd(cmd *exec.Cmd, launch func(func() (int, error)) error) *Cmd {
	if launch != nil {
		cmd.Err = ErrStartDirectly
	}
	return &Cmd{Cmd: cmd, launch: launch}
}

// Start starts the command (on its launcher thread when it has one).
func (c *Cmd) Start() error {
	defer func() {
		for _, f := range c.closeAfterStart {
			_ = f.Close()
		}
		c.closeAfterStart = nil
	}()
	if c.launch == nil {
		return c.Cmd.Start()
	}
	return c.launch(func() (int, error) {
		if c.Cmd.Err == ErrStartDirectly {
			c.Cmd.Err = nil
		}
		if err := c.Cmd.Start(); err != nil {
			return 0, err
		}
		return c.Process.Pid, nil
	})
}

// Run starts the command and waits for it, as exec.Cmd.Run does.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Output runs the command and returns its standard output, as
// exec.Cmd.Output does (standard error is collected into an *exec.ExitError).
func (c *Cmd) Output() ([]byte, error) {
	if c.Stdout != nil {
		return nil, errors.New("exec: Stdout already set")
	}
	var stdout, stderr bytes.Buffer
	c.Stdout = &stdout
	captureErr := c.Stderr == nil
	if captureErr {
		c.Stderr = &stderr
	}
	err := c.Run()
	var ee *exec.ExitError
	if captureErr && errors.As(err, &ee) {
		ee.Stderr = stderr.Bytes()
	}
	return stdout.Bytes(), err
}

// CombinedOutput runs the command and returns standard output and standard
// error together, as exec.Cmd.CombinedOutput does.
func (c *Cmd) CombinedOutput() ([]byte, error) {
	if c.Stdout != nil || c.Stderr != nil {
		return nil, errors.New("exec: Stdout or Stderr already set")
	}
	var b bytes.Buffer
	c.Stdout, c.Stderr = &b, &b
	err := c.Run()
	return b.Bytes(), err
}
