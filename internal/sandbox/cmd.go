package sandbox

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// Cmd is a command built by a Sandbox: an exec.Cmd (all of whose fields
// and methods apply) that must be started through Cmd's own Start, Run,
// Output or CombinedOutput and waited for with Cmd's Wait. A restricted
// command starts on a launcher thread that carries its restrictions, or in
// a pooled sandbox (Request.Pool); starting its exec.Cmd directly fails
// with ErrStartDirectly instead of running it unconfined.
//
// A pooled command is no child of the daemon: its Process can be
// signalled (its Pid is the pid as the daemon sees it) but not waited for
// through os.Process, its ProcessState stays nil (use WaitStatus), its
// exit error is an *ExitError and its stdio cannot be taken with
// StdinPipe, StdoutPipe or StderrPipe.
type Cmd struct {
	*exec.Cmd

	// launch runs start on the right thread; nil starts directly.
	launch func(start func() (pid int, err error)) error
	// closeAfterStart are the parent's copies of descriptors handed to
	// the child (the seccomp program's pipe).
	closeAfterStart []*os.File
	// pooled runs the command in a pooled sandbox (box_linux.go).
	pooled *pooledRun
	// waited is the result of the Wait that WaitExited did on systems
	// that cannot wait without reaping (other.go).
	waited *error
}

// Pooled reports whether the command runs in a pooled sandbox
// (Request.Pool) rather than one of its own.
func (c *Cmd) Pooled() bool { return c.pooled != nil }

// ExitError is the error of a pooled command that exited unsuccessfully,
// as *exec.ExitError is for other commands.
type ExitError struct {
	// Status is the command's wait status.
	Status syscall.WaitStatus
}

// Error reads as os/exec's: "exit status 2", "signal: killed".
func (e *ExitError) Error() string {
	if e.Status.Signaled() {
		return "signal: " + e.Status.Signal().String()
	}
	return "exit status " + strconv.Itoa(e.Status.ExitStatus())
}

// ExitCode is the exit status, or -1 when a signal ended the command.
func (e *ExitError) ExitCode() int {
	if !e.Status.Exited() {
		return -1
	}
	return e.Status.ExitStatus()
}

// errPooledPipe refuses Std*Pipe for a pooled command.
var errPooledPipe = errors.New("sandbox: a pooled command's stdio must be set before Start (no Std*Pipe)")

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

// Start starts the command (on its launcher thread when it has one, in
// its pooled sandbox when it has one).
func (c *Cmd) Start() error {
	if c.pooled != nil {
		return c.pooled.start(c)
	}
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

// Wait waits for the command to exit and its I/O to end, as exec.Cmd.Wait
// does.
func (c *Cmd) Wait() error {
	if c.pooled != nil {
		return c.pooled.wait(c)
	}
	if c.waited != nil {
		err := *c.waited
		c.waited = nil
		return err
	}
	return c.Cmd.Wait()
}

// WaitStatus returns the wait status of a command Wait (or WaitExited)
// saw exit; ok is false before.
func (c *Cmd) WaitStatus() (ws syscall.WaitStatus, ok bool) {
	if c.pooled != nil {
		return c.pooled.waitStatus()
	}
	if c.ProcessState == nil {
		return 0, false
	}
	ws, ok = c.ProcessState.Sys().(syscall.WaitStatus)
	return ws, ok
}

// StdinPipe is exec.Cmd's, refused for a pooled command.
func (c *Cmd) StdinPipe() (io.WriteCloser, error) {
	if c.pooled != nil {
		return nil, errPooledPipe
	}
	return c.Cmd.StdinPipe()
}

// StdoutPipe is exec.Cmd's, refused for a pooled command.
func (c *Cmd) StdoutPipe() (io.ReadCloser, error) {
	if c.pooled != nil {
		return nil, errPooledPipe
	}
	return c.Cmd.StdoutPipe()
}

// StderrPipe is exec.Cmd's, refused for a pooled command.
func (c *Cmd) StderrPipe() (io.ReadCloser, error) {
	if c.pooled != nil {
		return nil, errPooledPipe
	}
	return c.Cmd.StderrPipe()
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
